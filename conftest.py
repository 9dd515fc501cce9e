"""Suite-wide wiring for tests/ and for the notebooks nbval runs: compile-only mode on machines without a GPU (the
notebooks' kernels inherit it), the course's pytest plugin (markers `gpu(cc)`, `exercise`; the `learner`
fixture), and the run's last line before pytest's own: every reason tests were skipped, with counts."""

from __future__ import annotations

from collections import Counter

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


def skip_reasons(skipped: list[pytest.TestReport]) -> str:
    """One line: each reason tests were skipped for, with its count, most first ("" when none was)."""
    reasons = Counter()
    for report in skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    return "; ".join(f"{count} × {reason}" for reason, count in reasons.most_common())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    """After every other summary (the short test summary included), so that it stands just above pytest's last line."""
    result = yield
    line = skip_reasons(terminalreporter.stats.get("skipped", []))
    if line:
        terminalreporter.write_line(f"skipped, by reason: {line}")
    return result
