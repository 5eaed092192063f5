"""The machine code a technique check reads: the cubin of what is (or will be) launched, for each kind of
kernel a test can hold.

- a C++ :class:`gemmlab.Kernel`: its cubin (in the grader's judge, the judge's own compile of the source);
- a GEMM function with a ``build()`` (notebook 08's launchers): what ``build()`` compiles;
- a compiled CuTe DSL kernel (:class:`gemmlab.dsl.core.DslKernel`): the cubin of its last variant, or of the
  variant for ``example`` tensors;
- in the grader's judge, a compiled DSL kernel of the student's (:class:`gemmlab.answers.stand_ins.CompiledAnswer`):
  the module image its kernel hands over, which the judge disassembles itself and then binds to every
  launch it replays through that handle (:mod:`.guards`);
- any other callable that launches DSL kernels, with ``example`` tensors: one call is *recorded* (as the
  judge records launches: nothing runs, no GPU needed) and the images of the kernels it launched are read.

A :class:`MachineCode` is the image and the kernel symbol in it; :func:`program` disassembles it once
(cached by the image's hash) into a :class:`~gemmlab.techniques.program.Program`.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import GemmlabError, ToolchainError
from .listing import parse
from .program import Program

#: Most programs kept disassembled.
CACHE = 16
_PROGRAMS: "OrderedDict[tuple[str, str | None], Program]" = OrderedDict()


@dataclass(frozen=True)
class MachineCode:
    """A cubin and the kernel in it a check reads (None: its only kernel), with a label for messages."""

    cubin: bytes
    kernel: str | None
    label: str
    arch: str = ""

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.cubin).hexdigest()


class TargetError(GemmlabError, TypeError):
    """A technique check was given something whose machine code cannot be found."""


def program(code: MachineCode) -> Program:
    """The disassembled, analysable program of ``code`` (cached by image and kernel)."""
    from gemmlab.compiling.sass import disassemble

    key = (code.digest, code.kernel)
    found = _PROGRAMS.get(key)
    if found is None:
        if not code.cubin:
            raise ToolchainError(f"{code.label} has no cubin (it was compiled to PTX only): no machine code to check.")
        listing = parse(disassemble(code.cubin, code.label))
        if code.arch and not listing.arch:
            listing = type(listing)(code.arch, listing.sections)
        kernel = code.kernel
        names = [k.name for k in listing.kernels()]
        if kernel is not None and kernel not in names:
            kernel = next((n for n in names if kernel in n), None) if len(names) > 1 else None
        found = Program(listing, kernel, code.label)
        _PROGRAMS[key] = found
        while len(_PROGRAMS) > CACHE:
            _PROGRAMS.popitem(last=False)
    else:
        _PROGRAMS.move_to_end(key)
    return found


def machine_code(target: Any, example: Sequence[Any] | None = None) -> list[MachineCode]:
    """The images a check of ``target`` reads (see the module's docstring for what ``target`` may be)."""
    if isinstance(target, MachineCode):
        return [target]
    if isinstance(target, (list, tuple)) and target and all(isinstance(t, MachineCode) for t in target):
        return list(target)
    kind = type(target)
    module = getattr(kind, "__module__", "") or ""
    if kind.__name__ == "Kernel" and module == "gemmlab.running.kernel":
        return [MachineCode(target.cubin, target.lowered_name, target.name, target.arch)]
    if kind.__name__ == "DslKernel" and module == "gemmlab.dsl.core":
        if example is not None:
            target.compile_for(*example)
        try:
            return [MachineCode(target.cubin, target.kernel_name or None, target.name, target.compiled_arch)]
        except GemmlabError:
            raise TargetError(f"{target.name} is not compiled yet: pass example= tensors to compile it for, or the "
                              "kernel gemmlab.dsl.compile returned.") from None
    if kind.__name__ == "CompiledAnswer" and module == "gemmlab.answers.stand_ins":
        if example is not None:
            target.compile_for(*example)
        cubin, kernel, arch = target.image()
        return [MachineCode(cubin, kernel or None, target.name, arch)]
    if callable(getattr(target, "build", None)) and not isinstance(target, type):
        return machine_code(target.build())
    if example is not None and callable(target):
        return _recorded(target, example)
    raise TargetError(f"cannot find the machine code of {type(target).__name__} {getattr(target, '__name__', '')!s}: "
                      "give a compiled kernel (gemmlab.compile / gemmlab.dsl.compile), or the function that launches "
                      "it with example= tensors to record one call on.".replace("  ", " "))


def _recorded(fn: Any, example: Sequence[Any]) -> list[MachineCode]:
    """Record one call of ``fn`` on ``example`` (no GPU) and return the images of the kernels it launched."""
    kind = type(fn)
    if getattr(kind, "__module__", "") == "gemmlab.answers.stand_ins":
        from gemmlab.answers.stand_ins import recorded_plan

        plan = recorded_plan(fn, tuple(example))
    else:
        plan = record_plan(fn, example)
    return images_of_plan(plan, getattr(fn, "__name__", "kernel"))


def record_plan(fn: Any, example: Sequence[Any], arch: str | None = None) -> dict:
    """The launch plan of one call ``fn(*example)`` in this process, recorded without running anything."""
    import torch

    from ..dsl import gemm_fn
    from ..dsl.host_recording import H100_ATTRIBUTES
    from ..dsl.recording import probe, recording
    from gemmlab.running.gpu import current_arch, has_gpu

    arch = arch or (current_arch() if has_gpu() else "sm_90a")
    attributes = dict(H100_ATTRIBUTES)
    if has_gpu():
        from gemmlab.running.device import raw_attributes

        attributes = raw_attributes()
    tensors = [t for t in example if isinstance(t, torch.Tensor)]
    probes = [probe(list(t.shape), list(t.stride()), t.dtype, t.data_ptr() % 512) for t in tensors]
    it = iter(probes)
    args = [next(it) if isinstance(a, torch.Tensor) else a for a in example]
    module = getattr(getattr(fn, "__globals__", {}), "get", lambda _: "")("__name__") or ""
    call = gemm_fn(fn) if str(getattr(type(fn), "__module__", "")).startswith("cutlass") or \
        str(module).startswith("cutlass") else fn
    with recording(arch, attributes, probes) as recorder:
        call(*args)
    return recorder.plan()


_FATBIN_MAGIC = 0xBA55ED50
_ELF_MAGIC = b"\x7fELF"


def cubins_of(image: bytes) -> list[bytes]:
    """The cubins of a module image: the image itself if it is one, or the ELF entries of a fat binary (what the
    CuTe DSL's host code loads). A compressed entry cannot be read here: a ToolchainError says so."""
    import struct

    if image[:4] == _ELF_MAGIC:
        return [image]
    if len(image) < 16 or struct.unpack_from("<I", image, 0)[0] != _FATBIN_MAGIC:
        raise ToolchainError("the module image is neither a cubin nor a fat binary.")
    _magic, _version, header, fat_size = struct.unpack_from("<IHHQ", image, 0)
    out, pos, end = [], header, min(len(image), header + fat_size)
    while pos + 16 <= end:
        kind, _v, entry_header, padded = struct.unpack_from("<HHIQ", image, pos)
        payload = image[pos + entry_header:pos + entry_header + padded]
        if kind == 2:
            if payload[:4] != _ELF_MAGIC:
                raise ToolchainError("the module image holds a compressed cubin, which gemmlab cannot read.")
            out.append(payload)
        if entry_header == 0 or padded == 0:
            break
        pos += entry_header + padded
    if not out:
        raise ToolchainError("the module image's fat binary holds no cubin (PTX only?).")
    return out


def images_of_plan(plan: dict, label: str) -> list[MachineCode]:
    """One :class:`MachineCode` per kernel a recorded plan launches (checked the way the judge checks a plan)."""
    from ..judge.dsl_replay import Launch, parse_plan

    arguments = [b.get("argument") for b in (plan.get("buffers") or []) if isinstance(b, dict)]
    count = 1 + max((a for a in arguments if isinstance(a, int) and not isinstance(a, bool)), default=-1)
    images, _buffers, steps, _maps = parse_plan(plan, count)
    out: list[MachineCode] = []
    seen: set[tuple[str, str]] = set()
    for step in steps:
        if isinstance(step, Launch) and (step.image, step.kernel) not in seen:
            seen.add((step.image, step.kernel))
            cubins = cubins_of(images[step.image])
            cubin = next((c for c in cubins if step.kernel.encode() in c), cubins[0])
            out.append(MachineCode(cubin, step.kernel, f"{label} ({step.kernel[:40]})", str(plan.get("arch", ""))))
    return out


__all__ = ["CACHE", "MachineCode", "TargetError", "cubins_of", "images_of_plan", "machine_code", "program", "record_plan"]
