"""The GEMM launchers' checks: each misuse gets a ValueError naming the argument and the fix, on any device (the
shape, dtype, major and alignment rules are checked on CPU tensors here; the GPU tests repeat the device rules)."""

import importlib

import pytest

from cutecourse import hw

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutecourse.kernels.gemm import launcher, operands  # noqa: E402


def traits(a, b, c, vector=True):
    return operands.traits(a, b, c, step="gemm05_swizzle", vector=vector)


def problem(m=64, n=32, k=16, dtype=torch.float16, out=torch.float32):
    return torch.empty(m, k, dtype=dtype), torch.empty(k, n, dtype=dtype), torch.empty(m, n, dtype=out)


def test_majors_follow_the_strides():
    a, b, c = problem()
    assert traits(a, b, c) == operands.Operands("float16", "float32", "k", "n", 8)
    at, bt = torch.empty(16, 64, dtype=torch.float16), torch.empty(32, 16, dtype=torch.float16)
    assert traits(at.t(), bt.t(), c) == operands.Operands("float16", "float32", "m", "k", 8)
    assert traits(a.bfloat16(), b.bfloat16(), c.half(), vector=False) == \
        operands.Operands("bfloat16", "float16", "k", "n", 1)


@pytest.mark.parametrize("change, match", [
    (lambda a, b, c: (a.float(), b, c), r"a has dtype torch.float32; .* a = a.to\(torch.bfloat16\)"),
    (lambda a, b, c: (a, b.bfloat16(), c), r"b has dtype torch.bfloat16 but a has torch.float16: b = b.to"),
    (lambda a, b, c: (a, b, c.double()), r"c has dtype torch.float64; pick float32, float16 or bfloat16"),
    (lambda a, b, c: (a, b[:8], c), r"a is \(64, 16\) and b is \(8, 32\): a's columns \(K=16\) must equal b's rows"),
    (lambda a, b, c: (a, b, c[:, :16]), r"c has shape \(64, 16\); a @ b is \(64, 32\)"),
    (lambda a, b, c: (a, b, c.t().contiguous().t()), r"c has shape \(64, 32\) and strides \(1, 64\); pass a "
                                                     r"row-major output"),
    (lambda a, b, c: (a[:, ::2], b[::2], c), r"a has shape \(64, 8\) and strides \(16, 2\): neither row- nor column"),
    (lambda a, b, c: (a[0], b, c), r"a must be 2-D, got shape \(16,\)"),
    (lambda a, b, c: (a.numpy(), b, c), r"a is array\(.*\(ndarray\); pass a 2-D torch.Tensor"),
    (lambda a, b, c: (a, None, c), r"b is None \(NoneType\); pass a 2-D torch.Tensor on the GPU, e.g. b = "),
    (lambda a, b, c: (torch.empty(1, 16, dtype=torch.float16).expand(64, 16), b, c),
     r"a has shape \(64, 16\) and strides \(0, 1\): neither row- nor column-major with a leading dimension"),
    (lambda a, b, c: (a, b, torch.empty(1, 32).expand(64, 32)), r"c has shape \(64, 32\) and strides \(0, 1\); "
                                                                 r"pass a row-major output \(its leading dimension"),
])
def test_misuse_names_the_argument_and_the_fix(change, match):
    with pytest.raises(ValueError, match=match):
        traits(*change(*problem()))


def test_the_16_byte_rule_names_the_extent_and_the_way_out():
    a, b, c = problem(k=12)
    with pytest.raises(ValueError, match=r"a's contiguous extent is K=12 .* multiple of 8 .* or use gemm02_smem"):
        traits(a, torch.empty(12, 32, dtype=torch.float16), c)
    a, b, c = problem(n=36)
    with pytest.raises(ValueError, match=r"b's contiguous extent is N=36"):
        traits(a, b, c)
    a, b, c = problem(m=60)
    with pytest.raises(ValueError, match=r"a's contiguous extent is M=60"):
        traits(torch.empty(16, 60, dtype=torch.float16).t(), b, c)
    a, b, c = problem()
    offset = torch.empty(64 * 16 + 1, dtype=torch.float16)[1:].view(64, 16)  # 2 bytes past alignment
    with pytest.raises(ValueError, match=r"a starts 2 bytes past a 16-byte boundary: gemm05_swizzle moves 16-byte "
                                         r"vectors.*a.clone\(\)"):
        traits(offset, b, c)
    bk = torch.empty(36, 16, dtype=torch.float16).t()  # K-major b: only c's rows constrain N
    assert traits(a, bk, torch.empty(64, 36)).b_major == "k"  # 144-byte fp32 rows hold whole vectors
    with pytest.raises(ValueError, match=r"c's contiguous extent is N=36 .* multiple of 8"):
        traits(a, bk, torch.empty(64, 36, dtype=torch.float16))  # 72-byte fp16 rows do not
    assert traits(*problem(m=7, n=13, k=5), vector=False).vector == 1  # the SIMT steps take any shape


def test_launchers_refuse_cpu_tensors_before_anything_else():
    from cutecourse.kernels.gemm import gemm01_naive

    a, b, c = problem()
    with pytest.raises(ValueError, match=r"a is on cpu; move it to the GPU: a = a.cuda\(\)"):
        gemm01_naive.gemm(a, b, c)


def test_a_dimension_of_1_allows_either_major_and_the_aligned_one_is_taken():
    a = torch.empty(16, 1, dtype=torch.float16).t().t()  # (16, 1): both contiguous and transposed-contiguous
    b = torch.empty(1, 8, dtype=torch.float16)
    ops = traits(torch.empty(1, 16, dtype=torch.float16).t(), b, torch.empty(16, 8))
    assert (ops.a_major, ops.b_major) == ("m", "n")  # K = 1 holds no vector, M = 16 does
    assert traits(a, b, torch.empty(16, 8)).a_major == "m"


def test_extents_past_the_grid_limit_are_refused_with_the_way_to_split():
    a = torch.empty(65535 * 16 + 1, 8, dtype=torch.float16)
    b, c = torch.empty(8, 1, dtype=torch.float16), torch.empty(65535 * 16 + 1, 1)
    with pytest.raises(ValueError, match=r"keep M and N at most 1048560 and split the GEMM"):
        traits(a, b, c, vector=False)


@pytest.mark.parametrize("step", ["gemm09_persistent", "gemm10_multicast", "gemm11_pingpong"])
def test_the_persistent_steps_never_launch_more_ctas_than_the_gpu_has_sms_for(monkeypatch, step):
    from types import SimpleNamespace

    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    sms = {"cuda:0": 114, "cuda:1": 132}  # an H100 PCIe and an H200
    monkeypatch.setattr(launcher.torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(multi_processor_count=sms[device]))
    assert module.Config().sms == hw.SPECS["H200"].sms == 132
    assert launcher.for_device(module.Config(), "cuda:0").sms == 114
    assert launcher.for_device(module.Config(), "cuda:1") == module.Config()
    assert launcher.for_device(module.Config(sms=64), "cuda:0").sms == 64  # a smaller grid asked for stays
    assert module.gemm.for_device is launcher.for_device  # and the launcher applies it


def test_the_steps_take_their_limits_from_cutecourse_hw():
    from cutecourse.kernels.gemm import gemm05_swizzle, gemm07_wgmma, gemm10_multicast

    assert gemm05_swizzle.SMEM_BYTES == hw.ARCH_LIMITS["sm_80"].smem_per_block_max == 163 * 1024
    assert gemm07_wgmma.SMEM_BYTES == gemm10_multicast.SMEM_BYTES == 227 * 1024


@pytest.mark.parametrize("step, fields, match", [
    ("gemm01_naive", dict(threads_m=64, threads_n=32), r"threads_m=64, threads_n=32\): a CTA has at most 1024"),
    ("gemm02_smem", dict(tile_m=100), r"tile_m=100.*tile_m must be a multiple of 64"),
    ("gemm03_mma", dict(tile_k=24), r"tile_k=24.*tile_k must be a multiple of 16"),
    ("gemm04_multistage", dict(stages=2), r"stages=2.*stages >= 3"),
    ("gemm05_swizzle", dict(stages=6), r"6 stages of 16-bit A and B tiles take more than the 166912 bytes"),
    ("gemm05_swizzle", dict(tile_n=96), r"tile_n=96.*tile_n a power of two"),
    ("gemm07_wgmma", dict(tile_n=256), r"more than 128 accumulators a thread"),
    ("gemm07_wgmma", dict(stages=1), r"stages=1.*and stages >= 2"),
    ("gemm08_warpspecialized", dict(stages=5), r"5 stages of 16-bit A and B tiles take more than the 232448 bytes of "
                                               r"shared memory a CTA may use beside their mbarriers"),
    ("gemm09_persistent", dict(stages=1), r"stages=1.*stages must be 0 \(as many as fit\) or at least 2"),
    ("gemm11_pingpong", dict(stages=-1), r"stages=-1.*stages must be 0 \(as many as fit\) or at least 2"),
    ("gemm08_warpspecialized", dict(tile_m=96), r"tile_m=96.*tile_m a multiple of 64"),
    ("gemm09_persistent", dict(tile_m=192), r"tile_m=192.*tile_m must be 64, 128 or 256"),
    ("gemm09_persistent", dict(group_m=0), r"group_m=0.*group_m and sms must be at least 1"),
    ("gemm10_multicast", dict(sms=1), r"sms=1.*sms at least cluster_m \* cluster_n"),
    ("gemm11_pingpong", dict(tile_n=256), r"tile_n=256.*more than 128 accumulators a consumer thread"),
])
def test_a_config_the_kernel_cannot_run_is_refused_by_name(step, fields, match):
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    module.Config()  # the defaults are valid
    with pytest.raises(ValueError, match=match):
        module.Config(**fields)


def test_a_config_of_another_step_is_refused_by_name():
    from cutecourse.kernels.gemm import gemm04_multistage, gemm05_swizzle

    with pytest.raises(ValueError, match=r"config is a gemm04_multistage.Config; gemm05_swizzle takes its own: "
                                         r"gemm05_swizzle.Config\(...\)"):
        gemm05_swizzle.gemm(*problem(), gemm04_multistage.Config())


@pytest.mark.parametrize("step", ["gemm09_persistent", "gemm10_multicast"])
def test_explicit_stages_that_do_not_fit_shared_memory_are_refused_at_compile_time(step):
    from cutlass.cute.runtime import make_fake_stream

    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    a, b, c = problem(256, 256, 64)
    ops = traits(a, b, c)
    with pytest.raises(ValueError, match=r"Config\(stages=5\): 5 stages of 49152 bytes do not fit"):
        launcher.compile_for(module.host, module.Config(stages=5), ops, a, b, c, make_fake_stream(),
                                options="--gpu-arch sm_90a")


def test_a_launch_checks_and_compiles_once_for_tvm_ffi_then_passes_the_addresses_and_the_extents(monkeypatch):
    """The launcher's cached path, on CPU tensors: the checks (here `traits`, as `check` would refuse a CPU tensor)
    and the compile (for TVM FFI) run on the first call only; every call gets the three addresses as ints, with M,
    N, K, the leading dimensions (a's padded: its stride, not K) and the stream's handle."""
    from cutecourse.kernels.gemm import gemm05_swizzle as step5

    checks = []
    compiles = []
    calls = []

    class Compiled:  # what cute.compile returns for TVM FFI: a wrapper around the C entry point
        def __tvm_ffi_object__(self):
            return lambda *call: calls.append(call)

    def check(a, b, c, **kw):
        checks.append(kw["step"])
        return operands.traits(a, b, c, step=kw["step"], vector=kw["vector"])

    def compile_for(*args, **kw):
        compiles.append((args[1], kw["options"]))
        return Compiled()

    monkeypatch.setattr(operands, "check", check)
    monkeypatch.setattr(operands, "capability", lambda device: 80)  # an A100's shared memory budget
    monkeypatch.setattr(launcher, "compile_for", compile_for)
    monkeypatch.setattr(launcher.launch, "current_stream", lambda device=None: "the stream")
    monkeypatch.setattr(launcher.launch, "raw_stream", lambda device: 0x5EED)
    gemm = launcher.Launcher(step5.host, step5.Config, vector=True, min_cc=80)
    _, b, c = problem(64, 32, 16)
    a = torch.empty(64, 24, dtype=torch.float16)[:, :16]  # a padded leading dimension: strides (24, 1)
    for _ in range(3):
        assert gemm(a, b, c) is c
    assert checks == ["gemm05_swizzle"] and compiles == [(step5.Config(), "--enable-tvm-ffi")] and len(calls) == 3
    assert calls[-1] == (a.data_ptr(), b.data_ptr(), c.data_ptr(), 64, 32, 16, 24, 32, 32, 0x5EED)


def test_a_call_key_tells_shapes_apart_however_their_extents_run_on_and_an_unhashable_one_finds_nothing():
    from cutecourse.kernels.gemm.plans import Plans

    def key(a, b, d, epilogue=None):
        return launcher.call_key("config", a, b, d, epilogue, 1.0, 0.0, None, None, None)

    d = torch.empty(2, 5)
    flat = key(torch.empty(2, 3), torch.empty(3, 5), d)
    assert flat != key(torch.empty(2, 3, 3), torch.empty(5), d)  # the same extents, in other shapes
    assert flat != key(torch.empty(3, 2).t(), torch.empty(3, 5), d)  # the same shapes, other strides
    assert key(torch.empty(2, 3), torch.empty(3, 5), d) == flat and hash(flat) == hash(key(
        torch.empty(2, 3), torch.empty(3, 5), d))
    assert launcher.call_key("config", torch.empty(2, 3), torch.empty(3, 5), d, None, True, 0.0, None, None,
                             None) is None  # alpha=True: the checks say what is wrong
    plans = Plans()
    unhashable = key(torch.empty(2, 3), torch.empty(3, 5), d, epilogue=["gelu"])
    plans.put(unhashable, "plan")
    assert plans.get(unhashable) is None and len(plans) == 0


def test_the_plan_caches_are_bounded_and_forget_everything_when_full():
    from cutecourse import dispatch
    from cutecourse.kernels.gemm import gemm05_swizzle
    from cutecourse.kernels.gemm.plans import Plans

    plans = Plans(limit=2)
    plans.put("a", 1)
    plans.put("b", 2)
    assert (plans.get("a"), plans.get("b"), plans.get("c"), len(plans)) == (1, 2, None, 2)
    plans.put("c", 3)  # full: the older plans go
    assert (plans.get("a"), plans.get("c"), len(plans)) == (None, 3, 1)
    assert isinstance(gemm05_swizzle.gemm.plans, Plans)  # the launchers' and the dispatcher's caches are these
    dispatch.forget_plans()
    with pytest.raises(ValueError, match=r"limit=0: give the number of plans to keep, a positive int"):
        Plans(limit=0)
