"""environment.yml is the conda twin of pyproject.toml: same packages, same pins."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONDA_NAMES = {"pytorch": "torch"}  # conda's name -> PyPI's name

tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")


def normalise(requirement: str) -> tuple[str, str]:
    requirement = requirement.split(";")[0].replace(" ", "")
    name, spec = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?(.*)", requirement).groups()
    name = name.lower().replace("_", "-")
    return CONDA_NAMES.get(name, name), spec.replace("=", "==", 1) if re.fullmatch(r"=[^=].*", spec) else spec


def applies_to_conda(requirement: str) -> bool:
    """environment.yml is for Python 3.12 on any OS: a requirement only for older Pythons has no twin there."""
    from packaging.requirements import Requirement

    marker = Requirement(requirement).marker
    return marker is None or any(marker.evaluate({"python_version": "3.12", "sys_platform": p})
                                 for p in ("linux", "darwin", "win32"))


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    reqs = project["dependencies"] + extras["lab"] + extras["dev"]
    return dict(normalise(r) for r in reqs if applies_to_conda(r))


def conda_requirements() -> tuple[str, dict[str, str]]:
    python, reqs = None, {}
    text = (ROOT / "environment.yml").read_text()
    for line in text[text.index("\ndependencies:"):].splitlines():
        item = re.match(r"^\s*-\s+(.+?)\s*(#.*)?$", line)
        if not item or item.group(1) == "pip:":
            continue
        value = item.group(1).strip("\"'")
        if value.startswith("python"):
            python = value
        elif value == "pip" or value.startswith("-e") or value == ".":
            continue
        else:
            name, spec = normalise(value)
            reqs[name] = spec
    return python, reqs


def test_environment_yml_names_the_same_packages_and_pins_as_pyproject():
    python, conda = conda_requirements()
    assert python == "python=3.12"
    assert conda == pyproject_requirements()


def test_the_comparison_notices_a_changed_pin(tmp_path, monkeypatch):
    text = (ROOT / "environment.yml").read_text().replace("nvidia-cutlass-dsl==4.8.1", "nvidia-cutlass-dsl==4.7.0")
    fake = tmp_path / "environment.yml"
    fake.write_text(text)
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert conda_requirements()[1] != pyproject_requirements()


JUPYTER = {"ipywidgets", "widgetsnbextension", "jupyterlab", "notebook", "ipykernel", "ipython", "jupyter-client",
           "jupyter-server", "nbclient", "nbval"}


def jupyter_in_hard_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {normalise(r)[0] for r in project["dependencies"]} & JUPYTER


def test_the_hard_dependencies_leave_colabs_jupyter_alone():
    """On Colab, `pip install` of the course must not move ipywidgets (7.7.1 there) or the Jupyter stack: those live
    in the `lab` extra that `make lab` installs."""
    assert jupyter_in_hard_dependencies() == set()
    lab = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["lab"]
    assert {"jupyterlab", "ipywidgets"} <= {normalise(r)[0] for r in lab}


def test_the_colab_rule_notices_ipywidgets_in_the_hard_dependencies(tmp_path, monkeypatch):
    text = (ROOT / "pyproject.toml").read_text().replace('"tqdm>=4.66",', '"tqdm>=4.66", "ipywidgets>=8.1",', 1)
    (tmp_path / "pyproject.toml").write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert jupyter_in_hard_dependencies() == {"ipywidgets"}


def test_the_grade_extra_is_within_dev():
    """The grade extra is what a grading machine installs; a developer's dev extra has all of it."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["grade"] and set(extras["grade"]) <= set(extras["dev"])
