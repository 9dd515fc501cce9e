# Two commands: `make lab` (the course in JupyterLab) and `make test` (the CPU suite). Both set up .venv first.
# Set-up is idempotent: it reruns only when pyproject.toml changes, so a second `make test` costs nothing extra.

PYTHON_BOOT ?= python3
VENV        := .venv
# Another interpreter (e.g. `make test-gpu PYTHON=python3` on a GPU host with the DSL on PYTHONPATH) skips set-up.
PYTHON      ?= $(VENV)/bin/python
STAMP       := $(VENV)/.installed
SETUP       := $(if $(filter $(VENV)/bin/python,$(PYTHON)),$(STAMP))
LAB_ARGS    ?=
PYTEST_ARGS ?=

# Torch: with an NVIDIA GPU, the default CUDA build from PyPI. Without one, the CPU build (a few hundred MB instead
# of several GB): first from any local wheel pip already knows about, else from PyTorch's CPU index.
TORCH_VERSION   ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
HAS_GPU         := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
ALLOW_ROOT      := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: setup lab test test-gpu bench-layout clean

setup: $(SETUP)

$(STAMP): pyproject.toml
	@$(PYTHON_BOOT) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { \
	  echo "cutecourse needs Python 3.10+; '$(PYTHON_BOOT)' is older. Run: make PYTHON_BOOT=python3.12 $(MAKECMDGOALS)"; \
	  echo "or use conda: conda env create -f environment.yml && conda activate cutecourse"; exit 1; }
	@test -x $(VENV)/bin/python || $(PYTHON_BOOT) -m venv $(VENV)
	@$(VENV)/bin/python -c 'import torch' 2>/dev/null || \
	  if [ -n "$(HAS_GPU)" ]; then $(VENV)/bin/pip install "torch==$(TORCH_VERSION)"; \
	  else $(VENV)/bin/pip install "torch==$(TORCH_VERSION)+cpu" 2>/dev/null || \
	       $(VENV)/bin/pip install --extra-index-url $(TORCH_CPU_INDEX) "torch==$(TORCH_VERSION)+cpu"; fi
	$(VENV)/bin/pip install -q -e ".[dev]"
	@touch $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(ALLOW_ROOT) $(LAB_ARGS)

test: $(SETUP)
	$(PYTHON) -m cutecourse.cli build --check
	$(PYTHON) -m pytest --nbval $(PYTEST_ARGS)

test-gpu: $(SETUP)
	$(PYTHON) -m pytest -m gpu $(PYTEST_ARGS)

# The peers of the eager layout algebra, for the side-by-side benchmark only (pycute lives in the nvidia-cutlass wheel).
bench-layout: $(STAMP)
	$(VENV)/bin/pip install -q tensor-layouts==0.3.2 && $(VENV)/bin/pip install -q --no-deps nvidia-cutlass==4.2.0.0
	$(VENV)/bin/python benchmarks/layout_algebra.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
