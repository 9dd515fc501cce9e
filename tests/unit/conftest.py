"""Fixtures and the terminal summary of the eager-vs-DSL layout property tests."""

from __future__ import annotations

import pytest

_STATS_KEY = pytest.StashKey[dict]()


def _stats(config) -> dict:
    if _STATS_KEY not in config.stash:
        config.stash[_STATS_KEY] = {}
    return config.stash[_STATS_KEY]


@pytest.fixture(scope="session")
def layout_dsl_stats(pytestconfig) -> dict:
    """op -> {"compared": n, "mismatches": m, "invalid_compared": k}, printed at the end of the run."""
    return _stats(pytestconfig)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    stats = _stats(config)
    if not stats:
        return
    tr = terminalreporter
    tr.section("eager layout algebra vs CuTe DSL")
    w = max(len("op"), *(len(k) for k in stats))
    tr.write_line(f"{'op':<{w}}  {'cases compared':>14}  {'mismatches':>10}  {'random/invalid compared':>23}")
    total = [0, 0, 0]
    for op in sorted(stats):
        s = stats[op]
        c = s.get("compared", 0)
        m = s.get("mismatches", 0)
        i = s.get("invalid_compared", 0)
        total[0] += c
        total[1] += m
        total[2] += i
        tr.write_line(f"{op:<{w}}  {c:>14}  {m:>10}  {i:>23}")
    tr.write_line(f"{'total':<{w}}  {total[0]:>14}  {total[1]:>10}  {total[2]:>23}")
