"""The GEMM ladder's diffs: every step keeps at least half of the step before (35% where a mechanism switches:
cp.async -> TMA, mma.sync -> wgmma), the diff is shown as text and side by side, and `cutecourse steps` prints both.
Nothing here needs the DSL: the steps are read as text."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

from cutecourse import cli
from cutecourse.kernels.gemm import GEMM_STEPS, steps

PAIRS = range(2, len(GEMM_STEPS) + 1)


def below_bound() -> list[str]:
    """The pairs of consecutive steps whose kept share is under their bound, as summaries."""
    diffs = [steps.diff(n) for n in PAIRS]
    return [d.summary() for d in diffs if d.kept < steps.bound(d.n)]


def test_each_step_keeps_at_least_half_of_the_code_of_the_step_before(capsys):
    summaries = [steps.diff(n).summary() for n in PAIRS]
    with capsys.disabled():  # shown in the run's output, passed or not
        print("\nkept share of each GEMM step's code in the next:\n  " + "\n  ".join(summaries))
    assert not below_bound()
    assert steps.bound(6) == steps.bound(7) == 0.35 and all(steps.bound(n) == 0.5 for n in PAIRS if n not in (6, 7))


def test_the_bound_fails_a_step_that_was_rewritten(monkeypatch):
    rewritten = steps.source(1)  # step 4 replaced by the naive kernel: step 3's lines are gone
    original = steps.source
    monkeypatch.setattr(steps, "source", lambda step: rewritten if step == 4 else original(step))
    low = below_bound()
    assert [s.split(" (")[0] for s in low] == ["step 3 -> 4", "step 4 -> 5"], low


def test_code_lines_leave_out_docstrings_comments_and_indentation():
    text = ('"""Module doc."""\n\nx = 1  # why\n\n\ndef f():\n    """Doc\n    on two lines."""\n    # a comment\n'
            "    return x\n")
    assert steps.code_lines(text) == ["x = 1", "def f():", "return x"]


def test_the_diff_ignores_indentation_and_shows_the_changed_lines(monkeypatch):
    texts = {1: "a = 1\nfor i in range(3):\n    b = a\n", 2: "a = 1\nwhile True:\n    for i in range(3):\n"
                                                             "        b = a\n"}
    monkeypatch.setattr(steps, "source", lambda step: texts[step])
    d = steps.diff(2)
    body = d.text.splitlines()[3:]
    assert body == [" a = 1", "+while True:", "     for i in range(3):", "         b = a"], d.text
    assert (d.kept_code_lines, d.code_lines) == (3, 3)
    assert 'class="add">while True:</td>' in d.html and d._repr_html_() == d.html


def test_the_side_by_side_view_escapes_the_source_and_marks_both_sides():
    d = steps.diff(11)
    assert d.html.count("<tr>") > 100 and 'class="del"' in d.html and 'class="add"' in d.html
    assert "<lambda" not in d.html and "&quot;" in d.html
    assert d.summary() in d.html.replace("&gt;", ">")


@pytest.mark.parametrize("n", [1, 12, "3", 2.0])
def test_a_step_outside_the_ladder_is_named_with_the_range(n):
    with pytest.raises(ValueError, match=rf"n={n!r}: diff\(n\) compares step n with step n - 1, so n is a step "
                                         r"from 2 to 11"):
        steps.diff(n)


def test_context_must_be_a_count():
    with pytest.raises(ValueError, match=r"context=-1: give the number of unchanged lines"):
        steps.diff(3, context=-1)


def test_the_docstring_example_runs():
    result = doctest.testmod(steps)
    assert result.failed == 0 and result.attempted > 0


def test_the_cooperative_steps_never_mention_the_other_schedule():
    for step in ("gemm08_warpspecialized", "gemm09_persistent", "gemm10_multicast"):
        text = steps.source(GEMM_STEPS.index(step) + 1)
        assert text.lower().count("pingpong") == 0, step
    assert "pingpong" in steps.source(11)  # the check reads the files it means to


def test_each_step_states_its_idea_first():
    ideas = steps.ladder()
    assert [name for _, name, _ in ideas] == list(GEMM_STEPS)
    assert all(0 < len(idea) <= 70 for _, _, idea in ideas), ideas
    assert ideas[2][2] == "Tensor Cores"


def test_the_command_prints_the_diff_the_ladder_and_writes_html(capsys, tmp_path):
    assert cli.main(["steps", "diff", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(steps.diff(5).summary()) and "+++ gemm05_swizzle.py" in out
    page = tmp_path / "diff.html"
    assert cli.main(["steps", "diff", "7", "--html", str(page)]) == 0
    assert f"wrote {page}" in capsys.readouterr().out and '<table class="cc-diff">' in page.read_text()
    assert cli.main(["steps", "list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(GEMM_STEPS)
    assert cli.main(["steps", "diff", "1"]) == 2
    assert "n=1: diff(n) compares step n with step n - 1" in capsys.readouterr().err


def test_reading_the_diffs_loads_neither_torch_nor_the_dsl():
    code = ("import sys; from cutecourse.kernels.gemm import steps; steps.diff(9); "
            "assert not {'torch', 'cutlass', 'ipywidgets'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
