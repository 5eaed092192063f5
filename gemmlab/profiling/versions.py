"""Nsight Compute versions the readout refuses, each with the reason and where it is documented.

Why refuse rather than warn: a student reads the readout's numbers as facts about their kernel; a
version known to report wrong counters on their GPU would teach them something false. The table
is small on purpose: only what NVIDIA documents. Each entry: versions below ``fixed`` on GPUs of
the listed architectures.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ProfilerError
from .ncu import NcuVersion


@dataclass(frozen=True)
class Refusal:
    """Versions below ``fixed`` give wrong (or no) counters on the ``archs`` (``sm_90`` matches ``sm_90a``)."""

    fixed: NcuVersion
    archs: tuple[str, ...]
    reason: str
    source: str

    def applies(self, version: NcuVersion, arch: str) -> bool:
        return version < self.fixed and any(arch == a or arch.startswith(a) for a in self.archs)


REFUSED: tuple[Refusal, ...] = (
    Refusal(NcuVersion(2022, 3, 0), ("sm_90",),
            "it comes from a CUDA toolkit older than 11.8, the first that supports Hopper (sm_90): its counters on an "
            "H100 or H200 are not defined",
            "CUDA 11.8 is the minimum toolkit for H100/H200 (CUTLASS's Hopper documentation) and Nsight Compute "
            "2022.3.0 is the one that ships with it (https://developer.nvidia.com/nsight-compute-history)"),
    Refusal(NcuVersion(2024, 3, 2), ("sm_89",),
            "it computes wrong peak throughput (the speed-of-light percentages) for some pipelines on Ada GPUs",
            "Nsight Compute release notes, 'Updates in 2024.3.2', resolved issues, "
            "https://docs.nvidia.com/nsight-compute/ReleaseNotes/topics/updates-2024-3-2.html"),
)


def refusal(version: NcuVersion, arch: str) -> Refusal | None:
    """The first refusal that applies to ``version`` on a GPU of ``arch``, or None."""
    return next((r for r in REFUSED if r.applies(version, arch)), None)


def check_version(version: NcuVersion, arch: str) -> None:
    """A ProfilerError when ``version`` is refused on ``arch``, saying why, where that is documented, what to do."""
    found = refusal(version, arch)
    if found is not None:
        raise ProfilerError(f"Nsight Compute {version} is refused on this GPU ({arch}): {found.reason}. Install "
                            f"{found.fixed} or newer (it comes with the CUDA toolkit). Source: {found.source}.")


__all__ = ["REFUSED", "Refusal", "check_version", "refusal"]
