"""Integer C expressions evaluated the way C evaluates them, on numpy arrays.

Why: an exercise asks for a C expression (notebook 03's shared-memory index macro) and checks it
in Python before a GPU runs it. Python's ``eval`` of the same text is wrong where the two languages
differ: C's ``/`` and ``%`` truncate toward zero (``-1 % 32`` is -1 in C and 31 in Python), and
``//`` starts a comment in C. ``evaluate`` reads the text with C's meaning instead, over whole
arrays of variable values, and refuses what C would not compute for an ``int``.

Read: decimal, hex (``0x1f``) and binary (``0b101``) literals, the given variable names,
parentheses, unary ``- + ~`` and binary ``* / % + - << >> & ^ |``. These operators have the same
precedence and grouping in C as in Python, so Python's parser gives C's expression tree.
Semantics: 32-bit signed ``int``; ``/`` and ``%`` truncate toward zero; ``>>`` of a negative value
is arithmetic (what NVIDIA's compilers do, and what C++20 requires). Refused, with a message: other
syntax, division by zero, a shift count outside 0..31, and any value that overflows ``int``
(undefined behaviour in C). A caller may name functions the text may call, as numpy ufuncs (``functions={"min":
np.minimum}``, as :mod:`gemmlab.cfunction` does), each called with its number of arguments.
"""
from __future__ import annotations

import ast
import re
from typing import Callable, Mapping

import numpy as np

from .errors import GemmlabError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
OPERATORS = "* / % + - << >> & ^ | and unary - + ~"
_LITERAL = re.compile(r"(0[xX][0-9a-fA-F]+|0[bB][01]+|0|[1-9][0-9]*)")


class CExpressionError(GemmlabError):
    """The text is not an integer C expression this evaluator reads, or C would not compute it."""


def _fits(value: np.ndarray, what: str) -> np.ndarray:
    if value.size and (value.min() < INT_MIN or value.max() > INT_MAX):
        raise CExpressionError(f"{what} overflows a 32-bit int (undefined behaviour in C)")
    return value


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.any(b == 0):
        raise CExpressionError("division by zero")
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a - _c_div(a, b) * b          # C: (a / b) * b + a % b == a, with / truncating


def _shift(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if np.any((b < 0) | (b > 31)):
            raise CExpressionError("a shift count outside 0..31 (undefined behaviour in C for a 32-bit int)")
        return op(a, b)
    return shift


_BINARY: dict[type, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    ast.Add: ("+", np.add), ast.Sub: ("-", np.subtract), ast.Mult: ("*", np.multiply),
    ast.Div: ("/", _c_div), ast.Mod: ("%", _c_mod),
    ast.LShift: ("<<", _shift(np.left_shift)), ast.RShift: (">>", _shift(np.right_shift)),
    ast.BitAnd: ("&", np.bitwise_and), ast.BitXor: ("^", np.bitwise_xor), ast.BitOr: ("|", np.bitwise_or),
}
_UNARY: dict[type, Callable[[np.ndarray], np.ndarray]] = {
    ast.USub: np.negative, ast.UAdd: np.positive, ast.Invert: np.invert,
}
_NOT_C = {ast.FloorDiv: "'//' starts a comment in C; C's integer division is '/'",
          ast.Pow: "'**' is not a C operator"}


def evaluate(expr: str, functions: Mapping[str, np.ufunc] | None = None,
             **variables: object) -> np.ndarray:
    """``expr`` evaluated with C's ``int`` semantics, each variable an integer or an array
    (arrays broadcast like numpy's); returns an int64 array of the broadcast shape. ``functions``:
    the calls the text may make, by name (none unless given)."""
    if not isinstance(expr, str):
        raise CExpressionError(f"the expression must be a string of C, not {type(expr).__name__}")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as err:
        raise CExpressionError(f"{expr!r} is not an expression this checker reads ({err.msg}); "
                               f"use integers, {', '.join(sorted(variables))}, parentheses and {OPERATORS}") from None
    values = {name: np.asarray(v, dtype=np.int64) for name, v in variables.items()}
    calls = dict(functions or {})
    for name, v in values.items():
        _fits(v, f"variable {name}")
    shape = np.broadcast_shapes(*(v.shape for v in values.values())) if values else ()
    source = expr.strip()

    def walk(node: ast.AST) -> np.ndarray:
        if isinstance(node, ast.BinOp):
            if type(node.op) in _NOT_C:
                raise CExpressionError(f"{expr!r}: {_NOT_C[type(node.op)]}")
            if type(node.op) not in _BINARY:
                raise CExpressionError(f"{expr!r}: {ast.get_source_segment(source, node)!r} uses an operator "
                                       f"this checker does not read; use {OPERATORS}")
            fn = _BINARY[type(node.op)][1]
            return _fits(fn(walk(node.left), walk(node.right)), f"'{ast.get_source_segment(source, node)}'")
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _fits(_UNARY[type(node.op)](walk(node.operand)), f"'{ast.get_source_segment(source, node)}'")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls \
                and not node.keywords:
            fn = calls[node.func.id]
            if len(node.args) != fn.nin:
                raise CExpressionError(f"{expr!r}: {node.func.id} takes {fn.nin} arguments, not {len(node.args)}")
            return _fits(np.asarray(fn(*(walk(a) for a in node.args)), dtype=np.int64),
                         f"'{ast.get_source_segment(source, node)}'")
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise CExpressionError(f"{expr!r} uses {node.id!r}; the names it may use are {sorted(values)}")
            return values[node.id]
        if isinstance(node, ast.Constant) and type(node.value) is int:
            text = ast.get_source_segment(source, node) or ""
            if not _LITERAL.fullmatch(text):
                raise CExpressionError(f"{expr!r}: the literal {text!r} is not a C int literal; "
                                       "write it in decimal or hex (0x1f)")
            if node.value > INT_MAX:
                raise CExpressionError(f"{expr!r}: the literal {text} does not fit a 32-bit int")
            return np.asarray(node.value, dtype=np.int64)
        what = ast.get_source_segment(source, node) or type(node).__name__
        may_call = f", calls of {', '.join(sorted(calls))}" if calls else ""
        raise CExpressionError(f"{expr!r}: {what!r} is not allowed here; use integers, variable names{may_call}, "
                               f"parentheses and {OPERATORS}")

    return np.broadcast_to(walk(tree.body), shape).astype(np.int64)
