"""The hardware agrees with the simulator: one warp runs ldmatrix (.x1/.x2/.x4, with and without .trans) and
mma.sync (m16n8k8, m16n8k16; fp16 and bf16) and writes what each lane holds; cutecourse.fragments predicts every
entry. The inputs are distinct integers (exact in fp16 and bf16), so a value tells where it came from."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cutecourse import fragments as F  # noqa: E402

pytestmark = pytest.mark.gpu(80)


def first_mismatch(got: np.ndarray, want: np.ndarray) -> str:
    where = np.argwhere(got != want)
    if not where.size:
        return ""
    i = tuple(where[0])
    return f"{len(where)} of {got.size} entries differ; the first is [lane, ...] {i}: got {got[i]}, predicted {want[i]}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("num_matrices", F.LDMATRIX_COUNTS)
def test_ldmatrix_registers_are_what_the_simulator_predicts(num_matrices, transpose, dtype):
    from cutecourse.fragments import dump

    g = torch.Generator().manual_seed(17 * num_matrices + transpose)
    values = torch.randperm(64 * num_matrices, generator=g) + 1  # 1..256: distinct, exact in fp16 and bf16
    got = dump.ldmatrix_dump(values.to(dtype).cuda(), num_matrices, transpose)
    torch.cuda.synchronize()
    got = got.float().cpu().numpy()
    want = F.simulate_ldmatrix(values.view(8 * num_matrices, 8).numpy(), num_matrices, transpose)
    assert not np.isnan(got).any(), "some registers were never written out"
    assert np.array_equal(got, want), first_mismatch(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("k", F.MMA_KS)
@pytest.mark.parametrize("data", ["random", "distinct"])
def test_mma_c_fragment_is_what_the_simulator_predicts(k, dtype, data):
    from cutecourse.fragments import dump

    g = torch.Generator().manual_seed(k)
    if data == "random":  # small integers: every product and sum is exact in fp32
        a, b = (torch.randint(-4, 5, shape, generator=g) for shape in ((16, k), (8, k)))
    else:  # A's row m picks column m % k of B's row n, and B's entries are distinct: C[m, n] names (m % k, n)
        a = torch.zeros(16, k)
        a[torch.arange(16), torch.arange(16) % k] = 1
        b = (torch.randperm(8 * k, generator=g) + 1).view(8, k)
    out, c = dump.mma_c_dump(a.to(dtype).cuda(), b.to(dtype).cuda())
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().T).numpy()
    assert np.array_equal(c.double().cpu().numpy(), ref), "C = A @ B.T is wrong: the operands' fragments are off"
    at = F.mma_fragments(F.mma_atom(k))["C"]
    want, got = ref[at[..., 0], at[..., 1]], out.double().cpu().numpy()
    assert np.array_equal(got, want), first_mismatch(got, want)
