""":class:`Compiled`: everything NVRTC produced for one kernel, and its JSON form for the cache."""
from __future__ import annotations

import base64
from dataclasses import dataclass

from gemmlab.compiling import resources, signature


@dataclass(frozen=True)
class Compiled:
    """What :class:`gemmlab.running.kernel.Kernel` loads and launches."""

    name: str
    lowered_name: str
    arch: str
    source: str
    options: tuple[str, ...]
    ptx: str
    cubin: bytes
    log: str  # warnings, mapped to the student's lines ('' when clean)
    params: list[signature.Param]
    resources: resources.Resources
    compile_seconds: float
    cached: bool

    def summary(self) -> str:
        """One line: what was built and what it costs (registers, smem, spills, time)."""
        when = "cached" if self.cached else f"compiled in {self.compile_seconds:.1f} s"
        return f"{self.name} [{self.arch}]: {self.resources.summary()}; {when}"

    def to_record(self) -> dict:
        """A JSON-serialisable dict without the source (the cache is keyed by it)."""
        return {
            "name": self.name,
            "lowered_name": self.lowered_name,
            "arch": self.arch,
            "options": list(self.options),
            "ptx": self.ptx,
            "cubin": base64.b64encode(self.cubin).decode(),
            "log": self.log,
            "params": [p.__dict__ for p in self.params],
            "resources": self.resources.to_dict(),
            "compile_seconds": self.compile_seconds,
        }

    @classmethod
    def from_record(cls, record: dict, source: str) -> "Compiled":
        """The inverse of :meth:`to_record`, marked cached; KeyError/TypeError/ValueError on a torn record."""
        return cls(
            name=record["name"],
            lowered_name=record["lowered_name"],
            arch=record["arch"],
            source=source,
            options=tuple(record["options"]),
            ptx=record["ptx"],
            cubin=base64.b64decode(record["cubin"]),
            log=record["log"],
            params=[signature.Param(**p) for p in record["params"]],
            resources=resources.Resources(**record["resources"]),
            compile_seconds=float(record["compile_seconds"]),
            cached=True,
        )

