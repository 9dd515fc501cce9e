"""What a learner process runs of the master notebook: the answers, and of the other cells only what they need.

Every lesson's solution scoring all its points (test_every_exercise.py) shows the lessons' answers get what they need;
these cases pin the rules down one by one."""

from __future__ import annotations

from cutecourse.grading.cells import learner_cells, needed_cells


def cell(source: str, exercise: str | None = None) -> dict[str, str]:
    label = f"exercise {exercise}" if exercise else f"cell {abs(hash(source)) % 1000}"
    return {"label": label, "source": source, **({"exercise": exercise} if exercise else {})}


def kept(cells: list[dict[str, str]], roots: set[str] = frozenset()) -> list[str]:
    return [c["source"] for c in needed_cells(cells, roots)]


def test_a_demo_cell_nothing_reads_is_left_out_and_the_answers_stay():
    cells = [cell("import numpy as np\nA = np.arange(4)"), cell("print(A.sum())  # a demo"),
             cell("def f(x):\n    return x + 1", "1.1")]
    assert kept(cells) == ["def f(x):\n    return x + 1"]


def test_what_an_answer_reads_is_kept_with_what_that_reads():
    cells = [cell("import numpy as np\nimport torch"), cell("SIZE = 4\nprint(SIZE)"),
             cell("def helper(x):\n    return np.full(SIZE, x)"),
             cell("x = helper(1)  # a demo that binds the answer's parameter name"),
             cell("def f(x):\n    return helper(x) * 2", "1.1")]
    assert kept(cells) == ["import numpy as np\n", "SIZE = 4\nprint(SIZE)",
                           "def helper(x):\n    return np.full(SIZE, x)", "def f(x):\n    return helper(x) * 2"]


def test_an_import_is_kept_alone_unless_its_cell_is_needed_for_more():
    cells = [cell("import torch; import math\nT = torch.zeros(1)"), cell("def f():\n    return math.pi", "1.1")]
    assert kept(cells) == ["import math\n", "def f():\n    return math.pi"]
    cells.append(cell("def g():\n    return T", "1.2"))
    assert kept(cells)[0] == "import torch; import math\nT = torch.zeros(1)"


def test_a_cell_that_changes_a_needed_object_is_kept():
    cells = [cell("config = {}"), cell("config['tile'] = 64"), cell("class C: pass\nC.size = 3"),
             cell("def f():\n    return config['tile'], C.size", "1.1")]
    assert kept(cells) == [c["source"] for c in cells]


def test_a_cell_whose_bindings_cannot_be_told_always_runs():
    cells = [cell("from math import *"), cell("def g():\n    global K\n    K = 1\ng()"), cell("%%bash not python"),
             cell("print('demo')"), cell("def f():\n    return 1", "1.1")]
    assert kept(cells) == [cells[i]["source"] for i in (0, 1, 2, 4)]


def test_the_binding_before_the_reader_and_the_last_one_are_both_kept():
    cells = [cell("N = 1"), cell("M = N * 2"), cell("N = 5  # what a function sees when called"),
             cell("def f():\n    return M + N", "1.1")]
    assert kept(cells) == [c["source"] for c in cells]
    assert kept(cells[2:]) == [cells[2]["source"], cells[3]["source"]]


def test_check_cells_and_hidden_test_strings_are_roots():
    cells = [cell("def host(x):\n    return x"), cell("def other():\n    pass"), cell("def f():\n    pass", "1.1")]
    assert kept(cells) == ["def f():\n    pass"]
    assert kept(cells, {"host"}) == ["def host(x):\n    return x", "def f():\n    pass"]
    master = {"cells": [{"cell_type": "code", "source": c["source"], "metadata": {}} for c in cells[:2]]}
    hidden = 'def test_x(learner):\n    learner.call("other", via="call")\n'
    assert [c["source"] for c in learner_cells(master, {"cells": []}, hidden)] == ["def other():\n    pass"]
