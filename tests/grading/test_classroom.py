"""`cutecourse grade --workflow` and `--gradescope`: a GitHub Actions workflow that GitHub accepts and whose commands
grade as written, and a Gradescope bundle whose run_autograder grades the demo course on a CPU."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from cutecourse import env as machine
from cutecourse.cli import main
from cutecourse.grading import build, classroom, grader, isolation, reports

from .jail import needs_jail
from .submissions import DEMO, ROOT

pytestmark = pytest.mark.slow
#: GitHub's rule for job and step ids: a letter or _, then letters, digits, - and _ (Classroom's generated
#: `00-demo-0-1` broke it).
ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")
#: What a GitHub expression may read here: contexts, and string literals. No `vars`: a student who owns the repository
#: sets its variables.
CONTEXTS = re.compile(r"(secrets|steps|github|runner)\.[A-Za-z_][A-Za-z0-9_.-]*|'[^']*'|\|\|")


def workflow(capsys, *args: str) -> str:
    assert main(["grade", "--workflow", *args]) == 0
    return capsys.readouterr().out


def test_the_workflow_is_one_job_github_accepts_without_classroom(capsys):
    text = workflow(capsys, "exercises/02_layouts.ipynb", "exercises/05_tiled_mma.ipynb", "--gpu-graded-elsewhere")
    doc = yaml.safe_load(text)
    assert set(doc) == {"name", True, "permissions", "jobs"}  # YAML 1.1 reads the key `on` as True
    assert set(doc[True]) == {"push", "workflow_dispatch"} and doc["permissions"] == {"contents": "read"}
    assert all(ID.fullmatch(job) for job in doc["jobs"])
    (job,) = doc["jobs"].values()
    assert isinstance(job["timeout-minutes"], int) and job["timeout-minutes"] > classroom.INSTALL_MINUTES
    ids = [s["id"] for s in job["steps"] if "id" in s]
    assert ids and all(ID.fullmatch(i) for i in ids) and len(ids) == len(set(ids))
    for step in job["steps"]:
        assert ("uses" in step) != ("run" in step), step
        assert "name" in step
        if "uses" in step:
            assert re.fullmatch(r"actions/(checkout|setup-python|upload-artifact)@v\d+", step["uses"]), step
    for expression in EXPRESSION.findall(text):
        assert CONTEXTS.sub("", expression).strip() == "", expression
        for step_id in re.findall(r"steps\.([A-Za-z0-9_-]+)\.", expression):
            assert step_id in ids
    assert "classroom" not in text.lower().replace("no github classroom", "")
    course = next(s for s in job["steps"] if s["name"].startswith("Check out the course"))["with"]
    assert course["persist-credentials"] is False and course["sparse-checkout-cone-mode"] is False
    assert course["sparse-checkout"].split() == ["/*", "!solutions/"]  # every folder named solutions, at any depth
    assert all(s["with"]["persist-credentials"] is False for s in job["steps"] if s.get("uses", "").startswith(
        "actions/checkout"))
    grade = next(s["run"] for s in job["steps"] if s.get("id") == "grade")
    assert ("PYTHONSAFEPATH=1 python -I -m cutecourse.cli grade exercises/02_layouts.ipynb "
            "exercises/05_tiled_mma.ipynb --course .cutecourse --timeout 120 --gpu-graded-elsewhere "
            '--out "$RUNNER_TEMP/grading"') in grade


def test_the_workflow_refuses_what_a_student_repository_cannot_hold(capsys):
    for bad in ("/home/me/02_layouts.ipynb", "../02_layouts.ipynb", "02_layouts.py", "99_nothing.ipynb",
                "a\n$(id)/02_layouts.ipynb", "${{ secrets.X }}/02_layouts.ipynb", "./02_layouts.ipynb"):
        assert main(["grade", "--workflow", bad]) == 2
        assert "cutecourse grade: " in capsys.readouterr().err
    for args in (["x/02_layouts.ipynb", "x/02_layouts.ipynb"], ["02_layouts.ipynb", "--exercise", "9.9"]):
        assert main(["grade", "--workflow", *args]) == 2
        assert "cutecourse grade: " in capsys.readouterr().err
    assert main(["grade", "--gradescope", "bundle\n.zip", "02_layouts.ipynb"]) == 2
    assert "give a file name ending in .zip" in capsys.readouterr().err


def test_the_workflow_says_when_its_course_commit_is_on_no_remote(capsys, monkeypatch):
    monkeypatch.setattr(classroom, "_git", lambda root, *args: "" if args[0] == "branch" else "abc123def4567890")
    text = workflow(capsys, "exercises/02_layouts.ipynb")
    assert "          ref: abc123def4567890\n" in text
    assert main(["grade", "--workflow", "exercises/02_layouts.ipynb"]) == 0
    assert "abc123def456 is on no remote branch" in capsys.readouterr().err


def test_the_workflow_names_its_course_literally_and_reads_no_variables(capsys, monkeypatch):
    """A student who owns the repository sets its variables: CUTECOURSE_REPOSITORY/REF once chose the course that
    graded them. The repository and commit are written in the workflow when it is made."""
    monkeypatch.setattr(classroom, "_git", lambda root, *args: "0123456789abcdef0123456789abcdef01234567")
    text = workflow(capsys, "exercises/02_layouts.ipynb")
    steps = yaml.safe_load(text)["jobs"]["grade"]["steps"]
    course = next(s for s in steps if s["name"].startswith("Check out the course"))["with"]
    slug = build.Repository.of(ROOT).url.removeprefix("https://github.com/")
    assert (course["repository"], course["ref"]) == (slug, "0123456789abcdef0123456789abcdef01234567")
    assert "vars." not in text and "CUTECOURSE_REPOSITORY" not in text and "CUTECOURSE_REF" not in text
    assert course["token"] == "${{ secrets.CUTECOURSE_TOKEN || github.token }}"  # a private course's read token
    assert not any("apt-get" in s.get("run", "") for s in steps)  # bubblewrap comes with the course


def runner_env(tmp_path: Path) -> dict[str, str]:
    """The variables a GitHub runner gives a step, its files made; the install step's PATH."""
    env = dict(os.environ, GITHUB_OUTPUT=str(tmp_path / "output"), GITHUB_STEP_SUMMARY=str(tmp_path / "summary"),
               RUNNER_TEMP=str(tmp_path / "runner_temp"), PATH=f"{Path(sys.executable).parent}{os.pathsep}"
               f"{os.environ['PATH']}")
    Path(env["GITHUB_OUTPUT"]).write_text("")
    Path(env["RUNNER_TEMP"]).mkdir()
    return env


def run_step(script: str, workspace: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A `run:` step as GitHub runs it: bash -e with pipefail, in the workspace, with its output files."""
    outputs = dict(line.split("=", 1) for line in Path(env["GITHUB_OUTPUT"]).read_text().split())
    script = EXPRESSION.sub(lambda m: outputs[m.group(1).strip().rsplit(".", 1)[1]], script)
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=600)


@needs_jail
def test_the_workflow_grades_as_written(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the submission's path as the student's repository holds it
    text = workflow(capsys, "00_demo.ipynb", "--course", str(DEMO), "--hidden", str(DEMO / "hidden"),
                    "--timeout", "30", "--gpu-graded-elsewhere")
    steps = {s["name"]: s for s in yaml.safe_load(text)["jobs"]["grade"]["steps"]}
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / classroom.COURSE_DIR).symlink_to(ROOT)  # the course checkout step, done
    shutil.copy(DEMO / "solutions" / "00_demo.ipynb", workspace / "00_demo.ipynb")  # the submission checkout
    env = runner_env(tmp_path)
    install = steps["Install the course (it brings bubblewrap, the grader's jail, from PyPI)"]["run"]
    assert f"python -I {classroom.COURSE_DIR}/tools/course.py setup --extras grade" in install
    graded = run_step(steps["Grade"]["run"], workspace, env)
    assert graded.returncode == 0, graded.stderr
    assert Path(env["GITHUB_OUTPUT"]).read_text() == "exit_code=0\n"
    points = run_step(steps["Points"]["run"], workspace, env)
    most = 7 if machine.gpu_missing(80) is None else 3
    assert points.returncode == 0 and f"::notice title=cutecourse::{most}/{most} points" in points.stdout
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().startswith("| submission | lesson | points |")
    assert run_step(steps["Full points, or fail"]["run"], workspace, env).returncode == 0
    # The reports are those of the same command typed by hand.
    here = tmp_path / "by_hand"
    monkeypatch.chdir(workspace)
    main(["grade", "00_demo.ipynb", "--course", str(DEMO), "--hidden", str(DEMO / "hidden"), "--timeout", "30",
          "--gpu-graded-elsewhere", "--out", str(here)])
    assert (Path(env["RUNNER_TEMP"]) / "grading" / "grades.csv").read_text() == (here / "grades.csv").read_text()
    # A wrong answer fails the job.
    nb = json.loads((workspace / "00_demo.ipynb").read_text())
    for cell in nb["cells"]:
        if "def row_major_strides" in "".join(cell["source"]):
            cell["source"] = "def row_major_strides(shape):\n    return (1,) * len(shape)\n"
    (workspace / "00_demo.ipynb").write_text(json.dumps(nb))
    Path(env["GITHUB_OUTPUT"]).write_text("")
    assert run_step(steps["Grade"]["run"], workspace, env).returncode == 0
    assert run_step(steps["Full points, or fail"]["run"], workspace, env).returncode == 1


#: A module the student's checkout plants to forge the points: it leaves its mark, writes full points where the
#: reports go and says so, then ends the process.
FORGER = """
import os, sys
open({marker!r}, "a").write(__name__ + " " + repr(sys.argv) + " " + os.getcwd() + "\\n")
for folder in (os.path.join(os.environ["RUNNER_TEMP"], "grading"), "grading"):
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, "results.json"), "w").write('{{"score": 24, "max_score": 24}}')
print("::notice title=cutecourse::24/24 points")
sys.exit(0)
"""


@needs_jail
def test_the_students_files_cannot_forge_the_workflows_points(capsys, tmp_path, monkeypatch):
    """Issue 32: the Points step ran `python -c "import json..."` in the student's checkout, where a json.py replaced
    the standard module: it printed 24/24 for a 0/24 grade and rewrote the reports. Its Pythons now run isolated, and
    the reports are written and read outside the checkout."""
    monkeypatch.chdir(tmp_path)
    text = workflow(capsys, "00_demo.ipynb", "--course", str(DEMO), "--hidden", str(DEMO / "hidden"),
                    "--timeout", "30", "--gpu-graded-elsewhere")
    steps = {s["name"]: s for s in yaml.safe_load(text)["jobs"]["grade"]["steps"]}
    workspace, marker = tmp_path / "workspace", tmp_path / "forged"
    (workspace / "cutecourse").mkdir(parents=True)
    (workspace / classroom.COURSE_DIR).symlink_to(ROOT)
    nb = json.loads((DEMO / "exercises" / "00_demo.ipynb").read_text())  # nothing answered: no point earned
    (workspace / "00_demo.ipynb").write_text(json.dumps(nb))
    forger = FORGER.format(marker=str(marker))
    for name in ("json.py", "sitecustomize.py", "usercustomize.py", "cutecourse/__init__.py", "cutecourse/cli.py",
                 "cutecourse/__main__.py"):
        (workspace / name).write_text(forger)
    (workspace / "grading").mkdir()
    (workspace / "grading" / "results.json").write_text('{"score": 24, "max_score": 24}')  # a grade's reports, early
    env = runner_env(tmp_path)
    assert run_step(steps["Grade"]["run"], workspace, env).returncode == 0
    points = run_step(steps["Points"]["run"], workspace, env)
    most = 7 if machine.gpu_missing(80) is None else 3
    assert points.returncode == 0 and points.stdout.strip() == f"::notice title=cutecourse::0/{most} points"
    assert json.loads((Path(env["RUNNER_TEMP"]) / "grading" / "results.json").read_text())["score"] == 0
    assert Path(env["GITHUB_OUTPUT"]).read_text() == "exit_code=1\n"
    assert not marker.exists(), marker.read_text()
    # The planted files forge the points of a Python run as the workflow ran them before.
    for old in ("python -c 'import json'", "python -m cutecourse.cli grade 00_demo.ipynb"):
        forged = run_step(old, workspace, env)
        assert "::notice title=cutecourse::24/24 points" in forged.stdout, (old, forged.stderr)
    assert [line.split()[0] for line in marker.read_text().splitlines()] == ["json", "cutecourse"]


@pytest.fixture
def bundle(tmp_path, capsys) -> Path:
    out = tmp_path / "autograder.zip"
    assert main(["grade", "--gradescope", str(out), "00_demo.ipynb", "--course", str(DEMO), "--hidden",
                 str(DEMO / "hidden"), "--timeout", "30"]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    return out


def unpack(bundle: Path, autograder: Path) -> Path:
    """The bundle as Gradescope lays it out: /autograder/source, with the scripts' modes kept."""
    source = autograder / "source"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(source)
        for info in z.infolist():
            os.chmod(source / info.filename, (info.external_attr >> 16) & 0o777 or 0o644)
    (autograder / "submission").mkdir()
    return source


def test_the_gradescope_bundle_holds_the_course_without_its_answers(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) for i in z.infolist()}
    assert {"setup.sh", "run_autograder", "pyproject.toml", "tools/course.py", "cutecourse/grading/grader.py",
            "exercises/00_demo.ipynb", "tests/hidden/test_00_demo.py"} <= names
    assert not any(n.startswith(("solutions/", ".git")) or "__pycache__" in n for n in names)
    assert all(stat.S_IMODE(modes[s]) == 0o755 for s in ("setup.sh", "run_autograder"))


def test_setup_sh_locks_away_exactly_what_the_grader_denies_learners(bundle, tmp_path):
    source = unpack(bundle, tmp_path / "autograder")
    assert subprocess.run(["bash", "-n", str(source / "setup.sh")]).returncode == 0
    assert subprocess.run(["bash", "-n", str(source / "run_autograder")]).returncode == 0
    text = (source / "setup.sh").read_text()
    course = grader.Course.at(source)
    denied = [Path(p) for p in course.deny() if Path(p).exists() and Path(p).is_relative_to(source)]
    package = grader.PACKAGE_DIR
    denied += [source / "cutecourse" / p.relative_to(package) for p in isolation.hidden_in_package(package)]
    for path in denied:
        assert f'"$SOURCE/{path.relative_to(source).as_posix()}"' in text, path
    assert "tools/course.py\" setup --extras grade" in text


@needs_jail
def test_run_autograder_grades_the_demo_course_on_a_cpu(bundle, tmp_path, monkeypatch):
    autograder = tmp_path / "autograder"
    source = unpack(bundle, autograder)
    shutil.copy(DEMO / "solutions" / "00_demo.ipynb", autograder / "submission" / "00_demo.ipynb")
    env = dict(os.environ, AUTOGRADER=str(autograder), CUTECOURSE_PYTHON=sys.executable)
    done = subprocess.run([str(source / "run_autograder")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results = json.loads((autograder / "results" / "results.json").read_text())
    monkeypatch.chdir(autograder / "submission")
    direct = grader.grade("00_demo.ipynb", grader.Course.at(source), timeout=30)
    assert results == json.loads(json.dumps(reports.results_json([direct])))
    assert results["score"] == (7 if machine.gpu_missing(80) is None else 3) and results["max_score"] == 7


def test_run_autograder_leaves_results_json_when_the_grader_cannot_grade(bundle, tmp_path):
    autograder = tmp_path / "autograder"
    source = unpack(bundle, autograder)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").symlink_to(sys.executable)
    (fake / "cutecourse").write_text("#!/bin/sh\necho 'cutecourse grade: cannot isolate learner code here' >&2\n"
                                     "exit 2\n")
    (fake / "cutecourse").chmod(0o755)
    env = dict(os.environ, AUTOGRADER=str(autograder), CUTECOURSE_PYTHON=str(fake / "python"))
    done = subprocess.run([str(source / "run_autograder")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    results = json.loads((autograder / "results" / "results.json").read_text())
    assert results["score"] == 0 and "exit code 2" in results["output"]
    assert "cannot isolate learner code here" in results["output"]


def test_a_missing_upload_is_named(bundle, tmp_path):
    autograder = tmp_path / "autograder"
    source = unpack(bundle, autograder)
    env = dict(os.environ, AUTOGRADER=str(autograder), CUTECOURSE_PYTHON=sys.executable)
    subprocess.run([str(source / "run_autograder")], env=env, capture_output=True, text=True, timeout=120)
    results = json.loads((autograder / "results" / "results.json").read_text())
    assert results["score"] == 0 and results["max_score"] == 7
    assert "00_demo.ipynb was not handed in" in results["tests"][0]["output"]


def readme_commands() -> list[str]:
    """The commands of the README's "Grading a class" section: each line of its bash blocks and each inline command
    line, continuations joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Grading a class", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    commands = [line for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    return commands + re.findall(r"`(git archive [^`]+)`", section)


def test_the_readmes_grading_commands_run_as_written(monkeypatch, tmp_path, capsys):
    import shlex

    from cutecourse.grading import batch

    monkeypatch.chdir(tmp_path)
    seen = []
    for command in readme_commands():
        argv = shlex.split(command.split(" > ")[0])
        if argv[:2] == ["mkdir", "-p"]:
            continue
        seen.append(argv[:2])
        if argv[:2] == ["git", "archive"]:
            listing = subprocess.run(f"{command.split(' | ')[0]} | tar -t", shell=True, cwd=ROOT,
                                     capture_output=True, text=True, timeout=120)
            files = listing.stdout.splitlines()
            assert listing.returncode == 0 and "exercises/02_layouts.ipynb" in files, listing.stderr
            assert not [f for f in files if f.startswith(("solutions/", "tests/hidden/")) or "demo/solutions" in f
                        or "demo/hidden" in f]
        elif argv[:2] == ["modal", "run"]:
            import ast

            app = ast.parse((ROOT / argv[2]).read_text())
            entry = next(f for f in app.body if isinstance(f, ast.FunctionDef) and any(
                "local_entrypoint" in ast.unparse(d) for d in f.decorator_list))
            params = {a.arg.replace("_", "-") for a in entry.args.args}
            assert {a[2:] for a in argv[3:] if a.startswith("--")} <= params, (argv, params)
        elif "--jobs" in argv:
            got = {}
            (tmp_path / "class" / "ada").mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / "exercises" / "05_tiled_mma.ipynb", tmp_path / "class" / "ada")
            monkeypatch.setattr(batch, "grade_many", lambda subs, course, options, jobs, say: got.update(
                subs=subs, jobs=jobs) or [])
            monkeypatch.setattr(reports, "write", lambda *a: [])
            argv = [a for pattern in argv for a in (sorted(map(str, Path().glob(pattern))) if "*" in pattern
                                                   else [pattern])]
            main(argv[1:] + ["--course", str(ROOT)])
            assert got == {"subs": ["class/ada/05_tiled_mma.ipynb"], "jobs": 8}
        else:
            assert argv[:2] == ["cutecourse", "grade"], command
            assert main(argv[1:] + ["--course", str(ROOT)]) == 0, capsys.readouterr().err
            out = capsys.readouterr().out
            if "--workflow" in argv:
                assert yaml.safe_load(out)["jobs"]["grade"]["steps"]
            else:
                assert zipfile.ZipFile(tmp_path / "autograder.zip").testzip() is None
    assert sorted(seen) == sorted([["cutecourse", "grade"]] * 3 + [["modal", "run"], ["git", "archive"]])
