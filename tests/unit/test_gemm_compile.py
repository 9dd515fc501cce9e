"""Every GEMM step compiles without a GPU, for its arch, with every operand dtype, C dtype and major, and its PTX
holds the instructions the step adds and none that a later step adds (the census is how lesson 5-8 show what each
step changed). How long the first compile takes is a benchmark (benchmarks/host_costs.py
compile), not a test."""

import importlib

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

from cutecourse.kernels import ptx  # noqa: E402
from cutecourse.kernels.gemm import GEMM_STEPS, launcher  # noqa: E402
from cutecourse.kernels.gemm.operands import traits  # noqa: E402

#: step -> the instructions it adds (an opcode prefix, or an operand such as ``%nctaid``). Each step keeps what it
#: needs of the earlier ones.
STEPS = {
    "gemm01_naive": ["fma.rn.f32", "ld.global"],
    "gemm02_smem": ["ld.shared", "bar.sync"],
    "gemm03_mma": ["mma.sync.aligned.m16n8k16", "ldmatrix"],
    "gemm04_multistage": ["cp.async.cg.shared.global", "cp.async.wait_group"],
    "gemm05_swizzle": ["st.global.v4"],  # the epilogue's 128-bit stores, which the swizzled C tile makes possible
    "gemm06_tma": ["cp.async.bulk.tensor", "mbarrier"],  # TMA loads, completing on the full/empty mbarriers
    "gemm07_wgmma": ["wgmma.mma_async"],
    "gemm08_warpspecialized": ["setmaxnreg"],
    "gemm09_persistent": ["%nctaid"],  # a persistent CTA strides over the tiles by the grid's size
    "gemm10_multicast": ["multicast::cluster", "barrier.cluster", "cp.async.bulk.tensor.2d.global.shared"],
    "gemm11_pingpong": ["bar.arrive"],  # a warpgroup hands the mainloop to the other without waiting
}
#: instructions a step must not have though an earlier one did: the TMA steps leave cp.async behind, the wgmma steps
#: mma.sync and ldmatrix too.
DROPPED = {step: ["cp.async.cg", "cp.async.ca"] + (["mma.sync", "ldmatrix"] if step >= "gemm07" else [])
           for step in STEPS if step >= "gemm06"}
#: what a step adds and the steps after it keep, up to the last step that has it (the step after that replaces it):
#: the feature set only grows along the ladder. Steps 5-9 stage C through shared memory for 128-bit stores (step 9
#: in a buffer of its own, as its ring is loading the next tile), which step 10's TMA store replaces.
KEPT = {"st.global.v4": ("gemm05_swizzle", "gemm09_persistent")}
ORDER = list(STEPS)
assert tuple(ORDER) == GEMM_STEPS, "a GEMM step was added or renamed: say here which instructions it adds"

#: (A/B dtype, C dtype, A major, B major): each dtype, each C dtype and each major at least once.
COMBOS = [(torch.float16, torch.float32, "k", "k"), (torch.bfloat16, torch.bfloat16, "m", "n"),
          (torch.float16, torch.float16, "k", "n"), (torch.bfloat16, torch.float32, "m", "k")]


def operands(m, n, k, ab=torch.float16, c=torch.float32, a_major="k", b_major="n"):
    a = torch.empty(m, k, dtype=ab) if a_major == "k" else torch.empty(k, m, dtype=ab).t()
    b = torch.empty(k, n, dtype=ab) if b_major == "n" else torch.empty(n, k, dtype=ab).t()
    return a, b, torch.empty(m, n, dtype=c)


def arch(step):
    """Steps 1-5 compile for sm_80, the Hopper steps (6 on, which need sm_90) for sm_90a."""
    return "sm_90a" if importlib.import_module(f"cutecourse.kernels.gemm.{step}").gemm.min_cc >= 90 else "sm_80"


def compile_ptx(step, a, b, c):
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    ops = traits(a, b, c, step=step, vector=module.gemm.vector)
    return ptx.ptx_of(lambda options: launcher.compile_for(module.host, module.Config(), ops, a, b, c,
                                                             make_fake_stream(), options=options), arch(step))


def has(code, instruction):
    """Whether `code` issues `instruction`: an opcode that starts with it, or, for an operand (``%nctaid``,
    ``multicast::cluster``), any instruction that names it."""
    if instruction.startswith("%") or "::" in instruction:
        return instruction in code
    return ptx.count(code, instruction) > 0


@pytest.fixture(scope="module")
def census():
    """Each step's PTX for a ragged fp16 problem (M, N, K not multiples of any tile), compiled once."""
    return {step: compile_ptx(step, *operands(200, 136, 72)) for step in STEPS}


@pytest.mark.parametrize("step", ORDER)
def test_each_step_has_what_it_adds_and_nothing_a_later_step_adds(census, step):
    code = census[step]
    for instruction in STEPS[step]:
        assert has(code, instruction), f"{step} should issue {instruction}"
    later = [i for s in ORDER[ORDER.index(step) + 1:] for i in STEPS[s]]
    for instruction in later + DROPPED.get(step, []):
        assert not has(code, instruction), f"{step} should not issue {instruction}"


@pytest.mark.parametrize("step", ORDER)
def test_each_step_keeps_what_the_steps_before_it_added_until_one_replaces_it(census, step):
    for instruction, (first, last) in KEPT.items():
        if ORDER.index(first) <= ORDER.index(step) <= ORDER.index(last):
            assert has(census[step], instruction), f"{step} should still issue {instruction}, as {first} does"
        else:
            assert not has(census[step], instruction), f"{step} should not issue {instruction}"


def test_the_census_tells_the_steps_apart(census):
    """The table above is not vacuous: every step's PTX differs from the previous one in an instruction it adds."""
    for before, after in zip(ORDER, ORDER[1:]):
        assert any(has(census[after], i) and not has(census[before], i) for i in STEPS[after]), (before, after)


@pytest.mark.slow
@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: f"{str(c[0])[6:]}-{str(c[1])[6:]}-{c[2]}{c[3]}")
@pytest.mark.parametrize("step", ORDER)
def test_every_dtype_and_major_compiles(step, combo):
    ab, c, a_major, b_major = combo
    code = compile_ptx(step, *operands(72, 40, 24, ab, c, a_major, b_major))
    assert has(code, STEPS[step][0])


@pytest.mark.parametrize("step", ["gemm02_smem", "gemm11_pingpong"])
def test_the_launcher_compiles_a_tvm_ffi_function_that_takes_what_it_is_called_with(step):
    """The launcher calls each kernel's bare TVM FFI function with ints (`launcher.Launcher.__call__`): the three
    addresses, the extents, the stream's handle, and for a fused step its C, bias and aux addresses, alpha and beta.
    The function's C entry point checks each argument's type; asked with none, it names what it takes."""
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    a, b, c = operands(200, 136, 72)
    ops = traits(a, b, c, step=step, vector=module.gemm.vector)
    # For sm_90a, the compile-only arch: the DSL makes the callable function only for the arch it runs on.
    compiled = launcher.compile_for(module.host, module.Config(), ops, a, b, c, make_fake_stream(),
                                    options=f"{launcher.TVM_FFI} --gpu-arch sm_90a")
    fn = compiled.__tvm_ffi_object__()
    head = ("pA: DataPointer, pB: DataPointer, pC: DataPointer, m: int32, n: int32, k: int32, lda: int32, "
            "ldb: int32, ldc: int32, stream: Stream")
    tail = ", pSrc: DataPointer, pBias: DataPointer, pAux: DataPointer, alpha: float32, beta: float32"
    with pytest.raises(TypeError) as asked:
        fn()
    assert f"host({head}{tail if module.gemm.fuses else ''})" in str(asked.value)
    with pytest.raises(TypeError, match=r"argument #0 .* expected handle or int"):  # a pointer object is refused
        fn(1.5, *range(1, 10), *((1, 1, 1, 1.0, 0.0) if module.gemm.fuses else ()))
