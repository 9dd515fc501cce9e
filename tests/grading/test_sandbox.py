"""The learner's process: answers run there, in a jail, results come back as data, and failures stay there."""

import textwrap

import pytest

from cutecourse.grading import isolation, wire
from cutecourse.grading.sandbox import Learner, LearnerError

from .jail import needs_jail


def learner(source: str, **kw) -> Learner:
    return Learner([{"label": "exercise 1", "exercise": "1", "source": textwrap.dedent(source)}], timeout=30, **kw)


def test_values_come_back_as_data_and_failures_are_named():
    with learner("""
        def pair(x):
            return (x, [x])
        def fail():
            raise KeyError("nope")
    """) as process:
        assert process.call("pair", 3) == ((3, [3]), [])
        with pytest.raises(LearnerError, match="fail raised KeyError"):
            process.call("fail")
        with pytest.raises(LearnerError, match="missing is not defined"):
            process.call("missing")


def test_a_cell_that_raises_is_recorded_against_its_exercise():
    with learner("raise NotImplementedError('Exercise 1: fill in')") as process:
        with pytest.raises(LearnerError):
            process.call("anything")
        assert process.errors == {"1": "NotImplementedError: Exercise 1: fill in"}


def test_denied_files_cannot_be_read_and_programs_cannot_be_started(tmp_path):
    secret = tmp_path / "hidden"
    secret.mkdir()
    (secret / "answers.txt").write_text("42")
    with learner(f"""
        import subprocess
        def peek():
            return open({str(secret / 'answers.txt')!r}).read()
        def run():
            return subprocess.run(["cat", {str(secret / 'answers.txt')!r}], capture_output=True).stdout
    """, deny=[str(secret)]) as process:
        with pytest.raises(LearnerError, match="may not read|No such file"):
            process.call("peek")
        with pytest.raises(LearnerError, match="subprocess.Popen is not allowed"):
            process.call("run")


def test_the_learners_stderr_tail_comes_with_a_failure():
    with learner("""
        import sys
        def noisy():
            print("the answer went wrong here", file=sys.stderr)
            raise SystemExit(3)
    """) as process:
        with pytest.raises(LearnerError, match="the answer went wrong here"):
            process.call("noisy")


def test_a_reply_never_blocks_past_its_deadline():
    # Half a line on the channel, then silence: the old blocking readline waited forever.
    with learner("""
        import os, time
        def half():
            for fd in range(3, 16):  # whichever is the reply channel
                try:
                    os.write(fd, b'{"ok": tr')
                except OSError:
                    pass
            time.sleep(3600)
    """) as process:
        with pytest.raises(LearnerError, match="timed out after 2 s"):
            process.call("half", timeout=2)


def test_memory_limit_turns_a_huge_allocation_into_a_failure():
    walls = isolation.Walls(isolation.choose(), isolation.Limits(memory_mb=1024), gpu=False,
                            package_dir=isolation.Path(isolation.__file__).resolve().parents[1])
    with walls, Learner([{"label": "exercise 1", "exercise": "1",
                          "source": "def hog():\n    return len(bytearray(4 * 2**30))"}], walls, timeout=30) as process:
        with pytest.raises(LearnerError, match="MemoryError|SIGKILL|ended"):
            process.call("hog")


def test_forbidden_functions_raise_and_their_source_cannot_be_read():
    with learner("""
        import cutecourse.layout as L
        from cutecourse.layout import coalesce as early
        def direct():
            return str(L.coalesce(L.make_layout((2, 4))))
        def bound_before():
            return str(early(L.make_layout((2, 4))))
        def through_the_module():
            from cutecourse.layout import algebra
            return str(algebra.coalesce(L.make_layout((2, 4))))
        def from_source():
            import inspect, cutecourse.layout.algebra as A
            return open(A.__file__).read()[:10]
        def allowed():
            return str(L.make_layout((2, 4)))
    """, forbid=["cutecourse.layout.coalesce", "cutecourse.layout.algebra.coalesce"], exercise="2.2") as process:
        for name in ("direct", "bound_before", "through_the_module"):
            with pytest.raises(LearnerError, match="exercise 2.2 asks you to write this yourself"):
                process.call(name)
        with pytest.raises(LearnerError, match="may not read"):
            process.call("from_source")
        assert process.call("allowed")[0] == "(2,4):(1,2)"


def test_kernels_defined_in_an_answer_cell_compile_in_the_sandbox():
    # The DSL reads a kernel's source to trace it; exec'd cells must keep theirs where inspect finds it.
    pytest.importorskip("cutlass")
    with learner("""
        import cutlass, cutlass.cute as cute

        @cute.kernel
        def k(g: cute.Tensor):
            i, _, _ = cute.arch.thread_idx()
            if i < cute.size(g):
                g[i] = 1.0

        @cute.jit
        def host(g: cute.Tensor, stream):
            k(g).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)
    """) as process:
        code, _ = process.call("host", "sm_80", wire.tensor([0.0] * 64, device="cpu"), via="ptx", timeout=120)
        assert ".entry" in code and "st.global" in code


@needs_jail
def test_jailed_processes_see_neither_answers_nor_a_writable_course():
    root = isolation.Path(isolation.__file__).resolve().parents[2]
    with learner(f"""
        import os
        def look():
            paths = {[str(root / 'tests' / 'hidden'), str(root / 'solutions'), str(root / '.git'),
                      str(root / 'cutecourse' / 'grading' / 'checks' / 'demo.py')]!r}
            return [os.path.exists(p) for p in paths]
        def write():
            open({str(root / 'cutecourse' / '__init__.py')!r}, 'a').write('# pwned')
        def who():
            return os.getuid()
    """) as process:
        assert process.call("look")[0] == [False, False, False, False]
        with pytest.raises(LearnerError, match="Read-only file system|Permission"):
            process.call("write")
        assert process.call("who")[0] == isolation.NOBODY


def test_every_cuda_memory_fault_reads_the_same():
    """Where a stray access lands decides which error CUDA names (seen on the H200: an illegal memory access one
    run, an operation not supported on the global/shared address space the next): one kernel, one feedback."""
    from cutecourse.grading import sandbox

    said = {sandbox.describe(RuntimeError(f"CUDA error: {text}\nSearch for `{name}' in the docs"))
            for text, name in (("an illegal memory access was encountered", "cudaErrorIllegalAddress"),
                               ("operation not supported on global/shared address space",
                                "cudaErrorInvalidAddressSpace"))}
    assert said == {f"RuntimeError: {sandbox.MEMORY_FAULT}"}
    for other in ("misaligned address", "unspecified launch failure"):  # a trap or an assert is no stray access
        assert sandbox.describe(RuntimeError(f"CUDA error: {other}")) == f"RuntimeError: CUDA error: {other}"
