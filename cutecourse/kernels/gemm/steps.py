"""The GEMM ladder's diffs: each step against the one before, as text and as a side-by-side HTML view.

A step adds one idea, so its diff against the previous step is the lesson. ``diff(n)`` compares the source of step n
with step n - 1 line by line, ignoring changes of indentation (a block moved under a new loop is not a change), and
says how much of step n - 1's code survives: its code lines, docstrings and comments removed, that step n keeps.
Reading the sources as text needs neither the DSL nor torch.

>>> d = diff(4)
>>> d.before, d.after
('gemm03_mma', 'gemm04_multistage')
>>> d.kept >= KEPT_BOUND
True
>>> print(d.text.splitlines()[0])
--- gemm03_mma.py
"""

from __future__ import annotations

import ast
import difflib
import html
import io
import itertools
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path

from cutecourse.kernels.gemm import GEMM_STEPS

#: The least share of step n - 1's code lines that step n keeps (NVIDIA's Blackwell tutorial keeps 63-94%).
KEPT_BOUND = 0.5
#: The two steps that switch a mechanism keep less, and have their own bound: step 6 trades cp.async for TMA and an
#: mbarrier ring, step 7 ldmatrix and mma.sync for wgmma.
SWITCH_BOUNDS = {6: 0.35, 7: 0.35}


def bound(n: int) -> float:
    """The least kept share allowed between step n - 1 and step n."""
    return SWITCH_BOUNDS.get(n, KEPT_BOUND)


def _check(n: int) -> None:
    if not isinstance(n, int) or not 2 <= n <= len(GEMM_STEPS):
        raise ValueError(f"n={n!r}: diff(n) compares step n with step n - 1, so n is a step from 2 to "
                         f"{len(GEMM_STEPS)} (the steps: {', '.join(GEMM_STEPS)})")


def source(step: int) -> str:
    """The source text of GEMM step `step` (1 to 11)."""
    if not isinstance(step, int) or not 1 <= step <= len(GEMM_STEPS):
        raise ValueError(f"step={step!r}: the GEMM steps are 1 to {len(GEMM_STEPS)}")
    return (Path(__file__).parent / f"{GEMM_STEPS[step - 1]}.py").read_text()


def code_lines(text: str) -> list[str]:
    """The code lines of a module's source: docstrings, comments and blank lines removed, each line stripped of its
    indentation."""
    kept = tokenize.untokenize(t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                               if t.type != tokenize.COMMENT)
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(kept)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines = (line.strip() for number, line in enumerate(kept.splitlines(), 1) if number not in docstrings)
    return [line for line in lines if line]


def _matcher(before: list[str], after: list[str]) -> difflib.SequenceMatcher:
    """Line matching that ignores indentation (as ``diff -w`` does)."""
    return difflib.SequenceMatcher(None, [line.strip() for line in before], [line.strip() for line in after],
                                   autojunk=False)


def kept_lines(n: int) -> tuple[int, int]:
    """(code lines of step n - 1 that step n keeps, code lines of step n - 1)."""
    _check(n)
    before, after = code_lines(source(n - 1)), code_lines(source(n))
    return sum(block.size for block in _matcher(before, after).get_matching_blocks()), len(before)


@dataclass(frozen=True)
class StepDiff:
    """Step `after` (number `n`) against step `before`: a unified diff (`text`), a side-by-side HTML table (`html`,
    which a notebook displays), and the share of `before`'s code lines that `after` keeps."""

    n: int
    before: str
    after: str
    kept_code_lines: int
    code_lines: int
    text: str
    html: str

    @property
    def kept(self) -> float:
        return self.kept_code_lines / self.code_lines

    def summary(self) -> str:
        return (f"step {self.n - 1} -> {self.n} ({self.before} -> {self.after}): keeps {self.kept_code_lines} of "
                f"{self.code_lines} code lines, {self.kept:.0%} (bound {bound(self.n):.0%})")

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.text


_STYLE = ("<style>.cc-diff{border-collapse:collapse;font:12px/1.35 monospace}.cc-diff td{padding:0 6px;"
          "white-space:pre;vertical-align:top}.cc-diff .no{color:#999;text-align:right}.cc-diff .del{background:#fdd}"
          ".cc-diff .add{background:#dfd}.cc-diff .gap td{color:#999;background:#f4f4f4}</style>")


def _unified(before: list[str], after: list[str], names: tuple[str, str], context: int) -> str:
    out = [f"--- {names[0]}", f"+++ {names[1]}"]
    for group in _matcher(before, after).get_grouped_opcodes(context):
        i1 = group[0][1]
        i2 = group[-1][2]
        j1 = group[0][3]
        j2 = group[-1][4]
        out.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":  # shown as it reads now (its indentation may have changed)
                out += [" " + line for line in after[b1:b2]]
            else:
                out += ["-" + line for line in before[a1:a2]] + ["+" + line for line in after[b1:b2]]
    return "\n".join(out) + "\n"


def _side_by_side(before: list[str], after: list[str], names: tuple[str, str], context: int, summary: str) -> str:
    def cell(number: int | None, line: str | None, kind: str) -> str:
        if line is None:
            return '<td class="no"></td><td></td>'
        return f'<td class="no">{number}</td><td class="{kind}">{html.escape(line)}</td>'

    rows = [f"<tr><th></th><th>{html.escape(names[0])}</th><th></th><th>{html.escape(names[1])}</th></tr>"]
    for index, group in enumerate(_matcher(before, after).get_grouped_opcodes(context)):
        if index or group[0][1] > 0:
            rows.append('<tr class="gap"><td></td><td>⋯</td><td></td><td>⋯</td></tr>')
        for tag, a1, a2, b1, b2 in group:
            pairs = itertools.zip_longest(range(a1, a2), range(b1, b2))
            for i, j in pairs:
                left = cell(None if i is None else i + 1, None if i is None else before[i],
                            "" if tag == "equal" else "del")
                right = cell(None if j is None else j + 1, None if j is None else after[j],
                             "" if tag == "equal" else "add")
                rows.append(f"<tr>{left}{right}</tr>")
    return f'{_STYLE}<p>{html.escape(summary)}</p><table class="cc-diff">{"".join(rows)}</table>'


def diff(n: int, context: int = 3) -> StepDiff:
    """GEMM step n (2 to 11) against step n - 1, with `context` unchanged lines around each change."""
    _check(n)
    if not isinstance(context, int) or context < 0:
        raise ValueError(f"context={context!r}: give the number of unchanged lines to show around a change, e.g. 3")
    names = (f"{GEMM_STEPS[n - 2]}.py", f"{GEMM_STEPS[n - 1]}.py")
    before, after = source(n - 1).splitlines(), source(n).splitlines()
    kept, total = kept_lines(n)
    text = StepDiff(n, GEMM_STEPS[n - 2], GEMM_STEPS[n - 1], kept, total, _unified(before, after, names, context), "")
    return replace(text, html=_side_by_side(before, after, names, context, text.summary()))


def ladder() -> list[tuple[int, str, str]]:
    """(step number, module, the idea it adds: the first sentence of its docstring) for every step."""
    rows = []
    for number, name in enumerate(GEMM_STEPS, 1):
        doc = ast.get_docstring(ast.parse(source(number))) or ""
        idea = " ".join(doc.split("\n\n")[0].split())
        rows.append((number, name, idea.split(". ")[0].removeprefix(f"GEMM, step {number}: ").rstrip(".")))
    return rows
