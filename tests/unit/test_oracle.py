"""The CuTe DSL oracle (cutecourse.layout.oracle): batches, errors, crashes, bisection."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cutecourse.layout import oracle

needs_dsl = pytest.mark.skipif(not oracle.dsl_available(), reason=oracle.INSTALL_HINT)

# recast_layout(16, 0, L) divides by the old type's zero bit width inside the DSL's
# layout folder: the whole Python process dies with SIGFPE (DSL 4.8.1).
SIGFPE_CASE = ("recast_layout", 16, 0, "8:1")

KNOWN = [
    (("layout", "(4,8):(8,1)"), "(4,8):(8,1)"),
    (("layout", "(3):(5)"), "(3):(5)"),
    (("composition", "(4,8):(8,1)", "4:2"), "(2,2):(16,1)"),
    (("logical_divide", "1024:1", "128:1"), "(128,8):(1,128)"),
    (("coalesce", "(2,(1,6)):(1,(6,2))", {"target_profile": (1, 1)}), "(2,6):(1,2)"),
    (("logical_divide", "(8,8):(1,8)", ("2:1", "4:2")), "((2,4),(4,2)):((1,2),(16,8))"),
    (("complement", "(2,2):(1,8)", 32), "(4,2):(2,16)"),
    (("make_layout_tv", "(8,4):(4,1)", "4:1"), "((32, 4), ((4,8),4):((32,4),1))"),
    (("make_ordered_layout", (4, 8), {"order": (1, 0)}), "(4,8):(8,1)"),
    (("layout", "S<3,3,3> o 0 o (8,64):(64,1)"), "S<3,3,3> o 0 o (8,64):(64,1)"),
    (("crd2idx", (3, 17), "S<3,3,3> o 0 o (8,64):(64,1)"), "201"),
    (("call", "S<3,3,3> o 0 o (8,64):(64,1)", (3, 17)), "201"),
    (("make_swizzle", 3, 3, 3), "S<3,3,3>"),
    (("slice_", "(4,8):(8,1)", (None, 2)), "(4):(8)"),
    (("getitem", "(4,(8,2)):(8,(1,32))", 1), "(8,2):(1,32)"),
    (("idx2crd", 17, (4, 8)), "(1, 4)"),
    (("size", "(4,8):(8,1)"), "32"),
    (("cosize", "(4,(2,3)):(8,(1,2))"), "30"),
    (("right_inverse", "(4,8):(8,1)"), "(8,4):(4,1)"),
    (("recast_layout", 32, 16, "(8,64):(64,1)"), "(8,32):(32,1)"),
]


def test_parser_reads_every_printed_form():
    assert oracle.parse("(4,8):(8,1)") == ("layout", (4, 8), (8, 1))
    assert oracle.parse("(3):(5)") == ("layout", (3,), (5,))
    assert oracle.parse("12:-1") == ("layout", 12, -1)
    assert oracle.parse("((2,(3,4)),1):((4,(8,24)),0)") == ("layout", ((2, (3, 4)), 1), ((4, (8, 24)), 0))
    assert oracle.parse("S<3,3,3>") == ("swizzle", 3, 3, 3)
    assert oracle.parse("S<3,3,3> o 0 o (8,64):(64,1)") == (
        "composed", ("swizzle", 3, 3, 3), 0, ("layout", (8, 64), (64, 1)))
    assert oracle.parse("4:2 o 1 o 2:1") == ("composed", ("layout", 4, 2), 1, ("layout", 2, 1))
    for bad in ["(4,8)", "(4,8):(8,1", "4:x", "S<3,3> o 0 o 4:1", "4:1 junk"]:
        with pytest.raises(ValueError):
            oracle.parse(bad)


def test_importing_the_oracle_does_not_import_the_dsl():
    code = "import sys, cutecourse.layout.oracle; assert 'cutlass' not in sys.modules, 'DSL imported'"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_missing_dsl_is_a_runtime_error_with_the_fix(monkeypatch):
    monkeypatch.setattr(oracle, "dsl_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"pip install nvidia-cutlass-dsl==4\.8\.1"):
        oracle.evaluate([("layout", "4:1")])


def test_bad_case_shapes_are_type_errors():
    with pytest.raises(TypeError):
        oracle.evaluate(["layout"])  # a case is (op_name, *args), not a bare string
    assert oracle.evaluate([]) == []


@needs_dsl
def test_known_batch():
    got = oracle.evaluate([c for c, _ in KNOWN])
    assert got == [e for _, e in KNOWN]


@needs_dsl
def test_errors_are_reported_per_case_and_do_not_stop_the_batch():
    got = oracle.evaluate([
        ("composition", "(4,8):(8,1)", "3:5"),  # not composable: the DSL's MLIR folder refuses
        ("layout", "(0,4):(1,0)"),  # the DSL's make_layout: sizes must be positive
        ("no_such_op", "4:1"),
        ("logical_divide", "(4,2,3):(2,1,8)", "4:2"),
    ])
    assert got[0].startswith("error: MLIRError: ") and "unable to compute the following composition" in got[0]
    assert got[1].startswith("error: ValueError: ") and "strictly positive" in got[1]
    assert got[2].startswith("error: ValueError: unknown op")
    assert got[3] == "((2,2),(2,3)):((4,1),(2,8))"


@needs_dsl
def test_a_crashing_case_in_the_middle_is_isolated():
    cases = [
        ("layout", "(4,8):(8,1)"),
        ("composition", "(4,8):(8,1)", "4:2"),
        SIGFPE_CASE,
        ("logical_divide", "1024:1", "128:1"),
        ("composition", "(4,8):(8,1)", "3:5"),
        ("recast_layout", 32, 0, "(4,8):(8,1)"),  # a second SIGFPE
        ("size", "(4,8):(8,1)"),
    ]
    got = oracle.evaluate(cases)
    assert got[0] == "(4,8):(8,1)"
    assert got[1] == "(2,2):(16,1)"
    assert got[2].startswith("crash: ") and "SIGFPE" in got[2]
    assert got[3] == "(128,8):(1,128)"
    assert got[4].startswith("error: ")
    assert got[5].startswith("crash: ") and "SIGFPE" in got[5]
    assert got[6] == "32"


def test_bisection_isolates_crashes_when_the_stream_cannot_tell(monkeypatch):
    """A worker that dies before printing anything (e.g. during compilation) is bisected."""
    calls = []

    def fake_run_batch(cases, timeout):
        calls.append(len(cases))
        if any(c[0] == "boom" for c in cases):
            return [], False, "process killed by SIGFPE", ""
        return [f"ok {c[1]}" for c in cases], True, "", ""

    monkeypatch.setattr(oracle, "_run_batch", fake_run_batch)
    cases = [["layout", str(i)] for i in range(32)]
    cases[5] = ["boom", "5"]
    cases[21] = ["boom", "21"]
    got = oracle._evaluate_batch(cases, 10.0)
    assert [g.startswith("crash: ") for g in got] == [i in (5, 21) for i in range(32)]
    assert got[0] == "ok 0" and got[31] == "ok 31"
    assert "SIGFPE" in got[5]
    assert len(calls) <= 20  # bisection (19 runs here), not one process per case


def test_streamed_results_are_kept_and_the_suspect_confirmed(monkeypatch):
    """A worker that dies at case k keeps cases < k, tries k alone, then resumes after it."""
    calls = []

    def fake_run_batch(cases, timeout):
        calls.append([c[1] for c in cases])
        out = []
        for c in cases:
            if c[0] == "boom":
                return out, False, "process killed by SIGFPE", ""
            out.append(f"ok {c[1]}")
        return out, True, "", ""

    monkeypatch.setattr(oracle, "_run_batch", fake_run_batch)
    cases = [["layout", str(i)] for i in range(10)]
    cases[3] = ["boom", "3"]
    got = oracle._evaluate_batch(cases, 10.0)
    assert got[:3] == ["ok 0", "ok 1", "ok 2"] and got[3].startswith("crash: ") and got[4:] == [
        f"ok {i}" for i in range(4, 10)]
    assert calls == [[str(i) for i in range(10)], ["3"], [str(i) for i in range(4, 10)]]


@needs_dsl
def test_eager_objects_are_accepted_as_arguments():
    eager = pytest.importorskip("cutecourse.layout")
    if not hasattr(eager, "make_layout"):
        pytest.skip("eager algebra not there yet")
    lay = eager.make_layout((4, 8), stride=(8, 1))
    assert oracle.evaluate([("composition", lay, "4:2")]) == ["(2,2):(16,1)"]
