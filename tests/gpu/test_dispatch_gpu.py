"""cutecourse.gemm on the GPU: for 200 random problems (ragged and unaligned shapes, both dtypes, every pair of
majors, outputs poisoned) the dispatched result matches float64 torch and the step that ran is the one `explain`
names; the SM80 path's choice runs right on a Hopper GPU too; fused epilogues and fp8 go through the dispatcher."""

import importlib
import math
import random

import pytest

torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse import dispatch  # noqa: E402
from cutecourse.kernels.gemm import epilogue, fp8, tolerances  # noqa: E402

pytestmark = pytest.mark.gpu(80)
SIZES = [1, 7, 8, 64, 127, 128, 129, 255, 256, 1000, 1024, 2048, 3000, 4096]


@pytest.fixture(autouse=True)
def no_tuned_picks(tmp_path, monkeypatch):
    """An empty tuning cache: the rules decide, not what a user once tuned."""
    monkeypatch.setenv("CUTECOURSE_CACHE", str(tmp_path))
    dispatch.forget_plans()


@pytest.fixture
def ran(monkeypatch):
    """The steps' launchers, each with its `launch` (the call every path reaches: the launcher's own, the
    dispatcher's cached one, step 2's product under an unfused epilogue) wrapped to record which step ran."""
    calls = []
    for step in ("gemm02_smem", "gemm05_swizzle", "gemm10_multicast", "gemm11_pingpong", "gemv"):
        launcher = importlib.import_module(f"cutecourse.kernels.gemm.{step}").gemm

        def spy(*args, _step=step, _launch=launcher.launch, **kwargs):
            calls.append(_step)
            return _launch(*args, **kwargs)

        monkeypatch.setattr(launcher, "launch", spy)
    return calls


def problem(rng):
    m, n, k = (rng.choice(SIZES) if rng.random() < 0.5 else int(math.exp(rng.uniform(0, math.log(4096))))
               for _ in range(3))
    dtype = rng.choice([torch.float16, torch.bfloat16])
    a_major, b_major = rng.choice("km"), rng.choice("kn")
    a = torch.randn(m, k, device="cuda").to(dtype) if a_major == "k" else torch.randn(k, m, device="cuda").to(dtype).t()
    b = torch.randn(k, n, device="cuda").to(dtype) if b_major == "n" else torch.randn(n, k, device="cuda").to(dtype).t()
    out = torch.full((m, n), float("nan"), device="cuda", dtype=rng.choice([dtype, torch.float32]))
    return a, b, out


def test_200_random_problems_are_right_and_run_the_step_explain_names(ran):
    rng = random.Random(20)
    wrong, seen = [], {}
    for _ in range(200):
        a, b, out = problem(rng)
        choice = cutecourse.gemm.explain(a, b, out)
        ran.clear()
        cutecourse.gemm(a, b, out)
        torch.cuda.synchronize()
        seen[choice.step] = seen.get(choice.step, 0) + 1
        issue = tolerances.within_bounds(out, a, b)
        if issue or ran != [choice.step]:
            wrong.append(f"{tuple(a.shape)} @ {tuple(b.shape)} {a.dtype} -> {out.dtype}: explain says "
                         f"{choice.step}, ran {ran}; {issue or 'right'}")
    assert not wrong, f"{len(wrong)} of 200 wrong:\n" + "\n".join(wrong[:10])
    major, minor = torch.cuda.get_device_capability()
    expected = {"gemm02_smem", "gemm10_multicast", "gemm11_pingpong"} if major * 10 + minor == 90 else {
        "gemm02_smem", "gemm05_swizzle"}
    expected.add("gemv")  # a few rows of a against a K-major b, on every arch
    assert set(seen) == expected, seen  # every rule of this arch was exercised


def test_the_sm80_paths_choice_runs_right_here_too(ran):
    rng = random.Random(80)
    for _ in range(20):
        a, b, out = problem(rng)
        choice = cutecourse.gemm.explain(a, b, out, arch=80)
        ran.clear()
        cutecourse.gemm(a, b, out, config=choice.config)
        torch.cuda.synchronize()
        assert ran == [choice.step] and choice.step in ("gemm02_smem", "gemm05_swizzle")
        assert tolerances.within_bounds(out, a, b) is None, (tuple(a.shape), tuple(b.shape))


def test_a_fused_epilogue_goes_to_a_fusing_step_and_matches_the_reference(ran):
    rng = random.Random(7)
    for m, n, k in [(4096, 4096, 512), (1000, 1024, 264), (128, 8, 8)]:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        epi = epilogue.Epilogue(rng.choice(["relu", "gelu_tanh", "silu"]), bias="n")
        ran.clear()
        d = cutecourse.gemm(a, b, epilogue=epi, bias=bias, alpha=0.5)
        assert ran[0] in dispatch.FUSING
        ref, _ = epilogue.reference(a.double() @ b.double(), epi, 0.5, bias=bias)
        assert float((d.double() - ref).norm() / ref.norm()) < 1e-2, (m, n, k, epi)
    a = torch.randn(64, 63, device="cuda", dtype=torch.bfloat16)  # K = 63: no vector step takes it
    b = torch.randn(63, 64, device="cuda", dtype=torch.bfloat16)
    ran.clear()
    d = cutecourse.gemm(a, b, epilogue=epilogue.Epilogue("relu"))
    assert ran == ["gemm02_smem"]  # its product, then torch's epilogue
    ref, _ = epilogue.reference(a.double() @ b.double(), epilogue.Epilogue("relu"))
    assert float((d.double() - ref).norm() / ref.norm()) < 1e-2


def test_fp8_goes_to_the_hopper_steps():
    major, minor = torch.cuda.get_device_capability()
    if major * 10 + minor != 90:
        pytest.skip("not run: fp8 steps need sm_90")
    a, sa = fp8.quantize(torch.randn(2048, 1024, device="cuda"), torch.float8_e4m3fn)
    bt, sb = fp8.quantize(torch.randn(1536, 1024, device="cuda"), torch.float8_e4m3fn)
    d = cutecourse.gemm(a, bt.t(), alpha=sa * sb)
    ref = (a.double() * sa) @ (bt.double() * sb).t()
    assert d.dtype == torch.bfloat16 and float((d.double() - ref).norm() / ref.norm()) < 1e-2
