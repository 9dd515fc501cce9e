"""The learner's process: answers run there, results come back as data, and failures stay there."""

import textwrap

import pytest

from cutecourse.grading.sandbox import Learner, LearnerError


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
        with pytest.raises(LearnerError, match="may not read"):
            process.call("peek")
        with pytest.raises(LearnerError, match="subprocess.Popen is not allowed"):
            process.call("run")


def test_memory_limit_turns_a_huge_allocation_into_a_failure():
    with learner("def hog():\n    return len(bytearray(8 * 2**30))", memory_mb=1024) as process:
        with pytest.raises(LearnerError, match="MemoryError"):
            process.call("hog")


def test_kernels_defined_in_an_answer_cell_compile_in_the_sandbox():
    # The DSL reads a kernel's source to trace it; exec'd cells must keep theirs where inspect finds it.
    pytest.importorskip("cutlass")
    with learner("""
        import cutlass, cutlass.cute as cute
        from cutlass.cute.runtime import make_fake_compact_tensor

        @cute.kernel
        def k(g: cute.Tensor):
            i, _, _ = cute.arch.thread_idx()
            if i < cute.size(g):
                g[i] = 1.0

        @cute.jit
        def host(g: cute.Tensor):
            k(g).launch(grid=(1, 1, 1), block=(32, 1, 1))

        def compile_it():
            cute.compile(host, make_fake_compact_tensor(cutlass.Float32, (64,)), options="--gpu-arch sm_80")
            return "compiled"
    """) as process:
        assert process.call("compile_it", timeout=120) == ("compiled", [])
