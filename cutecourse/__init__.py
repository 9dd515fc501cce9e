"""cutecourse: support package for the CuTe DSL course (layouts, pictures, kernels, grading).

``%load_ext cutecourse`` in a notebook adds the ``%%gpu [cc]`` cell magic (see :func:`cutecourse.env.gpu_cell`).
Importing the package loads nothing heavy: no torch, no DSL, no ipywidgets.
"""


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's shell
    from cutecourse.env import gpu_cell

    ipython.register_magic_function(gpu_cell, "cell", "gpu")
