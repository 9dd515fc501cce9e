"""`cutecourse build`: exercises from solutions, stubs in place of answers, and no solution text left over."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cutecourse.cli import main
from cutecourse.grading import build, run_checks
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


def given_lines(nb: dict) -> set[str]:
    """The stripped code lines a solution notebook shows outside its answers (what the exercise keeps anyway)."""
    lines = set()
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            inside = False
            for line in nbio.source(cell).splitlines():
                inside = (inside or nbio.BEGIN in line) and nbio.END not in line
                if not inside:
                    lines |= {line.strip(), line.split("  #")[0].strip()}  # with and without its comment
    return lines


@pytest.mark.parametrize("course", COURSES, ids=lambda p: p.name)
def test_no_solution_text_leaks_into_exercises(course):
    """No line of an answer is in its exercise notebook, unless the solution shows it outside its answers too
    (given code that happens to repeat an idiom of the answer: `with cute.arch.elect_one():`)."""
    for solution in sorted((course / "solutions").glob("[0-9][0-9]_*.ipynb")):
        exercise = nbio.load(course / "exercises" / solution.name)
        text = json.dumps(exercise)
        assert nbio.BEGIN not in text and nbio.END not in text
        master = nbio.load(solution)
        given = given_lines(master)
        for cell in nbio.answers(master).values():
            for line in solution_lines(cell):
                assert line in given or line not in text, f"{solution.name}: solution line {line!r} is in the exercise"


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


def repository_copy(tmp_path: Path) -> Path:
    """The demo course at its place in a copy of the repository (the badges' links are relative to its root)."""
    course = tmp_path / COURSES[1].relative_to(ROOT)
    shutil.copytree(COURSES[1], course)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return course


def test_build_check_fails_on_a_stale_exercise(tmp_path, capsys):
    course = repository_copy(tmp_path)
    assert main(["build", "--check", "--course", str(course)]) == 0
    path = course / "exercises" / "00_demo.ipynb"
    nb = nbio.load(path)
    nb["cells"][0]["source"] = ["# edited by hand\n"]
    nbio.dump(nb, path)
    assert main(["build", "--check", "--course", str(course)]) == 1
    assert "exercises/00_demo.ipynb" in capsys.readouterr().out
    assert main(["build", "--course", str(course)]) == 0
    assert main(["build", "--check", "--course", str(course)]) == 0


def _shape(outputs: list[dict]) -> list[tuple]:
    """What nbval compares, less the words: each output's type and the MIME types (and text/plain value) it holds."""
    return [(o["output_type"], tuple(sorted(o.get("data", {}))), "".join(o.get("data", {}).get("text/plain", [])))
            for o in outputs]


def test_gpu_check_cells_expect_what_a_passing_check_shows():
    """The grader runs GPU check cells only on a GPU, comparing them with the master: they must expect the pass line
    (never the "not run" line a solution run without a GPU leaves) and the same outputs as a passing CPU check cell
    of the same notebook, recorded from a real run."""
    seen = 0
    for path in sorted((ROOT / "exercises").glob("[0-9][0-9]_*.ipynb")):
        cells = [c for c in nbio.load(path)["cells"] if c.get("cell_type") == "code" and nbio.is_check(c)]
        gpu = [c for c in cells if "gpu" in nbio.tags(c)]
        cpu = [c for c in cells if "gpu" not in nbio.tags(c)]
        for cell in gpu:
            seen += 1
            name = nbio.meta(cell)["check"]
            assert cell["outputs"][0]["text"][0].startswith(f"✓ {name}: all "), f"{path.name}: {cell['outputs']}"
            assert _shape(cell["outputs"]) == _shape(cpu[0]["outputs"]), path.name
    assert seen >= 2  # lessons 3 and 4 have GPU checks


def test_nbval_runs_gpu_cells_without_comparing_them(tmp_path):
    """Under `make test`, a GPU cell's output is the machine's (a timing; "not run" without a GPU), so the course's
    plugin runs it without comparing; any other cell is still compared."""
    if run_checks.nbval_available():
        pytest.skip(run_checks.nbval_available())

    def cell(tags):
        return {"cell_type": "code", "execution_count": 1, "id": "-".join(tags), "metadata": {"tags": tags},
                "source": ["print('measured 7')"],
                "outputs": [{"name": "stdout", "output_type": "stream", "text": ["[GPU cell not run: no GPU]\n"]}]}

    nb = {"cells": [cell(["gpu"]), cell([])], "metadata": {}, "nbformat": 4,
          "nbformat_minor": 5}
    (tmp_path / "cells.ipynb").write_text(json.dumps(nb))
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "-p", "cutecourse.grading.plugin", "-q",
                          "-p", "no:cacheprovider", "cells.ipynb"], cwd=tmp_path, capture_output=True, text=True)
    assert "1 failed, 1 passed" in run.stdout and "FAILED cells.ipynb::Cell 1" in run.stdout, run.stdout[-2000:]


def test_execute_stores_a_cells_prints_as_one_output_however_the_kernel_flushed_them(tmp_path):
    """Prints flushed apart reach the kernel's client as several stream messages; `build.execute` stores one output
    per run of a stream, so a notebook's stored outputs do not depend on the kernel's timing."""
    pytest.importorskip("nbclient")
    source = "import sys, time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b', flush=True)\n" \
             "print('c', file=sys.stderr, flush=True)"
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "prints", "metadata": {}, "source": source,
                     "outputs": []}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "prints.ipynb"
    path.write_text(json.dumps(nb))
    build.execute(path)
    outputs = [(o["name"], "".join(o["text"])) for o in json.loads(path.read_text())["cells"][0]["outputs"]]
    assert outputs == [("stdout", "a\nb\n"), ("stderr", "c\n")], outputs


def notebooks_of(course: Path) -> list[Path]:
    return [p for folder in ("notebooks", "solutions", "exercises")
            for p in sorted((course / folder).glob("[0-9][0-9]_*.ipynb"))]


#: AUTHORING: "keep a notebook under 150 KiB" (its outputs stored executed on a CPU: text and small SVGs only).
NOTEBOOK_BYTES = 150 * 1024


@pytest.mark.parametrize("course", COURSES, ids=lambda p: p.name)
def test_every_notebook_is_under_150_kib(course):
    sizes = {p.relative_to(course).as_posix(): p.stat().st_size for p in notebooks_of(course)}
    assert len(sizes) >= (12 if course == ROOT else 2)
    over = {name: size for name, size in sizes.items() if size >= NOTEBOOK_BYTES}
    assert not over, (f"over {NOTEBOOK_BYTES} bytes: {over}; split the lesson into a part notebook (as lesson 6's "
                      "06_smem_pipelines_hopper.ipynb) or store smaller outputs (text in place of a picture)")


@pytest.mark.parametrize("course", COURSES, ids=lambda p: p.name)
def test_every_notebook_opens_in_colab_from_its_own_path_and_sets_itself_up_there(course):
    repo = build.Repository.of(course)
    assert repo.root == ROOT
    paths = notebooks_of(course)
    assert len(paths) >= (12 if course == ROOT else 2)
    for path in paths:
        badge, setup = nbio.load(path)["cells"][:2]
        link = f"https://colab.research.google.com/github/{repo.url.removeprefix('https://github.com/')}/blob/main/"
        assert nbio.source(badge) == f"[![Open In Colab]({build.COLAB_BADGE})]({link}{path.relative_to(ROOT)})"
        assert nbio.source(setup) == build.colab_setup_source(repo) and setup["outputs"] == []


def test_build_check_catches_a_missing_or_stale_badge_and_build_restores_it(tmp_path, capsys):
    course = repository_copy(tmp_path)
    solution = course / "solutions" / "00_demo.ipynb"
    nb = nbio.load(solution)
    nb["cells"] = nb["cells"][1:]  # the badge deleted by hand
    nbio.dump(nb, solution)
    assert main(["build", "--check", "--course", str(course)]) == 1
    assert "solutions/00_demo.ipynb" in capsys.readouterr().out
    assert main(["build", "--course", str(course)]) == 0
    assert main(["build", "--check", "--course", str(course)]) == 0
    # The repository moves: every badge and set-up cell is stale until the build rewrites them.
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("github.com/cutecourse/cutecourse", "github.com/elsewhere/cc"))
    assert sorted(build.build(course, check=True)) == ["exercises/00_demo.ipynb", "solutions/00_demo.ipynb"]
    build.build(course)
    assert "colab.research.google.com/github/elsewhere/cc/blob/main/tests/grading/demo/exercises/00_demo.ipynb" in \
        nbio.source(nbio.load(course / "exercises" / "00_demo.ipynb")["cells"][0])


def test_running_a_notebook_does_not_make_its_colab_cells_stale(tmp_path):
    course = repository_copy(tmp_path)
    solution = course / "solutions" / "00_demo.ipynb"
    nb = nbio.load(solution)
    nb["cells"][1]["execution_count"] = 1  # run off Colab, the set-up cell prints nothing
    nbio.dump(nb, solution)
    assert build.build(course, check=True) == []


def test_the_repository_must_be_configured_and_on_github(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    with pytest.raises(ValueError, match=r"no pyproject.toml at or above .* names the course's repository; add "
                                         r"\[project.urls\] Repository = \"https://github.com/OWNER/NAME\""):
        build.Repository.of(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project.urls]\nRepository = "https://gitlab.com/a/b"\n')
    with pytest.raises(ValueError, match=r"'https://gitlab.com/a/b' is not a GitHub repository URL; .*write "
                                         r"https://github.com/OWNER/NAME"):
        build.Repository.of(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project.urls]\nRepository = "https://github.com/a/b.git"\n')
    assert build.Repository.of(tmp_path).url == "https://github.com/a/b"


def run_setup_cell(on_colab: bool, monkeypatch) -> list[list[str]]:
    """Run the set-up cell as plain Python (as the grader does) with pip and the doctor stubbed out."""
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, check: calls.append(args))
    monkeypatch.setattr("cutecourse.env.doctor", lambda: calls.append(["doctor"]))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(build.colab_setup_source(build.Repository.of(ROOT)), "colab-setup", "exec"), {})
    return calls


def test_the_setup_cell_installs_on_colab_and_does_nothing_elsewhere(monkeypatch):
    repo = build.Repository.of(ROOT)
    assert run_setup_cell(False, monkeypatch) == []
    assert run_setup_cell(True, monkeypatch) == [[sys.executable, "-m", "pip", "install", "-q",
                                                  f"cutecourse @ git+{repo.url}"], ["doctor"]]


def top_level_bindings(source: str) -> dict[str, str]:
    """Each name a cell binds at its top level (assignments, functions, classes), with what it binds it to."""
    import ast

    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = ast.dump(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out[name.id] = ast.dump(node.value)
    return out


def clashes(cells: list[str]) -> list[str]:
    seen: dict[str, tuple[int, str]] = {}
    found = []
    for i, source in enumerate(cells):
        for name, value in top_level_bindings(source).items():
            if name in seen and seen[name][1] != value:
                found.append(f"{name} (answer cells {seen[name][0]} and {i})")
            seen.setdefault(name, (i, value))
    return found


def test_answer_cells_do_not_rebind_each_others_names():
    """A notebook's answer cells share one namespace (the learner's kernel, the grader's learner process): a later
    answer that binds a name an earlier one uses, to something else, changes the earlier answer (lesson 6's two kernels
    once both had a STAGES, 3 and 4). The same constant bound to the same value twice is fine."""
    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
        cells = [nbio.source(c) for c in nbio.answers(nbio.load(path)).values()]
        assert clashes(cells) == [], path.name
    assert clashes(["STAGES = 3\ndef f(): return STAGES", "STAGES = 4"]) == ["STAGES (answer cells 0 and 1)"]
    assert clashes(["TILE = 64, 64", "TILE = 64, 64"]) == []
