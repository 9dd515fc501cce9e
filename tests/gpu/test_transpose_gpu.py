"""Both transpose steps on the GPU: random shapes (primes, ragged, tile multiples), three dtypes, poisoned output."""

import random

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu(80)

SHAPES = [(1, 1), (1, 97), (31, 33), (64, 64), (97, 131), (128, 256), (257, 63), (1000, 8), (2048, 1536)]
rng = random.Random(3)
SHAPES += [(rng.randint(1, 3000), rng.randint(1, 3000)) for _ in range(6)]


@pytest.mark.parametrize("variant", ["naive", "smem"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_transpose_is_exact_on_random_shapes(variant, dtype):
    from cutecourse.kernels.transpose import plan, transpose

    vectors = set()
    for m, n in SHAPES:
        src = torch.randn(m, n, device="cuda").to(dtype)
        dst = torch.full((n, m), float("nan"), device="cuda", dtype=dtype)
        vectors.add(plan(src, dst, variant).vector)
        transpose(src, dst, variant)
        torch.cuda.synchronize()
        assert not dst.isnan().any(), f"{variant} {dtype} {(m, n)}: {int(dst.isnan().sum())} outputs never written"
        assert torch.equal(dst, src.t()), f"{variant} {dtype} {(m, n)}: wrong values"
    if variant == "smem":
        assert len(vectors) == 2, "both the 128-bit and the scalar path must have been exercised"


def test_transpose_launcher_rejects_bad_tensors():
    from cutecourse.kernels.transpose import transpose

    x = torch.randn(8, 16, device="cuda")
    with pytest.raises(ValueError, match=r"dst has shape \(8, 16\)"):
        transpose(x, torch.empty(8, 16, device="cuda"))
    with pytest.raises(ValueError, match="dst has dtype"):
        transpose(x, torch.empty(16, 8, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="row-major"):
        transpose(x.t(), torch.empty(8, 16, device="cuda"))
    with pytest.raises(ValueError, match="supported: float32"):
        transpose(x.double(), torch.empty(16, 8, device="cuda", dtype=torch.float64))
