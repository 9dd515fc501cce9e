"""The small launchers (copy, transpose, axpby, smoke) on CPU tensors: each checks its tensors, compiles once per
Config and launches with the CuTe tensors, its scalars and the stream, through the one `launch.Launcher` (the GPU
tests run the kernels)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass")

from cutecourse.kernels import (axpby, copy, copy_naive, copy_predicated, copy_tiled, launch, smoke,  # noqa: E402
                                transpose)

STEPS = (axpby, copy_naive, copy_predicated, copy_tiled, transpose, smoke)


@pytest.fixture
def recorded(monkeypatch):
    """Launches recorded instead of run: {"checks": [tensor names], "compiles": [(module, config)],
    "calls": [(module, args)]}. Only the checks' CUDA rule is left out (these tensors are on the CPU)."""
    log = {"checks": [], "compiles": [], "calls": []}
    monkeypatch.setattr(launch, "check_matrix", lambda name, t, **rules: log["checks"].append(name))
    monkeypatch.setattr(launch, "current_stream", lambda device=None: "the stream")
    monkeypatch.setattr(smoke, "_check", lambda name, t: log["checks"].append(name))
    for module in STEPS:
        def compile_fn(config, *tensors, options="", module=module):
            log["compiles"].append((module.__name__.rsplit(".", 1)[1], config))
            return lambda *args: log["calls"].append((module.__name__.rsplit(".", 1)[1], args))

        monkeypatch.setattr(module._launcher, "compile", compile_fn)
        monkeypatch.setattr(module._launcher, "compiled", {})
    return log


def matrix(m=128, n=128, dtype=torch.float32):
    return torch.randn(m, n).to(dtype)


def test_each_launcher_compiles_once_and_passes_tensors_scalars_and_stream(recorded):
    x = matrix()
    y = matrix()
    out = matrix()
    vector, vector_out = x[0], out[0]
    for _ in range(2):
        assert copy_naive.copy(x, out) is out and copy_predicated.copy(x, out) is out
        assert copy_tiled.copy(x, out) is out and axpby.axpby(x, y, out, 2.0, -1.0) is out
        assert transpose.transpose(x, out, "naive", tile=64) is out
        assert smoke.smoke(vector, vector_out) is vector_out
    assert transpose.transpose(x, out, "naive", tile=128) is out  # the naive step's tile is always 32: no recompile
    assert [step for step, _ in recorded["compiles"]] == ["copy_naive", "copy_predicated", "copy_tiled", "axpby",
                                                          "transpose", "smoke"]
    calls = dict(recorded["calls"])
    assert len(recorded["calls"]) == 13 and all(args[-1] == "the stream" for _, args in recorded["calls"])
    assert [len(calls[s]) for s in ("copy_naive", "copy_predicated", "copy_tiled", "transpose", "smoke")] == [3] * 5
    *tensors, alpha, beta, stream = calls["axpby"]
    assert len(tensors) == 3 and (alpha.value, beta.value) == (2.0, -1.0)


def test_an_empty_input_launches_nothing(recorded):
    x, out = matrix(0, 8), matrix(0, 8)
    assert copy_predicated.copy(x, out) is out and axpby.axpby(x, x, out) is out
    empty = torch.empty(0)
    assert smoke.smoke(empty, empty) is empty
    assert recorded["compiles"] == [] and recorded["calls"] == []


@pytest.mark.parametrize("m, route", [(128, "copy_tiled"), (121, "copy_predicated")])
def test_the_copy_router_checks_each_tensor_once_and_takes_the_step_that_fits(recorded, m, route):
    x, out = matrix(m), matrix(m)
    assert copy.copy(x, out) is out
    assert recorded["checks"] == ["src", "dst"]
    assert [step for step, _ in recorded["calls"]] == [route]


def test_check_matrix_names_the_shape_a_transpose_needs(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "is_cuda", True)  # the rules after "on the GPU", on CPU tensors
    src = matrix(8, 16)
    launch.check_matrix("dst", matrix(16, 8), like=src, shape=(16, 8))
    with pytest.raises(ValueError, match=r"dst has shape \(8, 16\); it must be \(16, 8\) for an input of \(8, 16\): "
                                         r"torch.empty\(16, 8, "):
        launch.check_matrix("dst", matrix(8, 16), like=src, shape=(16, 8))
    with pytest.raises(ValueError, match=r"dst has shape \(8, 8\) but the input has \(8, 16\)"):
        launch.check_matrix("dst", matrix(8, 8), like=src)
