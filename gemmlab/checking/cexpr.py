"""Integer C expressions evaluated the way C evaluates them, on numpy arrays.

Why: an exercise asks for a C expression (notebook 03's shared-memory index macro) and checks it
in Python before a GPU runs it. Python's ``eval`` of the same text is wrong where the two languages
differ: C's ``/`` and ``%`` truncate toward zero (``-1 % 32`` is -1 in C and 31 in Python), and
``//`` starts a comment in C. ``evaluate`` reads the text with C's meaning instead, over whole
arrays of variable values, and refuses what C would not compute for an ``int``.

Read: decimal, hex (``0x1f``) and binary (``0b101``) literals, the given variable names,
parentheses, unary ``- + ~``, binary ``* / % + - << >> & ^ |`` and CUDA's ``min(a, b)`` and
``max(a, b)``. These have the same precedence and grouping in C as in Python, so Python's parser
gives C's expression tree.

``evaluate_function`` reads a whole straight-line C function of ints (notebook 08's tile orders):
``int`` declarations, assignments and one ``return make_int2(x, y)`` or ``return x``, each
expression read as above, evaluated over arrays of its parameters at once.
Semantics: 32-bit signed ``int``; ``/`` and ``%`` truncate toward zero; ``>>`` of a negative value
is arithmetic (what NVIDIA's compilers do, and what C++20 requires). Refused, with a message: other
syntax, division by zero, a shift count outside 0..31, and any value that overflows ``int``
(undefined behaviour in C). A caller may name functions the text may call, as numpy ufuncs (``functions={"min":
np.minimum}``, as :mod:`gemmlab.checking.cfunction` does), each called with its number of arguments.
"""
from __future__ import annotations

import ast
import re
from typing import Callable, Mapping

import numpy as np

from gemmlab.errors import GemmlabError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
OPERATORS = "* / % + - << >> & ^ |, unary - + ~, min(a, b) and max(a, b)"
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
#: The functions of two ints an expression may call (CUDA's device ``min`` and ``max``).
_CALLS: dict[str, np.ufunc] = {"min": np.minimum, "max": np.maximum}


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
    calls = {**_CALLS, **(functions or {})}
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


# ---------------------------------------------------------------- straight-line functions

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_NAME = r"[A-Za-z_]\w*"
_DECLARATION = re.compile(r"(?:const\s+)?int\s+(.+)", re.S)
_ASSIGNMENT = re.compile(rf"({_NAME})\s*([-+*/%]?=)\s*(.+)", re.S)
_RETURN = re.compile(r"return\s+(.+)", re.S)
_PAIR = re.compile(r"make_int2\s*\((.*)\)", re.S)
_STATEMENTS = "`int name = expression;` (or `const int`, several names separated by commas), " \
              "`name = expression;` (or `+=` ...) and one `return make_int2(x, y);` or `return x;` at the end"


def _split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` split at each ``separator`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _function(source: str, name: str) -> tuple[list[str], str]:
    """The parameter names and the body of the one C function ``name`` defined in ``source``."""
    text = _COMMENTS.sub(" ", source)
    heads = list(re.finditer(rf"\b{re.escape(name)}\s*\(([^()]*)\)\s*\{{", text))
    if len(heads) != 1:
        raise CExpressionError(f"the source should define the function {name} once; it defines it {len(heads)} "
                               "time(s)")
    if re.search(r"^\s*#\s*(define|undef|if|ifdef|ifndef|elif|else|endif|line)\b", text, re.M):
        raise CExpressionError("the source has a preprocessor line (#define, #if, ...): the C the compiler sees is "
                               "then not the text this checker reads")
    params = []
    for declared in filter(str.strip, heads[0].group(1).split(",")):
        found = re.fullmatch(rf"\s*(?:const\s+)?int\s+({_NAME})\s*", declared)
        if not found:
            raise CExpressionError(f"{name}'s parameter {declared.strip()!r} is not an int")
        params.append(found.group(1))
    start = heads[0].end()
    end = text.find("}", start)
    if end < 0:
        raise CExpressionError(f"{name}'s body has no closing brace")
    body = text[start:end]
    if "{" in body:
        raise CExpressionError(f"{name} has a block inside it (an if, a loop, braces): this checker reads "
                               f"straight-line functions only: {_STATEMENTS}")
    return params, body


def evaluate_function(source: str, name: str, **values: object) -> tuple[np.ndarray, ...]:
    """What the straight-line C function ``name`` of ``source`` returns, with C's ``int`` meaning, for every
    element of its arguments at once: ``values`` holds its parameters and the macros it uses (arrays broadcast
    like numpy's). Returns ``(x, y)`` for ``return make_int2(x, y)``, ``(x,)`` for ``return x``.

    Why: a tile order written in CUDA C (notebook 08's ``swizzled_tile``) can then be checked on the CPU
    for every CTA of many grids, as the GPU would compute it. Refused, with a message naming what is not
    read: statements other than ``int`` declarations, assignments and a final return (branches, loops,
    ``?:``), preprocessor lines, a name used before it is set, and whatever :func:`evaluate` refuses."""
    if not isinstance(source, str):
        raise CExpressionError(f"the source must be a string of C, not {type(source).__name__}")
    params, body = _function(source, name)
    if missing := [p for p in params if p not in values]:
        raise CExpressionError(f"no value given for {name}'s parameter(s) {', '.join(missing)}")
    env = {k: np.asarray(v, dtype=np.int64) for k, v in values.items()}
    constant = set(values) - set(params)
    statements = [s.strip() for s in body.split(";")]
    if statements[-1]:
        raise CExpressionError(f"{name}: {statements[-1]!r} does not end with ';'")
    statements = [s for s in statements if s]
    for index, statement in enumerate(statements):
        where = f"{name}: {' '.join(statement.split())!r}"
        if returned := _RETURN.fullmatch(statement):
            if index != len(statements) - 1:
                raise CExpressionError(f"{where}: the return must be the function's last statement")
            pair = _PAIR.fullmatch(returned.group(1).strip())
            parts = _split_top_level(pair.group(1)) if pair else [returned.group(1)]
            if pair and len(parts) != 2:
                raise CExpressionError(f"{where}: make_int2 takes two values")
            return tuple(evaluate(p.strip(), **env) for p in parts)
        if declared := _DECLARATION.fullmatch(statement):
            for item in _split_top_level(declared.group(1)):
                one = re.fullmatch(rf"\s*({_NAME})\s*=\s*(.+)", item, re.S)
                if not one:
                    raise CExpressionError(f"{where}: every declared name needs a value (`int x = ...`)")
                env[one.group(1)] = evaluate(one.group(2).strip(), **env)
                if statement.startswith("const"):
                    constant.add(one.group(1))
            continue
        if assigned := _ASSIGNMENT.fullmatch(statement):
            target, op, expr = assigned.groups()
            if target not in env or target in constant:
                raise CExpressionError(f"{where}: {target} is " + ("not declared before" if target not in env
                                                                    else "const or a macro, and cannot change"))
            expr = expr if op == "=" else f"{target} {op[0]} ({expr})"
            env[target] = evaluate(expr.strip(), **env)
            continue
        raise CExpressionError(f"{where} is not a statement this checker reads; it reads {_STATEMENTS}")
    raise CExpressionError(f"{name} has no return statement")
