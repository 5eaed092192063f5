"""Nsight Compute (``ncu``) for the benchmark scripts: find it, profile a child process under it, read its CSV.

ladder_traffic.py and kernel_counters.py both run a child process of themselves under one ncu
invocation and want each profiled launch's counters back as ``{name: value}``; this is that part,
once. Values come back in base units (bytes, sectors, nanoseconds, per second), whatever scaling
ncu printed them in, so a ratio never mixes ``Mbyte`` with bytes.
"""
from __future__ import annotations

import csv
import glob
import io
import math
import re
import shutil
import subprocess
from pathlib import Path

#: Where ncu lives when it is not on PATH: the CUDA toolkit's link, then standalone Nsight Compute installs.
FALLBACKS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
#: ncu's message for a metric this GPU or ncu version does not know.
MISSING_METRIC = re.compile(r"Failed to find metric (\S+)")
#: SI prefixes ncu puts in front of a unit when it scales a value (``Mbyte``, ``Ksector``, ``Ghz``).
PREFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
#: Time units, in nanoseconds (ncu's base unit for durations); long and short spellings.
NANOSECONDS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
               "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def find_ncu() -> str:
    """Path of the ncu executable; SystemExit saying how to get one where there is none."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in FALLBACKS:
        matches = sorted(glob.glob(pattern))
        if matches and Path(matches[-1]).exists():
            return matches[-1]              # the newest version where several are installed
    raise SystemExit("ncu (NVIDIA Nsight Compute) not found: it comes with the CUDA toolkit (or from "
                     "https://developer.nvidia.com/nsight-compute); put it on PATH or at /usr/local/cuda/bin/ncu")


def command(ncu: str, metrics: list[str], child: list[str], options: list[str] | None = None) -> list[str]:
    """The ncu command line that profiles ``child`` and prints ``metrics`` of each launch as CSV."""
    return [ncu, "--csv", *(options or []), "--metrics", ",".join(metrics), *child]


def to_base(value: float, unit: str) -> float:
    """``value`` in ``unit`` converted to base units: bytes, sectors, cycles... (SI prefix removed),
    nanoseconds for a duration, per second for a rate; percentages and unknown units unchanged.

    ncu scales what it prints unless told ``--print-units base`` (``1.19 Gbyte``, ``12.5 usecond``)."""
    unit = unit.strip()
    if "/" in unit:                                   # a rate: cycle/nsecond, Gbyte/second
        top, _, bottom = unit.partition("/")
        if bottom in NANOSECONDS:
            return to_base(value, top) * 1e9 / NANOSECONDS[bottom]
        return value
    if unit in NANOSECONDS:
        return value * NANOSECONDS[unit]
    hz = re.fullmatch(r"([KMGT]?)hz", unit, flags=re.IGNORECASE)
    if hz:
        return value * PREFIXES[hz.group(1).upper()]
    scaled = re.fullmatch(r"([KMGTP])([a-z].*)", unit)
    if scaled:
        return value * PREFIXES[scaled.group(1)]
    return value


def number(text: str, unit: str = "") -> float:
    """A CSV value (``"1,190,493,632"``, ``"85.3"``) in base units; NaN for what ncu could not count (``n/a``)."""
    text = text.replace(",", "").strip()
    try:
        return to_base(float(text), unit)
    except ValueError:
        return math.nan


def missing_metrics(output: str) -> set[str]:
    """The metric names ncu said it could not find, in its output."""
    return {m.strip("'\".,") for m in MISSING_METRIC.findall(output)}


def parse_csv(text: str, metrics: dict[str, str]) -> list[dict[str, float | str]]:
    """Each profiled launch in launch order as ``{"kernel": ncu's kernel name, name: value}`` for the
    ``metrics`` (name -> ncu metric) that ncu reported; a metric it did not report is left out.

    ``text`` is ncu's whole stdout: the child's own lines and ncu's ``==PROF==`` lines are skipped."""
    rows = [line for line in text.splitlines() if line.startswith('"')]
    names = {metric: name for name, metric in metrics.items()}
    launches: dict[int, dict[str, float | str]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        if not (row.get("ID") or "").strip().isdigit():
            continue
        values = launches.setdefault(int(row["ID"]), {"kernel": row["Kernel Name"]})
        name = names.get(row["Metric Name"])
        if name:
            values[name] = number(row["Metric Value"], row.get("Metric Unit") or "")
    return [launches[key] for key in sorted(launches)]


def tail(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text`` that are not CSV rows (what a failure is explained by)."""
    kept = [line for line in text.splitlines() if line.strip() and not line.startswith('"')]
    return "\n".join(kept[-lines:])


def failure(run: subprocess.CompletedProcess, what: str) -> str:
    """A message for a failed ncu run: what failed, the end of its output, and a hint where one is known."""
    text = f"{what} failed (exit status {run.returncode}).\n--- ncu stderr (end) ---\n{tail(run.stderr) or '(empty)'}"
    out = tail(run.stdout)
    if out:
        text += f"\n--- ncu stdout (end) ---\n{out}"
    if "ERR_NVGPUCTRPERM" in run.stdout + run.stderr:
        text += ("\nThis user may not read the GPU's performance counters: run as root, or see "
                 "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    return text


def profile(child: list[str], metrics: dict[str, str], options: list[str] | None = None,
            timeout: float = 1200) -> tuple[list[dict[str, float | str]], str]:
    """Run ``child`` (a command line) under one ncu invocation; each profiled launch's counters
    (see :func:`parse_csv`) and ncu's whole stdout, which holds the child's own output.

    A metric ncu does not know on this GPU is dropped and the run repeated, so one unknown name
    costs that column, not the table. SystemExit with ncu's output where it fails."""
    ncu = find_ncu()
    wanted = dict(metrics)
    for _ in range(len(metrics) + 1):
        cmd = command(ncu, list(wanted.values()), child, options)
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"ncu ran longer than {timeout:.0f} s: {' '.join(cmd)}") from None
        missing = missing_metrics(run.stdout + run.stderr)
        if not missing or not wanted.keys() - {k for k, v in wanted.items() if v in missing}:
            break
        wanted = {k: v for k, v in wanted.items() if v not in missing}
    if run.returncode != 0:
        raise SystemExit(failure(run, f"ncu on {' '.join(child)}"))
    return parse_csv(run.stdout, wanted), run.stdout
