"""The learner's process: answers run there, in a jail, results come back as data, and failures stay there."""

import os
import textwrap

import pytest

from cutecourse.grading import isolation, sandbox, wire
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


def test_a_call_that_raised_leaves_the_process_to_the_next_call_and_a_crash_replaces_it():
    """An exception in a process that started no CUDA context costs the next call nothing (no new process importing
    torch and the DSL again); a crash gets a fresh process. Each failure says what that call wrote to stderr."""
    with learner("""
        import os, sys
        CALLS = []
        def calls():  # how many calls this process has taken (a pid would be 2 in every jail)
            CALLS.append(1)
            return len(CALLS)
        def fail(word):
            print(word, file=sys.stderr)
            raise ValueError("no")
        def crash():
            os._exit(3)
    """) as process:
        assert process.call("calls")[0] == 1
        with pytest.raises(LearnerError, match="fail raised ValueError: no; what it wrote to stderr: one$"):
            process.call("fail", "one")
        with pytest.raises(LearnerError, match="what it wrote to stderr: two$"):  # this call's words only
            process.call("fail", "two")
        assert process.call("calls")[0] == 2  # the same process
        with pytest.raises(LearnerError, match="ended"):
            process.call("crash")
        assert process.call("calls")[0] == 1  # a fresh one


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


def test_forbidden_source_cannot_be_read_from_a_folders_descriptor():
    """Issue 32: the `open` audit event carries no dir_fd, and the hook judged ``os.open("algebra.py", dir_fd=fd)``
    from the current folder; a submission read a forbidden function's source that way and ran it."""
    with learner("""
        import os
        import cutecourse.layout.algebra as A
        FOLDER, NAME = os.path.split(A.__file__)
        def fd():
            return os.open(FOLDER, os.O_RDONLY)
        READS = {
            "dir_fd": lambda: os.read(os.open(NAME, os.O_RDONLY, dir_fd=fd()), 100),
            "opener": lambda: open(NAME, opener=lambda p, f: os.open(p, f, dir_fd=fd())).read(100),
            "dotdot": lambda: os.read(os.open(os.path.relpath(A.__file__, "/usr"), os.O_RDONLY,
                                              dir_fd=os.open("/usr", os.O_RDONLY)), 100),
            "proc_fd": lambda: open(f"/proc/self/fd/{fd()}/{NAME}").read(100),
            "fchdir": lambda: os.fchdir(fd()) or open(NAME).read(100),
            "link": lambda: os.link(NAME, "stolen.py", src_dir_fd=fd()) or open("stolen.py").read(100),
            "symlink": lambda: os.symlink(FOLDER, "folder") or open(f"folder/{NAME}").read(100),
        }
        def read(how):
            return READS[how]()
    """, forbid=["cutecourse.layout.coalesce", "cutecourse.layout.algebra.coalesce"], exercise="2.2") as process:
        for how in ("dir_fd", "opener", "dotdot", "proc_fd", "fchdir", "link", "symlink"):
            with pytest.raises(LearnerError, match="grading sandbox: (answers may not read|os.symlink is not)"):
                process.call("read", how)


@pytest.fixture
def doors(tmp_path, monkeypatch):
    """A course folder with a denied `hidden/`, a package folder with a closed `atoms.py`, another folder with an
    `atoms.py` of its own, the current folder elsewhere, and the audit hook that closes them (not installed)."""
    for folder in ("course/hidden", "course/other", "pkg", "other"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "course" / "hidden" / "answers.txt").write_text("42")
    (tmp_path / "pkg" / "atoms.py").write_text("SECRET = 1\n")
    (tmp_path / "other" / "atoms.py").write_text("MINE = 1\n")
    monkeypatch.chdir("/")
    fds = []

    def held(path):
        fds.append(os.open(tmp_path / path, os.O_RDONLY))
        return fds[-1]

    yield tmp_path, sandbox._doors([str(tmp_path / "course" / "hidden")], (str(tmp_path / "pkg" / "atoms.py"),)), held
    for fd in fds:
        os.close(fd)


def refused(hook, event, *args) -> bool:
    try:
        hook(event, args)
    except PermissionError:
        return True
    return False


def test_the_hook_judges_a_relative_path_from_every_folder_a_dir_fd_may_name(doors, monkeypatch):
    tmp_path, hook, held = doors
    held("course")
    held("course/other")
    (tmp_path / "link").symlink_to(tmp_path / "course" / "hidden")
    held(".")
    escapes = ("hidden/answers.txt", "hidden", "../hidden/answers.txt", "link/answers.txt")
    assert all(refused(hook, "open", path, None, os.O_RDONLY) for path in escapes)
    assert not refused(hook, "open", "other", None, os.O_RDONLY)
    # The hook that judged them from the current folder alone (as before issue 32) let every one through.
    monkeypatch.setattr(sandbox, "_folders_held", lambda: [os.getcwd()])
    assert not any(refused(hook, "open", path, None, os.O_RDONLY) for path in escapes)


def test_a_closed_files_name_is_refused_where_its_folder_can_change_under_the_hook(doors):
    """Another thread can turn descriptor N, or the current folder, into the package's folder between the hook's look
    and the open: a name reached that way is refused even while it leads elsewhere."""
    tmp_path, hook, held = doors
    fd = held("other")
    os.chdir(tmp_path / "other")
    for path in ("atoms.py", "./atoms.py", f"/proc/self/fd/{fd}/atoms.py", f"/dev/fd/{fd}/atoms.py",
                 "/proc/self/cwd/atoms.py"):
        assert os.path.realpath(path) == str(tmp_path / "other" / "atoms.py")  # elsewhere, as the hook looks
        assert refused(hook, "open", path, None, os.O_RDONLY), path
    assert not refused(hook, "open", str(tmp_path / "other" / "atoms.py"), None, os.O_RDONLY)  # the learner's own
    assert refused(hook, "open", str(tmp_path / "pkg" / "atoms.py"), None, os.O_RDONLY)


def test_links_renames_listings_and_symlinks_are_judged_too(doors):
    tmp_path, hook, held = doors
    pkg, hidden = held("pkg"), held("course/hidden")
    assert refused(hook, "os.link", "atoms.py", "/tmp/stolen.py", pkg, -1)  # a hard link: another name for it
    assert refused(hook, "os.rename", str(tmp_path / "pkg" / "atoms.py"), "/tmp/stolen.py", -1, -1)
    assert refused(hook, "os.listdir", str(tmp_path / "course" / "hidden"))
    assert refused(hook, "os.scandir", hidden)
    assert not refused(hook, "os.listdir", pkg) and not refused(hook, "os.link", "x.py", "y.py", pkg, -1)
    # Symlinks (which another thread can swap under the hook) only where files are closed.
    assert refused(hook, "os.symlink", str(tmp_path / "pkg"), "folder", -1)
    assert not refused(sandbox._doors([str(tmp_path / "course" / "hidden")]), "os.symlink", "a", "b", -1)
