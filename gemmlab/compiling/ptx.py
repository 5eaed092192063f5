"""A kernel's PTX read as statements: which instructions it holds, and which of them read memory where.

Why: a test that asks how a kernel moves its data (through shared memory by ``cp.async``, say) can
only read its instructions, and PTX text is not one instruction a line: it mixes directives, labels,
predicates, comments and inline-asm blocks (several statements on one line, inside braces). A grep of
lines both misses instructions and counts comments. These functions split it into statements first.

    reads_outside_shared(kernel.ptx)   # [] when every load reads shared memory, parameters or spills
"""
from __future__ import annotations

import re

from gemmlab.compiling.signature import split_top_level

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LABEL = re.compile(r"^[$%\w]+:(?!:)\s*")
_PREDICATE = re.compile(r"^@!?%?[\w.]+\s+")

#: State spaces a load may read without touching global memory: shared memory (any scope), the
#: kernel's parameters, the thread's local memory (spills) and the constant banks.
ON_CHIP_OR_PARAMETERS = ("shared", "param", "local", "const")


def statements(ptx: str) -> list[str]:
    """Every instruction of ``ptx``, one string each, without comments, labels or predicates
    (directives such as ``.reg`` and ``.loc`` are left out)."""
    out = []
    for piece in re.split(r"[;\n]", _COMMENTS.sub(" ", ptx)):
        text = piece.strip()
        while True:       # an inline-asm block's braces, labels and a predicate may stand before an instruction
            stripped = _PREDICATE.sub("", _LABEL.sub("", text.lstrip("{} \t"))).strip()
            if stripped == text:
                break
            text = stripped
        if text and not text.startswith("."):
            out.append(text)
    return out


def opcode(statement: str) -> str:
    """The instruction with its qualifiers, e.g. ``cp.async.ca.shared.global.L2::128B``."""
    return statement.split(None, 1)[0] if statement.split() else ""


def operands(statement: str) -> list[str]:
    """The operands of one statement, split at top-level commas (``[%r1+16]`` and ``{%r1,%r2}`` stay one)."""
    rest = statement.split(None, 1)[1] if len(statement.split(None, 1)) > 1 else ""
    return [part.strip() for part in split_top_level(rest) if part.strip()]


def _spaces(op: str) -> list[str]:
    """The state-space qualifiers of an opcode, in order (``shared::cta`` counts as ``shared``)."""
    names = ("shared", "global", "param", "local", "const", "generic")
    return [part.split("::")[0] for part in op.split(".")[1:] if part.split("::")[0] in names]


def reads_memory(op: str) -> bool:
    """Whether the instruction brings data from memory into the kernel: a load, an atomic (it returns
    the old value), a texture or surface read, a multimem load, or a copy from global memory."""
    head = op.split(".", 1)[0]
    if head in ("ld", "ldu", "atom", "tex", "tld4", "suld", "multimem", "ldmatrix"):
        return True
    return head == "cp" and "global" in _spaces(op)[1:2]      # a copy whose source is global memory


def reads_outside_shared(ptx: str) -> list[str]:
    """The statements of ``ptx`` that read memory other than shared memory, parameters, local or
    constant memory, except copies whose destination is shared memory (``cp.async`` from global to
    shared, TMA loads). A generic-address load (``ld.u32`` with no state space) is listed too: it may
    read global memory."""
    found = []
    for stmt in statements(ptx):
        op = opcode(stmt)
        if not reads_memory(op) or op.startswith("ldmatrix"):
            continue                                   # ldmatrix reads shared memory only
        spaces = _spaces(op)
        if op.startswith("cp."):
            if spaces[0] == "shared":                  # the destination comes first: a copy into shared memory
                continue
        elif spaces and spaces[0] in ON_CHIP_OR_PARAMETERS:
            continue
        found.append(stmt)
    return found
