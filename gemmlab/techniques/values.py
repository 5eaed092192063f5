"""Which value each register holds, as far as the machine code tells: constants, sums, and where loads came from.

Why: some techniques are written in the operands. Which mbarrier a wait names (``[UR37+0x10]``), with
which parity (a register set to ``0x80000000``), whether four MMAs read four different k-blocks (four
different shared-memory descriptors) or one, whether the registers an MMA multiplies were filled by
``ldmatrix``, a plain shared-memory load or a global load. A register's value is followed from where
it is written to where it is read: the classic global value numbering on the control-flow graph.

Every value gets a number (:class:`Values` keeps the table). Equal numbers mean equal values; different
numbers mean "not known to be equal". A value is a constant, a symbol (a special register such as
``SR_TID.X``, a word of the parameter bank, or what one load instruction brought), a symbol plus a
constant, an operation on other values, or a merge (phi) where paths with different values meet.
"""
from __future__ import annotations

import re
import struct
from functools import lru_cache
from typing import Iterable, Iterator

from .cfg import ControlFlowGraph
from .listing import Instruction
from .semantics import classify

_REG = re.compile(r"^(U?R(?:\d+|Z)|U?P(?:\d+|T)|SRZ)$")
_IMM = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")
_ADDRESS = re.compile(r"(\w*)\[([^\]]*)\]")
#: Instructions that write no register (their first operand is a source or an address).
_NO_DEST = {"ST", "STG", "STS", "STL", "LDGSTS", "LDGDEPBAR", "DEPBAR", "UTMALDG", "UTMASTG", "UTMACMDFLUSH",
            "UTMACCTL", "UTMAREDG", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA", "UTCBMMA", "UTCBAR", "BAR",
            "MEMBAR", "FENCE", "BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "NOP", "BSSY", "BSYNC", "WARPSYNC",
            "WARPGROUP", "NANOSLEEP", "YIELD", "KILL", "BPT", "CCTL", "ERRBAR", "STSM", "RED", "REDG", "UBLKCP",
            "STTM", "UVIRTCOUNT", "UCGABAR_ARV", "UCGABAR_WAIT", "USETMAXREG", "ACQBULK", "BREAK", "DEPBAR"}
#: Loads: their destination registers hold what memory held, a symbol of the load itself.
_LOADS = {"LDG", "LD", "LDS", "LDL", "LDSM", "LDTM", "ATOM", "ATOMS", "ATOMG", "LDGMC", "SULD", "TEX", "TLD", "REDUX",
          "SHFL", "VOTE", "VOTEU", "S2R", "S2UR", "CS2R"}
#: Constant-bank loads: the same word of the same bank is the same value everywhere in the kernel.
_CONSTANT_LOADS = {"LDC", "ULDC", "LDCU"}
_MASK = (1 << 32) - 1


def _imm(text: str) -> int | None:
    t = text.strip()
    if not _IMM.match(t):
        return None
    neg = t.startswith("-")
    t = t.lstrip("-")
    value = int(t, 16) if t.startswith("0x") else int(t)
    return -value if neg else value


@lru_cache(maxsize=1 << 16)
def register_name(operand: str) -> str | None:
    """The register an operand names (``R12.reuse`` → ``R12``), or None for anything else."""
    text = operand.strip().lstrip("-!|~").rstrip("|")
    name = text.split(".", 1)[0]
    return name if _REG.match(name) else None


def _width_written(ins: Instruction) -> int:
    """How many consecutive 32-bit registers the first destination spans."""
    e = classify(ins)
    mods = ins.modifiers
    if e.kind in ("load",) and e.bytes:
        return max(1, e.bytes // 4)
    if e.kind == "ldmatrix":
        return int(e.shape[1:] or 1)
    if e.kind == "tcgen05.ld":
        return int(e.shape[1:] or 1)
    if e.kind == "mma.sync":
        return 4 if "F32" in mods or ins.base in ("IMMA", "DMMA") else 2
    if e.kind == "wgmma":
        m = re.match(r"(\d+)x(\d+)x(\d+)", e.shape)
        return int(m.group(2)) // 2 if m else 1
    if "WIDE" in mods or "64" in mods or ins.base == "CS2R":
        return 2
    if "128" in mods:
        return 4
    return 1


@lru_cache(maxsize=1 << 16)
def destinations(ins: Instruction) -> tuple[str, ...]:
    """The registers ``ins`` writes (each 32-bit register of a wide destination), predicates included."""
    return tuple(_destinations(ins))


def _destinations(ins: Instruction) -> list[str]:
    if ins.base in _NO_DEST or ins.never_runs or not ins.operands:
        if ins.base == "SYNCS" and "PHASECHK" in ins.modifiers and ins.operands:
            name = register_name(ins.operands[0])
            return [name] if name and name not in ("PT", "UPT") else []
        return []
    if ins.base == "SYNCS":
        return []
    out: list[str] = []
    first = register_name(ins.operands[0])
    if first is None or ins.operands[0].strip().startswith(("[", "-", "!", "|")):
        return []
    width = _width_written(ins)
    if first[0] in "RU" and first not in ("RZ", "URZ") and not first.startswith(("P", "UP")):
        prefix = "UR" if first.startswith("UR") else "R"
        number = int(first[len(prefix):])
        out.extend(f"{prefix}{number + k}" for k in range(width))
    elif first.startswith(("P", "UP")) and first not in ("PT", "UPT"):
        out.append(first)
    if len(ins.operands) > 1:                  # a second destination: a predicate (carry, compare, elect)
        second = register_name(ins.operands[1])
        if second and second.startswith(("P", "UP")) and second not in ("PT", "UPT") and \
                not ins.operands[1].strip().startswith("!") and ins.base in (
                    "IADD3", "UIADD3", "LEA", "ULEA", "ISETP", "UISETP", "PLOP3", "UPLOP3", "ELECT", "LOP3", "ULOP3",
                    "FSETP", "HSETP2", "DSETP", "IADD", "UIADD", "UTCATOMSWS", "R2UR", "VOTE", "VOTEU", "IMAD"):
            out.append(second)
    return out


class Values:
    """Value numbers of every register at every instruction of one kernel's graph."""

    def __init__(self, graph: ControlFlowGraph) -> None:
        self.graph = graph
        self._ids: dict[tuple, int] = {}
        self.exprs: list[tuple] = []
        self.phi_inputs: dict[int, set[int]] = {}
        self.phi_by_pred: dict[int, dict[int, int]] = {}
        self._dependence: dict[tuple, bool] = {}
        self.entry_state: dict[int, dict[str, int]] = {}
        self._origins: dict[int, set[str]] = {}
        self._block_states: dict[int, list[dict[str, int]]] = {}
        self._solve()

    # ---------------------------------------------------------------- the table of values

    def _intern(self, expr: tuple) -> int:
        found = self._ids.get(expr)
        if found is None:
            found = len(self.exprs)
            self._ids[expr] = found
            self.exprs.append(expr)
        return found

    def const(self, value: int) -> int:
        return self._intern(("c", value & _MASK))

    def symbol(self, name: str) -> int:
        return self._intern(("s", name))

    def constant(self, vid: int) -> int | None:
        """The constant a value number stands for, or None."""
        expr = self.exprs[vid]
        return expr[1] if expr[0] == "c" else None

    def add(self, vid: int, k: int) -> int:
        expr = self.exprs[vid]
        if expr[0] == "c":
            return self.const(expr[1] + k)
        if expr[0] == "+":
            vid, k = expr[1], expr[2] + k
        return vid if k == 0 else self._intern(("+", vid, k))

    def split(self, vid: int) -> tuple[int, int]:
        """(base value, constant offset) of a value: ``base + offset``."""
        expr = self.exprs[vid]
        if expr[0] == "+":
            return expr[1], expr[2]
        return vid, 0

    def op(self, name: str, args: Iterable[int]) -> int:
        return self._intern(("op", name, tuple(args)))

    # ---------------------------------------------------------------- reading operands

    def read(self, state: dict[str, int], operand: str) -> int:
        """The value an operand reads in ``state`` (immediates, registers, with their sign or modifier)."""
        text = operand.strip()
        value = _imm(text)
        if value is not None:
            return self.const(value)
        name = register_name(text)
        if name is None:
            return self.symbol(f"operand:{text}")
        if name in ("RZ", "URZ", "SRZ"):
            vid = self.const(0)
        elif name in ("PT", "UPT"):
            vid = self.const(1)
        else:
            vid = state.get(name)
            if vid is None:
                vid = self.symbol(f"in:{name}")
        stripped = text.lstrip("|")
        if stripped.startswith("!"):
            c = self.constant(vid)
            return self.const(0 if c else 1) if c is not None else self.op("not", [vid])
        if stripped.startswith("-"):
            c = self.constant(vid)
            return self.const(-c) if c is not None else self.op("neg", [vid])
        if text.startswith("|"):
            return self.op("abs", [vid])
        rest = text.lstrip("-!|~").rstrip("|").split(".")[1:]
        rest = [r for r in rest if r not in ("reuse", "64")]
        return self.op("part." + ".".join(rest), [vid]) if rest else vid

    def address(self, state: dict[str, int], operand: str) -> tuple[str, int] | None:
        """``(space word, value)`` of an address operand: ``[UR37+0x10]`` → ("", UR37 + 16); ``tmem[UR4+0x20]``
        → ("tmem", UR4 + 32); ``desc[UR8][R8.64+0x2]`` → ("desc", R8 + 2). None if the operand holds no address."""
        found = _ADDRESS.findall(operand)
        if not found:
            return None
        word, inside = found[-1]
        if word == "desc" and len(found) == 1:
            word = ""
        total, offset = None, 0
        for part in re.split(r"\+", inside.replace("-", "+-")):
            part = part.strip()
            if not part:
                continue
            k = _imm(part)
            if k is not None:
                offset += k
                continue
            vid = self.read(state, part)
            c = self.constant(vid)
            if c is not None:
                offset += c
                continue
            total = vid if total is None else self.op("add", sorted([total, vid]))
        base = self.const(0) if total is None else total
        return (found[0][0] if len(found) > 1 else word), self.add(base, offset)

    def pair(self, state: dict[str, int], operand: str) -> tuple[int, int]:
        """The two 32-bit values of a 64-bit register pair named inside ``gdesc[UR40]`` or as ``R8.64``."""
        m = re.search(r"U?R\d+", operand)
        if not m:
            return self.read(state, operand), self.const(0)
        name = m.group(0)
        prefix = "UR" if name.startswith("UR") else "R"
        number = int(name[len(prefix):])
        return self.read(state, name), self.read(state, f"{prefix}{number + 1}")

    # ---------------------------------------------------------------- transfer

    def _evaluate(self, ins: Instruction, state: dict[str, int], where: str) -> dict[str, int]:
        """The values ``ins`` writes, by destination register."""
        dests = destinations(ins)
        if not dests:
            return {}
        base, mods = ins.base, ins.modifiers
        ops = ins.operands
        regs = [d for d in dests if not d.startswith(("P", "UP"))]
        out: dict[str, int] = {d: self.symbol(f"{where}:{d}") for d in dests}

        def src(i: int) -> int:
            return self.read(state, ops[i]) if i < len(ops) else self.const(0)

        if base in _CONSTANT_LOADS and len(ops) > 1:
            addr = ops[1].strip()
            for k, d in enumerate(regs):
                out[d] = self.symbol(f"bank:{addr}+{4 * k}")
            return out
        if base in _LOADS:
            if base in ("S2R", "S2UR") and len(ops) > 1:
                out[regs[0]] = self.symbol(ops[1].strip())
            elif base == "CS2R" and len(ops) > 1 and ops[1].strip() == "SRZ":
                for d in regs:
                    out[d] = self.const(0)
            else:
                for k, d in enumerate(regs):
                    out[d] = self.symbol(f"load@{where}:{k}")
            return out
        if not regs:
            return out
        d = regs[0]
        srcs = [i for i in range(1, len(ops)) if not (i == 1 and len(dests) > len(regs)
                                                      and register_name(ops[1]) and ops[1].strip().startswith(("P", "UP")))]
        value: int | None = None
        if base in ("MOV", "UMOV") and srcs:
            value = src(srcs[0])
        elif base == "R2UR" and srcs:
            value = src(srcs[-1])
        elif base in ("IMAD", "UIMAD") and len(srcs) >= 3 and not any(m in mods for m in ("WIDE", "HI", "X")):
            a, b, c = (src(i) for i in srcs[:3])
            ca, cb = self.constant(a), self.constant(b)
            if "MOV" in mods:
                value = c
            elif "SHL" in mods and cb is not None:          # IMAD.SHL: a multiply by a power of two (its b)
                value = self.const(ca * cb) if ca is not None else self.op("mul", [a, b])
                cc = self.constant(c)
                value = self.add(value, cc) if cc is not None else self.op("add", sorted([value, c]))
            elif "IADD" in mods:
                value = self._sum([a, c])
            elif ca == 0 or cb == 0:
                value = c
            elif ca is not None and cb is not None:
                value = self._sum([self.const(ca * cb), c])
            elif cb == 1:
                value = self._sum([a, c])
            elif ca == 1:
                value = self._sum([b, c])
        elif base in ("IADD3", "UIADD3", "VIADD", "IADD", "UIADD") and "X" not in mods and "64" not in mods:
            value = self._sum([src(i) for i in srcs if register_name(ops[i]) not in ("PT", "UPT")
                               and not (register_name(ops[i]) or "").startswith(("P", "UP", "!P", "!UP"))])
        elif base in ("SHF", "USHF") and len(srcs) >= 3:
            lo, sh, hi = (src(i) for i in srcs[:3])
            clo, csh, chi = self.constant(lo), self.constant(sh), self.constant(hi)
            if csh is not None and "L" in mods and "U32" in mods and chi == 0 and clo is not None:
                value = self.const((clo << csh) & 0xFFFFFFFF)
            elif csh is not None and "R" in mods and "U32" in mods and "HI" in mods and clo == 0 and chi is not None:
                value = self.const((chi & 0xFFFFFFFF) >> csh)
        elif base in ("LOP3", "ULOP3") and "LUT" in mods and len(srcs) >= 4:
            a, b, c = (self.constant(src(i)) for i in srcs[:3])
            lut = self.constant(src(srcs[3]))
            if None not in (a, b, c, lut):
                value = self.const(_lop3(a, b, c, lut))
        elif base in ("LEA", "ULEA") and "HI" not in mods and len(srcs) >= 3:
            a, b, s = (src(i) for i in srcs[:3])
            ca, cb, cs = self.constant(a), self.constant(b), self.constant(s)
            if ca is not None and cs is not None:
                value = self._sum([self.const(ca << cs), b])
        elif base == "HFMA2" and len(srcs) == 4 and {register_name(ops[i]) for i in srcs[:2]} == {"RZ"}:
            halves = [_half_bits(ops[i]) for i in srcs[2:]]    # ptxas writes a constant as -0 * 0 + (hi, lo)
            if None not in halves:
                value = self.const((halves[0] << 16) | halves[1])  # type: ignore[operator]
        if value is None:
            value = self.op(ins.opcode, [src(i) for i in srcs])
        if ins.conditional:
            old = state.get(d, self.symbol(f"in:{d}"))
            value = value if value == old else self.op("select", [self.symbol(f"pred@{where}"), value, old])
        out[d] = value
        for k, extra in enumerate(regs[1:], 1):
            out[extra] = self.op(f"part{k}", [value])
        return out

    def _sum(self, values: list[int]) -> int:
        total, rest = 0, []
        for v in values:
            base, off = self.split(v)
            total += off
            c = self.constant(base)
            if c is not None:
                total += c
            else:
                rest.append(base)
        if not rest:
            return self.const(total)
        core = rest[0] if len(rest) == 1 else self.op("add", sorted(rest))
        return self.add(core, total)

    def step(self, ins: Instruction, state: dict[str, int], where: str) -> None:
        """Apply ``ins`` to ``state`` (in place)."""
        state.update(self._evaluate(ins, state, where))

    def _solve(self) -> None:
        g = self.graph
        out_state: dict[int, dict[str, int]] = {}
        changed = True
        rounds = 0
        while changed and rounds < 50:
            changed, rounds = False, rounds + 1
            for b in g.order:
                preds = [p for p in g.blocks[b].predecessors if p in out_state]
                if b == g.entry and not preds:
                    entry: dict[str, int] = {}
                else:
                    entry = self._join(b, [out_state[p] for p in preds], preds)
                if self.entry_state.get(b) != entry:
                    self.entry_state[b] = entry
                    changed = True
                state = dict(entry)
                for i, ins in enumerate(g.blocks[b].instructions):
                    self.step(ins, state, f"{b}.{i}")
                out_state[b] = state

    def _join(self, block: int, states: list[dict[str, int]], preds: list[int]) -> dict[str, int]:
        if not states:
            return {}
        if len(states) == 1:
            return dict(states[0])
        out: dict[str, int] = {}
        for name in set().union(*states):
            incoming = [s.get(name, self.symbol(f"in:{name}")) for s in states]
            values = set(incoming)
            if len(values) == 1:
                out[name] = values.pop()
            else:
                phi = self._intern(("phi", block, name))
                self.phi_inputs.setdefault(phi, set()).update(values - {phi})
                by_pred = self.phi_by_pred.setdefault(phi, {})
                for pred, value in zip(preds, incoming):
                    if value != phi:
                        by_pred[pred] = value
                out[name] = phi
        return out

    def evaluate(self, vid: int, env: dict[str, int], default: int = 1 << 20) -> int | None:
        """The low 32 bits of a value for concrete symbols (``env``: ``"SR_TID.X"`` → 5, ...; any other symbol:
        ``default``); a merge of paths takes the value that enters its loop from outside. None where an
        operation is not one this evaluator knows."""
        return self._eval(vid, env, default, set())

    def _eval(self, vid: int, env: dict[str, int], default: int, seen: set[int]) -> int | None:
        m = 0xFFFFFFFF
        expr = self.exprs[vid]
        kind = expr[0]
        if kind == "c":
            return expr[1] & m
        if kind == "s":
            return env.get(expr[1], default) & m
        if kind == "+":
            base = self._eval(expr[1], env, default, seen)
            return None if base is None else (base + expr[2]) & m
        if kind == "phi":
            if vid in seen:
                return default
            block = expr[1]
            entering = [v for p, v in self.phi_by_pred.get(vid, {}).items()
                        if (p, block) not in set(self.graph.back_edges)]
            if not entering:
                return default
            return self._eval(entering[0], env, default, seen | {vid})
        name, args = expr[1], [self._eval(a, env, default, seen) for a in expr[2]]
        value = _apply(name, args)
        if value is None and not self._depends_on(vid, env):
            value = (default + (vid << 12)) & m            # an operation this evaluator does not know, the same for
        return value                                       # every thread: any one value stands for it

    def _depends_on(self, vid: int, env: dict[str, int]) -> bool:
        """Whether a value is computed from a symbol ``env`` gives (e.g. the thread index)."""
        key = (vid, tuple(sorted(env)))
        if key not in self._dependence:
            self._dependence[key] = any(expr[0] == "s" and expr[1] in env for _, expr in self._walk(vid))
        return self._dependence[key]

    # ---------------------------------------------------------------- questions

    def before(self, block: int, index: int) -> dict[str, int]:
        """The register values just before instruction ``index`` of ``block`` (computed once per block)."""
        states = self._block_states.get(block)
        if states is None:
            state = dict(self.entry_state.get(block, {}))
            states = []
            for i, ins in enumerate(self.graph.blocks[block].instructions):
                states.append(dict(state))
                self.step(ins, state, f"{block}.{i}")
            self._block_states[block] = states
        return states[index]

    def origins(self, vid: int, limit: int = 4096) -> set[str]:
        """The load symbols (``load@B.I:k``) a value was computed from, through operations, moves and merges."""
        if vid in self._origins:
            return self._origins[vid]
        found = self._trace(vid, limit)
        self._origins[vid] = found
        return found

    def _walk(self, vid: int, limit: int = 4096) -> Iterator[tuple[int, tuple]]:
        """Every value ``vid`` was computed from (itself included), through sums, operations and merges."""
        seen: set[int] = set()
        stack = [vid]
        while stack and len(seen) < limit:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            expr = self.exprs[v]
            yield v, expr
            if expr[0] == "+":
                stack.append(expr[1])
            elif expr[0] == "op":
                stack.extend(expr[2])
            elif expr[0] == "phi":
                stack.extend(self.phi_inputs.get(v, ()))

    def _trace(self, vid: int, limit: int) -> set[str]:
        return {expr[1] for _, expr in self._walk(vid, limit) if expr[0] == "s" and str(expr[1]).startswith("load@")}

    def operations(self, vid: int, limit: int = 2048) -> list[tuple[str, tuple[int, ...]]]:
        """Every operation ``(opcode, argument values)`` a value was computed with (through merges too)."""
        return [(expr[1], expr[2]) for _, expr in self._walk(vid, limit) if expr[0] == "op"]

    def results_of(self, vid: int, limit: int = 2048) -> list[tuple[int, int]]:
        """The instructions ``(block, index)`` whose results ``vid`` was computed from where the table keeps them as
        symbols (a predicate an ``ELECT`` set, a value no rule computes), through operations and merges."""
        out = []
        for _, expr in self._walk(vid, limit):
            hit = re.match(r"(\d+)\.(\d+):", str(expr[1])) if expr[0] == "s" else None
            if hit:
                out.append((int(hit.group(1)), int(hit.group(2))))
        return out

    def describe(self, vid: int, depth: int = 3) -> str:
        """A short human-readable form of a value (for messages and debugging)."""
        expr = self.exprs[vid]
        if expr[0] == "c":
            return hex(expr[1])
        if expr[0] == "s":
            return str(expr[1])
        if expr[0] == "+":
            return f"{self.describe(expr[1], depth)}{expr[2]:+#x}"
        if expr[0] == "phi":
            return f"phi({expr[2]}@{expr[1]})"
        if depth <= 0:
            return "…"
        return f"{expr[1]}({', '.join(self.describe(a, depth - 1) for a in expr[2])})"


def _apply(opcode: str, args: list[int | None]) -> int | None:
    """An operation of the value table on concrete 32-bit values (the low word of a 64-bit result), or None."""
    m = 0xFFFFFFFF
    if any(a is None for a in args):
        return None
    a = [int(x) for x in args]  # type: ignore[arg-type]
    base = opcode.split(".")[0]
    mods = opcode.split(".")[1:]
    if opcode == "add":
        return sum(a) & m
    if opcode == "neg":
        return -a[0] & m
    if opcode == "not":
        return 0 if a[0] else 1
    if opcode == "mul" and len(a) == 2:
        return (a[0] * a[1]) & m
    if opcode.startswith("part"):
        return None
    if base in ("IADD3", "UIADD3", "IADD", "UIADD", "VIADD") and "X" not in mods:
        return sum(a) & m
    if base in ("IMAD", "UIMAD") and len(a) >= 3 and "HI" not in mods and "X" not in mods:
        return (a[0] * a[1] + a[2]) & m
    if base in ("LEA", "ULEA") and len(a) >= 3 and "HI" not in mods:
        return ((a[0] << a[2]) + a[1]) & m
    if base in ("LEA", "ULEA") and "HI" in mods and "X" not in mods and len(a) >= 4:
        return (a[1] + ((((a[2] & m) << 32) | (a[0] & m)) >> (32 - a[3]))) & m   # b + (c:a) >> (32 - s)
    if base in ("SHF", "USHF") and len(a) >= 3:
        lo, sh, hi = a[0], a[1] & 63, a[2]
        if "L" in mods:
            return (((hi << 32) | lo) << sh >> 32 if "HI" in mods else lo << sh) & m
        if "R" in mods:
            wide = (hi << 32) | lo
            return (wide >> sh >> 32 if "HI" in mods else wide >> sh) & m
    if base in ("LOP3", "ULOP3") and len(a) >= 4:
        return _lop3(a[0], a[1], a[2], a[3])
    if base in ("MOV", "UMOV", "R2UR") and a:
        return a[-1] & m
    if base in ("SEL", "USEL") and len(a) >= 2:
        return a[0] & m
    if base in ("IMNMX", "VIMNMX", "UIMNMX") and len(a) >= 2:
        return min(a[0], a[1]) & m
    if base in ("IABS",) and a:
        return abs(a[0]) & m
    return None


def _half_bits(operand: str) -> int | None:
    """The 16 bits of an fp16 immediate as nvdisasm prints it (``9.5367431640625e-07`` is 0x0010), or None."""
    try:
        number = float(operand.strip())
        bits = struct.unpack("<H", struct.pack("<e", number))[0]
    except (ValueError, OverflowError, struct.error):
        return None
    return bits if struct.unpack("<e", struct.pack("<H", bits))[0] == number else None


def _lop3(a: int, b: int, c: int, lut: int) -> int:
    """The bitwise function ``lut`` (a 3-input truth table, as LOP3.LUT takes it) of a, b, c (32 bits)."""
    m = 0xFFFFFFFF
    a, b, c = a & m, b & m, c & m
    out = 0
    for i in range(8):
        if lut >> i & 1:
            term = (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
            out |= term
    return out & m


__all__ = ["Values", "destinations", "register_name"]
