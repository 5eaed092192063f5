"""The GEMM kernel design checklist: seven decisions, taken in order.

A CuTe GEMM is designed by answering the same questions in the same order: what is the
problem (shape, types, GPU), which instruction multiplies (the MMA atom), how atoms cover the
CTA tile (the TiledMMA), how the operand tiles sit in shared memory (layout and swizzle), which
instructions move them (copy atoms), how the copies overlap the math (the pipeline), and how
results reach C (the epilogue). Each answer narrows the next: the atom fixes the fragment
layouts the copies must deliver, the copies fix which swizzle is conflict-free, the swizzle and
the tile fix how many stages fit in shared memory.

``steps()`` is that order as plain data; ``show(current)`` draws it with the student's step
highlighted, ``text(current)`` writes it as markdown and ``where_you_stand(current)`` as one
line. The course notebooks carry one of them so a student always knows which decision the
notebook in front of them is about.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence, Union

from gemmlab.errors import GemmlabError

__all__ = ["Choice", "ChecklistError", "Step", "show", "step", "steps", "text", "where_you_stand"]


class ChecklistError(GemmlabError):
    """A step name the checklist does not know."""


@dataclass(frozen=True)
class Choice:
    """One answer to a step's question, and when it is the right one."""

    name: str
    when: str


@dataclass(frozen=True)
class Step:
    """One decision of the checklist.

    ``key``: the short name ``show``/``text`` accept; ``question``: what this step decides;
    ``choices``: the usual answers; ``decided_by``: what picks between them; ``notebooks``: the
    course notebooks (by number) that teach this step.
    """

    number: int
    key: str
    title: str
    question: str
    choices: tuple[Choice, ...]
    decided_by: str
    notebooks: tuple[str, ...]


_STEPS = (
    Step(1, "problem", "Problem shape and dtype",
         "What is given: M, N, K, the operands' layouts and types, the GPU?",
         (Choice("fp16/bf16 in, fp32 accumulate", "the usual deep-learning GEMM; tensor cores apply"),
          Choice("fp32 in and out", "no fp16/bf16 tensor core applies (TF32 aside): scalar FMAs"),
          Choice("\"tn\" or \"nn\" storage", "which operand is K-major decides the copies and ldmatrix .trans"),
          Choice("any size, any alignment", "edges need predication, odd strides narrower vectors")),
         "The application; the roofline (intensity against the GPU's two peaks) says if compute-bound is possible.",
         ("00", "05")),
    Step(2, "mma atom", "MMA atom",
         "Which instruction does the multiply-adds?",
         (Choice("UniversalFMA (FMA)", "any GPU and type, 1 thread, 1x1x1; DSL MmaUniversalOp; when no tensor core applies"),
          Choice("mma.sync 16x8x16 (SM80)", "sm_80 and later, fp16/bf16: one warp, operands in registers; DSL warp.MmaF16BF16Op"),
          Choice("wgmma 64xNx16 (SM90)", "sm_90a only: a warpgroup (128 threads), B from shared memory, A from shared memory or registers; DSL warpgroup.MmaF16BF16Op"),
          Choice("tcgen05 UMMA (SM100)", "sm_100a: one thread issues it, the accumulator lives in tensor memory")),
         "The GPU's architecture and the input/accumulator types; the atom fixes the A, B, C TV layouts.",
         ("04", "04b", "07")),
    Step(3, "tiled mma", "TiledMMA",
         "How do atoms cover the CTA tile: how many atoms (warps) along M and N, and where do repeats go?",
         (Choice("atoms layout, e.g. (2,2,1)",
                 "threads per CTA = atoms x threads per atom. With 4 warps, (2,2,1) gives each warp a (BM/2)x(BN/2) "
                 "block and (4,1,1) a (BM/4)xBN strip of whole rows; the accumulators per thread are the same, but "
                 "a square warp block reads fewer operand bytes from shared memory per MMA (for a 128x128 tile "
                 "64+64 rows of A and B a warp per k-step, against 32+128), so prefer (2,2,1) unless the tile is "
                 "too narrow to split along N or whole rows per warp matter (e.g. a row-wise epilogue)"),
          Choice("integer permutation, e.g. (64,64,16)", "sets the tile one step covers; repeats interleave"),
          Choice("layout permutation, e.g. M (16,2,2):(1,32,16)", "also says where repeats go: contiguous blocks, wider vectors"),
          Choice("CTA tile BM x BN x BK", "arithmetic intensity against registers (BM*BN/threads accumulators each)")),
         "Threads per CTA, accumulator registers, the tile's intensity, which values should be neighbours in C.",
         ("04", "04b", "05", "06")),
    Step(4, "smem layout", "SMEM layout and swizzle",
         "How do the A and B tiles sit in shared memory?",
         (Choice("row-major, unswizzled", "simple; column-wise reads of it have bank conflicts"),
          Choice("padded rows", "no conflicts, wasted bytes, no TMA/wgmma"),
          Choice("Swizzle<B,M,S>", "conflict-free for both the writing copy and the MMA's reads"),
          Choice("GMMA layout atoms (K_SW128 ...)", "required by TMA and wgmma: one of their swizzle modes")),
         "Both the copy that writes the tile and the reads that feed the MMA conflict-free; TMA/wgmma modes.",
         ("03", "06", "07")),
    Step(5, "copy atoms", "Copy atoms",
         "Which instructions move tiles: global -> shared, shared -> registers?",
         (Choice("UniversalCopy, 16..128-bit vectors", "synchronous loads; the widest vector the alignment allows"),
          Choice("cp.async (SM80)", "global -> shared without registers, asynchronous: enables a pipeline"),
          Choice("TMA (SM90)", "one thread copies a whole swizzled box, completion counted by an mbarrier"),
          Choice("ldmatrix (SM75)", "shared -> registers straight into MMA fragments (make_tiled_copy_A/B)")),
         "The architecture, the operands' alignment, the atom's fragments (wgmma reads its shared-memory operands itself).",
         ("02", "04b", "05", "06", "07")),
    Step(6, "pipeline", "Pipeline",
         "How do copies of the next k-tiles overlap the math on this one?",
         (Choice("none: copy, barrier, compute", "correct and simple; the tensor cores wait for every load"),
          Choice("cp.async multistage ring", "commit/wait groups keep STAGES-1 k-tiles in flight"),
          Choice("TMA + mbarrier ring", "full/empty barriers with phase parity, one producer thread"),
          Choice("warp specialisation", "producer and consumer warpgroups, persistent CTAs")),
         "Latency x bandwidth = bytes in flight to hide it, against the shared memory each stage costs.",
         ("06", "07")),
    Step(7, "epilogue", "Epilogue",
         "How do the accumulators reach C?",
         (Choice("registers -> global directly", "simplest; stores follow the MMA's C layout"),
          Choice("registers -> shared -> global", "restages the tile so stores are whole 16-byte vectors"),
          Choice("TMA store", "one thread writes the whole tile from shared memory (sm_90)"),
          Choice("alpha*AB + beta*C, predicated", "C is read only when beta != 0; edges masked")),
         "The output type and alignment, whether C is read (beta), how the C layout lines up with C's rows.",
         ("05", "06", "07")),
)

StepName = Union[str, int]


def steps() -> tuple[Step, ...]:
    """The seven steps in the order a design takes them."""
    return _STEPS


def step(name: StepName) -> Step:
    """A step by key (``"mma atom"``), title (``"MMA atom"``) or number (1..7)."""
    if not isinstance(name, bool) and isinstance(name, (str, int)):
        for s in _STEPS:
            if name == s.number or (isinstance(name, str) and name.strip().lower() in (s.key, s.title.lower())):
                return s
    known = ", ".join(f"{s.number} {s.key!r}" for s in _STEPS)
    raise ChecklistError(f"no checklist step {name!r}: name one by key or number. Steps: {known}.")


def _current(current: StepName | Sequence[StepName] | None) -> set[int]:
    if current is None:
        return set()
    if isinstance(current, (str, int)):
        return {step(current).number}
    return {step(c).number for c in current}


def _done(here: set[int], notebook: str | None) -> set[int]:
    """Steps already decided: those a notebook before ``notebook`` teaches, or (without one) the
    steps before the first current one."""
    if notebook is not None:
        if not (isinstance(notebook, str) and re.fullmatch(r"\d\d[a-z]?", notebook)):
            raise ChecklistError(f"notebook={notebook!r}: give the notebook's number as its name starts, e.g. '05' or '04b'.")
        return {s.number for s in _STEPS if s.number not in here and min(s.notebooks) < notebook}
    return set(range(1, min(here))) if here else set()


def where_you_stand(current: StepName | Sequence[StepName], notebook: str | None = None) -> str:
    """One line: the seven steps, the decided ones ticked, the current one(s) in bold.

    ``notebook`` (e.g. ``"06"``): tick the steps earlier notebooks teach; without it, the steps
    before the first current one.
    """
    here = _current(current)
    if not here:
        known = ", ".join(f"{s.number} {s.key!r}" for s in _STEPS)
        raise ChecklistError(f"where_you_stand needs the current step. Steps: {known}.")
    done = _done(here, notebook)
    parts = []
    for s in _STEPS:
        if s.number in here:
            parts.append(f"**{s.number} {s.title} (you are here)**")
        elif s.number in done:
            parts.append(f"{s.number} {s.title} ✓")
        else:
            parts.append(f"{s.number} {s.title}")
    return "Design checklist: " + " → ".join(parts)


def text(current: StepName | Sequence[StepName] | None = None) -> str:
    """The whole checklist as markdown: each step's question, choices, what decides, where taught."""
    here = _current(current)
    lines = []
    for s in _STEPS:
        mark = " ← **you are here**" if s.number in here else ""
        lines.append(f"{s.number}. **{s.title}**{mark}: {s.question}")
        for c in s.choices:
            lines.append(f"    - {c.name}: {c.when}")
        lines.append(f"    - *Decided by:* {s.decided_by}")
        lines.append(f"    - *Taught in:* notebook{'s' if len(s.notebooks) > 1 else ''} {', '.join(s.notebooks)}")
    return "\n".join(lines)


_DONE, _HERE, _LATER = "#e3e3e3", "#ffd27f", "#ffffff"


def show(current: StepName | Sequence[StepName] | None = None, notebook: str | None = None) -> Any:
    """The checklist as a picture: one box a step, top to bottom, the current step(s) highlighted.

    Returns a matplotlib ``Figure`` (Jupyter shows it). Decided steps are grey (see
    ``where_you_stand`` for ``notebook``), the current ones orange, the others white.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from gemmlab.seeing.figures import figure_png

    _register_png(Figure, figure_png)
    here = _current(current)
    done = _done(here, notebook)
    n = len(_STEPS)
    box_h, gap = 1.0, 0.45
    fig = Figure(figsize=(12.5, 0.95 * n + 0.6))
    ax = fig.add_axes((0.01, 0.01, 0.98, 0.98))
    total = n * box_h + (n - 1) * gap
    ax.set_xlim(0, 13.2)
    ax.set_ylim(-0.1, total + 0.1)
    ax.axis("off")
    for i, s in enumerate(_STEPS):
        top = total - i * (box_h + gap)
        y = top - box_h
        if s.number in here:
            face, edge, width = _HERE, "#c05000", 2.5
        elif s.number in done:
            face, edge, width = _DONE, "#808080", 1.0
        else:
            face, edge, width = _LATER, "#404040", 1.0
        ax.add_patch(FancyBboxPatch((1.25, y), 3.4, box_h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                    facecolor=face, edgecolor=edge, linewidth=width))
        ax.text(1.4, y + 0.68, f"{s.number}  {s.title}", fontsize=10.5, weight="bold", va="center")
        ax.text(1.4, y + 0.28, f"notebooks {', '.join(s.notebooks)}", fontsize=8, va="center", color="#404040")
        ax.text(4.85, y + 0.80, s.question, fontsize=8.5, va="center", style="italic")
        names = "   ·   ".join(c.name for c in s.choices)
        ax.text(4.85, y + 0.45, names, fontsize=7.5, va="center")
        ax.text(4.85, y + 0.12, "decided by: " + s.decided_by, fontsize=7.5, va="center", color="#505050")
        if s.number in here:
            ax.text(1.15, y + 0.5, "you are\nhere ▶", fontsize=9, weight="bold", color="#c05000", ha="right", va="center")
        if i < n - 1:
            ax.add_patch(FancyArrowPatch((2.95, y), (2.95, y - gap), arrowstyle="-|>", mutation_scale=12,
                                         color="#404040", linewidth=1.0))
    return fig


def _register_png(figure_type: type, to_png: Any) -> None:
    """Let IPython show a pyplot-free Figure as PNG (the inline backend only does so once pyplot is loaded)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with jupyter
        return
    ip = get_ipython()
    if ip is not None:
        fmt = ip.display_formatter.formatters["image/png"]
        if figure_type not in fmt.type_printers:
            fmt.for_type(figure_type, to_png)
