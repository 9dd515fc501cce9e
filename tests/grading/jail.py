"""Whether this machine can grade in the grader's jail (bubblewrap), and the mark of the tests that need it."""

from __future__ import annotations

import os

import pytest

from cutecourse.grading import isolation


def _no_jail() -> str | None:
    """Why this machine cannot grade in bubblewrap (the cause and the command that fixes it), or None. On CI it must
    grade in bubblewrap: there a missing jail fails the run instead of skipping the tests that need it."""
    why = isolation.no_jail()
    if why and os.environ.get("CI"):
        raise RuntimeError(f"CI must grade in bubblewrap, and cannot: {why}")
    return why


#: Why the tests that need the grader's jail skip here, or None where bubblewrap runs.
NO_JAIL = _no_jail()
#: A test that grades in bubblewrap and nothing else (the attack suite, --jobs, the workflow): skipped, with the cause
#: and its fix, where no jail can be made.
needs_jail = pytest.mark.skipif(NO_JAIL is not None, reason=str(NO_JAIL))

#: The isolation the attack suite grades in: "auto" (bubblewrap here), or "uid" when test_docker_mode.py runs the suite
#: again as Gradescope's Docker mode grades (no namespaces, learners as uid 65534).
ISOLATION = os.environ.get("CUTECOURSE_TEST_ISOLATION", "auto")
