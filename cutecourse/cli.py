"""The `cutecourse` command."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cutecourse.grading.course import Course


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


def _usage_error(submissions: list[str], course: "Course", lesson: str | None, uploads: bool) -> str | None:
    """What is wrong with the command line's submissions, before anything is graded or written: a path that is no
    notebook, no file (unless they are `uploads`, which are graded as lost), or names no lesson of the course."""
    from pathlib import Path

    from cutecourse.grading import grader

    for submission in submissions:
        path = Path(submission)
        if path.suffix != ".ipynb":
            return (f"SUBMISSION {submission!r} is not a notebook: give the filled-in exercise notebooks "
                    "(NN_name.ipynb, e.g. exercises/02_layouts.ipynb)")
        if not uploads and not path.is_file():
            return (f"SUBMISSION {submission!r}: no such file; give the path of a filled-in exercise notebook "
                    "(or --uploads, where a missing upload is to be graded as not handed in)")
        try:
            grader.lesson_of(path, course, lesson)
        except ValueError as exc:
            return str(exc).removeprefix("submission rejected: ")
    return None


def _grade(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cutecourse.grading import batch, classroom, grader, isolation, reports

    course = grader.Course.at(args.course, args.hidden)
    try:
        options = batch.options(nbval_only=args.nbval, hidden_only=args.hidden_only, timeout=args.timeout,
                                lesson=args.lesson, exercise=args.exercise, isolation_kind=args.isolation,
                                gpu_elsewhere=args.gpu_graded_elsewhere)
        if args.workflow:
            print(classroom.workflow(args.submissions, course, options), end="")
            note = classroom.unpushed(course)
            if note:
                print(f"cutecourse grade --workflow: note: {note}", file=sys.stderr)
            return 0
        if args.gradescope:
            bundle = classroom.gradescope_bundle(args.submissions, course, options, Path(args.gradescope),
                                                 hidden_tests=args.hidden_visibility)
            print(f"wrote {bundle}")
            return 0
        refused = _usage_error(args.submissions, course, args.lesson, args.uploads)
        if refused:
            raise ValueError(refused)
    except ValueError as exc:
        print(f"cutecourse grade: {exc}", file=sys.stderr)
        return 2
    try:
        isolation.choose(args.isolation, course.deny(), course.read_only())
        results = batch.grade_many(args.submissions, course, options, jobs=args.jobs, say=print)
    except (isolation.IsolationError, ValueError) as exc:
        print(f"cutecourse grade: {exc}", file=sys.stderr)
        return 2
    for path in reports.write(results, Path(args.out), args.hidden_visibility):
        print(f"wrote {path}")
    # CI steps read the exit code: 0 only when every point of the maximum was earned here (tests not run count
    # toward the maximum, unless --gpu-graded-elsewhere leaves the GPU ones to another grader).
    return 0 if all(r.tests and r.score == r.max_score for r in results) else 1


def _steps(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cutecourse.kernels.gemm import steps

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


NCU_MISSING = ("ncu (Nsight Compute) is not on PATH. Install it with the CUDA toolkit (Debian/Ubuntu with NVIDIA's "
               "CUDA apt repository: sudo apt-get install nsight-compute; or https://developer.nvidia.com/nsight-compute)"
               ", or run without --ncu")


def _bench(args: argparse.Namespace) -> int:
    """``cutecourse bench gemm``: our steps, the dispatcher's pick and torch.matmul on one problem, side by side."""
    import shutil

    problem = (args.m, args.n, args.k)
    if any(x < 1 for x in problem):
        print(f"cutecourse bench gemm: --m {args.m} --n {args.n} --k {args.k}: give positive extents",
              file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("cutecourse bench gemm needs torch: pip install torch (with CUDA), on a machine with a GPU",
              file=sys.stderr)
        return 2
    from cutecourse import bench

    try:  # the kernels named first: a misspelt one is said on any machine, before ncu starts
        launches = _launches(args.kernels)
    except SystemExit as exc:
        print(f"cutecourse bench gemm: {exc}", file=sys.stderr)
        return 2
    if args.ncu and not args.once:
        return _bench_under_ncu(args, shutil.which("ncu"))
    if not torch.cuda.is_available():
        print("cutecourse bench gemm times kernels on a GPU and none is visible here: run it where nvidia-smi lists "
              "an sm_80+ GPU (Colab with a GPU runtime, a Modal H100: README, 'Where to run it')",
              file=sys.stderr)
        return 2
    if args.once:
        return _launch_once(args, launches)
    rows = bench.profile([problem], [args.dtype], launches, rounds=args.rounds, settle_ms=args.settle_ms,
                         data=args.data, say=print)
    print(bench.table(rows))
    if args.csv:
        bench.write_csv(rows, args.csv)
        print(f"wrote {args.csv}")
    return 0


def _tune(args: argparse.Namespace) -> int:
    """``cutecourse tune``: measure on this GPU what `cutecourse.gemm` runs. ``gemm``: search one problem's Configs
    (`cutecourse.tune`), kept in the tuner's cache for this GPU; ``winners``: race the shipped table's candidates
    (`cutecourse.tuning.measure_winners`) and merge each class's fastest into the table."""
    try:
        import torch  # noqa: F401  (the tuner's own import, said here with its fix)
    except ImportError:
        print(f"cutecourse tune {args.tune_command} needs torch: pip install torch (with CUDA), on a machine with a "
              "GPU", file=sys.stderr)
        return 2
    from cutecourse import tuning
    from cutecourse.kernels.gemm import winners

    try:
        if args.tune_command == "gemm":
            print(tuning.tune((args.m, args.n, args.k), args.dtype, search=args.search, rounds=args.rounds,
                              settle_ms=args.settle_ms, say=print))
            return 0
        shapes = _shapes(args.shapes)
        for dtype in args.dtypes:
            tuning.measure_winners(shapes, dtype, fused=args.fused, rounds=args.rounds, settle_ms=args.settle_ms,
                                   write=not args.dry_run, say=print)
    except ValueError as exc:
        print(f"cutecourse tune {args.tune_command}: {exc}", file=sys.stderr)
        return 2
    print(f"{'not written (--dry-run)' if args.dry_run else 'merged into'}: {winners.TABLE}")
    return 0


def _shapes(words: list[str]) -> list[tuple[int, int, int]]:
    """`tune winners --shapes`: each word suite, extras (`winners.SHAPES`, `winners.EXTRAS`) or one MxNxK; ValueError
    naming a bad one and the forms."""
    from cutecourse import bench
    from cutecourse.kernels.gemm import winners

    named = {"suite": winners.SHAPES, "extras": winners.EXTRAS}
    try:
        return [s for word in words for s in (named[word] if word in named else [bench.problem(word)])]
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--shapes {exc}, or suite, or extras") from None


def _launches(specs: list[str]) -> dict[str, tuple]:
    """--kernels: step numbers, STEP:FIELD=VALUE,... variants and "dispatch" (cutecourse.gemm's pick); "torch" is
    the baseline, always timed."""
    from cutecourse import bench, dispatch
    from cutecourse.kernels.gemm import GEMM_STEPS, VARIANTS

    launches = {}
    for spec in specs:
        if spec == "torch":
            continue
        if spec == "dispatch":
            launches["cutecourse.gemm"] = (lambda a, b, c, config: dispatch.gemm(a, b, c), None)
            continue
        number = spec.partition(":")[0]
        if not number.isdigit() and number not in VARIANTS:
            raise SystemExit(f"--kernels {spec!r}: give torch, dispatch, a step (1-{len(GEMM_STEPS)}), "
                             f"{', '.join(VARIANTS)}, or STEP:FIELD=VALUE,... (e.g. 9:epi_n=64, gemv:warps=8)")
        launches.update(bench.kernels_to_time([int(spec)], []) if spec.isdigit() else bench.kernels_to_time([],
                                                                                                       [spec]))
    return launches


def _launch_once(args: argparse.Namespace, launches: dict[str, tuple]) -> int:
    """Under ncu: check every kernel (compiling it), then launch each once between cudaProfilerStart and Stop."""
    import torch

    from cutecourse import bench

    a, b, c = bench.operands(args.m, args.n, args.k, args.dtype, args.data)
    kernels = {"torch.matmul": lambda i: torch.matmul(a, b, out=c)}
    for name, (gemm, config) in launches.items():
        try:
            kernels[name] = bench.checked(name, gemm, config, a, b, c, say=lambda line: print(line, file=sys.stderr))
        except ValueError as exc:  # refused on this GPU: not profiled
            print(f"{name}: not profiled, {exc}", file=sys.stderr)
    for fn in kernels.values():
        fn(0)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, fn in kernels.items():  # each in an NVTX range of its name: ncu renames its kernels by it
        torch.cuda.nvtx.range_push(name)
        fn(0)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    torch.cuda.profiler.stop()
    print("launched: " + " ".join(kernels))
    return 0


def _bench_under_ncu(args: argparse.Namespace, ncu: str | None) -> int:
    import os
    import subprocess
    import tempfile

    from cutecourse.bench import ncu as profiler

    if ncu is None:
        print(f"cutecourse bench gemm --ncu: {NCU_MISSING}", file=sys.stderr)
        return 2
    known = profiler.available(ncu)
    metrics, stall_metrics = profiler.chosen(known), profiler.stalls(known)
    argv = [sys.executable, "-m", "cutecourse.cli", "bench", "gemm", "--m", str(args.m), "--n", str(args.n),
            "--k", str(args.k), "--dtype", args.dtype, "--data", args.data, "--kernels", *args.kernels, "--once"]
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "profile")
        done = subprocess.run(profiler.command(ncu, metrics, argv, report, stall_metrics), capture_output=True,
                              text=True)
        read = os.path.exists(report + ".ncu-rep")
        text, ranges = (subprocess.run(profiler.export(ncu, report, renamed), capture_output=True, text=True).stdout
                        if read else "" for renamed in (False, True))
    launched = next((line.split()[1:] for line in done.stdout.splitlines() if line.startswith("launched:")), [])
    profiles = profiler.parse(text, metrics)
    if done.returncode != 0 or not profiles:
        print(f"cutecourse bench gemm --ncu: ncu exited {done.returncode} and profiled {len(profiles)} kernels:\n"
              f"{done.stderr[-2000:]}{done.stdout[-2000:]}{text[-2000:]}", file=sys.stderr)
        return 1
    names = profiler.named(launched, [p["kernel"] for p in profiler.parse(ranges, {})], len(profiles))
    print(f"ncu --clock-control none, one launch each ({args.m}x{args.n}x{args.k} {args.dtype}, {args.data} data); "
          "metrics: " + ", ".join(f"{what} = {name}" for what, name in metrics.items())
          + f"; stalls: {len(stall_metrics)} reasons, " + profiler.STALL_METRIC.format("<reason>"))
    print(profiler.table(names, profiles))
    if args.csv:
        from cutecourse import bench

        bench.write_csv([profiler.flat(p, name) for name, p in zip(names, profiles)], args.csv)
        print(f"wrote {args.csv}")
    return 0


def version() -> str:
    """This package's version, and the CuTe DSL release it is tested with."""
    import importlib.metadata

    from cutecourse import env

    try:
        mine = importlib.metadata.version("cutecourse")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        mine = "(not installed: pip install -e . in the checkout)"
    return f"cutecourse {mine} (tested with nvidia-cutlass-dsl {env.DSL_PIN})"


def _problem_arguments(parser: argparse.ArgumentParser) -> None:
    """One 16-bit GEMM problem's arguments (`bench gemm`, `tune gemm`): --m, --n, --k and --dtype."""
    for extent in ("--m", "--n", "--k"):
        parser.add_argument(extent, type=int, required=True)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))


def main(argv: list[str] | None = None) -> int:
    from cutecourse.grading import reports  # plain data and the standard library: the flags' choices
    from cutecourse.kernels.gemm import GEMM_STEPS  # a tuple: the package imports nothing heavy

    parser = argparse.ArgumentParser(prog="cutecourse", description="Tools for the cutecourse CuTe DSL course.")
    parser.add_argument("--version", action="version", version=version())
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
    grade.add_argument("--uploads", action="store_true",
                       help="the submissions are students' uploads: a missing one is graded as not handed in (every "
                            "point lost, said in its report) instead of refused (the Gradescope bundle grades so)")
    grade.add_argument("--hidden-visibility", default=reports.HIDDEN_TESTS_SHOWN, choices=reports.VISIBILITIES,
                       help="when results.json shows students the hidden tests' results (Gradescope's test "
                            "visibility; default after_due_date: a failing hidden test's output would show its "
                            "input before the deadline); the check cells' are always visible")
    grade.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="grade N submissions at once, each worker with one of this machine's GPUs (needs "
                            "bubblewrap); the reports are those of grading them one by one")
    elsewhere = grade.add_mutually_exclusive_group()
    elsewhere.add_argument("--workflow", action="store_true",
                           help="print a GitHub Actions workflow that grades these notebooks (paths in the "
                                "student's repository) with these options on every push, and exit")
    elsewhere.add_argument("--gradescope", metavar="BUNDLE.zip",
                           help="write a Gradescope autograder bundle that grades these notebooks (the names "
                                "students upload) with these options, and exit")
    grade.set_defaults(run=_grade)
    benchmark = commands.add_parser("bench", help="time GEMMs on this GPU, in the manner of cutlass_profiler")
    benchmarks = benchmark.add_subparsers(dest="bench_command", required=True, metavar="BENCH_COMMAND")
    gemm = benchmarks.add_parser("gemm", help="our steps, cutecourse.gemm's pick and torch.matmul on one problem: "
                                              "ms, TFLOP/s, ratio, SM clock and power, settled and interleaved")
    _problem_arguments(gemm)
    gemm.add_argument("--kernels", nargs="+", default=["torch", "dispatch", "5", "9", "10"],
                      help="torch (the baseline, always timed), dispatch (cutecourse.gemm), step numbers and "
                           "STEP:FIELD=VALUE,... variants, gemv (the decode GEMV) (default: torch dispatch 5 9 10)")
    gemm.add_argument("--data", default="normal", choices=("normal", "integers", "zeros"),
                      help="what A and B hold: the power a GEMM draws, and so its clock, depends on it")
    gemm.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported")
    gemm.add_argument("--settle-ms", type=float, default=1000.0,
                      help="each kernel runs alone this long before it is timed (power and clocks settle)")
    gemm.add_argument("--csv", metavar="FILE", help="also write the rows as CSV")
    gemm.add_argument("--ncu", action="store_true",
                      help="instead, profile one launch of each under Nsight Compute and print the key metrics")
    gemm.add_argument("--once", action="store_true", help=argparse.SUPPRESS)  # the run ncu profiles
    benchmark.set_defaults(run=_bench)
    tune = commands.add_parser("tune", help="measure on this GPU what cutecourse.gemm runs: one problem's Config, or "
                                            "the shipped table's winners")
    tunes = tune.add_subparsers(dest="tune_command", required=True, metavar="TUNE_COMMAND")
    one = tunes.add_parser("gemm", help="search one problem's Configs (cutecourse.tune) and keep the fastest for "
                                        "this GPU in the tuner's cache, which cutecourse.gemm then runs")
    _problem_arguments(one)
    one.add_argument("--search", default="coordinate", choices=("coordinate", "exhaustive"))
    race = tunes.add_parser("winners", help="race the table's candidates on problems (cutecourse.tuning."
                                            "measure_winners) and merge each shape class's fastest into the table")
    race.add_argument("--shapes", nargs="+", default=["suite"], metavar="MxNxK",
                      help="problems (M×N×K, as y = x @ W.t()), or suite (the 22 of benchmarks/gemm_shapes.py) or "
                           "extras (its three big ones) (default: suite)")
    race.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"],
                      choices=("bfloat16", "float16", "float8_e4m3fn"))
    race.add_argument("--fused", action="store_true",
                      help="race bias + GELU fused against cuBLASLt's fused epilogue (the winners a call with an "
                           "epilogue runs)")
    race.add_argument("--dry-run", action="store_true", help="print the winners; leave the table as it is")
    for parser_ in (one, race):
        parser_.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is kept")
        parser_.add_argument("--settle-ms", type=float, default=100.0,
                             help="each kernel runs alone this long before it is timed (power and clocks settle)")
    tune.set_defaults(run=_tune)
    ladder = commands.add_parser("steps", help="the GEMM ladder: its steps, and each one's diff against the one before")
    ladder_commands = ladder.add_subparsers(dest="steps_command", required=True, metavar="STEPS_COMMAND")
    ladder_commands.add_parser("list", help="every step and the idea it adds")
    steps_diff = ladder_commands.add_parser("diff", help="step N against step N - 1, with the share of code it keeps")
    steps_diff.add_argument("n", type=int, metavar="N", help=f"the step, 2 to {len(GEMM_STEPS)}")
    steps_diff.add_argument("--context", type=int, default=3, help="unchanged lines around each change (default 3)")
    steps_diff.add_argument("--html", metavar="FILE", help="write a side-by-side HTML view to FILE instead")
    ladder.set_defaults(run=_steps)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
