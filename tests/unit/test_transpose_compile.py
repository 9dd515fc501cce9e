"""The transpose steps compile without a GPU, and their PTX has the accesses each step promises."""


import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

from cutecourse.kernels import ptx  # noqa: E402
from cutecourse.kernels.transpose import TransposeConfig, compile  # noqa: E402


def census(config: TransposeConfig, arch: str = "sm_90a"):
    dtype = getattr(torch, config.dtype)
    src, dst = torch.empty(64, 128, dtype=dtype), torch.empty(128, 64, dtype=dtype)
    return ptx.ptx_of(lambda options: compile(config, src, dst, make_fake_stream(), options=options), arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_naive_step_uses_scalar_accesses_and_no_shared_memory(arch):
    code = census(TransposeConfig("naive", "float32", 1), arch)
    assert ptx.count(code, "ld.global.b32") == 4 and ptx.count(code, "st.global.b32") == 4
    assert ptx.count(code, "ld.shared") == 0 and ptx.count(code, "bar.sync") == 0


@pytest.mark.parametrize("dtype, accesses", [("float32", 4), ("float16", 2), ("bfloat16", 2)])
def test_smem_step_moves_128_bits_per_global_access(dtype, accesses):
    vector = 128 // (8 * torch.empty(0, dtype=getattr(torch, dtype)).element_size())
    code = census(TransposeConfig("smem", dtype, vector))
    assert ptx.count(code, "ld.global.v4") == accesses and ptx.count(code, "st.global.v4") == accesses
    assert ptx.count(code, "bar.sync") == 1 and ptx.count(code, "ld.shared") > 0


def test_smem_step_falls_back_to_scalar_accesses():
    code = census(TransposeConfig("smem", "float16", 1))
    assert ptx.count(code, "ld.global.v4") == 0 and ptx.count(code, "ld.global.b16") == 16


def test_config_rejects_unknown_variant_and_dtype():
    with pytest.raises(ValueError, match="variant='fast'"):
        TransposeConfig("fast")
    with pytest.raises(ValueError, match="dtype='float64'"):
        TransposeConfig("smem", "float64")


@pytest.mark.parametrize("make, match", [
    (lambda: (torch.ones(4, 4), torch.ones(4, 4)), r"src is on cpu"),
    (lambda: ([1], None), "src must be a torch.Tensor"),
])
def test_plan_names_the_bad_argument(make, match):
    from cutecourse.kernels.transpose import plan

    with pytest.raises(ValueError, match=match):
        plan(*make())
