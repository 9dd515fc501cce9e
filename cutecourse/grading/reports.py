"""Reports of a grading run: Gradescope/otter `results.json`, JUnit XML, a CSV row per submission, and a Markdown
summary of the points (a GitHub Actions job summary).

Nothing in them depends on when or where the run happened, so grading the same submission twice writes the same
bytes. Only the grader writes them, after every learner process is dead: each file is written whole to a fresh
temporary file in the output folder and renamed into place, so a symlink planted at a report's path is replaced,
never followed.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from cutecourse.grading.results import NOT_RUN, PASSED, Report, TestResult


def _points(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


#: Gradescope's test visibilities: shown at once, after the due date, once the grades are published, never.
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
#: When students see a hidden test's result (its name, output and points) by default: a failing hidden test's output
#: says what input broke the answer, which would let the next submission be fitted to it before the deadline.
HIDDEN_TESTS_SHOWN = "after_due_date"


def results_json(reports: list[Report], hidden_tests: str = HIDDEN_TESTS_SHOWN) -> dict:
    """Gradescope's autograder format (otter reads it too). A test this machine could not run scores 0 of its points
    and says why, unless it is graded elsewhere (0 of 0). The check cells' results are visible at once (the learner
    ran them already); the hidden tests' are shown as `hidden_tests` says (one of VISIBILITIES)."""
    if hidden_tests not in VISIBILITIES:
        raise ValueError(f"--hidden-visibility {hidden_tests!r}: give one of {', '.join(VISIBILITIES)} (Gradescope's "
                         f"test visibilities; default {HIDDEN_TESTS_SHOWN})")
    tests = []
    for report in reports:
        for t in report.tests:
            tests.append({"name": f"{report.submission}: {t.name}", "number": t.exercise,
                          "score": _points(t.score), "max_score": _points(t.counted),
                          "status": "passed" if t.status == PASSED else "failed",
                          "output": _said(t), "visibility": hidden_tests if t.hidden else "visible"})
    score = sum(r.score for r in reports)
    most = sum(r.max_score for r in reports)
    summary = "; ".join(f"{r.submission}: {_points(r.score)}/{_points(r.max_score)}" for r in reports)
    isolations = sorted({r.isolation for r in reports if r.isolation})
    if isolations:
        summary += "\nisolation: " + "; ".join(isolations)
    return {"score": _points(score), "max_score": _points(most), "output": summary, "tests": tests,
            "extra_data": {"isolation": {r.submission: r.isolation for r in reports}}}


def _said(t: TestResult) -> str:
    """A test's status and message, once: "failed: why", or "not run: needs sm_80; ..." as it is."""
    if not t.output:
        return t.status
    return t.output if t.output.startswith(t.status) else f"{t.status}: {t.output}"


def junit_xml(reports: list[Report]) -> ET.ElementTree:
    suites = ET.Element("testsuites")
    for report in reports:
        failed = sum(t.status not in (PASSED, NOT_RUN) for t in report.tests)
        skipped = sum(t.status == NOT_RUN for t in report.tests)
        suite = ET.SubElement(suites, "testsuite", name=report.submission, tests=str(len(report.tests)),
                              failures=str(failed), skipped=str(skipped))
        for t in report.tests:
            case = ET.SubElement(suite, "testcase", classname=f"{report.lesson}.exercise_{t.exercise}", name=t.name)
            if t.status == NOT_RUN:
                ET.SubElement(case, "skipped", message=t.output or NOT_RUN)
            elif t.status != PASSED:
                ET.SubElement(case, "failure", message=t.output or t.status)
    ET.indent(suites)
    return ET.ElementTree(suites)


def grades_csv(reports: list[Report]) -> str:
    exercises = sorted({e for r in reports for e in r.exercises()},
                       key=lambda e: [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in e.split(".")])
    sink = io.StringIO(newline="")
    writer = csv.writer(sink)
    writer.writerow(["submission", "lesson", "score", "max_score"] + [f"exercise {e}" for e in exercises])
    for r in reports:
        per = r.exercises()
        writer.writerow([r.submission, r.lesson, _points(r.score), _points(r.max_score)]
                        + [f"{_points(per[e][0])}/{_points(per[e][1])}" if e in per else "" for e in exercises])
    return sink.getvalue()


def markdown(reports: list[Report]) -> str:
    """The points as Markdown: a table of submissions and exercises, then each test that did not pass and why."""
    def cell(text: str) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    header, *rows = csv.reader(io.StringIO(grades_csv(reports)))  # the gradebook's rows, as the table's
    lines = [line(["submission", "lesson", "points", *header[4:]]), line(["---"] * (len(header) - 1))]
    lines += [line([cell(row[0]), row[1], f"{row[2]}/{row[3]}", *row[4:]]) for row in rows]
    for r in reports:
        missed = [t for t in r.tests if t.status != PASSED]
        if missed:
            lines += ["", f"**{cell(r.submission)}**: {_points(r.score)}/{_points(r.max_score)}", ""]
            lines += [f"- {'–' if t.status == NOT_RUN else '✗'} {cell(t.name)}: {cell(_said(t))}" for t in missed]
    return "\n".join(lines) + "\n"


def to_dict(report: Report) -> dict:
    """A report as JSON-able data, for a grade made in another process or container (`from_dict` reads it)."""
    return dataclasses.asdict(report)


def from_dict(data: dict) -> Report:
    tests = []
    for fields in data["tests"]:
        test = TestResult(**{**fields, "output": ""})
        test.output = fields["output"]  # already cut to size where it was made: cut it again and the note doubles
        tests.append(test)
    return Report(data["submission"], data["lesson"], tests, list(data["notes"]), data["isolation"])


def _replace(path: Path, data: bytes) -> None:
    """Write `path` whole and atomically, replacing (never following) whatever is there, a symlink included."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write(reports: list[Report], out: Path, hidden_tests: str = HIDDEN_TESTS_SHOWN) -> list[Path]:
    """Write the four reports into `out`; `hidden_tests` is when results.json shows the hidden tests' results."""
    if out.is_symlink():
        raise ValueError(f"--out {out} is a symlink; give the output folder itself")
    gradescope = results_json(reports, hidden_tests)
    out.mkdir(parents=True, exist_ok=True)
    xml = io.BytesIO()
    junit_xml(reports).write(xml, encoding="utf-8", xml_declaration=True)
    files = {"results.json": (json.dumps(gradescope, indent=1, ensure_ascii=False) + "\n").encode(),
             "junit.xml": xml.getvalue(), "grades.csv": grades_csv(reports).encode(),
             "summary.md": markdown(reports).encode()}
    for name, data in files.items():
        _replace(out / name, data)
    return [out / name for name in files]


def summary(report: Report) -> str:
    lines = [f"{report.submission} ({report.lesson}): {_points(report.score)}/{_points(report.max_score)} points"]
    lines += [f"  note: {note}" for note in report.notes]
    for exercise, (got, most) in report.exercises().items():
        lines.append(f"  exercise {exercise}: {_points(got)}/{_points(most)}")
    for t in report.tests:
        mark = {"passed": "✓", "not run": "–"}.get(t.status, "✗")
        lines.append(f"    {mark} {t.name}" + (f": {t.output}" if t.output and t.status != PASSED else ""))
    return "\n".join(lines)
