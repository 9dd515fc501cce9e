"""Python imports this at start-up when its folder is on PYTHONPATH: the interpreter then behaves as one on a machine
without the CuTe DSL (macOS, Windows), so that tests/dsl_free can run lessons 1-2 as such a learner does.

The DSL's own .pth file puts its packages on sys.path; they are taken off again, and a finder in front of all others
answers every import of them as Python does for a package that is not installed.
"""

import sys

_HIDDEN = ("cutlass", "nvidia_cutlass_dsl", "iket")


class _WithoutTheDSL:
    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 - the meta path finder protocol
        if name.partition(".")[0] in _HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (tests/dsl_free hides the CuTe DSL)", name=name)
        return None


sys.path[:] = [p for p in sys.path if "nvidia_cutlass_dsl" not in p]
sys.meta_path.insert(0, _WithoutTheDSL())
