"""Operands as torch takes them, on the GPU, against torch in float64: every step and `cutecourse.gemm` on random
ragged shapes whose operands are slices of wider matrices (padded leading dimensions), both majors, fp16 and bf16,
with outputs poisoned with NaN, padding included (a store past N or into another row's padding shows). The steps
that load scalars (1 and 2) and `cutecourse.gemm` also get unaligned starts and leading dimensions, and the
dispatcher an epilogue on them. A launcher that passes K (M, N) where the stride is due fails the same check.
tests/unit/test_gemm_strides.py holds the rules on a CPU."""

import importlib
import math
import random
import zlib

import pytest

torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse import dispatch  # noqa: E402
from cutecourse.kernels.gemm import GEMM_STEPS, epilogue, launcher, tolerances  # noqa: E402

pytestmark = pytest.mark.gpu(80)

#: (A/B dtype, C dtype, A major, B major): both dtypes, both majors of each operand.
COMBOS = [(torch.float16, torch.float16, "k", "n"), (torch.bfloat16, torch.float32, "m", "k")]


@pytest.fixture(autouse=True)
def no_tuned_picks(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTECOURSE_CACHE", str(tmp_path))
    dispatch.forget_plans()


def view(rows, cols, pad, start, dtype, fill):
    """A (rows, cols) row-major slice of a (rows, cols + pad) matrix that begins `start` elements past a 16-byte
    boundary, and the whole buffer under it. `fill`: "randn" or "nan"."""
    flat = torch.empty(rows * (cols + pad) + start, device="cuda", dtype=dtype)
    if fill == "nan":
        flat.fill_(float("nan"))
    else:
        flat.copy_(torch.randn(flat.numel(), device="cuda"))
    return flat[start:].view(rows, cols + pad)[:, :cols], flat


def operands(m, n, k, combo, pads, starts=(0, 0, 0)):
    """a (M, K), b (K, N) in the combo's majors and out (M, N), each a slice of a wider matrix (pads: a's, b's and
    out's padding in elements), and out's whole buffer (NaN)."""
    ab, c_dtype, a_major, b_major = combo
    a = view(m, k, pads[0], starts[0], ab, "randn")[0] if a_major == "k" else view(
        k, m, pads[0], starts[0], ab, "randn")[0].t()
    b = view(k, n, pads[1], starts[1], ab, "randn")[0] if b_major == "n" else view(
        n, k, pads[1], starts[1], ab, "randn")[0].t()
    out, buffer = view(m, n, pads[2], starts[2], c_dtype, "nan")
    return a, b, out, buffer


def judge(out, buffer, a, b):
    """What is wrong: the product against float64, or a write past the output (the padding must stay NaN)."""
    problem = tolerances.within_bounds(out, a, b)
    written = int((~buffer.isnan()).sum()) - out.numel()
    if written:
        return f"{written} elements outside the output were written"
    return problem


def shapes(seed, count, vector):
    """`count` random ragged (M, N, K, pads); a vector step gets extents and pads in whole 16-byte vectors of the
    16-bit operands (8 elements; 4 would do for a float32 out, 8 serves both)."""
    rng = random.Random(seed)
    picked = [(1, 8, 8), (129, 257, 72), (1000, 136, 520)]
    while len(picked) < count:
        picked.append(tuple(int(math.exp(rng.uniform(0, math.log(2048)))) for _ in range(3)))
    cases = []
    for m, n, k in picked:
        pads = tuple(rng.choice([8, 16, 64]) if vector else rng.choice([1, 3, 8, 13]) for _ in range(3))
        if vector:
            m, n, k = (-(-x // 8) * 8 for x in (m, n, k))
        cases.append((m, n, k, pads))
    return cases


def failures(gemm, combo, cases, starts=(0, 0, 0)):
    wrong = []
    for m, n, k, pads in cases:
        a, b, out, buffer = operands(m, n, k, combo, pads, starts)
        gemm(a, b, out)
        torch.cuda.synchronize()
        problem = judge(out, buffer, a, b)
        if problem:
            wrong.append(f"{(m, n, k)} pads {pads} starts {starts}: {problem}")
    return wrong


def runnable(step):
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    major, minor = torch.cuda.get_device_capability()
    if major * 10 + minor < module.gemm.min_cc:
        pytest.skip(f"not run: {step} needs sm_{module.gemm.min_cc}")
    return module


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: f"{str(c[0])[6:]}-{str(c[1])[6:]}-{c[2]}{c[3]}")
@pytest.mark.parametrize("step", GEMM_STEPS)
def test_every_step_takes_padded_leading_dimensions(step, combo):
    module = runnable(step)
    cases = shapes(zlib.crc32(step.encode()) + COMBOS.index(combo), 8, module.gemm.vector)
    wrong = failures(module.gemm, combo, cases)
    assert not wrong, f"{step}: {len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)


@pytest.mark.parametrize("step", ["gemm01_naive", "gemm02_smem"])
def test_the_scalar_steps_take_unaligned_starts_and_leading_dimensions(step):
    module = runnable(step)
    for combo in COMBOS:
        wrong = failures(module.gemm, combo, shapes(zlib.crc32(step.encode()), 6, False), starts=(1, 3, 1))
        assert not wrong, f"{step}: " + "\n".join(wrong)


@pytest.mark.parametrize("step", ["gemm05_swizzle", "gemm11_pingpong"])
def test_a_launcher_that_passes_the_extents_for_the_leading_dimensions_fails_the_check(step, monkeypatch):
    module = runnable(step)

    def unpadded(ops, a, b, c):  # the layouts of contiguous operands: lda = K (or M), ldb = K (or N), ldc = N
        (m, k), n = a.shape, b.shape[1]
        return m, n, k, k if ops.a_major == "k" else m, k if ops.b_major == "k" else n, n

    monkeypatch.setattr(launcher, "extents", unpadded)
    assert failures(module.gemm, COMBOS[0], shapes(1, 4, True)), "padded operands read as contiguous passed"


def test_cutecourse_gemm_takes_padded_and_unaligned_operands_and_runs_what_explain_names():
    rng = random.Random(34)
    wrong, seen = [], {}
    for i in range(60):
        m, n, k = (int(math.exp(rng.uniform(0, math.log(3000)))) for _ in range(3))
        ab = rng.choice([torch.float16, torch.bfloat16])
        combo = (ab, rng.choice([ab, torch.float32]), rng.choice("km"), rng.choice("kn"))
        aligned = i % 3 != 0  # every third problem has an unaligned start or leading dimension somewhere
        pads = tuple(rng.choice([8, 16, 64]) if aligned else rng.choice([1, 8, 13]) for _ in range(3))
        starts = (0, 0, 0) if aligned else tuple(rng.choice([0, 1, 8]) for _ in range(3))
        if aligned:
            m, n, k = (-(-x // 8) * 8 for x in (m, n, k))
        a, b, out, buffer = operands(m, n, k, combo, pads, starts)
        choice = cutecourse.gemm.explain(a, b, out)
        seen[choice.step] = seen.get(choice.step, 0) + 1
        cutecourse.gemm(a, b, out)
        torch.cuda.synchronize()
        problem = judge(out, buffer, a, b)
        if problem:
            wrong.append(f"{(m, n, k)} {combo} pads {pads} starts {starts} ({choice.step}): {problem}")
    assert not wrong, f"{len(wrong)} of 60 wrong:\n" + "\n".join(wrong[:10])
    assert "gemm02_smem" in seen and len(seen) > 1, seen  # both the vector and the scalar path ran


def test_an_epilogue_on_unaligned_operands_is_computed_not_refused():
    rng = random.Random(5)
    for m, n, k in [(1000, 520, 333), (64, 72, 4095), (3, 5, 7)]:
        combo = (torch.bfloat16, torch.bfloat16, "k", "k")
        a, b, out, buffer = operands(m, n, k, combo, (1, 3, 8), (1, 0, 0))
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        aux = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        c = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        epi = epilogue.Epilogue(rng.choice(["relu", "gelu_tanh", "silu"]), bias="n", aux=True)
        assert cutecourse.gemm.explain(a, b, out, epilogue=epi).step == "gemm02_smem"
        cutecourse.gemm(a, b, out, epilogue=epi, bias=bias, alpha=0.5, beta=0.25, c=c, aux=aux)
        ref, x = epilogue.reference(a.double() @ b.double(), epi, 0.5, 0.25, c, bias)
        for name, got, want in (("out", out, ref), ("aux", aux, x)):
            error = float((got.double() - want).norm() / want.norm())
            assert error < 1e-2, f"{(m, n, k)} {epi}: {name} relative error {error:.2e}"
        assert int((~buffer.isnan()).sum()) == out.numel()


def test_an_output_that_overlaps_an_input_is_refused_on_the_gpu():
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"^out \(bytes .*\) overlaps the input a"):
        cutecourse.gemm(a, a, a)
    with pytest.raises(ValueError, match=r"^d \(bytes .*\) overlaps the input b"):  # b's columns 64-127 are d's
        runnable("gemm05_swizzle").gemm(a.clone(), a[:, :128], a[:, 64:192])
