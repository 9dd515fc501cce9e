"""pytest plugin for the grader's nbval run (``-p cutecourse.grading.kernel_jail``): the notebook's kernel in a jail.

nbval and this plugin are the grader's, outside the jail; the kernel they drive runs the learner's code inside it
(its command is the grader's jailed ``kernel.json``). The jail has a network namespace of its own, so the kernel
talks over Unix sockets (Jupyter's ``ipc`` transport) in a folder both sides see. And nbval is made to notice a dead
kernel at once, instead of waiting out the cell timeout, and to stop a kernel that floods it with output.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from queue import Empty
from typing import Any

import nbval.kernel
from jupyter_client.manager import KernelManager
from jupyter_core.paths import jupyter_runtime_dir

from cutecourse.grading import isolation

#: The most output (in bytes of messages) a learner's notebook may send; past it the kernel is killed.
MAX_OUTPUT_BYTES = 16 * 2**20

_POLL_S = 0.25
#: The longest path a Unix socket may have on Linux: sun_path's 108 bytes, less the terminating NUL.
SOCKET_PATH_MAX = 107


class JailedKernelManager(KernelManager):
    """A kernel manager whose kernel listens on Unix sockets: TCP cannot cross into the jail's network namespace."""

    def __init__(self, **kwargs: Any):
        # The connection file and the sockets' path prefix in the runtime folder the jail shares (by default the file
        # goes to this side's /tmp, which the jail does not see, and a relative prefix resolves differently inside).
        # The grader makes that folder for this one kernel, so its names are short: a socket's whole path (the
        # folder, "k-ipc-" and the channel's number) must fit in SOCKET_PATH_MAX bytes, or the kernel never answers.
        stem = os.path.join(jupyter_runtime_dir(), "k")
        longest = len(os.fsencode(stem)) + len("-ipc-99")
        if longest > SOCKET_PATH_MAX:
            raise RuntimeError(f"set TMPDIR to a shorter folder, e.g. TMPDIR=/tmp: under {tempfile.gettempdir()} the "
                               f"notebook kernel's sockets would have paths of {longest} bytes, past the "
                               f"{SOCKET_PATH_MAX} a Unix socket may have")
        kwargs.setdefault("transport", "ipc")
        kwargs.setdefault("connection_file", stem + ".json")
        kwargs.setdefault("ip", stem + "-ipc")
        super().__init__(**kwargs)

    def write_connection_file(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """The connection file, written as jupyter_client writes it (readable by its owner only), then given to the
        kernel's uid where that is another user (the grader's uid 65534 fallback, `isolation.KERNEL_UID_ENV`)."""
        written = super().write_connection_file(**kwargs)
        uid = os.environ.get(isolation.KERNEL_UID_ENV)
        if uid:
            os.chown(self.connection_file, int(uid), int(uid))
        return written


class KernelGone(RuntimeError):
    """The learner's kernel died or was stopped; the cell fails, and the next ones fail at once."""


def _get_message(self: nbval.kernel.RunningKernel, stream: str, timeout: float | None = None) -> dict[str, Any]:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if not self.km.is_alive():
            raise KernelGone("the notebook's kernel is gone: the learner's code ended its process, or an earlier "
                             "cell ran out of time and the kernel was stopped")
        wait = _POLL_S if deadline is None else min(_POLL_S, max(0.0, deadline - time.monotonic()))
        try:
            msg = _original_get_message(self, stream, timeout=wait)
        except Empty:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            continue
        self.output_bytes = getattr(self, "output_bytes", 0) + len(json.dumps(msg.get("content"), default=str))
        if self.output_bytes > MAX_OUTPUT_BYTES:
            self.km.shutdown_kernel(now=True)
            raise KernelGone(f"the notebook sent more than {MAX_OUTPUT_BYTES >> 20} MiB of output; the kernel was "
                             f"stopped")
        return msg


_original_get_message = nbval.kernel.RunningKernel.get_message
nbval.kernel.KernelManager = JailedKernelManager
nbval.kernel.RunningKernel.get_message = _get_message
