"""The copy steps compile without a GPU, for sm_80 and sm_90a, with the memory instructions each step promises:
the 128-bit steps issue 4× (fp32) fewer global loads and stores than scalar copies of the same elements."""


import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

from cutecourse.kernels import axpby, copy_naive, copy_predicated, copy_tiled, ptx  # noqa: E402


def f32(shape=(64, 256)):
    return torch.empty(*shape)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_vectorized_steps_issue_a_quarter_of_the_scalar_memory_instructions(arch):
    stream = make_fake_stream()

    def code(module, vector):
        return ptx.ptx_of(lambda o: module.compile(module.Config("float32", vector), f32(), f32(), stream, o), arch)

    scalar = code(copy_predicated, 1)
    assert ptx.count(scalar, "ld.global.b32") == 4 and ptx.count(scalar, "st.global.b32") == 4
    # 16 elements a thread in 4 vector instructions, where the scalar build moves 4 in 4: a quarter per element
    for vectorized in (code(copy_tiled, 4), code(copy_predicated, 4)):
        assert ptx.count(vectorized, "ld.global.v4") == 4 and ptx.count(vectorized, "st.global.v4") == 4
        assert ptx.count(vectorized, "ld.global.b32") == 0


def test_naive_step_is_one_scalar_load_and_store_per_thread():
    code = ptx.ptx_of(lambda o: copy_naive.compile(copy_naive.Config(), f32(), f32(), make_fake_stream(), o), "sm_80")
    assert ptx.count(code, "ld.global.b32") == 1 and ptx.count(code, "st.global.b32") == 1


def test_predication_guards_the_accesses():
    code = ptx.ptx_of(lambda o: copy_predicated.compile(copy_predicated.Config("float32", 4), f32(), f32(),
                                                    make_fake_stream(), o), "sm_90a")
    # Each of the 8 vector accesses sits behind a predicated branch (or is itself predicated); the tiled step has none.
    assert ptx.count(code, "ld.global.v4") + ptx.count(code, "st.global.v4") == 8 and ptx.guarded(code) >= 8
    config = copy_tiled.Config("float32", 4)
    tiled = ptx.ptx_of(lambda o: copy_tiled.compile(config, f32(), f32(), make_fake_stream(), o), "sm_90a")
    assert ptx.guarded(tiled) == 0


def test_axpby_reads_two_vectors_and_fuses_the_arithmetic():
    half = torch.empty(64, 256, dtype=torch.float16)
    code = ptx.ptx_of(lambda o: axpby.compile(axpby.Config("float16", "float16", 8), half, half, half,
                                          make_fake_stream(), o), "sm_90a")
    assert ptx.count(code, "ld.global.v4") == 8 and ptx.count(code, "st.global.v4") == 4
    assert ptx.count(code, "fma.rn.f32") > 0


@pytest.mark.parametrize("call, match", [
    (lambda: copy_predicated.copy(torch.ones(4, 4), torch.ones(4, 4)), "src is on cpu"),
    (lambda: copy_tiled.copy("x", None), "src must be a torch.Tensor"),
    (lambda: axpby.axpby(torch.ones(4, 4), torch.ones(4, 4), torch.ones(4, 4), alpha="2"), "alpha must be"),
])
def test_launchers_name_the_bad_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("shape, offset, dtype, path", [
    ((64, 256), 0, torch.float32, "tiled, 128-bit"),          # whole 32x128 tiles, aligned rows
    ((64, 512), 0, torch.float16, "tiled, 128-bit"),          # whole 32x256 tiles
    ((33, 256), 0, torch.float32, "predicated, 128-bit"),     # a partial row of tiles
    ((64, 260), 0, torch.float32, "predicated, 128-bit"),     # N a multiple of 4 but not of the tile
    ((64, 130), 0, torch.float32, "predicated, scalar"),      # rows not 16-byte aligned
    ((64, 256), 1, torch.float32, "predicated, scalar"),      # base pointer 4 bytes past alignment
])
def test_the_copy_launcher_routes_by_shape_and_alignment(shape, offset, dtype, path):
    from cutecourse.kernels.copy import route

    base = torch.empty(shape[0] * shape[1] + 16, dtype=dtype)
    src = base[offset:offset + shape[0] * shape[1]].view(shape)
    assert route(src, torch.empty(shape, dtype=dtype)) == path
