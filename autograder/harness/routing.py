"""Which process runs each test cell: the judge, unless the test needs a CuTe DSL kernel of the student's.

Why: test cells run in the judge (a kernel that holds no student Python; :mod:`gemmlab.answers`).
A CuTe DSL kernel is Python: only the student's process can build and launch it. So a test that
depends on one runs in the student's kernel, as before, with the grader's tamper probe.

Which tests may depend on one is decided from the instructor's notebook alone, so no hand-in can move
any other test out of the judge: an answer cell of the instructor's solution that defines a
``@cute.kernel`` or ``@cute.jit`` function is a DSL answer cell, every name it defines (kernels, and
the Python functions that launch them, as in the capstone) is a DSL answer, and every instructor
cell that uses such a name (or a name defined from one, transitively, in cell order) depends on it.
Such a test runs in the student's kernel when the student's kernel describes one of those names as a
finished DSL kernel or a Python function (:func:`gemmlab.answers.serving.describe`); otherwise, a
placeholder or a C++-only hand-in, it runs in the judge.
"""
from __future__ import annotations

import ast

from ..cell_metadata import display_only, grade_id, is_answer, is_graded, judge_only, judged_launches

#: Decorator names that make a function a CuTe DSL kernel or JIT function.
DSL_DECORATORS = ("kernel", "jit")


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [name for elt in node.elts for name in _targets(elt)]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return []


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run at the cell's top level: those of its body and of the blocks inside it (if, try, for, with),
    not of function or class bodies."""
    out = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            for field in ("body", "orelse", "finalbody"):
                out += _statements(getattr(node, field, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                out += _statements(handler.body)
    return out


def defined_names(source: str, imports: bool = False) -> list[str]:
    """Names a cell binds at its top level, in blocks too (functions, classes, assignments; imports only if asked)."""
    tree = _parse(source)
    names: list[str] = []
    for node in _statements(tree.body) if tree else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [n for t in node.targets for n in _targets(t)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.target is not None:
            names += _targets(node.target)
        elif imports and isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
    return list(dict.fromkeys(names))


#: The markers of the student's part of an instructor's answer cell (nbgrader's solution region).
SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")


def solution_lines(source: str) -> set[int]:
    """Line numbers (1-based) inside the cell's solution regions, the marker lines included."""
    inside, lines = False, set()
    for number, line in enumerate(source.splitlines(), 1):
        if SOLUTION_MARKERS[0] in line:
            inside = True
        if inside:
            lines.add(number)
        if SOLUTION_MARKERS[1] in line:
            inside = False
    return lines


def given_statements(source: str) -> list[tuple[list[str], str]]:
    """The instructor's own top-level definitions and assignments in an answer cell (no line of them in
    a solution region), as ``(names bound, code)``: e.g. the launcher 08 builds around the student's
    kernel source. The judge runs them itself, so such an object is the instructor's, made from the
    student's plain data; nothing of the solution is ever among them."""
    tree = _parse(source)
    solution = solution_lines(source)
    out = []
    for node in tree.body if tree else []:
        if not isinstance(node, (ast.FunctionDef, ast.Assign)):
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            continue                      # decorated (a DSL kernel): the student's process builds it
        if any(n in solution for n in range(first, (node.end_lineno or node.lineno) + 1)):
            continue
        code = ast.get_source_segment(source, node, padded=False) or ""
        names = [node.name] if isinstance(node, ast.FunctionDef) else [n for t in node.targets for n in _targets(t)]
        if names and code:
            out.append((names, code))
    return out


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def dsl_names(source: str) -> set[str]:
    """Functions an answer cell defines with a CuTe DSL decorator (``@cute.kernel``, ``@cute.jit``)."""
    tree = _parse(source)
    return {node.name for node in (tree.body if tree else [])
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(_decorator_name(d) in DSL_DECORATORS for d in node.decorator_list)}


#: Calls that build a CuTe DSL kernel (``gemmlab.dsl.compile(...)``, ``gemmlab.dsl.gemm_fn(...)``, ``k.compile_for(...)``).
DSL_BUILDERS = ("gemm_fn", "compile_for")


def builds_dsl(source: str) -> bool:
    """Whether an (instructor's) cell builds CuTe DSL kernels: it defines a ``@cute.kernel``/``@cute.jit`` function
    or calls ``gemmlab.dsl.compile``/``gemm_fn``/``compile_for``. Built from the student's DSL answers, such a
    kernel exists only in the student's process, so in a notebook with judged tests the cell runs there alone
    and the judge gets what it defines as the student's answers (launchers it records, plain data it decodes)."""
    tree = _parse(source)
    if tree is None:
        return False
    if dsl_names(source):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, owner = node.func.attr, node.func.value
            if attr in DSL_BUILDERS or (attr == "compile" and isinstance(owner, ast.Attribute) and owner.attr == "dsl"):
                return True
    return False


def used_names(source: str) -> set[str]:
    """Every name a cell reads, function bodies included."""
    tree = _parse(source)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} if tree else set()


#: Method names that change the object they are called on (lists, dicts, sets).
MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "remove",
                              "discard", "add", "sort", "reverse", "__setitem__", "__delitem__"})


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _local_names(tree: ast.AST) -> set[str]:
    """Names the code binds itself (assignments, loop targets, imports, definitions, parameters)."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names |= {a.arg for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs,
                                      *filter(None, (n.args.vararg, n.args.kwarg))]}
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return names


def _changed(tree: ast.AST) -> set[str]:
    """Names whose objects the code changes in place or rebinds through ``global``, its own names excluded."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
            continue
        targets = (n.targets if isinstance(n, (ast.Assign, ast.Delete)) else
                   [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)) else [])
        for target in targets:
            for t in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                if isinstance(t, (ast.Subscript, ast.Attribute)) and (root := _root(t)):
                    out.add(root)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATING_METHODS:
            if root := _root(n.func.value):
                out.add(root)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr") and n.args:
            if root := _root(n.args[0]):
                out.add(root)
    globals_ = {name for n in ast.walk(tree) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
    return {name for name in out if name in globals_ or name not in _local_names(tree)}


def changes_outside(source_nb, cell) -> set[str]:
    """The notebook's names whose objects this cell changes without defining them: item and attribute assignments,
    mutating methods, ``setattr`` and ``global``, in the cell and in the notebook's functions it calls (one level).
    A cell the grader may skip (``display_only``) must change none: a later cell could read the change. A guard,
    not a proof: an alias (``x = LADDER; x[k] = v``) or an object handed to a function that changes its parameter
    escapes it, so display-only cells are chosen by hand and the solutions' GPU grading run must score full marks."""
    tree = _parse(cell.source)
    if tree is None:
        return set()
    changed = _changed(tree)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    for other in source_nb.cells:
        other_tree = _parse(other.source) if other.cell_type == "code" and other is not cell else None
        for node in (other_tree.body if other_tree else []):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in called:
                changed |= _changed(node)
    return changed


def cell_dsl_dependencies(source_nb) -> list[frozenset[str]]:
    """For each cell of the instructor's notebook (by index): the DSL answer names it depends on (empty for an
    answer cell or a cell that uses none)."""
    roots: dict[str, set[str]] = {}          # name -> the DSL answer names its value was made from
    out: list[frozenset[str]] = []
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            out.append(frozenset())
            continue
        if is_answer(cell):
            if dsl_names(cell.source):      # a DSL answer cell: its kernels and the Python that launches them
                for name in defined_names(cell.source):
                    roots[name] = {name}
            out.append(frozenset())
            continue
        depends = set().union(*(roots.get(n, set()) for n in used_names(cell.source)))
        if depends:
            for name in defined_names(cell.source):
                if not name.startswith("_"):        # a cell's temporaries (_k, _name) are reused by later cells
                    roots[name] = roots.get(name, set()) | depends
        out.append(frozenset(depends))
    return out


def dsl_dependencies(source_nb) -> dict[str, frozenset[str]]:
    """For each test cell (by grade_id) of the instructor's notebook: the DSL answer names it depends on."""
    return {grade_id(cell): deps for cell, deps in zip(source_nb.cells, cell_dsl_dependencies(source_nb))
            if cell.cell_type == "code" and is_graded(cell) and not is_answer(cell)}


def _public(names: list[str]) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def one_side_cells(source_nb) -> tuple[set[str], set[str]]:
    """In a notebook with judged tests: the instructor's cells (by grade_id) that run in one kernel only.

    ``student``: cells that use the student's DSL answers and build DSL kernels from them (the kernels exist
    only in the student's process; what the cell defines reaches the judge as the student's answers do), or
    that define nothing a test or such a cell reads (a timing table, a self-check: the judge would only run
    it again). ``judge``: cells that use DSL answers and define what only judged tests read (05's
    performance bars: timed once, by the judge), and cells the instructor marked ``judge_only`` (05's C++
    builds). Cells marked ``display_only`` run in neither. Every other cell runs in both kernels."""

    deps_of = cell_dsl_dependencies(source_nb)
    candidates = [c for c, deps in zip(source_nb.cells, deps_of) if deps and c.cell_type == "code"
                  and not is_graded(c) and not is_answer(c) and grade_id(c) and not display_only(c)]
    student = {grade_id(c) for c in candidates if builds_dsl(c.source)}

    def read_by(keep) -> set[str]:      # display-only cells are not run when graded: they read nothing then
        return set().union(*(used_names(c.source) for c in source_nb.cells
                             if c.cell_type == "code" and not display_only(c) and keep(c)))

    read = read_by(lambda c: is_graded(c) or grade_id(c) in student)
    student |= {grade_id(c) for c in candidates if not _public(defined_names(c.source)) & read}
    read_outside_judge = read_by(lambda c: (is_graded(c) and not judged_launches(c)) or grade_id(c) in student)
    judge = {grade_id(c) for c in candidates
             if grade_id(c) not in student and not _public(defined_names(c.source)) & read_outside_judge}
    judge |= {grade_id(c) for c in source_nb.cells if c.cell_type == "code" and judge_only(c) and grade_id(c)
              and not is_graded(c) and not is_answer(c) and grade_id(c) not in student}
    return student, judge


__all__ = ["DSL_BUILDERS", "DSL_DECORATORS", "MUTATING_METHODS", "SOLUTION_MARKERS", "builds_dsl", "cell_dsl_dependencies",
           "changes_outside", "defined_names", "one_side_cells", "dsl_dependencies", "dsl_names", "given_statements",
           "solution_lines", "used_names"]
