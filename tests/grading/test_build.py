"""`cutecourse build`: exercises from solutions, stubs in place of answers, and no solution text left over."""

import json
import shutil
from pathlib import Path

import pytest

from cutecourse.cli import main
from cutecourse.grading import build
from cutecourse.grading import notebook as nbio

ROOT = Path(__file__).resolve().parents[2]
COURSES = [ROOT, Path(__file__).parent / "demo"]


def solution_lines(cell: dict) -> list[str]:
    text = nbio.source(cell)
    inside, lines = False, []
    for line in text.splitlines():
        if nbio.BEGIN in line:
            inside = True
        elif nbio.END in line:
            inside = False
        elif inside and len(line.strip()) > 3:
            lines.append(line.strip())
    return lines


@pytest.mark.parametrize("course", COURSES, ids=lambda p: p.name)
def test_exercises_are_up_to_date(course):
    assert build.build(course, check=True) == []


@pytest.mark.parametrize("course", COURSES, ids=lambda p: p.name)
def test_no_solution_text_leaks_into_exercises(course):
    for solution in sorted((course / "solutions").glob("[0-9][0-9]_*.ipynb")):
        exercise = nbio.load(course / "exercises" / solution.name)
        text = json.dumps(exercise)
        assert nbio.BEGIN not in text and nbio.END not in text
        for cell in nbio.answers(nbio.load(solution)).values():
            for line in solution_lines(cell):
                assert line not in text, f"{solution.name}: solution line {line!r} is in the exercise"


def test_demo_has_a_solution_to_check():
    # The leak test above must have something to look at, or it proves nothing.
    cells = nbio.answers(nbio.load(COURSES[1] / "solutions" / "00_demo.ipynb"))
    assert sum(len(solution_lines(c)) for c in cells.values()) >= 8


def test_stub_raises_with_the_exercise_title_and_keeps_indentation():
    cell = {"cell_type": "code", "metadata": {"cutecourse": {"exercise": "2.3", "title": "compose A with B"}},
            "source": "def f(a, b):\n    ### BEGIN SOLUTION\n    return a(b)\n    ### END SOLUTION\n"}
    assert build.stub(cell) == "def f(a, b):\n    raise NotImplementedError('Exercise 2.3: compose A with B')\n"


def test_unmarked_answer_and_orphan_marker_are_errors():
    with pytest.raises(ValueError, match="no '### BEGIN SOLUTION' marker"):
        build.stub({"cell_type": "code", "metadata": {"cutecourse": {"exercise": "1.1"}}, "source": "x = 1"})
    nb = {"nbformat": 4, "cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                                    "source": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n"}]}
    with pytest.raises(ValueError, match="no exercise id"):
        build.exercise_from_solution(nb)


def test_answer_outputs_are_cleared_and_check_outputs_kept():
    ex = nbio.load(COURSES[1] / "exercises" / "00_demo.ipynb")
    for cell in ex["cells"]:
        if cell["cell_type"] != "code":
            continue
        if nbio.is_check(cell):
            assert cell["outputs"][0]["text"][0].startswith("✓ ")
        else:
            assert cell["outputs"] == [] and cell["execution_count"] is None


def test_build_check_fails_on_a_stale_exercise(tmp_path, capsys):
    course = tmp_path / "course"
    shutil.copytree(COURSES[1], course)
    assert main(["build", "--check", "--course", str(course)]) == 0
    path = course / "exercises" / "00_demo.ipynb"
    nb = nbio.load(path)
    nb["cells"][0]["source"] = ["# edited by hand\n"]
    nbio.dump(nb, path)
    assert main(["build", "--check", "--course", str(course)]) == 1
    assert "exercises/00_demo.ipynb" in capsys.readouterr().out
    assert main(["build", "--course", str(course)]) == 0
    assert main(["build", "--check", "--course", str(course)]) == 0
