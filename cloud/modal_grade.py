"""Grade a class on Modal H100s: every submission in a container of its own, all at once, with the reports that
`cutecourse grade` writes on one machine.

    pip install -e '.[dev]' && modal setup      # once: the course and modal here, and a Modal token on this machine
    modal run cloud/modal_grade.py --submissions 'class/*.ipynb' --out grading
    modal run cloud/modal_grade.py --submissions 'a/*.ipynb,b/*.ipynb' --exercise 2.3 --timeout 300 --hidden-only

`--submissions` is a glob pattern, or several separated by commas, relative to the current folder; a submission is
named in the reports by the path it matched (``class/alice/02_layouts.ipynb``), whose file name says its lesson
unless ``--lesson`` does. The other flags are those of ``cutecourse grade``.
results.json, junit.xml, grades.csv and summary.md go to ``--out``, in the order the patterns match (each pattern's
matches sorted): those ``cutecourse grade`` writes for the same files on an H100, each report made by the same
`grader.grade`.

The image is this checkout as it is now, built as cloud/modal_lab.py builds its own, with the ``grade`` extra and
bubblewrap (the jail the grader prefers) and without ``solutions/``: a grading container never needs the answers. A
container that fails (out of memory, past its time, a Modal error) costs only its own submission, which loses every
point with the reason. Modal needs a container's time limit when the app is defined, so it is a fixed `TIMEOUT`; a
grade's own deadline is ``--timeout`` times its tests, and a run whose deadline would pass `TIMEOUT` is refused
before it starts.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

import modal

from cutecourse.grading import batch, grader, isolation, reports


def _modal_lab():
    """cloud/modal_lab.py: beside this file here; in a container, where Modal mounts this file alone, the copy in the
    checkout baked into the image."""
    path = Path(__file__).with_name("modal_lab.py") if modal.is_local() else Path("/course/cloud/modal_lab.py")
    spec = importlib.util.spec_from_file_location("cutecourse_modal_lab", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lab = _modal_lab()
#: The course graded: the checkout here, the one baked into the image at /course in a container; HIDDEN None is
#: its tests/hidden. A test points them at another course.
COURSE_ROOT: str | Path = lab.ROOT
HIDDEN: str | Path | None = None
GPU = "H100"
#: Seconds a grading container may run: far past a lesson's grade at the default 120 s per test, start-up included.
TIMEOUT = 2 * 3600

#: Where bubblewrap cannot make namespaces (inside Modal's sandbox it may not), the grader runs learner code as uid
#: 65534 only if that uid can read none of what it denies learners: here, the hidden tests and the references.
LOCKED = [f"{lab.COURSE}/tests/hidden", *map(str, isolation.hidden_in_package(Path(lab.COURSE) / "cutecourse"))]
image = (lab.course_image("bubblewrap", extras="grade", ignore=[*lab.IGNORE, "solutions"])
         .run_commands(f"chmod -R go-rwx {' '.join(LOCKED)}"))
app = modal.App("cutecourse-grade")


def grading_options(timeout: float = 120.0, lesson: str = "", exercise: str = "", gpu_graded_elsewhere: bool = False,
                    hidden_only: bool = False, nbval: bool = False) -> dict[str, Any]:
    """`grader.grade`'s options from the entrypoint's flags, which are `cutecourse grade`'s."""
    return batch.options(nbval_only=nbval, hidden_only=hidden_only, timeout=timeout, lesson=lesson,
                         exercise=exercise, gpu_elsewhere=gpu_graded_elsewhere)


def matched(submissions: str) -> list[str]:
    """The notebooks the comma-separated glob patterns `submissions` match here: pattern by pattern, each one's
    matches sorted, each notebook once."""
    names: dict[str, None] = {}
    for pattern in (p.strip() for p in submissions.split(",")):
        found = sorted(glob.glob(pattern, recursive=True))
        if not found:
            raise ValueError(f"--submissions {submissions!r}: {pattern!r} matches no file in {Path.cwd()}; give glob "
                             f"patterns of the notebooks relative to this folder, separated by commas, e.g. "
                             f"'class/*.ipynb'")
        for path in found:
            if not Path(path).is_file():
                raise ValueError(f"--submissions {submissions!r}: {path!r} is not a file; give patterns that match "
                                 f"notebooks only, e.g. '{path}/*.ipynb'")
            names[grader.relative_name(Path(path).as_posix(), f"--submissions {submissions!r} matched")] = None
    return list(names)


@app.function(image=image, gpu=GPU, timeout=TIMEOUT, single_use_containers=True)
def grade_submission(name: str, notebook: bytes, options: dict[str, Any]) -> dict:
    """The report (`reports.to_dict`) of the submission `notebook`, graded under its relative path `name` with
    `grader.grade`'s `options`."""
    grader.relative_name(name, "name")
    course = grader.Course.at(COURSE_ROOT, HIDDEN)
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="cutecourse-submission-") as tmp:
        path = Path(tmp, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(notebook)
        # Graded by its relative path from the folder it is in, the report names it `name`, as a local grade does.
        os.chdir(tmp)
        try:
            report = grader.grade(name, course, **options)
        finally:
            os.chdir(here)
    return reports.to_dict(report)


@app.local_entrypoint()
def main(submissions: str, out: str = "grading", timeout: float = 120.0, lesson: str = "", exercise: str = "",
         gpu_graded_elsewhere: bool = False, hidden_only: bool = False, nbval: bool = False) -> None:
    options = grading_options(timeout, lesson, exercise, gpu_graded_elsewhere, hidden_only, nbval)
    names = matched(submissions)
    course = grader.Course.at(COURSE_ROOT, HIDDEN)
    longest, slowest = max((batch.worker_limit(n, course, options), n) for n in names)
    if longest > TIMEOUT:
        raise ValueError(f"--timeout {timeout:g}: grading {slowest} may take {longest:g} s, past the {TIMEOUT} s a "
                         f"grading container may run; give a smaller --timeout, or raise TIMEOUT in {__file__}")
    contents = [Path(n).read_bytes() for n in names]
    results = grade_submission.map(names, contents, kwargs={"options": options}, return_exceptions=True,
                                   order_outputs=True)
    graded = []
    for name, result in zip(names, results):
        try:
            if isinstance(result, BaseException):
                raise result
            report = reports.from_dict(result)
        except Exception as exc:  # the container's, or a report that did not come back whole: this submission only
            report = grader.lost(name, course, f"the grading container failed: {type(exc).__name__}: {exc}",
                                 lesson=options["lesson"], exercises=batch.exercises_of(options))
        print(reports.summary(report), flush=True)
        graded.append(report)
    for path in reports.write(graded, Path(out)):
        print(f"wrote {path}")
