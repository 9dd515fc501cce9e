"""`Plans`: what a call's checks decided (its plan), remembered by the call's key, so that the next call with the same
key skips the checks. Each step's launcher keeps one (the compiled kernel and the operands' traits) and so does
`cutecourse.gemm` (the step it chose).

Bounded: at `limit` plans it forgets them all, so that a program calling with ever new shapes does not grow it
without end. Pure Python: `cutecourse.dispatch` imports it without torch.
"""

from __future__ import annotations

from typing import Any


class Plans:
    """A bounded cache of plans: ``plans.get(key)`` (None if not remembered), ``plans.put(key, plan)``,
    ``plans.clear()`` (forget them all, e.g. when what decided them changed)."""

    def __init__(self, limit: int = 4096) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit={limit!r}: give the number of plans to keep, a positive int (e.g. 4096)")
        self.limit = limit
        self.entries: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        try:
            return self.entries.get(key)
        except TypeError:  # a key that does not hash: nothing was remembered for it, and the checks say what is wrong
            return None

    def put(self, key: Any, plan: Any) -> None:
        if len(self.entries) >= self.limit:
            self.entries.clear()
        try:
            self.entries[key] = plan
        except TypeError:  # a key that does not hash (cutecourse.gemm's, before step 2's unfused epilogue is
            pass  # checked) is not remembered: the next call is checked again

    def clear(self) -> None:
        self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)
