"""cloud/modal_grade.py on a CPU: the definitions Modal receives (GPU, time limit, image), the grading function's body
run locally with `.local()` on the demo course, and the local entrypoint with a stand-in for the containers, one of
which fails."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

if os.environ.get("CI") == "true":
    import modal  # CI installs the dev extra, modal included: this must run there
else:  # before test_modal's import, which would otherwise fail this file's collection without modal
    modal = pytest.importorskip("modal", reason="modal is in the dev extra: pip install -e '.[dev]'")

from cutecourse.grading import grader, reports  # noqa: E402

from ..grading.jail import NO_JAIL  # noqa: E402
from ..grading.submissions import DEMO  # noqa: E402
from .test_modal import ROOT, load_app, record  # noqa: E402

APP = ROOT / "cloud" / "modal_grade.py"
GRADE_IMAGE_STEPS = ["debian_slim", "apt_install", "pip_install", "add_local_dir", "run_commands", "run_commands"]
CRASH = RuntimeError("the container ran out of memory")


def load_grade(name: str = "modal_grade"):
    return load_app(name, APP)


@pytest.fixture(scope="module")
def defined():
    """The app imported with Modal's builders recording: the grading image's steps (the last image built: modal_lab's
    comes first, as the grader loads it) and the grading function's definition."""
    module, steps, functions = record(load_grade)
    last = max(i for i, (name, _, _) in enumerate(steps) if name == "debian_slim")
    (function,) = [f for f in functions if f["image"] is module.image]
    return module, steps[last:], function


@pytest.fixture
def app(monkeypatch):
    """The app, grading against the demo course."""
    module = load_grade("modal_grade_demo")
    monkeypatch.setattr(module, "COURSE_ROOT", DEMO)
    monkeypatch.setattr(module, "HIDDEN", DEMO / "hidden")
    return module


@pytest.fixture(scope="module")
def submissions(tmp_path_factory) -> Path:
    """A class: alice and bob handed in the solution (full marks here, but for the GPU tests), carol no notebook."""
    root = tmp_path_factory.mktemp("class")
    for student in ("alice", "bob"):
        (root / student).mkdir()
        shutil.copy(DEMO / "solutions" / "00_demo.ipynb", root / student / "00_demo.ipynb")
    (root / "carol").mkdir()
    (root / "carol" / "00_demo.ipynb").write_text("{not json")
    return root


def walls() -> dict:
    """The isolation option a grade needs here: none where bubblewrap is missing (the uid fallback needs root)."""
    return {"isolation_kind": "none"} if NO_JAIL else {}


@pytest.fixture(scope="module")
def direct(submissions):
    """grade(name) -> the report of a local grade of the class's notebook `name`, from the class's folder."""
    course, made = grader.Course.at(DEMO, DEMO / "hidden"), {}

    def grade(name: str) -> grader.Report:
        if name not in made:
            here = os.getcwd()
            os.chdir(submissions)
            try:
                made[name] = grader.grade(name, course, timeout=60, **walls())
            finally:
                os.chdir(here)
        return made[name]

    return grade


def test_grading_gets_an_h100_and_a_time_limit_past_a_lessons_grade(defined):
    module, _, function = defined
    assert function["gpu"] == "H100" and function["timeout"] == module.TIMEOUT == 2 * 3600
    assert function["single_use_containers"] is True  # one submission per container: no neighbour's leftovers
    assert module.grade_submission._spec_.gpus == "H100"  # Modal itself holds what the app declares
    assert module.app.name == "cutecourse-grade"


def test_the_grading_image_is_this_checkout_with_the_grade_extra_and_bubblewrap(defined):
    module, steps, _ = defined
    assert [s[0] for s in steps] == GRADE_IMAGE_STEPS
    assert steps[0][2] == {"python_version": "3.12"} and steps[1][1] == ("bubblewrap",)
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    installed = steps[2][1]
    assert installed[0] == f"torch=={module.lab.setup_script.TORCH_VERSION}"
    assert set(installed[1:]) == {*project["dependencies"], *extras["grade"]} - {"torch>=2.4"}
    assert not set(installed) & (set(extras["lab"]) | set(extras["dev"]) - set(extras["grade"]))
    (local, remote), options = steps[3][1], steps[3][2]
    assert Path(local) == ROOT and remote == "/course" and options["copy"] is True
    ignored = modal.FilePatternMatcher(*options["ignore"])
    for path in ("solutions/02_layouts.ipynb", ".venv/bin/python", ".git/HEAD", "tests/unit/__pycache__/x.pyc"):
        assert ignored(Path(path)), path
    for path in ("exercises/02_layouts.ipynb", "tests/hidden/test_02_layouts.py", "cutecourse/grading/grader.py",
                 "cloud/modal_lab.py", "pyproject.toml"):
        assert not ignored(Path(path)), path
    # The uid fallback grades only where uid 65534 reads nothing the grader denies learners.
    locked = steps[5][1][0]
    for denied in ("/course/tests/hidden", "/course/cutecourse/grading/checks"):
        assert denied in locked.split() and locked.startswith("chmod -R go-rwx ")


def test_the_grading_function_reports_what_a_local_grade_does(app, submissions, direct):
    here = os.getcwd()
    got = app.grade_submission.local("alice/00_demo.ipynb", (submissions / "alice" / "00_demo.ipynb").read_bytes(),
                                     {"timeout": 60, **walls()})
    assert os.getcwd() == here
    report = reports.from_dict(json.loads(json.dumps(got)))  # as it crosses from the container
    expected = direct("alice/00_demo.ipynb")
    assert reports.results_json([report]) == reports.results_json([expected]) and report == expected
    assert report.submission == "alice/00_demo.ipynb" and report.score == 3 and report.max_score == 7


def test_a_failed_container_costs_only_its_own_submission(app, submissions, direct, monkeypatch, capsys):
    real = app.grade_submission

    class Containers:  # Modal's map, run here: bob's container fails
        @staticmethod
        def map(names, contents, *, kwargs, return_exceptions, order_outputs):
            assert return_exceptions and order_outputs
            options = {**kwargs["options"], **walls()}
            return [CRASH if name.startswith("bob/") else real.local(name, content, options)
                    for name, content in zip(names, contents)]

    monkeypatch.setattr(app, "grade_submission", Containers)
    monkeypatch.chdir(submissions)
    out = submissions.parent / "grading"
    app.main.info.raw_f("carol/*.ipynb, alice/*.ipynb,bob/00_demo.ipynb", out=str(out), timeout=60)
    rows = [line.split(",") for line in (out / "grades.csv").read_text().splitlines()[1:]]
    assert [r[:4] for r in rows] == [["carol/00_demo.ipynb", "00_demo", "0", "7"],
                                     ["alice/00_demo.ipynb", "00_demo", "3", "7"],
                                     ["bob/00_demo.ipynb", "00_demo", "0", "7"]]
    bob = grader.lost("bob/00_demo.ipynb", grader.Course.at(DEMO, DEMO / "hidden"),
                      "the grading container failed: RuntimeError: the container ran out of memory")
    expected = [direct("carol/00_demo.ipynb"), direct("alice/00_demo.ipynb"), bob]
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(reports.results_json(expected)))
    printed = capsys.readouterr().out
    assert "the grading container failed: RuntimeError" in printed and f"wrote {out / 'grades.csv'}" in printed


def test_a_run_past_the_containers_time_limit_is_refused_before_it_starts(app, submissions, monkeypatch):
    monkeypatch.setattr(app, "grade_submission", None)  # nothing is graded
    monkeypatch.chdir(submissions)
    with pytest.raises(ValueError, match=r"--timeout 7200: grading alice/00_demo.ipynb may take .* past the 7200 s"):
        app.main.info.raw_f("alice/*.ipynb", timeout=7200)


def test_the_flags_map_to_the_graders_options(app):
    assert app.grading_options() == {"nbval": True, "hidden": True, "timeout": 120.0, "lesson": None,
                                     "exercise": None, "isolation_kind": "auto", "gpu_elsewhere": False}
    assert app.grading_options(30, "00_demo", "0.1", True, hidden_only=True) == {
        "nbval": False, "hidden": True, "timeout": 30, "lesson": "00_demo", "exercise": "0.1",
        "isolation_kind": "auto", "gpu_elsewhere": True}
    assert app.grading_options(nbval=True)["hidden"] is False
    with pytest.raises(ValueError, match="--nbval and --hidden-only"):
        app.grading_options(hidden_only=True, nbval=True)
    with pytest.raises(ValueError, match="--timeout 0"):
        app.grading_options(0)


@pytest.mark.parametrize("name", ["../x.ipynb", "a/../../x.ipynb", "/abs.ipynb", "x.txt", "./x.ipynb", ""])
def test_a_submission_name_must_be_a_notebooks_relative_path(app, name):
    with pytest.raises(ValueError, match=r"name .*: give the notebook's path relative to the folder"):
        app.grade_submission.local(name, b"{}", {})


def test_submissions_must_match_notebooks_here(app, submissions, monkeypatch):
    monkeypatch.chdir(submissions)
    assert app.matched("*/00_demo.ipynb,alice/*") == ["alice/00_demo.ipynb", "bob/00_demo.ipynb",
                                                      "carol/00_demo.ipynb"]
    with pytest.raises(ValueError, match=r"--submissions 'alice/\*,dave/\*': 'dave/\*' matches no file in"):
        app.matched("alice/*,dave/*")
    with pytest.raises(ValueError, match=r"'alice' is not a file; give patterns that match notebooks only"):
        app.matched("ali*")
    with pytest.raises(ValueError, match=r"matched '/.*00_demo.ipynb': give the notebook's path relative"):
        app.matched(str(submissions / "alice" / "*.ipynb"))
