"""The register-dump kernels (cutecourse.fragments.dump) compile on this CPU for sm_80 and sm_90a, and each issues
exactly the instruction it dumps: one ldmatrix of the asked count and .trans, one mma.sync of the asked K and dtype.
Their inputs are checked before anything compiles."""

import pytest

pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed")
torch = pytest.importorskip("torch")

from cutecourse.fragments import dump  # noqa: E402
from cutecourse.kernels import ptx  # noqa: E402

pytestmark = pytest.mark.slow


def only(code: str, prefix: str) -> dict:
    return {op: n for op, n in ptx.census(code).items() if op.startswith(prefix)}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("num_matrices, transpose", [(1, False), (2, True), (4, False), (4, True)])
def test_ldmatrix_dump_issues_one_ldmatrix_of_its_kind(arch, num_matrices, transpose):
    code = dump.ptx_of("ldmatrix", arch, num_matrices=num_matrices, transpose=transpose)
    trans = ".trans" if transpose else ""
    assert only(code, "ldmatrix") == {f"ldmatrix.sync.aligned.m8n8.x{num_matrices}{trans}.shared.b16": 1}
    assert ptx.count(code, "st.global") == 2 * num_matrices  # every register half is written out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("k, dtype", [(16, "float16"), (8, "bfloat16")])
def test_mma_dump_issues_one_mma_sync_of_its_shape(arch, k, dtype):
    code = dump.ptx_of("mma", arch, dtype=dtype, k=k)
    ab = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    assert only(code, "mma") == {f"mma.sync.aligned.m16n8k{k}.row.col.f32.{ab}.{ab}.f32": 1}


@pytest.mark.parametrize("call, message", [
    (lambda: dump.ldmatrix_dump(torch.zeros(64, dtype=torch.float16), 3), "1, 2 or 4"),
    (lambda: dump.ldmatrix_dump(torch.zeros(64, dtype=torch.float16), 4), "(256,) tensor"),
    (lambda: dump.ldmatrix_dump(torch.zeros(64), 1), "float16 or bfloat16"),
    (lambda: dump.mma_c_dump(torch.zeros(16, 12, dtype=torch.float16), torch.zeros(8, 12)), "k=16"),
    (lambda: dump.mma_c_dump(torch.zeros(16, 8, dtype=torch.float16), torch.zeros(8, 8)), "(8, 8) tensor of float16"),
    (lambda: dump.ptx_of("stmatrix", "sm_90a"), "'ldmatrix' and 'mma'"),
])
def test_bad_inputs_are_refused_with_the_fix(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert message in str(info.value), str(info.value)
