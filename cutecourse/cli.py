"""The `cutecourse` command."""

from __future__ import annotations

import argparse
import sys


def _doctor(args: argparse.Namespace) -> int:
    from cutecourse import env

    machine = env.probe()
    print(env.report(machine))
    if args.smoke:
        if not machine.can_run_kernels:
            print("smoke       skipped: needs the CuTe DSL and a GPU")
        else:
            from cutecourse.kernels import smoke

            print(f"smoke       {smoke.self_test()}")
    # Only a machine that cannot even run the CPU lessons is a failure; everything else is information.
    return 0 if machine.can_run_cpu_lessons else 1


def _build(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cutecourse.grading import build

    changed = build.build(Path(args.course), check=args.check, run=args.execute)
    if args.check:
        if changed:
            print("stale notebooks (run: cutecourse build):\n  " + "\n  ".join(changed))
            return 1
        print("notebooks are up to date")
    else:
        print("\n".join(f"wrote {c}" for c in changed) or "notebooks are up to date")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cutecourse.grading import grader, isolation, reports

    course = grader.Course.at(args.course, args.hidden)
    if args.classroom:
        print(classroom_workflow(args.submissions, course))
        return 0
    try:
        isolation.choose(args.isolation, course.deny(), course.read_only())
    except isolation.IsolationError as exc:
        print(f"cutecourse grade: {exc}", file=sys.stderr)
        return 2
    results = []
    for submission in args.submissions:
        report = grader.grade(submission, course, nbval=not args.hidden_only, hidden=not args.nbval,
                              timeout=args.timeout, lesson=args.lesson, exercise=args.exercise,
                              isolation_kind=args.isolation, gpu_elsewhere=args.gpu_graded_elsewhere)
        print(reports.summary(report))
        results.append(report)
    for path in reports.write(results, Path(args.out)):
        print(f"wrote {path}")
    # CI steps read the exit code: 0 only when every point of the maximum was earned here (tests not run count
    # toward the maximum, unless --gpu-graded-elsewhere leaves the GPU ones to another grader).
    return 0 if all(r.tests and r.score == r.max_score for r in results) else 1


def _steps(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cutecourse.kernels import steps

    if args.steps_command == "list":
        for number, name, idea in steps.ladder():
            print(f"{number:2}  {name:24} {idea}")
        return 0
    try:
        d = steps.diff(args.n, context=args.context)
    except ValueError as e:
        print(f"cutecourse steps diff: {e}", file=sys.stderr)
        return 2
    if args.html:
        Path(args.html).write_text(f"<!doctype html><meta charset='utf-8'><title>{d.before} -> {d.after}</title>"
                                   f"{d.html}\n")
        print(f"{d.summary()}\nwrote {args.html}")
    else:
        print(d.summary())
        print(d.text, end="")
    return 0


def classroom_workflow(submissions: list[str], course: "object") -> str:
    """The autograding steps of a GitHub Classroom workflow: one command per exercise, worth its points."""
    from pathlib import Path

    from cutecourse.grading import grader

    where = "" if course.root == Path.cwd().resolve() else f" --course {course.root}"
    if course.hidden != course.root / "tests" / "hidden":
        where += f" --hidden {course.hidden}"
    steps = []
    for submission in submissions:
        lesson = grader.lesson_of(Path(submission), course)
        for exercise, points in grader.exercise_points(course, lesson).items():
            slug = f"{lesson}-{exercise}".replace(".", "-").replace("_", "-")
            steps.append(f"""      - name: {lesson} exercise {exercise}
        id: {slug}
        uses: classroom-resources/autograding-command-grader@v1
        with:
          test-name: {lesson} exercise {exercise}
          setup-command: pip install -e .[dev]
          command: cutecourse grade {submission}{where} --exercise {exercise} --out grading/{slug}
          timeout: 30
          max-score: {points:g}""")
    return "\n".join(steps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cutecourse", description="Tools for the cutecourse CuTe DSL course.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor = commands.add_parser("doctor", help="what this machine can do for the course, and how to fix set-up")
    doctor.add_argument("--smoke", action="store_true", help="also compile and launch a tiny CuTe DSL kernel")
    doctor.set_defaults(run=_doctor)
    build = commands.add_parser("build", help="write exercises/ from solutions/ (answers become stubs), and the "
                                              "Colab badge and set-up cells of every notebook")
    build.add_argument("--check", action="store_true", help="fail if a notebook is stale; write nothing")
    build.add_argument("--execute", action="store_true", help="run each solution first to refresh its outputs")
    build.add_argument("--course", default=".", help="the course root (default: here)")
    build.set_defaults(run=_build)
    grade = commands.add_parser("grade", help="grade submissions: nbval against the master, then hidden tests")
    grade.add_argument("submissions", nargs="+", metavar="SUBMISSION.ipynb")
    grade.add_argument("--out", default="grading", help="where results.json, junit.xml and grades.csv go")
    grade.add_argument("--course", default=".", help="the course root holding exercises/ (default: here)")
    grade.add_argument("--hidden", default=None, help="the hidden tests' folder (default: COURSE/tests/hidden)")
    only = grade.add_mutually_exclusive_group()
    only.add_argument("--nbval", action="store_true", help="only the check cells, through nbval")
    only.add_argument("--hidden-only", action="store_true", help="only the hidden tests")
    grade.add_argument("--timeout", type=float, default=120.0,
                       help="seconds per test (default 120); the whole grade gets this times the number of tests")
    grade.add_argument("--exercise", help="grade one exercise only (its report and exit code), e.g. 2.3")
    grade.add_argument("--lesson", help="the lesson the submissions answer, e.g. 02_layouts (default: the file name)")
    grade.add_argument("--isolation", default="auto", choices=("auto", "bwrap", "uid", "none"),
                       help="how learner code is walled in: auto (bubblewrap, else an unprivileged uid where safe), "
                            "or none (only to check your own notebook on your own machine)")
    grade.add_argument("--gpu-graded-elsewhere", action="store_true",
                       help="leave GPU tests this machine cannot run out of the maximum (a GPU grader awards them)")
    grade.add_argument("--classroom", action="store_true",
                       help="print GitHub Classroom autograding steps, one per exercise, and exit")
    grade.set_defaults(run=_grade)
    ladder = commands.add_parser("steps", help="the GEMM ladder: its steps, and each one's diff against the one before")
    ladder_commands = ladder.add_subparsers(dest="steps_command", required=True, metavar="STEPS_COMMAND")
    ladder_commands.add_parser("list", help="every step and the idea it adds")
    steps_diff = ladder_commands.add_parser("diff", help="step N against step N - 1, with the share of code it keeps")
    steps_diff.add_argument("n", type=int, metavar="N", help="the step, 2 to 10")
    steps_diff.add_argument("--context", type=int, default=3, help="unchanged lines around each change (default 3)")
    steps_diff.add_argument("--html", metavar="FILE", help="write a side-by-side HTML view to FILE instead")
    ladder.set_defaults(run=_steps)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
