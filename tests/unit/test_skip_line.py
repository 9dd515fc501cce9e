"""The suite's last line before pytest's own: every reason tests were skipped for, with its count."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "conftest.py")
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)


def skipped(reason: str) -> SimpleNamespace:
    return SimpleNamespace(longrepr=("tests/x.py", 3, f"Skipped: {reason}"))


def test_the_line_counts_each_reason_most_first():
    reports = [skipped("needs sm_80"), skipped("no Chromium"), skipped("needs sm_80")]
    assert suite.skip_reasons(reports) == "2 × needs sm_80; 1 × no Chromium"


def test_no_skip_makes_no_line():
    assert suite.skip_reasons([]) == ""
