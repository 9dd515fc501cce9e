"""cutecourse: support package for the CuTe DSL course (layouts, pictures, kernels, grading).

``%load_ext cutecourse`` in a notebook adds the ``%%gpu [cc]`` and ``%%dsl`` cell magics (see
:func:`cutecourse.env.gpu_cell` and :func:`cutecourse.env.dsl_cell`).
Importing the package loads nothing heavy: no torch, no DSL, no ipywidgets.
"""


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's shell
    from cutecourse.env import dsl_cell, gpu_cell

    ipython.register_magic_function(gpu_cell, "cell", "gpu")
    ipython.register_magic_function(dsl_cell, "cell", "dsl")
