# Two commands: `make lab` (the course in JupyterLab) and `make test` (the CPU suite). Both set up .venv first.
# Set-up is idempotent: it reruns only when pyproject.toml changes, so a second `make test` costs nothing extra.

PYTHON_BOOT ?= python3
VENV        := .venv
# Another interpreter (e.g. `make test-gpu PYTHON=python3` on a GPU host with the DSL on PYTHONPATH, or the Modal
# image, which sets PYTHON) skips set-up.
PYTHON      ?= $(VENV)/bin/python
# The set-up itself is tools/course.py (Windows runs it directly: py tools\course.py lab). It picks torch for this
# machine: the CUDA build with an NVIDIA GPU on Linux, the CPU build otherwise (PyPI's own build on macOS).
COURSE      := $(PYTHON_BOOT) tools/course.py
SETUP       := $(if $(filter $(VENV)/bin/python,$(PYTHON)),setup)
LAB_ARGS    ?=
PYTEST_ARGS ?=

.PHONY: setup lab test test-gpu bench-layout clean

setup:
	@$(COURSE) setup

lab:
	@$(COURSE) lab $(LAB_ARGS)

test:
	@$(COURSE) test $(if $(SETUP),,--python $(PYTHON)) $(PYTEST_ARGS)

test-gpu: $(SETUP)
	$(PYTHON) -m pytest -m gpu $(PYTEST_ARGS)

# The peers of the eager layout algebra, for the side-by-side benchmark only (pycute lives in the nvidia-cutlass wheel).
bench-layout: setup
	$(VENV)/bin/pip install -q tensor-layouts==0.3.2 && $(VENV)/bin/pip install -q --no-deps nvidia-cutlass==4.2.0.0
	$(VENV)/bin/python benchmarks/layout_algebra.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
