"""A real launch: the smallest CuTe DSL kernel on torch tensors, checked against torch."""

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu(80)


@pytest.mark.parametrize("n", [1, 127, 128, 129, 100_003])
def test_smoke_kernel_matches_torch_on_random_data(n):
    from cutecourse.kernels import smoke

    x = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    smoke.smoke(x, out)
    torch.cuda.synchronize()
    ref = 2 * x.double() + 1
    assert not out.isnan().any(), "some outputs were never written"
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-6


def test_smoke_launcher_rejects_wrong_dtype_and_shape_on_the_gpu():
    from cutecourse.kernels import smoke

    x = torch.randn(64, device="cuda")
    with pytest.raises(ValueError, match="dtype torch.float16"):
        smoke.smoke(x.half(), torch.empty_like(x))
    with pytest.raises(ValueError, match="out has shape"):
        smoke.smoke(x, torch.empty(65, device="cuda"))
    with pytest.raises(ValueError, match="contiguous 1-D"):
        smoke.smoke(torch.randn(8, 8, device="cuda"), torch.empty(8, 8, device="cuda"))


def test_self_test_reports_ok():
    from cutecourse.kernels import smoke

    assert smoke.self_test().startswith("ok:")
