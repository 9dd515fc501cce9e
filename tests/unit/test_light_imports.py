"""`import cutecourse` and `import cutecourse.layout` need neither torch, nor the DSL, nor ipywidgets."""

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


@pytest.mark.parametrize("module", ["cutecourse", "cutecourse.layout", "cutecourse.env", "cutecourse.cli"])
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
