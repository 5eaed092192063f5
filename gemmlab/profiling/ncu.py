"""Nsight Compute (``ncu``) as a tool: find it, ask its version, run a child under it, read its CSV.

Why here: the readout for students (:mod:`gemmlab.profiling.readout`), the judge's profile action
and the instructors' benchmark scripts (``benchmarks/ncu.py`` and the scripts using it) all run a
child process under one ncu invocation and want each profiled launch's counters back as
``{name: value}``. Values come back in base units (bytes, sectors, nanoseconds, per second)
whatever scaling ncu printed, so a ratio never mixes ``Mbyte`` with bytes. Failures are
:class:`~gemmlab.profiling.errors.ProfilerError`\\ s whose message ends with ncu's own last lines.
"""
from __future__ import annotations

import csv
import glob
import io
import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .errors import ProfilerError

#: Where ncu lives when it is not on PATH: the CUDA toolkit's link, then standalone Nsight Compute installs.
FALLBACKS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
#: ncu's message for a metric this GPU or ncu version does not know.
MISSING_METRIC = re.compile(r"Failed to find metric (\S+)")
#: SI prefixes ncu puts in front of a unit when it scales a value (``Mbyte``, ``Ksector``, ``Ghz``).
PREFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
#: Time units, in nanoseconds (ncu's base unit for durations); long and short spellings.
NANOSECONDS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
               "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
#: The columns of ncu's CSV that describe a launch rather than a metric (raw page).
LAUNCH_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
                  "Grid Size", "Device", "CC")
#: How ncu prints its version: ``Version 2025.3.1.0 (build 36398880) (public-release)``.
VERSION_LINE = re.compile(r"Version\s+(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?")
HINT_NOT_FOUND = ("ncu (NVIDIA Nsight Compute) not found: it comes with the CUDA toolkit (or from "
                  "https://developer.nvidia.com/nsight-compute); put it on PATH or at /usr/local/cuda/bin/ncu")
HINT_PERMISSION = ("This user may not read the GPU's performance counters: run as root, or let every user read them "
                   "(NVreg_RestrictProfilingToAdminUsers=0; https://developer.nvidia.com/ERR_NVGPUCTRPERM)")


@dataclass(frozen=True, order=True)
class NcuVersion:
    """An Nsight Compute version, e.g. 2025.3.1 (the fourth number, a build, is kept but rarely matters)."""

    year: int
    minor: int
    patch: int
    build: int = 0

    def __str__(self) -> str:
        return f"{self.year}.{self.minor}.{self.patch}" + (f".{self.build}" if self.build else "")

    @classmethod
    def parse(cls, text: str) -> "NcuVersion":
        """The version in ``ncu --version``'s output (or a bare ``2025.3.1``); a ProfilerError if there is none."""
        found = VERSION_LINE.search(text) or re.search(r"\b(\d{4})\.(\d+)\.(\d+)(?:\.(\d+))?\b", text)
        if not found:
            raise ProfilerError(f"could not read Nsight Compute's version from {text.strip()[:200]!r}.")
        return cls(*(int(g or 0) for g in found.groups()))


def find_ncu(fallbacks: Iterable[str] = FALLBACKS) -> str:
    """Path of the ncu executable (PATH first, then ``fallbacks``, the newest of several installs)."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in fallbacks:
        matches = sorted(glob.glob(pattern))
        if matches and Path(matches[-1]).exists():
            return matches[-1]
    raise ProfilerError(HINT_NOT_FOUND)


def ncu_version(ncu: str, timeout: float = 60) -> NcuVersion:
    """What ``ncu --version`` says."""
    try:
        run = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProfilerError(f"{ncu} --version failed: {type(exc).__name__}: {exc}") from None
    return NcuVersion.parse(run.stdout + run.stderr)


def command(ncu: str, metrics: Sequence[str], child: Sequence[str], options: Sequence[str] | None = None) -> list[str]:
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


def _csv_rows(text: str) -> list[str]:
    """The CSV lines of ncu's output: the child's own lines and ncu's ``==PROF==`` lines are skipped."""
    return [line for line in text.splitlines() if line.startswith('"')]


def parse_csv(text: str, metrics: Mapping[str, str]) -> list[dict[str, float | str]]:
    """Each profiled launch of ncu's details CSV (one row per metric) in launch order as
    ``{"kernel": ncu's kernel name, name: value}`` for the ``metrics`` (name -> ncu metric) that ncu
    reported; a metric it did not report is left out."""
    names = {metric: name for name, metric in metrics.items()}
    launches: dict[int, dict[str, float | str]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(_csv_rows(text)))):
        if not (row.get("ID") or "").strip().isdigit():
            continue
        values = launches.setdefault(int(row["ID"]), {"kernel": row["Kernel Name"]})
        name = names.get(row["Metric Name"])
        if name:
            values[name] = number(row["Metric Value"], row.get("Metric Unit") or "")
    return [launches[key] for key in sorted(launches)]


def parse_raw_csv(text: str) -> list[dict[str, float | str]]:
    """Each launch of ncu's raw-page CSV (``--page raw``: a header of metric names, a row of units, one row
    per launch) as ``{"kernel": name, "block": "(384, 1, 1)", "grid": ..., metric: value}`` in base units.

    Every metric the report holds comes back, under ncu's own name (``sm__throughput.avg.pct_of_...``)."""
    rows = list(csv.reader(io.StringIO("\n".join(_csv_rows(text)))))
    if len(rows) < 2 or "Kernel Name" not in rows[0]:
        return []
    header, units = rows[0], rows[1]
    first_unit_row = not (units and units[0].strip().isdigit())
    body = rows[2:] if first_unit_row else rows[1:]
    units = units if first_unit_row else [""] * len(header)
    launches = []
    for row in body:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue
        cells = dict(zip(header, row))
        launch: dict[str, float | str] = {"kernel": cells["Kernel Name"], "block": cells.get("Block Size", ""),
                                          "grid": cells.get("Grid Size", "")}
        for name, unit, value in zip(header, units, row):
            if name not in LAUNCH_COLUMNS:
                launch[name] = number(value, unit)
        launches.append(launch)
    return launches


#: How CuTe DSL names a kernel: this prefix, the function's name, then its mangled arguments.
DSL_PREFIX = "kernel_cutlass_"


def short_name(kernel: str, known: Iterable[str] = ()) -> str:
    """A readable kernel name: a CuTe DSL kernel's function name without the prefix and mangled
    arguments (``kernel_cutlass_cap_kernel_CopyAtom_ThrID10_...`` -> ``cap_kernel``), a C++
    kernel's name up to its parameter list.

    ``known``: the function names the kernel's cells define; the longest that fits wins. Without
    one, the DSL name is cut after its ``kernel`` word, else before the first mangled argument."""
    if kernel.startswith(DSL_PREFIX):
        body = kernel[len(DSL_PREFIX):]
        fits = [k for k in known if body == k or body.startswith(k + "_")]
        if fits:
            return max(fits, key=len)
        parts = body.split("_")
        if "kernel" in parts:
            return "_".join(parts[:parts.index("kernel") + 1])
        kept = []
        for part in parts:
            if not re.fullmatch(r"[a-z][a-z0-9]*", part):
                break
            kept.append(part)
        return "_".join(kept) or body
    name = kernel.strip().replace("(anonymous namespace)::", "")
    name = name[len("void "):] if name.startswith("void ") else name
    depth = 0
    for i, ch in enumerate(name):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "(" and depth == 0:
            return name[:i].strip()
    return name


def tail(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text`` that are not CSV rows (what a failure is explained by)."""
    kept = [line for line in text.splitlines() if line.strip() and not line.startswith('"')]
    return "\n".join(kept[-lines:])


def failure(run: subprocess.CompletedProcess, what: str) -> str:
    """A message for a failed ncu run: what failed, the end of its output, and a hint where one is known."""
    text = f"{what} failed (exit status {run.returncode}).\n--- ncu stderr (end) ---\n{tail(run.stderr or '') or '(empty)'}"
    out = tail(run.stdout or "")
    if out:
        text += f"\n--- ncu stdout (end) ---\n{out}"
    if "ERR_NVGPUCTRPERM" in (run.stdout or "") + (run.stderr or ""):
        text += "\n" + HINT_PERMISSION
    return text


def _run(cmd: list[str], timeout: float, env: Mapping[str, str] | None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired:
        raise ProfilerError(f"ncu ran longer than {timeout:.0f} s and was stopped: {' '.join(cmd)[:300]}") from None
    except OSError as exc:
        raise ProfilerError(f"ncu could not be started ({exc}).") from None


def _die_with_parent() -> None:
    """In the child before exec: a process group of its own (so ncu and the process it profiles are stopped
    together), and killed when its parent dies."""
    import ctypes
    import os
    import signal

    os.setpgrp()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_stoppable(cmd: list[str], timeout: float, env: Mapping[str, str] | None) -> subprocess.CompletedProcess:
    """Run ``cmd`` like :func:`subprocess.run` but in a process group of its own that is killed whole past
    ``timeout`` (ncu and the process it profiles, which may hang in a kernel) and when this process dies."""
    import os
    import signal

    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(env) if env is not None else None, preexec_fn=_die_with_parent)
    except OSError as exc:
        raise ProfilerError(f"ncu could not be started ({exc}).") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.communicate()
        raise ProfilerError(f"ncu ran longer than {timeout:.0f} s and was stopped (a kernel that never ends, or a "
                            "very slow one under the profiler's replay).") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_known(ncu: str, metrics: Mapping[str, str], build: "CommandBuilder", timeout: float,
              env: Mapping[str, str] | None = None, runner: Any = None) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Run ``build(ncu, metric names)`` until ncu knows every metric asked for: a metric this GPU or ncu does
    not know is dropped and the run repeated, so one unknown name costs that value, not the run. The last
    run and the metrics it asked for; a ProfilerError when ncu itself failed."""
    wanted = dict(metrics)
    for _ in range(len(metrics) + 1):
        cmd = build(ncu, list(wanted.values()))
        run = (runner or _run)(cmd, timeout, env)
        missing = missing_metrics((run.stdout or "") + (run.stderr or ""))
        kept = {k: v for k, v in wanted.items() if v not in missing}
        if not missing or not kept:
            break
        wanted = kept
    if run.returncode != 0:
        raise ProfilerError(failure(run, f"ncu on {' '.join(build.child)[:300]}"))
    return run, wanted


class CommandBuilder:
    """``build(ncu, metrics) -> command line``: how :func:`run_known` asks again without unknown metrics."""

    def __init__(self, child: Sequence[str], options: Sequence[str] | None = None, csv_output: bool = True) -> None:
        self.child, self.options, self.csv_output = list(child), list(options or []), csv_output

    def __call__(self, ncu: str, metrics: Sequence[str]) -> list[str]:
        if self.csv_output:
            return command(ncu, metrics, self.child, self.options)
        return [ncu, *self.options, "--metrics", ",".join(metrics), *self.child]


def profile(ncu: str, child: Sequence[str], metrics: Mapping[str, str], options: Sequence[str] | None = None,
            timeout: float = 1200) -> tuple[list[dict[str, float | str]], str]:
    """Run ``child`` (a command line) under one ncu invocation; each profiled launch's counters
    (see :func:`parse_csv`) and ncu's whole stdout, which holds the child's own output."""
    run, wanted = run_known(ncu, metrics, CommandBuilder(child, options), timeout)
    return parse_csv(run.stdout, wanted), run.stdout


def export(ncu: str, child: Sequence[str], metrics: Sequence[str], report: Path, options: Sequence[str] | None = None,
           timeout: float = 600, env: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """Profile ``child`` into the report file ``report`` (``.ncu-rep`` is added by ncu when missing) collecting
    ``metrics``; ncu's output (the child's included) and the metrics it knew."""
    opts = [*(options or []), "--export", str(report), "--force-overwrite"]
    run, wanted = run_known(ncu, {m: m for m in metrics}, CommandBuilder(child, opts, csv_output=False), timeout, env,
                            run_stoppable)
    return (run.stdout or "") + (run.stderr or ""), list(wanted.values())


def import_raw(ncu: str, report: Path, timeout: float = 120) -> list[dict[str, float | str]]:
    """Every launch in a report file with every metric it holds (ncu's raw page, base units)."""
    run = _run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"], timeout, None)
    if run.returncode != 0:
        raise ProfilerError(failure(run, f"reading the report {report.name}"))
    return parse_raw_csv(run.stdout)


__all__ = ["DSL_PREFIX", "FALLBACKS", "HINT_NOT_FOUND", "HINT_PERMISSION", "LAUNCH_COLUMNS", "MISSING_METRIC", "NANOSECONDS",
           "PREFIXES", "CommandBuilder", "NcuVersion", "command", "export", "failure", "find_ncu", "import_raw",
           "missing_metrics", "ncu_version", "number", "parse_csv", "parse_raw_csv", "profile", "run_known", "run_stoppable",
           "short_name", "tail", "to_base"]
