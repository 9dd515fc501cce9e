"""`import cutecourse` and `import cutecourse.layout` need neither torch, nor the DSL, nor ipywidgets; reading a grading
report loads none of the grader's machinery."""

import subprocess
import sys
import textwrap

import pytest

HEAVY = ("torch", "cutlass", "ipywidgets", "matplotlib", "numpy", "IPython", "jupyter_client")

BLOCKER = textwrap.dedent(f"""
    import sys
    class Hide:
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in {HEAVY!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (hidden by the test)")
    sys.meta_path.insert(0, Hide())
""")


def run_hidden(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60)


def test_the_blocker_really_hides_the_heavy_modules():
    for name in ("torch", "cutlass", "ipywidgets"):
        out = run_hidden(f"import {name}")
        assert out.returncode != 0 and "hidden by the test" in out.stderr


@pytest.mark.parametrize("module", ["cutecourse", "cutecourse.layout", "cutecourse.env", "cutecourse.cli",
                                    "cutecourse.hw", "cutecourse.bench", "cutecourse.viz",
                                    "cutecourse.viz.pipeline", "cutecourse.viz.fragment_explorer"])
def test_light_module_imports_without_heavy_dependencies(module):
    out = run_hidden(f"""
        import {module}
        import sys
        loaded = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})
        assert not loaded, loaded
    """)
    assert out.returncode == 0, out.stderr


def test_doctor_still_reports_when_torch_and_dsl_are_missing():
    out = run_hidden("""
        from cutecourse import env
        m = env.probe()
        print(env.report(m))
    """)
    assert out.returncode == 0, out.stderr
    assert "can do" in out.stdout


def test_viz_pictures_stay_light_and_its_explorers_and_charts_load_on_first_use():
    out = run_hidden("""
        import sys
        from cutecourse import viz
        viz.layout("(2,2):(1,2)"); viz.bank_map("(8,64):(64,1)", 16, viz.LDMATRIX_8x8); viz.mma_atom()
        assert "cutecourse.viz.widgets" not in sys.modules and "cutecourse.viz.plots" not in sys.modules
        try:
            viz.no_such_thing
        except AttributeError:
            pass
        else:
            raise AssertionError("viz.no_such_thing did not raise")
        try:
            viz.widgets  # loads on first use: here it needs ipywidgets, which the test hides
        except ModuleNotFoundError as e:
            assert "ipywidgets" in str(e), e
        else:
            raise AssertionError("viz.widgets loaded without ipywidgets")
    """)
    assert out.returncode == 0, out.stderr


def test_the_layout_explorers_do_not_load_matplotlib():
    code = ("import sys; from cutecourse import viz; viz.widgets.layout_explorer('(4,8)', '(8,1)'); "
            "assert 'matplotlib' not in sys.modules; viz.plots; assert 'matplotlib' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("module", ["cutecourse.grading.results", "cutecourse.grading.reports"])
def test_reading_reports_loads_none_of_the_grading_machinery(module):
    """A report's types and its writers import without nbval, subprocesses, the sandbox or the grader."""
    machinery = ("subprocess", "nbval", "pytest", "cutecourse.grading.grader", "cutecourse.grading.sandbox",
                 "cutecourse.grading.isolation", "cutecourse.grading.checks")
    code = f"import sys, {module}; print(chr(10).join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert loaded.isdisjoint(machinery), sorted(loaded & set(machinery))
