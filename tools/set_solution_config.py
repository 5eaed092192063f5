#!/usr/bin/env python3
"""Change integer settings of a solution kernel in its solutions notebook, in place.

    python tools/set_solution_config.py gemm06_cpp STAGES=3 GROUP_M=8
    python tools/set_solution_config.py hopper_ws WS_GROUP_M=16
    python tools/set_solution_config.py ladder_any WARPS_N=2 BK=64

Why: a tuning run (benchmarks/sweep.py) finds a better configuration by changing settings in
memory; this writes the same change into the notebook, so the kernel the GPU tests then run is
the one that will be committed (run it on the GPU machine and here with the same arguments).

The cell is the one tagged ``kernel:<name>`` or one of its ``kernel-part:<name>`` cells. A setting
is changed where the cell assigns it: a keyword of the cell's ``*_CONFIG = dict(...)`` line (added
there when that dict inherits it from another config), or a module-level constant (``KEY = 3`` or ``A, KEY = 1, 3``).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.append(str(ROOT))

from autograder.cell_metadata import kernel_tag  # noqa: E402

CONFIG_LINE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*_CONFIG) = dict\((?P<body>.*)\)(?P<tail>\s*(#.*)?)$", re.M)


class ConfigEditError(ValueError):
    """The setting is not assigned in a form this tool can change."""


def _set_in_config_line(source: str, key: str, value: int) -> str | None:
    """The source with ``key=value`` in the cell's first ``*_CONFIG = dict(...)`` line, or None."""
    match = CONFIG_LINE.search(source)
    if match is None:
        return None
    body = match.group("body")
    keyword = re.compile(rf"\b{re.escape(key)}=-?\d+")
    if keyword.search(body):
        body = keyword.sub(f"{key}={value}", body, count=1)
    elif re.fullmatch(r"[A-Z][A-Z0-9_]*_CONFIG(, *[A-Z_][A-Z0-9_]*=-?\d+)*", body.strip()):
        body = f"{body}, {key}={value}"           # dict(OTHER_CONFIG, ...): inherited, so add it
    else:
        return None
    line = f"{match.group('name')} = dict({body}){match.group('tail')}"
    return source[:match.start()] + line + source[match.end():]


def _set_constant(source: str, key: str, value: int) -> str | None:
    """The source with the module-level constant ``key`` set to ``value``, or None."""
    for match in re.finditer(r"^(?P<names>[A-Z_][A-Z0-9_]*(?:, *[A-Z_][A-Z0-9_]*)*) = (?P<values>[^#\n]+?)"
                             r"(?P<tail>\s*(#.*)?)$", source, re.M):
        names = [n.strip() for n in match.group("names").split(",")]
        if key not in names:
            continue
        values = [v.strip() for v in match.group("values").split(",")]
        if len(values) != len(names) or not all(re.fullmatch(r"-?\d+", v) for v in values):
            raise ConfigEditError(f"{key} is assigned {match.group('values')!r}, not integer literals")
        values[names.index(key)] = str(value)
        line = f"{match.group('names')} = {', '.join(values)}{match.group('tail')}"
        return source[:match.start()] + line + source[match.end():]
    return None


def set_in_source(source: str, changes: dict[str, int]) -> str:
    """``source`` with every ``changes`` setting applied; ConfigEditError where one cannot be."""
    for key, value in changes.items():
        edited = _set_constant(source, key, value)
        if edited is None:
            edited = _set_in_config_line(source, key, value)
        if edited is None:
            raise ConfigEditError(f"no '{key} = <int>' constant and no *_CONFIG = dict(...) line to set {key} in")
        source = edited
    return source


def assignment_of(kernel: str) -> str:
    import solutions

    assignment = solutions.assignment_of(kernel)
    if assignment is None or kernel in solutions.VARIANTS:   # a variant is its base kernel's cell, changed in memory
        raise ConfigEditError(f"unknown solution kernel {kernel!r}")
    return assignment


def apply(kernel: str, changes: dict[str, int]) -> Path:
    """Write ``changes`` into the cells of ``kernel:<kernel>`` (the kernel's own cell and its
    ``kernel-part:`` cells: each setting where one of them assigns it); return the notebook's path."""
    import solution_cells

    assignment = assignment_of(kernel)
    path = solution_cells.notebook_path(assignment)
    try:
        indices = solution_cells.cell_indices(assignment, kernel_tag(kernel))
    except solution_cells.SolutionCellError as err:
        raise ConfigEditError(str(err)) from None
    nb = nbformat.read(path, as_version=4)
    for key, value in changes.items():
        for i in indices:
            try:
                nb.cells[i].source = set_in_source(nb.cells[i].source, {key: value})
                break
            except ConfigEditError:
                if i == indices[-1]:
                    raise
    nbformat.write(nb, path)
    return path


def parse_changes(items: list[str]) -> dict[str, int]:
    changes = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", key) or not re.fullmatch(r"-?\d+", value):
            raise ConfigEditError(f"{item!r}: expected KEY=INTEGER, e.g. STAGES=3")
        changes[key] = int(value)
    return changes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel", help="solution kernel, e.g. gemm06_cpp")
    ap.add_argument("settings", nargs="+", metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        path = apply(args.kernel, parse_changes(args.settings))
    except ConfigEditError as err:
        print(f"set_solution_config: {err}", file=sys.stderr)
        return 1
    print(f"{path.relative_to(ROOT)}: {args.kernel} {' '.join(args.settings)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
