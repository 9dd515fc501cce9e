"""Suite-wide wiring: compile-only mode on machines without a GPU; markers come from the course's pytest plugin."""

from __future__ import annotations

import pytest

from cutecourse import env

pytest_plugins = ["cutecourse.grading.plugin"]
# Hidden tests need a learner's answers: the grader runs them (tests/grading runs the grader on every exercise).
collect_ignore = ["hidden", "grading/demo"]

# Without a GPU, kernels still compile: the DSL emits PTX and cubin for this arch.
COMPILE_ONLY_ARCH = env.use_compile_only_arch()


def pytest_report_header(config: pytest.Config) -> str:
    machine: env.Machine = config._cutecourse_machine  # type: ignore[attr-defined]
    mode = f"compile-only for {COMPILE_ONLY_ARCH}" if COMPILE_ONLY_ARCH else (machine.sm or "no DSL")
    return f"cutecourse: {machine.capabilities()} [{mode}]"
