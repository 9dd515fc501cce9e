"""Suite-wide wiring for tests/ and for the notebooks nbval runs: compile-only mode on machines without a GPU (the
notebooks' kernels inherit it), and the course's pytest plugin (markers `gpu(cc)`, `exercise`; the `learner`
fixture)."""

from __future__ import annotations

import pytest

from cutecourse import env

pytest_plugins = ["cutecourse.grading.plugin"]
# Hidden tests need a learner's answers: the grader runs them (tests/grading runs the grader on every exercise).
# Exercises raise NotImplementedError by design; their solutions are what nbval runs.
collect_ignore = ["tests/hidden", "tests/grading/demo", "exercises", ".venv"]

# Without a GPU, kernels still compile: the DSL emits PTX and cubin for this arch.
COMPILE_ONLY_ARCH = env.use_compile_only_arch()


def pytest_report_header(config: pytest.Config) -> str:
    machine: env.Machine = config._cutecourse_machine  # type: ignore[attr-defined]
    mode = f"compile-only for {COMPILE_ONLY_ARCH}" if COMPILE_ONLY_ARCH else (machine.sm or "no DSL")
    return f"cutecourse: {machine.capabilities()} [{mode}]"
