"""The ``profile`` action: Nsight Compute on the judge's own launch of the kernel, in a child process.

How: ncu can profile only a process it starts, so the judge writes its request (and the C++ kernel's
compiled record) into a private folder and starts ``ncu ... python -m gemmlab.judge.profile_target
FOLDER``. That child builds the same launcher the judge would, runs the checked call, runs it again
(ncu profiles that call's launches alone: it skips the checked call's, by the kernel's name), then
runs the kernel back to back for half a second while NVML reads the board's power
(:mod:`gemmlab.profiling.power`), and writes its results next to the request. The judge holds its
GPU's timing lock alone meanwhile (like a timing), reads the report file (``--page raw``) and answers
the curated readout, and the report file itself for Nsight Compute when it is small enough.
"""
from __future__ import annotations

import base64
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gemmlab.results import CheckResult, CopyResult
from ..errors import ContextLostError, GemmlabError, KernelTimeoutError
from ..profiling import ncu
from ..profiling.errors import ProfilerError
from ..profiling.metrics import all_metrics
from ..profiling.readout import Power, Readout
from ..profiling.versions import check_version
from .client import judge_environment
from .profiled_calls import launched_kernels
from .protocol import JudgeRequest

#: ncu's options: the board's own clocks (as bench_gemm times), caches flushed before each pass, and the
#: full section set, so the report file holds everything Nsight Compute's own pages show.
NCU_OPTIONS = ("--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel", "--set", "full",
               "--kernel-name-base", "mangled")
#: Seconds ncu may take, the child's checked calls, replays and the power burst together.
NCU_TIMEOUT_S = 240.0
#: Largest report file sent back with the readout (base64 in the judge's report).
MAX_REPORT_FILE_BYTES = 8 << 20
#: Errors the child reports by name that end the judgement with their own verdict.
_ERRORS: dict[str, type[GemmlabError]] = {"ContextLostError": ContextLostError, "KernelTimeoutError": KernelTimeoutError}


def ncu_filter(kernels: list[str]) -> list[str]:
    """Options that profile exactly one call's launches: the second call's, the checked call's skipped."""
    names = "|".join(re.escape(k) for k in dict.fromkeys(kernels))
    return ["--kernel-name", f"regex:^({names})$", "--launch-skip", str(len(kernels)), "--launch-count",
            str(len(kernels))]


def child_environment(folder: str) -> dict[str, str]:
    """The child's environment: the judge's allow-list, a HOME of its own, and no timing lock (the judge holds it)."""
    env = judge_environment()
    env["HOME"] = folder
    return env


def main_launch(launches: list[dict[str, Any]]) -> tuple[dict[str, Any], list[tuple[str, float]]]:
    """The launch that took longest (the GEMM or copy), and the others as (kernel, ns)."""
    def ns(launch: dict[str, Any]) -> float:
        value = launch.get("gpu__time_duration.sum")
        return float(value) if isinstance(value, float) and value == value else 0.0

    main = max(launches, key=ns)
    return main, [(ncu.short_name(str(x["kernel"]))[:80], ns(x)) for x in launches if x is not main]


def profile_in_child(request: JudgeRequest, launcher: Any) -> tuple[Any, dict[str, Any] | None]:
    """(the checked call's result, the profile as plain data or None when the kernel was wrong)."""
    from gemmlab.running.gpu import current_arch
    from gemmlab.timing.timing_lock import exclusive_timing

    tool = ncu.find_ncu()
    version = ncu.ncu_version(tool)
    check_version(version, current_arch())
    compiled = getattr(launcher, "compiled", None)
    kernels = launched_kernels(request, getattr(compiled, "lowered_name", ""))
    with tempfile.TemporaryDirectory(prefix="gemmlab-ncu-") as folder:
        work = Path(folder)
        (work / "request.json").write_text(request.to_json())
        if compiled is not None:
            (work / "compiled.json").write_text(json.dumps(compiled.to_record()))
        child = [sys.executable, "-s", "-P", "-m", "gemmlab.judge.profile_target", folder]
        report = work / "profile.ncu-rep"
        with exclusive_timing():
            output, _known = ncu.export(tool, child, all_metrics(), report, [*NCU_OPTIONS, *ncu_filter(kernels)],
                                        NCU_TIMEOUT_S, child_environment(folder))
        result_file = work / "result.json"
        if not result_file.exists():
            raise ProfilerError(f"the profiled process ended without a result.\n{ncu.tail(output)}")
        result = json.loads(result_file.read_text())
        if "error" in result:
            raise _ERRORS.get(result["error"], GemmlabError)(f"while profiling: {result['message']}")
        parse = CopyResult.from_dict if request.is_copy else CheckResult.from_dict
        checks = [parse(c) for c in result["checks"]]
        if not checks[-1].passed:
            return checks[-1], None
        if not report.exists():
            raise ProfilerError(f"ncu wrote no report: it profiled no launch of {', '.join(kernels)[:120]}.\n"
                                f"{ncu.tail(output)}")
        launches = ncu.import_raw(tool, report)
        if not launches:
            raise ProfilerError(f"the report holds no launch of {', '.join(kernels)[:120]}.\n{ncu.tail(output)}")
        main, others = main_launch(launches)
        power = Power(**{**result["power"], "reasons": tuple(result["power"]["reasons"])}) if result.get("power") \
            else None
        readout = Readout.from_counters(main, kernel=ncu.short_name(str(main["kernel"])),
                                        what="copy" if request.is_copy else "gemm",
                                        shape=request.shape, dtype=request.dtype, device=result["device"],
                                        ncu_version=str(version), measured_on=time.strftime("%Y-%m-%d", time.gmtime()),
                                        power=power, other_launches=tuple(others))
        raw = report.read_bytes()
        data: dict[str, Any] = {"readout": readout.to_dict(), "report_bytes": len(raw)}
        if len(raw) <= MAX_REPORT_FILE_BYTES:
            data["report"] = base64.b64encode(raw).decode("ascii")
        return checks[-1], data


__all__ = ["MAX_REPORT_FILE_BYTES", "NCU_OPTIONS", "NCU_TIMEOUT_S", "child_environment", "main_launch", "ncu_filter",
           "profile_in_child"]
