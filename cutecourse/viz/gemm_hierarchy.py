"""The GEMM mapped onto the GPU hierarchy (seed 000, part 1): C = A×B → CTA tile → warp tile → MMA atom → epilogue.

>>> p = gemm_hierarchy()
>>> p.svg.count("<rect") > 5 and "ThreadblockShape" in p.svg
True
"""

from __future__ import annotations

from .svg import Canvas, Picture

_FILLS = ("#DDDDDD", "#77AADD", "#99DDFF", "#EEDD88", "#EE8866")


def gemm_hierarchy(cta: tuple[int, int, int] = (128, 128, 32), warp: tuple[int, int, int] = (64, 64, 32),
                   instruction: tuple[int, int, int] = (16, 8, 16)) -> Picture:
    """Five boxes, left to right: what each level of a CUTLASS GEMM computes, which hardware runs it, where its data
    lives. The shapes are CUTLASS's ThreadblockShape, WarpShape and InstructionShape (M, N, K).

    >>> "64x64x32" in gemm_hierarchy(warp=(64, 64, 32)).svg
    True
    """
    for label, shape in (("cta", cta), ("warp", warp), ("instruction", instruction)):
        if len(shape) != 3 or any(not isinstance(v, int) or v <= 0 for v in shape):
            raise ValueError(f"gemm_hierarchy: {label}={shape!r} must be three positive ints (M, N, K), "
                             f"e.g. {label}=(128, 128, 32)")
    fmt = "x".join
    levels = (
        ("C = A × B", ["C[M,N] = A[M,K] · B[K,N]", "2·M·N·K FLOPs"], "whole GPU (grid)", "global memory (HBM)"),
        ("CTA tile", [f"ThreadblockShape {fmt(map(str, cta))}", "one block per C tile", "K loop: gmem → smem"],
         "one SM", "shared memory"),
        ("Warp tile", [f"WarpShape {fmt(map(str, warp))}", "warps split the CTA tile", "smem → registers"],
         "warp scheduler", "registers"),
        ("MMA atom", [f"InstructionShape {fmt(map(str, instruction))}", "mma.sync / wgmma", "Tensor Core op"],
         "Tensor Core", "regs / smem / TMEM"),
        ("Epilogue", ["D = α·acc + β·C", "bias / activation", "convert, store"], "CUDA cores", "registers → gmem"),
    )
    box_w = 184
    box_h = 112
    gap = 26
    top = 34
    width = len(levels) * box_w + (len(levels) - 1) * gap + 20
    c = Canvas(width, top + box_h + 64)
    c.text(10, 14, "GEMM → GPU hierarchy (CUTLASS tile levels)", size=14, anchor="start", weight="bold")
    for i, (title, lines, hardware, memory) in enumerate(levels):
        x = 10 + i * (box_w + gap)
        c.rect(x, top, box_w, box_h, fill=_FILLS[i], stroke_width=1.2)
        c.text(x + box_w / 2, top + 16, title, size=13, weight="bold")
        for j, line in enumerate(lines):
            c.text(x + box_w / 2, top + 42 + 20 * j, line, size=10.5)
        c.text(x + box_w / 2, top + box_h + 16, f"runs on: {hardware}", size=10.5)
        c.text(x + box_w / 2, top + box_h + 34, f"data in: {memory}", size=10.5)
        if i:
            ax = x - gap
            c.line(ax + 2, top + box_h / 2, x - 4, top + box_h / 2, width=2)
            c.raw(f'<polygon points="{x - 4:g},{top + box_h / 2 - 5:g} {x + 1:g},{top + box_h / 2:g} '
                  f'{x - 4:g},{top + box_h / 2 + 5:g}" fill="#000"/>')
    return Picture(c.finish(), "GEMM hierarchy")
