# Two commands: `make lab` (the course in JupyterLab) and `make test` (the CPU suite). Both set up .venv first.
# Set-up is idempotent: it reruns only when pyproject.toml changes, so a second `make test` costs nothing extra.

PYTHON_BOOT ?= python3
VENV        := .venv
# Another interpreter (e.g. `make test-gpu PYTHON=python3` on a GPU host with the DSL on PYTHONPATH, or the Modal
# image, which sets PYTHON) skips set-up.
PYTHON      ?= $(VENV)/bin/python
# The set-up itself is tools/course.py (Windows runs it directly: py tools\course.py lab). It picks torch for this
# machine, from where its wheel exists: the CUDA build with an NVIDIA GPU on Linux x86_64, the CPU build there
# otherwise (PyTorch's CPU index), PyPI's own build on Windows, macOS and Linux aarch64. `make lab` installs the lab
# extra, `make test` the dev extra too.
COURSE      := $(PYTHON_BOOT) tools/course.py
SETUP       := $(if $(filter $(VENV)/bin/python,$(PYTHON)),setup)
LAB_ARGS    ?=
PYTEST_ARGS ?=

.PHONY: setup setup-test lab test test-gpu bench-layout clean

setup:
	@$(COURSE) setup

# The tests' extras (pytest among them) beside the lab's.
setup-test:
	@$(COURSE) setup --extras dev,lab

lab:
	@$(COURSE) lab $(LAB_ARGS)

test:
	@$(COURSE) test $(if $(SETUP),,--python $(PYTHON)) $(PYTEST_ARGS)

# The GPU suite on GPU_WORKERS pytest-xdist workers sharing the GPU, each with its own CUDA context (about 0.5 GiB of
# GPU memory each; nothing in it is timed): on one H200, 333 tests take about 10 minutes on 12 workers, several times
# that on one. The default is the machine's cores, at most 8; GPU_WORKERS=1 runs them in one process.
GPU_WORKERS ?= $(shell $(PYTHON_BOOT) -c "import os; print(min(8, os.cpu_count() or 1))")

test-gpu: $(if $(SETUP),setup-test)
	$(PYTHON) -m pytest -m gpu -n $(GPU_WORKERS) --dist load $(PYTEST_ARGS)

# The peers of the eager layout algebra, for the side-by-side benchmark only (pycute lives in the nvidia-cutlass wheel).
bench-layout: setup
	$(VENV)/bin/pip install -q tensor-layouts==0.3.2 && $(VENV)/bin/pip install -q --no-deps nvidia-cutlass==4.2.0.0
	$(VENV)/bin/python benchmarks/layout_algebra.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
