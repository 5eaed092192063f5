"""Launch geometry as small integer expressions over M, N, K and named constants.

Why: a kernel's grid, block and shared memory depend on the problem size, and the judge must
compute them without running any Python a student wrote. So they are data: a tiny language of
integers, ``+ - * // %``, parentheses, ``min``, ``max``, ``cdiv`` (ceiling division) and names
(``M``, ``N``, ``K`` and the spec's constants). Anything else (attributes, other calls, strings,
``**``, huge numbers) is refused with a message naming the token.
"""
from __future__ import annotations

import ast
from typing import Callable, Collection, Mapping

from .errors import JudgeError

#: Longest expression text accepted.
MAX_EXPRESSION_CHARS = 200
#: Every literal, name value and intermediate result must stay within ±MAX_MAGNITUDE.
MAX_MAGNITUDE = 2**62
#: The problem-size names every expression may use.
SIZE_NAMES = ("M", "N", "K")


def cdiv(a: int, b: int) -> int:
    """Ceiling division: the number of tiles of size ``b`` that cover ``a``."""
    if b == 0:
        raise JudgeError("cdiv(a, b) with b = 0: a tile size of zero covers nothing.")
    return -(-a // b)


FUNCTIONS: dict[str, Callable[[int, int], int]] = {"cdiv": cdiv, "min": min, "max": max}

_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_VOCABULARY = ("integers, + - * // %, parentheses, min(a, b), max(a, b), cdiv(a, b) and the names "
               "M, N, K and the spec's constants")


def _bounded(value: int, text: str) -> int:
    if abs(value) > MAX_MAGNITUDE:
        raise JudgeError(f"launch expression {text!r} reaches {value:.3e}, beyond the ±2**62 a launch expression may use.")
    return value


class _Evaluator:
    def __init__(self, text: str, names: Mapping[str, int]) -> None:
        self.text = text
        self.names = names

    def refuse(self, node: ast.AST, what: str) -> JudgeError:
        token = ast.get_source_segment(self.text, node) or type(node).__name__
        return JudgeError(f"launch expression {self.text!r}: {what} {token!r} is not allowed; "
                          f"use only {_VOCABULARY}.")

    def value(self, node: ast.AST) -> int:
        if isinstance(node, ast.Constant):
            if type(node.value) is not int:
                raise self.refuse(node, "the literal")
            return _bounded(node.value, self.text)
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                known = ", ".join(sorted(self.names))
                raise JudgeError(f"launch expression {self.text!r}: unknown name {node.id!r}; known names: {known}.")
            return self.names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.value(node.left), self.value(node.right)
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right == 0:
                raise JudgeError(f"launch expression {self.text!r} divides by zero in "
                                 f"{ast.get_source_segment(self.text, node)!r}.")
            return _bounded(_BINARY[type(node.op)](left, right), self.text)
        if isinstance(node, ast.Call):
            func = node.func
            if not isinstance(func, ast.Name) or func.id not in FUNCTIONS:
                raise self.refuse(func, "the call of")
            if node.keywords or len(node.args) != 2:
                raise self.refuse(node, "the call")
            return _bounded(FUNCTIONS[func.id](self.value(node.args[0]), self.value(node.args[1])), self.text)
        raise self.refuse(node, "the token")


def check_text(text: object) -> str:
    """The expression text, or a JudgeError if it is not a string of acceptable length."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise JudgeError(f"a launch expression is a string such as 'cdiv(N, BN)' or an int, not {type(text).__name__}.")
    text = str(text)
    if len(text) > MAX_EXPRESSION_CHARS:
        raise JudgeError(f"a launch expression has at most {MAX_EXPRESSION_CHARS} characters, not {len(text)}.")
    return text


def parse(text: object) -> ast.Expression:
    """The syntax tree of one expression, or a JudgeError for text that is not one."""
    source = check_text(text)
    try:
        return ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise JudgeError(f"launch expression {source!r} is not an expression ({exc.msg}); "
                         f"use only {_VOCABULARY}.") from None


def evaluate(text: object, names: Mapping[str, int]) -> int:
    """The integer value of ``text`` with ``names`` bound (e.g. ``{"M": 128, "BM": 64}``)."""
    tree = parse(text)
    return _Evaluator(str(text).strip(), names).value(tree.body)


def check_vocabulary(text: object, names: Collection[str]) -> None:
    """Refuse, before any value is known, an expression that uses anything outside the vocabulary.

    Every token is looked at (evaluation alone would stop at the first division by zero).
    """
    tree = parse(text)
    source = str(text).strip()
    checker = _Evaluator(source, dict.fromkeys(names, 1))
    functions = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree.body):
        if isinstance(node, (ast.Load, ast.operator, ast.unaryop)):
            if isinstance(node, ast.operator) and type(node) not in _BINARY:
                raise JudgeError(f"launch expression {source!r}: the operator {type(node).__name__} is not allowed; "
                                 f"use only {_VOCABULARY}.")
            continue
        if isinstance(node, ast.Name) and id(node) in functions:
            continue  # the function's name, checked with its call
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise checker.refuse(node.func, "the call of")
            if node.keywords or len(node.args) != 2:
                raise checker.refuse(node, "the call")
            continue
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            if isinstance(node, ast.UnaryOp) and not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise checker.refuse(node, "the token")
            continue
        checker.value(node)  # a literal or a name is checked as evaluation would; anything else is refused


__all__ = ["FUNCTIONS", "MAX_EXPRESSION_CHARS", "MAX_MAGNITUDE", "SIZE_NAMES", "cdiv", "check_text", "evaluate",
           "check_vocabulary", "parse"]
