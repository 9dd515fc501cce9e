"""The copy steps and axpby on the GPU: random shapes (primes included), three dtypes, poisoned outputs."""

import random

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu(80)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
rng = random.Random(5)
SHAPES = [(1, 1), (1, 8), (7, 13), (31, 1000), (97, 131), (257, 64), (1024, 1024)]
SHAPES += [(rng.randint(1, 2000), rng.randint(1, 2000)) for _ in range(4)]
SHAPES += [(rng.randint(1, 500), 8 * rng.randint(1, 300)) for _ in range(4)]  # 128-bit rows, ragged tiles


def poisoned_like(t, dtype=None):
    return torch.full(t.shape, float("nan"), device="cuda", dtype=dtype or t.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("step", ["copy_naive", "copy_predicated"])
def test_copy_steps_are_exact_on_random_shapes(step, dtype):
    import importlib

    module = importlib.import_module(f"cutecourse.kernels.{step}")
    for shape in SHAPES:
        src = torch.randn(*shape, device="cuda").to(dtype)
        dst = poisoned_like(src)
        module.copy(src, dst)
        torch.cuda.synchronize()
        assert torch.equal(dst, src), f"{step} {dtype} {shape}: {int(dst.isnan().sum())} unwritten or wrong values"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tiled_copy_on_tile_multiples_and_refuses_ragged_shapes(dtype):
    from cutecourse.kernels import copy_tiled

    vector = 16 // torch.empty(0, dtype=dtype).element_size()
    for shape in [(32, 32 * vector), (96, 64 * vector), (1024, 4096)]:
        src = torch.randn(*shape, device="cuda").to(dtype)
        dst = poisoned_like(src)
        copy_tiled.copy(src, dst)
        torch.cuda.synchronize()
        assert torch.equal(dst, src), f"{dtype} {shape}"
    with pytest.raises(ValueError, match="use copy_predicated.copy"):
        copy_tiled.copy(torch.randn(33, 64, device="cuda").to(dtype), torch.empty(33, 64, device="cuda", dtype=dtype))


BOUNDS = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1e-2}


@pytest.mark.parametrize("out_dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_axpby_matches_torch_in_float64(dtype, out_dtype):
    from cutecourse.kernels.axpby import axpby

    for shape in SHAPES[4:]:
        x, y = (torch.randn(*shape, device="cuda").to(dtype) for _ in range(2))
        alpha, beta = rng.uniform(-3, 3), rng.uniform(-3, 3)
        out = poisoned_like(x, out_dtype)
        axpby(x, y, out, alpha, beta)
        torch.cuda.synchronize()
        ref = alpha * x.double() + beta * y.double()
        assert not out.isnan().any(), f"{shape}: unwritten outputs"
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err < max(BOUNDS[dtype], BOUNDS[out_dtype]), f"{dtype}->{out_dtype} {shape}: relative error {err:.2e}"


def test_a_misaligned_view_falls_back_to_scalar_accesses():
    from cutecourse.kernels import copy_predicated

    base = torch.randn(64 * 130 + 1, device="cuda")
    src = base[1:].view(64, 130)  # rows start 4 bytes past 16-byte alignment
    dst = poisoned_like(src)
    assert copy_predicated.plan(src, dst).vector == 1
    copy_predicated.copy(src, dst)
    torch.cuda.synchronize()
    assert torch.equal(dst, src)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_copy_launcher_is_exact_on_every_route(dtype):
    from cutecourse.kernels.copy import copy, route

    routes = set()
    for shape in [(64, 512), (33, 512), (97, 131)] + SHAPES[:4]:
        src = torch.randn(*shape, device="cuda").to(dtype)
        dst = poisoned_like(src)
        routes.add(route(src, dst))
        copy(src, dst)
        torch.cuda.synchronize()
        assert torch.equal(dst, src), f"{dtype} {shape} by {route(src, dst)}"
    assert routes == {"tiled, 128-bit", "predicated, 128-bit", "predicated, scalar"}
