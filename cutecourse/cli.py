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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cutecourse", description="Tools for the cutecourse CuTe DSL course.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor = commands.add_parser("doctor", help="what this machine can do for the course, and how to fix set-up")
    doctor.add_argument("--smoke", action="store_true", help="also compile and launch a tiny CuTe DSL kernel")
    doctor.set_defaults(run=_doctor)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
