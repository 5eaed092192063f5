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
expression read as above, evaluated over arrays of its parameters at once. :func:`definition` and
:func:`execute` are the one reader and runner of such functions; :mod:`gemmlab.checking.cfunction` uses
them for functions whose results are ``int&`` parameters (notebook 05's ``tile_of``).
Semantics: 32-bit signed ``int``; ``/`` and ``%`` truncate toward zero; ``>>`` of a negative value
is arithmetic (what NVIDIA's compilers do, and what C++20 requires). Refused, with a message: other
syntax, division by zero, a shift count outside 0..31, and any value that overflows ``int``
(undefined behaviour in C). A caller may name functions the text may call, as numpy ufuncs (``functions={"min":
np.minimum}``, as :mod:`gemmlab.checking.cfunction` does), each called with its number of arguments.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
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
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)[^\n]*", re.M)
_NAME = r"[A-Za-z_]\w*"
_INPUT = re.compile(rf"(?:const\s+)?int\s+({_NAME})")
_OUTPUT = re.compile(rf"int\s*&\s*({_NAME})")
_QUALIFIERS = r"(?:(?:__device__|__host__|__forceinline__|inline|static|constexpr)\s+)*"
_QUALIFIED_CALL = re.compile(r"(?:\b(?:cuda::std|std|cute))?::\s*(min|max)\s*\(")
_DECLARATION = re.compile(r"(const\s+)?int\s+(.+)", re.S)
_ASSIGNMENT = re.compile(rf"({_NAME})\s*([-+*/%]?)=(?!=)\s*(.+)", re.S)
_RETURN = re.compile(r"return\b\s*(.*)", re.S)
_PAIR = re.compile(r"make_int2\s*\((.*)\)", re.S)
_CONTROL = re.compile(r"(if|else|for|while|do|switch|goto)\b")
_STATEMENTS = "`int name = expression;` (or `const int`, several names separated by commas), " \
              "`name = expression;` (or `+=` ...) and, in a function that returns its value, one " \
              "`return make_int2(x, y);` or `return x;` at the end"


@dataclass(frozen=True)
class Definition:
    """One C function as written: what precedes its name (``__device__ void``), its ``int`` inputs, its ``int&``
    outputs, which inputs are ``const``, and its body (comments dropped)."""

    name: str
    prefix: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    constant: frozenset[str]
    body: str

    @property
    def is_void(self) -> bool:
        """Whether it is declared ``[qualifiers] void NAME(...)`` (its results are its ``int&`` outputs)."""
        return re.fullmatch(rf"\s*{_QUALIFIERS}void\s*", self.prefix) is not None


@dataclass(frozen=True)
class Execution:
    """A function's run: every name's value after its last statement, which outputs it assigned, what it returned."""

    values: dict[str, np.ndarray]
    assigned: frozenset[str]
    returned: tuple[np.ndarray, ...] | None


def _split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` split at each ``separator`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def definition(source: str, name: str) -> Definition:
    """The one definition of the C function ``name`` in ``source``, comments dropped.

    Refused: a preprocessor line other than ``#pragma`` (a ``#define`` or an ``#include``d header could change
    what the compiler sees, and this reads the text as written), ``name`` defined other than once, a parameter
    that is neither ``int NAME`` nor ``int& NAME``, a block inside the body."""
    if not isinstance(source, str):
        raise CExpressionError(f"the source must be a string of C, not {type(source).__name__}")
    text = _COMMENTS.sub(" ", source)
    for directive in _DIRECTIVE.finditer(text):
        if directive.group(1) != "pragma":
            raise CExpressionError(f"the source has a preprocessor line ({directive.group(0).strip()!r}): this "
                                   "checker reads the C as written, so no #define, #if or #include may change what "
                                   "the compiler sees")
    text = _DIRECTIVE.sub("", text)
    heads = list(re.finditer(rf"\b{re.escape(name)}\s*\(([^()]*)\)\s*\{{", text))
    if len(heads) != 1:
        raise CExpressionError(f"{name} must be defined exactly once in this source; it defines it {len(heads)} "
                               "time(s)")
    head = heads[0]
    inputs, outputs, constant = [], [], set()
    for declared in (p.strip() for p in head.group(1).split(",") if p.strip()):
        if found := _INPUT.fullmatch(declared):
            inputs.append(found.group(1))
            constant |= {found.group(1)} if declared.startswith("const") else set()
        elif found := _OUTPUT.fullmatch(declared):
            outputs.append(found.group(1))
        else:
            raise CExpressionError(f"{name}'s parameter {declared!r} is not an int: it is neither `int NAME` nor "
                                   "`int& NAME`")
    depth, end = 1, head.end()
    while depth and end < len(text):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        end += 1
    if depth:
        raise CExpressionError(f"{name}'s body has no closing brace")
    body = text[head.end():end - 1]
    if "{" in body:
        raise CExpressionError(f"{name} has a block inside it (an if, a loop, braces): this checker reads "
                               f"straight-line functions only: {_STATEMENTS}")
    prefix = text[:head.start()].rsplit(";", 1)[-1].rsplit("}", 1)[-1]
    return Definition(name, prefix, tuple(inputs), tuple(outputs), frozenset(constant), body)


def execute(fn: Definition, values: Mapping[str, object]) -> Execution:
    """Run ``fn``'s statements with C's ``int`` meaning on ``values`` (its inputs, and any macros it uses, each an
    integer or an array; arrays broadcast like numpy's), every element at once.

    Reads ``int`` declarations, assignments (``=``, ``+=`` ...) and, last, one ``return``; expressions as
    :func:`evaluate` reads them, with ``min``/``max`` also spelled ``std::min``, ``cute::min``, ``::min``. Refused,
    with a message naming what is not read: other statements (branches, loops, ``?:``), a name assigned before
    it is declared, a name declared twice, a change to a ``const`` or a macro, an input without a value."""
    if missing := [p for p in fn.inputs if p not in values]:
        raise CExpressionError(f"no value given for {fn.name}'s parameter(s) {', '.join(missing)}: {fn.name} takes "
                               f"{', '.join(fn.inputs)}")
    env = {k: np.asarray(v, dtype=np.int64) for k, v in values.items()}
    constant = set(fn.constant) | (set(values) - set(fn.inputs))      # const inputs and macros
    assigned: set[str] = set()
    body = _QUALIFIED_CALL.sub(lambda m: f"{m.group(1)}(", fn.body)
    statements = [" ".join(s.split()) for s in body.split(";")]
    if statements[-1]:
        raise CExpressionError(f"{fn.name}: {statements[-1][:60]!r} does not end with ';'")
    statements = [s for s in statements if s]
    for index, statement in enumerate(statements):
        where = f"{fn.name}: {statement[:80]!r}"
        if "?" in statement or _CONTROL.match(statement):
            raise CExpressionError(f"{where}: a branch, a loop or ?: is not an expression this checker reads; it reads "
                                   f"straight-line code only: {_STATEMENTS}")
        if returned := _RETURN.fullmatch(statement):
            if fn.is_void:
                raise CExpressionError(f"{where}: a void function gives its results through its int& parameters; "
                                       "this checker reads no return there")
            if index != len(statements) - 1:
                raise CExpressionError(f"{where}: the return must be the function's last statement")
            pair = _PAIR.fullmatch(returned.group(1))
            parts = _split_top_level(pair.group(1)) if pair else [returned.group(1)]
            if pair and len(parts) != 2:
                raise CExpressionError(f"{where}: make_int2 takes two values")
            return Execution(env, frozenset(assigned), tuple(_evaluate(fn.name, p, env) for p in parts))
        if declared := _DECLARATION.fullmatch(statement):
            for item in _split_top_level(declared.group(2)):
                one = re.fullmatch(rf"\s*({_NAME})\s*=\s*(.+)", item, re.S)
                if not one:
                    raise CExpressionError(f"{where}: every declared name needs a value (`int x = ...`)")
                target = one.group(1)
                if target in env or target in fn.outputs:
                    raise CExpressionError(f"{where}: {target} is declared twice")
                env[target] = _evaluate(fn.name, one.group(2), env)
                constant |= {target} if declared.group(1) else set()
            continue
        if found := _ASSIGNMENT.fullmatch(statement):
            target, op, expr = found.groups()
            if target not in env and target not in fn.outputs:
                raise CExpressionError(f"{where}: {target} is assigned but not declared before")
            if target in constant:
                raise CExpressionError(f"{where}: {target} is const or a macro, and cannot change")
            env[target] = _evaluate(fn.name, expr if not op else f"({target}) {op} ({expr})", env)
            assigned.add(target)
            continue
        raise CExpressionError(f"{where} is not a statement this checker reads; it reads straight-line code only: "
                               f"{_STATEMENTS}")
    return Execution(env, frozenset(assigned), None)


def _evaluate(function: str, expr: str, env: Mapping[str, np.ndarray]) -> np.ndarray:
    """One expression of ``function``'s body, a refusal naming the function."""
    try:
        return evaluate(expr.strip(), **env)
    except CExpressionError as err:
        raise type(err)(f"{function}: {err}") from None


def evaluate_function(source: str, name: str, **values: object) -> tuple[np.ndarray, ...]:
    """What the straight-line C function ``name`` of ``source`` returns, with C's ``int`` meaning, for every
    element of its arguments at once: ``values`` holds its parameters and the macros it uses (arrays broadcast
    like numpy's). Returns ``(x, y)`` for ``return make_int2(x, y)``, ``(x,)`` for ``return x``.

    Why: a tile order written in CUDA C (notebook 08's ``swizzled_tile``) can then be checked on the CPU
    for every CTA of many grids, as the GPU would compute it. What is read and refused: :func:`definition`
    and :func:`execute`; a function whose results are ``int&`` parameters is :mod:`gemmlab.checking.cfunction`'s."""
    fn = definition(source, name)
    if fn.outputs or fn.is_void:
        raise CExpressionError(f"{name} gives its results through int& parameters, not a return: run it with "
                               "gemmlab.cfunction.run")
    returned = execute(fn, values).returned
    if returned is None:
        raise CExpressionError(f"{name} has no return statement")
    return returned
