"""Operands as torch takes them, on a CPU: any row- or column-major operand with a leading dimension at least its
extent is computed (the kernels get the real stride), an unaligned start or leading dimension goes to step 2 (with
an epilogue too), and None, wrong types and an output that overlaps an input are refused naming the argument, the
value and the fix. tests/gpu/test_gemm_strides_gpu.py runs the same operands on the GPU against float64."""

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse.kernels.gemm import epilogue, gemm05_swizzle, operands  # noqa: E402

explain = cutecourse.gemm.explain
H = torch.float16


def padded(rows, cols, pad, dtype=H, start=0):
    """A (rows, cols) row-major view of a wider matrix: strides (cols + pad, 1), `start` elements past its base."""
    return torch.empty(rows * (cols + pad) + start, dtype=dtype)[start:].view(rows, cols + pad)[:, :cols]


def traits(a, b, c, vector=True):
    return operands.traits(a, b, c, step="gemm05_swizzle", vector=vector)


@pytest.mark.parametrize("make, majors, lds", [
    (lambda: (padded(64, 40, 8), padded(40, 32, 24), padded(64, 32, 8, torch.float32)), ("k", "n"), (48, 56, 40)),
    (lambda: (padded(40, 64, 16).t(), padded(32, 40, 8).t(), torch.empty(64, 32)), ("m", "k"), (80, 48, 32)),
    # a dimension of 1: its stride is never used, so the leading dimension is the extent in whole vectors
    (lambda: (padded(1, 40, 3), padded(40, 32, 8), torch.empty(1, 32)), ("k", "n"), (40, 40, 32)),
])
def test_a_padded_leading_dimension_is_only_another_stride(make, majors, lds):
    a, b, c = make()
    ops = traits(a, b, c)
    assert (ops.a_major, ops.b_major, ops.vector) == (*majors, 8)
    assert operands.leading_dims(ops, a, b, c) == lds


@pytest.mark.parametrize("make, match", [
    (lambda: (padded(64, 40, 1), torch.empty(40, 32, dtype=H)), r"a's leading dimension is 41 elements, not a "
                                                                  r"multiple of 8 .* or use gemm02_smem"),
    (lambda: (torch.empty(64, 40, dtype=H), padded(32, 40, 4).t()), r"b's leading dimension is 44 elements"),
    (lambda: (padded(64, 40, 8, start=4), torch.empty(40, 32, dtype=H)), r"a starts 8 bytes past a 16-byte boundary"),
])
def test_a_vector_step_refuses_an_unaligned_leading_dimension_or_start_naming_step_2(make, match):
    a, b = make()
    with pytest.raises(ValueError, match=match):
        traits(a, b, torch.empty(64, 32))
    assert traits(a, b, torch.empty(64, 32), vector=False).vector == 1  # step 2 takes it


@pytest.mark.parametrize("arch, step", [(90, "gemm11_pingpong"), (80, "gemm05_swizzle"), (89, "gemm05_swizzle")])
def test_padded_operands_that_hold_whole_vectors_run_the_vector_steps(arch, step):
    a, b = padded(1000, 512, 64), padded(256, 512, 8).t()
    out = padded(1000, 256, 8, torch.float32)
    assert explain(a, b, out, arch=arch).step == step
    assert explain(a, b, out, epilogue=epilogue.Epilogue("relu"), arch=arch).step == step


@pytest.mark.parametrize("a, b", [
    (padded(1000, 512, 3), padded(256, 512, 8).t()),  # lda = 515
    (padded(1000, 512, 8, start=1), padded(256, 512, 8).t()),  # a starts 2 bytes past alignment
    (padded(512, 1000, 8).t(), padded(512, 256, 5)),  # M-major a, N-major b with ldb = 261
])
def test_an_unaligned_leading_dimension_or_start_goes_to_step_2_with_an_epilogue_too(a, b):
    for arch in (80, 90):
        plain = explain(a, b, arch=arch)
        assert plain.step == "gemm02_smem" and "any shape, stride and alignment" in plain.reasons[-1], plain
        fused = explain(a, b, epilogue=epilogue.Epilogue("gelu_tanh", bias="n"), arch=arch)
        assert fused.step == "gemm02_smem" and "torch computes the epilogue" in fused.reasons[-1], fused


@pytest.mark.parametrize("call, match", [
    (lambda a, b: explain(None, b, arch=90), r"^a is None \(NoneType\); pass a 2-D torch.Tensor on the GPU, e.g. "
                                             r"a = torch.randn\(rows, cols"),
    (lambda a, b: explain(a, "b", arch=90), r"^b is 'b' \(str\); pass a 2-D torch.Tensor"),
    (lambda a, b: explain(a, b, [[0.0]], arch=90), r"^out is \[\[0.0\]\] \(list\); pass a 2-D torch.Tensor"),
    (lambda a, b: cutecourse.gemm(None, b), r"^a is None \(NoneType\); pass a 2-D torch.Tensor"),
    (lambda a, b: gemm05_swizzle.gemm(None, b), r"^a is None \(NoneType\); pass a 2-D torch.Tensor"),
    (lambda a, b: gemm05_swizzle.gemm(a, None), r"^b is None \(NoneType\)"),
    (lambda a, b: gemm05_swizzle.gemm(a, b, 3), r"^d is 3 \(int\); pass a 2-D torch.Tensor"),
    (lambda a, b: explain(a[0], b, arch=90), r"a must be a 2-D torch.Tensor, got shape \(64,\): pass a matrix"),
])
def test_none_and_wrong_types_get_a_value_error_naming_the_argument_the_value_and_the_fix(call, match):
    a, b = torch.empty(128, 64, dtype=H), torch.empty(64, 32, dtype=H)
    with pytest.raises(ValueError, match=match):
        call(a, b)


def test_an_output_that_overlaps_an_input_is_refused_naming_both():
    a, b = torch.empty(64, 64, dtype=H), torch.empty(64, 64, dtype=H)
    with pytest.raises(ValueError, match=r"^out \(bytes 0x[0-9a-f]+-0x[0-9a-f]+\) overlaps the input a .*Pass an "
                                         r"output of its own: out = torch.empty\(64, 64, dtype=torch.float16"):
        explain(a, b, a, arch=90)
    with pytest.raises(ValueError, match=r"^d \(bytes .*\) overlaps the input b"):
        operands.traits(a, b, b[:, :].view(64, 64), step="gemm05_swizzle", vector=True, out="d")
    wide = torch.empty(64, 128, dtype=H)
    with pytest.raises(ValueError, match=r"overlaps the input a"):  # a and out share 32 columns
        explain(wide[:, :64], b, wide[:, 32:96], arch=90)
    with pytest.raises(ValueError, match=r"overlaps the input a"):  # another pitch over the same bytes
        operands.overlap("a", wide[:, :64], "out", wide.view(128, 64)[:64])
    # side by side in one padded matrix: they share no byte, so both are taken
    assert explain(wide[:, :64], b, wide[:, 64:], arch=90).step == "gemm11_pingpong"
    assert explain(a, b, torch.empty(64, 64, dtype=H), arch=90).step == "gemm11_pingpong"


def test_an_epilogues_aux_that_overlaps_an_input_is_refused(monkeypatch):
    a, b = torch.empty(64, 64, dtype=H), torch.empty(64, 64, dtype=H)
    monkeypatch.setattr(operands, "check", lambda a, b, c, **kw: operands.traits(a, b, c, step="x", vector=True))
    with pytest.raises(ValueError, match=r"^aux \(bytes .*\) overlaps the input a"):
        gemm05_swizzle.gemm(a, b, torch.empty(64, 64, dtype=H), epilogue=epilogue.Epilogue(aux=True), aux=a)
