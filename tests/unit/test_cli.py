"""`cutecourse`'s command line: `--version`, `grade`'s usage errors (exit 2, nothing written), and when results.json
shows students the hidden tests' results (`--hidden-visibility`, also in the Gradescope bundle)."""

from __future__ import annotations

import importlib.metadata
import json
import re
import zipfile
from pathlib import Path

import pytest

from cutecourse import env
from cutecourse.cli import _usage_error, main
from cutecourse.grading import grader, reports
from cutecourse.grading import results

ROOT = Path(__file__).resolve().parents[2]
COURSE = grader.Course.at(ROOT)


def test_version_names_the_package_and_the_dsl_it_is_tested_with(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == (f"cutecourse {importlib.metadata.version('cutecourse')} "
                                       f"(tested with nvidia-cutlass-dsl {env.DSL_PIN})\n")


@pytest.fixture
def notebook(tmp_path) -> Path:
    """A filled-in exercise notebook where a learner keeps it."""
    path = tmp_path / "mine" / "02_layouts.ipynb"
    path.parent.mkdir()
    path.write_text((ROOT / "exercises" / "02_layouts.ipynb").read_text())
    return path


@pytest.mark.parametrize("make, extra, says", [
    (lambda n: n.parent / "nope" / "02_layouts.ipynb", [], r"SUBMISSION '.*nope/02_layouts\.ipynb': no such file; "
                                                          r"give the path of a filled-in exercise notebook"),
    (lambda n: n.with_suffix(".py"), [], r"SUBMISSION '.*02_layouts\.py' is not a notebook: give the filled-in "
                                         r"exercise notebooks \(NN_name\.ipynb"),
    (lambda n: n, ["--lesson", "99_nothing"], r"--lesson 99_nothing names no lesson of this course; .* one of "
                                              r"01_gpu_hierarchy_tensor_cores, 02_layouts"),
    (lambda n: n.rename(n.with_name("my_work.ipynb")), [], r"the file name 'my_work\.ipynb' names no lesson of this "
                                                           r"course; name the file after its exercise notebook"),
])
def test_a_usage_error_exits_2_names_the_fix_and_writes_nothing(notebook, tmp_path, capsys, make, extra, says):
    submission = make(notebook)
    out = tmp_path / "grading"
    assert main(["grade", str(submission), "--course", str(ROOT), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cutecourse grade: ") and re.search(says, err), err
    assert not out.exists()


def test_a_right_command_line_is_no_usage_error(notebook):
    assert _usage_error([str(notebook)], COURSE, None, uploads=False) is None
    assert _usage_error([str(notebook)], COURSE, "02_layouts", uploads=False) is None


def test_a_missing_upload_is_graded_not_refused(tmp_path):
    missing = str(tmp_path / "submission" / "02_layouts.ipynb")
    assert _usage_error([missing], COURSE, None, uploads=True) is None
    assert "no such file" in _usage_error([missing], COURSE, None, uploads=False)
    assert "is not a notebook" in _usage_error([missing[:-6] + ".py"], COURSE, None, uploads=True)


REPORT = results.Report("02_layouts.ipynb", "02_layouts", [
    results.TestResult("check composition", "2.3", 1, results.PASSED),
    results.TestResult("hidden test_composition_on_random", "2.3", 2, results.FAILED, "composition(...) gave 5")])


def visibility(data: dict) -> dict[str, str]:
    return {t["name"].split(": ", 1)[1]: t["visibility"] for t in data["tests"]}


def test_hidden_tests_are_shown_after_the_due_date_unless_the_instructor_chooses():
    assert visibility(reports.results_json([REPORT])) == {"check composition": "visible",
                                                          "hidden test_composition_on_random": "after_due_date"}
    for chosen in reports.VISIBILITIES:
        shown = visibility(reports.results_json([REPORT], chosen))
        assert shown == {"check composition": "visible", "hidden test_composition_on_random": chosen}
    with pytest.raises(ValueError, match=r"--hidden-visibility 'later': give one of visible, after_due_date"):
        reports.results_json([REPORT], "later")


def test_the_reports_write_the_chosen_visibility(tmp_path):
    reports.write([REPORT], tmp_path / "out", hidden_tests="hidden")
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert visibility(data)["hidden test_composition_on_random"] == "hidden"


def bundle_command(tmp_path: Path, capsys, *extra: str) -> str:
    out = tmp_path / "autograder.zip"
    assert main(["grade", "--gradescope", str(out), "02_layouts.ipynb", *extra]) == 0, capsys.readouterr().err
    with zipfile.ZipFile(out) as z:
        script = z.read("run_autograder").decode()
    return next(line for line in script.splitlines() if "cutecourse grade" in line and "PYTHONSAFEPATH" in line)


def test_the_gradescope_bundle_grades_uploads_with_the_chosen_visibility(tmp_path, capsys):
    default = bundle_command(tmp_path, capsys)
    assert "--uploads" in default and "--hidden-visibility" not in default  # after_due_date, the default
    chosen = bundle_command(tmp_path, capsys, "--hidden-visibility", "after_published")
    assert "--uploads --hidden-visibility after_published --out" in chosen
    with pytest.raises(SystemExit) as refused:
        main(["grade", "--gradescope", str(tmp_path / "b.zip"), "02_layouts.ipynb", "--hidden-visibility", "later"])
    assert refused.value.code == 2 and "invalid choice: 'later'" in capsys.readouterr().err
