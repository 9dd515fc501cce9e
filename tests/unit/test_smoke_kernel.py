"""The smoke kernel compiles on a CPU for both course archs, and its launcher rejects bad tensors by name."""

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

from cutecourse.kernels import ptx, smoke  # noqa: E402


def smoke_ptx(arch):
    x = torch.empty(1000)  # on the CPU: compiled, never launched
    return ptx.ptx_of(lambda options: smoke.compile(smoke.SmokeConfig(), x, x, make_fake_stream(), options), arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_smoke_kernel_compiles_without_a_gpu(arch):
    code = smoke_ptx(arch)
    assert f".target {arch}" in code
    assert ptx.count(code, "ld.global") == 1 and ptx.count(code, "st.global") == 1
    assert ptx.count(code, "fma.rn.f32") == 1


def test_census_counts_predicated_and_vector_instructions():
    sample = "\t@%p1 ld.global.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1];\n\tst.global.b32 [%rd2], %r1;\n$L__BB0_2:\n\tret;\n"
    assert ptx.census(sample) == {"ld.global.v4.f32": 1, "st.global.b32": 1, "ret": 1}
    assert ptx.count(sample, "ld.global.v4") == 1 and ptx.count(sample, "ld.global.v2") == 0


def test_compile_ptx_rejects_a_bad_arch_name():
    with pytest.raises(ValueError, match="arch='hopper'"):
        smoke_ptx("hopper")


@pytest.mark.parametrize("bad, match", [
    (lambda: [1.0, 2.0], "x must be a torch.Tensor"),
    (lambda: torch.ones(8), r"x is on cpu; move it to the GPU with x.cuda\(\)"),
])
def test_launcher_names_the_bad_argument_and_the_fix(bad, match):
    with pytest.raises(ValueError, match=match):
        smoke.smoke(bad(), None)
