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

The reading and running are :mod:`gemmlab.checking.cexpr`'s (:func:`~gemmlab.checking.cexpr.definition`,
:func:`~gemmlab.checking.cexpr.execute`), shared with its ``evaluate_function`` for functions that return their
value; this module is the entry point for functions whose results are their ``int&`` parameters.
"""
from __future__ import annotations

import numpy as np

from gemmlab.checking import cexpr
from gemmlab.checking.cexpr import CExpressionError, Definition

__all__ = ["CFunctionError", "Definition", "definition", "run"]


class CFunctionError(CExpressionError):
    """The source holds no single straight-line int function of that name, or C would not compute it."""


def definition(source: str, name: str) -> Definition:
    """The one definition of the void function ``name`` in ``source`` (C++ text), comments dropped."""
    try:
        fn = cexpr.definition(source, name)
    except CExpressionError as err:
        raise CFunctionError(str(err)) from None
    if not fn.is_void:
        raise CFunctionError(f"{name} must be declared `void {name}(...)` (optionally __device__, __host__, inline), "
                             f"not {fn.prefix.strip() + ' ' + name!r}")
    return fn


def run(source: str, name: str, **inputs: object) -> dict[str, np.ndarray]:
    """Run ``name``'s body on ``inputs`` (ints or arrays, broadcast like numpy's); its outputs' values after it.

    Each statement is evaluated with C's ``int`` meaning; an output the body never assigns is an error,
    as is an input missing from ``inputs`` or a name in ``inputs`` that is no input."""
    fn = definition(source, name)
    if extra := sorted(set(inputs) - set(fn.inputs)):
        raise CFunctionError(f"{name} takes {', '.join(fn.inputs)}; given {', '.join(sorted(inputs))} "
                             f"({', '.join(extra)} is no parameter)")
    try:
        ran = cexpr.execute(fn, inputs)
    except CExpressionError as err:
        raise CFunctionError(str(err)) from None
    if never := [o for o in fn.outputs if o not in ran.assigned]:
        raise CFunctionError(f"{name} never assigns {', '.join(never)}")
    return {o: ran.values[o] for o in fn.outputs}
