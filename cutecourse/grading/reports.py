"""Reports of a grading run: Gradescope/otter `results.json`, JUnit XML and a CSV row per submission.

Nothing in them depends on when or where the run happened, so grading the same submission twice writes the same
bytes.
"""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from cutecourse.grading.grader import NOT_RUN, PASSED, Report


def _points(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


def results_json(reports: list[Report]) -> dict:
    """Gradescope's autograder format (otter reads it too). Tests this machine could not run count 0 of 0 points
    and say why, so they neither pass nor lower the score."""
    tests = []
    for report in reports:
        for t in report.tests:
            runnable = t.status != NOT_RUN
            tests.append({"name": f"{report.submission}: {t.name}", "number": t.exercise,
                          "score": _points(t.score), "max_score": _points(t.points if runnable else 0),
                          "status": "passed" if t.status == PASSED else "failed",
                          "output": t.status if not t.output else f"{t.status}: {t.output}"})
    score = sum(r.score for r in reports)
    most = sum(r.max_score for r in reports)
    summary = "; ".join(f"{r.submission}: {_points(r.score)}/{_points(r.max_score)}" for r in reports)
    return {"score": _points(score), "max_score": _points(most), "output": summary, "tests": tests}


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


def write(reports: list[Report], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "junit.xml", out / "grades.csv"]
    paths[0].write_text(json.dumps(results_json(reports), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    junit_xml(reports).write(paths[1], encoding="utf-8", xml_declaration=True)
    exercises = sorted({e for r in reports for e in r.exercises()}, key=lambda e: [int(x) if x.isdigit() else x
                                                                                   for x in e.split(".")])
    with paths[2].open("w", newline="", encoding="utf-8") as sink:
        writer = csv.writer(sink)
        writer.writerow(["submission", "lesson", "score", "max_score"] + [f"exercise {e}" for e in exercises])
        for r in reports:
            per = r.exercises()
            writer.writerow([r.submission, r.lesson, _points(r.score), _points(r.max_score)]
                            + [f"{_points(per[e][0])}/{_points(per[e][1])}" if e in per else "" for e in exercises])
    return paths


def summary(report: Report) -> str:
    lines = [f"{report.submission} ({report.lesson}): {_points(report.score)}/{_points(report.max_score)} points"]
    for exercise, (got, most) in report.exercises().items():
        lines.append(f"  exercise {exercise}: {_points(got)}/{_points(most)}")
    for t in report.tests:
        mark = {"passed": "✓", "not run": "–"}.get(t.status, "✗")
        lines.append(f"    {mark} {t.name}" + (f": {t.output}" if t.output and t.status != PASSED else ""))
    return "\n".join(lines)
