"""cutecourse: support package for the CuTe DSL course (layouts, pictures, kernels, grading).

``cutecourse.gemm(a, b)`` runs the GEMM step that fits the GPU and the problem (``cutecourse.gemm.explain(a, b)``
says which and why: `cutecourse.dispatch`); ``cutecourse.tune((m, n, k), dtype)`` searches a step's Configs on this
GPU and stores the pick, which ``cutecourse.gemm`` then uses (`cutecourse.tuning`).
``%load_ext cutecourse`` in a notebook adds the ``%%gpu [cc]`` and ``%%dsl`` cell magics (see
:func:`cutecourse.env.gpu_cell` and :func:`cutecourse.env.dsl_cell`).
Importing the package loads nothing heavy: no torch, no DSL, no ipywidgets (``gemm`` and ``tune`` load them when
first named).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "gemm":
        from cutecourse.dispatch import gemm

        return gemm
    if name == "tune":
        from cutecourse.tuning import tune

        return tune
    raise AttributeError(f"module 'cutecourse' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's shell
    from cutecourse.env import dsl_cell, gpu_cell

    ipython.register_magic_function(gpu_cell, "cell", "gpu")
    ipython.register_magic_function(dsl_cell, "cell", "dsl")
