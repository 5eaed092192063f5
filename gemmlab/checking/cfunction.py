"""A straight-line C function of ``int``s run on the CPU with C's meaning, for many inputs at once.

Why: notebook 05's C++ kernel calls a ``tile_of`` the student writes, and only its results say
whether the CTAs run in grouped order; a kernel that computes the right C in any order hides a
wrong one. The function is integer arithmetic, so the CPU can run the student's own text as the
GPU would (:mod:`gemmlab.checking.cexpr`: truncating ``/`` and ``%``, overflow refused) for every CTA of
many grids, with no compiler.

Read: exactly one definition ``[qualifiers] void NAME(int a, ..., int& out, ...) { BODY }`` in the
source (``const int`` inputs too); BODY is declarations ``int x = e, y = e;`` (``const`` allowed)
and assignments ``x = e;`` / ``x += e;`` (``-= *= /= %=``), where ``e`` is a cexpr expression that
may call ``min`` and ``max`` (also spelled ``std::min``, ``cute::min``, ``::min``). Comments are
dropped. Anything else (``if``, ``?:``, loops, other calls, a second definition of NAME, a
preprocessor line) is refused with a message that names it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from gemmlab.checking.cexpr import CExpressionError, evaluate

__all__ = ["CFunctionError", "Definition", "definition", "run"]

#: The calls a body may make.
FUNCTIONS = {"min": np.minimum, "max": np.maximum}
_QUALIFIED_CALL = re.compile(r"\b(?:cuda::std|std|cute)?::\s*(min|max)\s*\(")
_NAME = r"[A-Za-z_]\w*"
_DECLARATION = re.compile(rf"^(?:const\s+)?int\s+(?P<rest>{_NAME}\s*=.*)$", re.S)
_ASSIGNMENT = re.compile(rf"^(?P<name>{_NAME})\s*(?P<op>[-+*/%]?)=(?!=)\s*(?P<expr>.+)$", re.S)
_INPUT = re.compile(rf"^(?:const\s+)?int\s+(?P<name>{_NAME})$")
_OUTPUT = re.compile(rf"^int\s*&\s*(?P<name>{_NAME})$")


class CFunctionError(CExpressionError):
    """The source holds no single straight-line int function of that name, or C would not compute it."""


@dataclass(frozen=True)
class Definition:
    """One function's parameters and body, as written: inputs (by value), outputs (``int&``) and its statements."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    body: str


def _without_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def _split_top_level(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def definition(source: str, name: str) -> Definition:
    """The one definition of ``name`` in ``source`` (C++ text), comments dropped."""
    text = _without_comments(source)
    if re.search(r"^\s*#\s*(?!pragma\b)\w+", text, re.M):
        line = re.search(r"^\s*#\s*(?!pragma\b)\w+[^\n]*", text, re.M).group(0).strip()
        raise CFunctionError(f"the source holds a preprocessor line ({line!r}): this check reads the C++ as written, "
                             "so no #define, #if or #include may change what it means")
    text = re.sub(r"^\s*#[^\n]*", "", text, flags=re.M)      # #pragma lines say nothing of the arithmetic
    heads = list(re.finditer(rf"\b{name}\s*\(([^()]*)\)\s*\{{", text))
    if len(heads) != 1:
        raise CFunctionError(f"{name} must be defined exactly once in this source, found {len(heads)} definitions")
    head = heads[0]
    prefix = text[:head.start()].rsplit(";", 1)[-1].rsplit("}", 1)[-1]
    if not re.fullmatch(r"\s*(?:(?:__device__|__host__|__forceinline__|inline|static|constexpr)\s+)*void\s*", prefix):
        raise CFunctionError(f"{name} must be declared `void {name}(...)` (optionally __device__, __host__, inline), "
                             f"not {prefix.strip() + ' ' + name!r}")
    inputs, outputs = [], []
    for param in (p.strip() for p in head.group(1).split(",")):
        if m := _INPUT.match(param):
            inputs.append(m.group("name"))
        elif m := _OUTPUT.match(param):
            outputs.append(m.group("name"))
        else:
            raise CFunctionError(f"{name}'s parameter {param!r} is neither `int NAME` nor `int& NAME`")
    depth, end = 1, head.end()
    while depth and end < len(text):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        end += 1
    if depth:
        raise CFunctionError(f"{name}'s body has no closing brace")
    return Definition(name, tuple(inputs), tuple(outputs), text[head.end():end - 1])


def run(source: str, name: str, **inputs: object) -> dict[str, np.ndarray]:
    """Run ``name``'s body on ``inputs`` (ints or arrays, broadcast like numpy's); its outputs' values after it.

    Each statement is evaluated with C's ``int`` meaning; an output the body never assigns is an error,
    as is an input missing from ``inputs``."""
    fn = definition(source, name)
    missing = [p for p in fn.inputs if p not in inputs]
    if missing or set(inputs) - set(fn.inputs):
        raise CFunctionError(f"{name} takes {', '.join(fn.inputs)}; given {', '.join(sorted(inputs))}")
    values: dict[str, np.ndarray] = {k: np.asarray(v, dtype=np.int64) for k, v in inputs.items()}
    assigned: set[str] = set()
    body = _QUALIFIED_CALL.sub(lambda m: f"{m.group(1)}(", fn.body)
    statements = [s.strip() for s in body.split(";")]
    if statements[-1]:
        raise CFunctionError(f"{name}: {statements[-1][:60]!r} does not end with ';'")
    for statement in statements[:-1]:
        if not statement:
            continue
        if any(ch in statement for ch in "{}?"):
            raise CFunctionError(f"{name}: this check reads straight-line code only (declarations `int x = ...;` and "
                                 f"assignments `x = ...;`), not {statement[:60]!r}: write it without if, ?: or loops")
        if m := _DECLARATION.match(statement):
            for part in _split_top_level(m.group("rest"), ","):
                target, _, expr = part.partition("=")
                target = target.strip()
                if target in values:
                    raise CFunctionError(f"{name}: {target} is declared twice")
                values[target] = _value(name, expr, values)
            continue
        if m := _ASSIGNMENT.match(statement):
            target, op = m.group("name"), m.group("op")
            if target not in values and target not in fn.outputs:
                raise CFunctionError(f"{name}: {target} is assigned but never declared")
            expr = m.group("expr") if not op else f"({target}) {op} ({m.group('expr')})"
            values[target] = _value(name, expr, values)
            assigned.add(target)
            continue
        raise CFunctionError(f"{name}: {statement[:60]!r} is not a declaration `int x = ...;` or an assignment "
                             "`x = ...;`: this check reads straight-line int code only")
    never = [o for o in fn.outputs if o not in assigned]
    if never:
        raise CFunctionError(f"{name} never assigns {', '.join(never)}")
    return {o: values[o] for o in fn.outputs}


def _value(name: str, expr: str, values: dict[str, np.ndarray]) -> np.ndarray:
    try:
        return evaluate(" ".join(expr.split()), functions=FUNCTIONS, **values)
    except CFunctionError:
        raise
    except CExpressionError as err:
        raise CFunctionError(f"{name}: {err}") from None
