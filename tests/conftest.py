"""Suite-wide wiring: compile-only mode on machines without a GPU, and the `gpu(cc)` marker."""

from __future__ import annotations

import pytest

from cutecourse import env

_MACHINE = env.probe()
# Without a GPU, kernels still compile: the DSL emits PTX and cubin for this arch.
COMPILE_ONLY_ARCH = env.use_compile_only_arch()


def _required_capability(marker: pytest.Mark) -> int:
    cc = marker.args[0] if marker.args else marker.kwargs.get("cc", 80)
    if not isinstance(cc, int) or cc < 50:
        raise pytest.UsageError(f"@pytest.mark.gpu({cc!r}): give the compute capability as an int, e.g. gpu(90)")
    return cc


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    have = None if _MACHINE.capability is None else _MACHINE.capability[0] * 10 + _MACHINE.capability[1]
    for item in items:
        marker = item.get_closest_marker("gpu")
        if marker is None:
            continue
        need = _required_capability(marker)
        if _MACHINE.dsl is None:
            item.add_marker(pytest.mark.skip(reason=f"not run: needs the CuTe DSL and sm_{need}"))
        elif have is None:
            item.add_marker(pytest.mark.skip(reason=f"not run: needs sm_{need}; this machine has no GPU"))
        elif have < need:
            item.add_marker(pytest.mark.skip(reason=f"not run: needs sm_{need}; this GPU is sm_{have}"))


def pytest_report_header(config: pytest.Config) -> str:
    mode = f"compile-only for {COMPILE_ONLY_ARCH}" if COMPILE_ONLY_ARCH else (_MACHINE.sm or "no DSL")
    return f"cutecourse: {_MACHINE.capabilities()} [{mode}]"
