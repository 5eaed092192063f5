"""What the CuTe DSL's and MLIR's common error messages mean, and what to change.

The DSL traces a ``@cute.jit``/``@cute.kernel`` function once, in Python, and builds MLIR from
it. Its messages speak of that machinery ("operand does not dominate this use", "a Runtime value
(Staged value) where a Python value (Meta value) boolean is required", "weakly congruent"), not of
the line a student wrote. Each rule below matches one family of messages (the DSL's diagnostic id
where it has one, otherwise the message's words, including the wording of older DSL releases)
and says, in the course's words, what happened and what to change. ``dsl/errors.py`` shows the
explanation under the message and the student's line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Explanation", "RULES", "Rule", "explain", "is_assigned"]


@dataclass(frozen=True)
class Explanation:
    """One family of DSL errors: a short name, what the message means, and what to change."""

    topic: str
    means: str
    change: str

    def __str__(self) -> str:
        return f"What it means: {self.means}\nWhat to change: {self.change}"


@dataclass(frozen=True)
class Rule:
    """A message pattern (searched in the whole error text, case-insensitive) and its explanation.

    ``assigned``: the rule holds only when the name the pattern captures (group ``name``) is, or is
    not (False), assigned somewhere in the student's source; None: whatever the source says.
    """

    pattern: str
    explanation: Explanation
    assigned: bool | None = None


#: Run-time versus trace-time values: the idea most DSL errors come back to.
_RUNTIME = ("a value known only when the kernel runs (a thread or block index, a tensor element, a shape "
            "that is not a compile-time constant, or anything computed from one)")

#: A NameError as Python and the DSL word it; group ``name`` is the missing name.
_NOT_DEFINED = r"name '(?P<name>\w+)' is not defined"

RULES: tuple[Rule, ...] = (
    Rule(r"does not dominate this use",
         Explanation(
             "a run-time value carried out of its branch or loop",
             "a value computed inside a run-time `if`, `for` or `while` (one whose condition or bounds are known "
             "only when the kernel runs) is used after it, through something the DSL cannot follow out of "
             "the branch: a dict, list or object attribute, a global, or a helper function that stores it.",
             "keep it in a plain local variable: give it a value of the same type before the `if`/loop "
             "(e.g. `v = cutlass.Float32(0.0)`), assign that variable inside, and use it after; or compute "
             "it where you use it.")),
    Rule(r"PHASE_DYNAMIC_TO_STATIC_BOOL|unable to convert dynamic .*to bool|where a Python value .*boolean is required",
         Explanation(
             "Python needed True or False from a run-time value",
             f"plain Python had to decide True or False from {_RUNTIME}, while the DSL was still tracing. "
             "This happens in a helper function without `@cute.jit` (its `if`, `while`, `and`, `or` and "
             "`not` are Python's own), and with Python's `min()`, `max()` or `bool()` there.",
             "decorate the helper with `@cute.jit` (then its `if`/`while` become run-time branches), use "
             "`cutlass.min(a, b)` / `cutlass.max(a, b)` instead of Python's, `cutlass.select_(cond, a, b)` "
             "for a choice between two values, and `&` / `|` instead of `and` / `or`; or, if the value can "
             "be known at compile time, pass it as a `cutlass.Constexpr` argument.")),
    Rule(r"PHASE_REQUIRES_CONSTANT|requires a value known at code-read time|range_constexpr\(\)` requires",
         Explanation(
             "a compile-time constant was needed",
             f"`cutlass.const_expr(...)`, `cutlass.range_constexpr(...)` and `assert` decide while the kernel "
             f"is traced, so they need a value known then; this one is {_RUNTIME}.",
             "use the run-time form: a plain `if` instead of `if cutlass.const_expr(...)`, `range(...)` or "
             "`cutlass.range(...)` instead of `cutlass.range_constexpr(...)`; or make the value a "
             "`cutlass.Constexpr` argument (a Python int, bool or object fixed when the kernel compiles).")),
    Rule(r"PHASE_DYNAMIC_INDEX|as a list index or for loop range in plain Python",
         Explanation(
             "a run-time value used as a Python index or count",
             f"{_RUNTIME} was used where Python needs a real integer: to index a Python list or tuple, in "
             "`int(...)`, or as the bound of a Python `range` outside traced code.",
             "index a CuTe tensor instead of a Python list (e.g. a register tensor from "
             "`cute.make_rmem_tensor`), loop with `range(...)`/`cutlass.range(...)` inside a `@cute.jit` or "
             "`@cute.kernel` function, or make the value a compile-time constant (`cutlass.Constexpr`).")),
    Rule(_NOT_DEFINED,
         Explanation(
             "a variable set only inside a run-time branch or loop",
             "a variable that is first assigned inside a run-time `if` or loop does not exist after it: "
             "the kernel is traced once, and on the path that skips the branch the variable never got a value.",
             "give it a value before the `if`/loop, of the type the branch assigns (e.g. `v = "
             "cutlass.Float32(0.0)` before `if ...: v = x * 2.0`). If the condition is a compile-time "
             "constant, write `if cutlass.const_expr(cond):` and the branch is decided while tracing."),
         assigned=True),
    Rule(_NOT_DEFINED,
         Explanation(
             "a name that is not defined",
             "the kernel uses a name that is assigned nowhere in it and is not a global of the notebook: a "
             "typo, or a constant or helper from a cell that has not been run in this session.",
             "check the spelling, or run the cell that defines it (after a restart, every cell above this "
             "one); a notebook constant a kernel reads must exist before the kernel is compiled."),
         assigned=False),
    Rule(r"has type `[^`]*` on one path and `[^`]*` on another|type of .* changed|different types? .* (?:branch|loop)",
         Explanation(
             "a variable changes type in a run-time branch or loop",
             "a variable holds one type before a run-time `if`/loop and another inside it (typically a "
             "Python `0` (Int32) that becomes a Float32 sum, or fp16 against fp32); where the paths meet, "
             "the kernel needs one type.",
             "start it with the type it ends with (`acc = cutlass.Float32(0.0)`, not `acc = 0`), or convert "
             "inside the branch with `.to(cutlass.Float32)` (or the type the variable had before).")),
    Rule(r"different structure at the end of this|must keep the same shape \(same fields",
         Explanation(
             "a list, dict or tuple changes shape in a run-time branch or loop",
             "a Python container carried through a run-time `if`/loop gains or loses entries inside it; "
             "the traced kernel needs the same number of values on every path.",
             "create every entry before the `if`/loop and only assign to existing entries inside, or use a "
             "register tensor (`cute.make_rmem_tensor`) instead of a Python list for values made at run time.")),
    Rule(r"called but never launched",
         Explanation(
             "a kernel was called without .launch",
             "calling a `@cute.kernel` function only builds its launcher; nothing runs until it is launched.",
             "write `kernel(args...).launch(grid=[...], block=[...], stream=stream)` in the `@cute.jit` "
             "function.")),
    Rule(r"weakly congruent|expects rank\(tiler\) <= rank\(input\)",
         Explanation(
             "coordinates or a tiler that do not match the tensor's modes",
             "a tensor was indexed (or tiled with `local_tile`/`zipped_divide`) with a different number of "
             "coordinates than it has modes, or with a nesting its layout does not have.",
             "print the tensor while tracing (`print(t)` shows its layout) and give one coordinate per mode, "
             "`None` for a mode you keep whole (e.g. `tAgA[None, None, k]`); a tiler needs at most as many "
             "modes as the tensor.")),
    Rule(r"Expected Coord, whose leaves are integers",
         Explanation(
             "a coordinate that is not an integer",
             "a tensor was indexed with a float (Python's `/` always gives one) or with something that is not "
             "an integer.",
             "use integer division `//` (and `%`) for indices, or convert with `.to(cutlass.Int32)`.")),
    Rule(r"dynamic size is not supported",
         Explanation(
             "a register tensor whose size is known only at run time",
             "registers are allocated when the kernel compiles, so a register tensor "
             "(`cute.make_rmem_tensor`, `make_fragment_*`) needs a shape made of compile-time constants; "
             "this one has a run-time extent (shown as `?`).",
             "build its layout from constants (a tile size, `cute.size` of a static partition, a "
             "`cutlass.Constexpr`), e.g. from the static shape of the partition it will hold.")),
    Rule(r"expects same size in rank|expects src and dst to have the same|size mismatch",
         Explanation(
             "a copy between tensors of different sizes",
             "`cute.copy`/`cute.autovec_copy` was given a source and a destination with different numbers of "
             "elements in some mode: each thread's partition of one does not match its partition of the other.",
             "partition both with the same TiledCopy (`partition_S` of the source, `partition_D` of the "
             "destination), or make the register tensor from the partition it receives; print both tensors "
             "while tracing to compare their shapes.")),
    Rule(r"expects src and dst to have static shape",
         Explanation(
             "a copy of a tensor whose shape is known only at run time",
             "a copy needs static shapes, and one of the tensors still has a mode whose size is known only "
             "at run time (e.g. the k-tile mode of `local_tile(..., (m, None))`).",
             "index the run-time modes before copying: copy one k-tile at a time, e.g. "
             "`tAgA[None, None, None, k]`.")),
    Rule(r"ptr alignment \(\d+ bits\) does not meet requirement",
         Explanation(
             "a vector copy wider than the data's alignment",
             "the copy atom moves more bits per instruction than the tensor's alignment guarantees.",
             "make `num_bits_per_copy` the element's bits times the vector length the rows allow, and let "
             "each thread's value layout run along the contiguous mode ((1, vec) for a K-major tile, "
             "(vec, 1) for an N-major one).")),
)

_COMPILED = tuple((re.compile(rule.pattern, re.IGNORECASE), rule) for rule in RULES)


def is_assigned(name: str, source: str) -> bool:
    """Whether ``source`` assigns ``name`` anywhere: ``name = ...``, ``name += ...``, a tuple target
    (``a, name = ...``) or a loop variable (``for name in ...``)."""
    target = rf"(?<![\w.]){re.escape(name)}(?!\w)"
    return bool(re.search(rf"{target}\s*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)", source)
                or re.search(rf"{target}\s*,[^=\n]*=(?!=)|,\s*{target}\s*(?:,[^=\n]*)?=(?!=)", source)
                or re.search(rf"\bfor\b[^\n]*{target}[^\n]*\bin\b", source))


def explain(message: str, source: str = "") -> Explanation | None:
    """The explanation of the first rule whose pattern occurs in ``message`` (and that holds for the
    student's ``source``, for rules that look at it), or None."""
    for pattern, rule in _COMPILED:
        match = pattern.search(message)
        if match is None:
            continue
        if rule.assigned is None or is_assigned(match.group("name"), source) == rule.assigned:
            return rule.explanation
    return None
