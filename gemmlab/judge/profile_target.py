"""``python -m gemmlab.judge.profile_target FOLDER``: the process Nsight Compute profiles for the ``profile`` action.

It reads the judge's request (and the C++ kernel's compiled record) from FOLDER, builds the judge's own
launcher (no student code: the compiled kernel, or the recorded DSL plan), runs the checked call, runs
it again (the call ncu profiles: :func:`gemmlab.judge.ncu_run.ncu_filter` skips the first), and runs
the kernel back to back for half a second while NVML reads the power (not profiled: ncu's count is
reached). It writes ``result.json`` to FOLDER: the checks' results, the GPU's name and the power, or
the error that stopped it. Nothing of it reaches the judge's report but through that file.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from gemmlab.compiling.record import Compiled
from ..errors import GemmlabError
from .backend import GpuBackend
from .profiled_calls import run_check
from .protocol import JudgeRequest
from .spec import DslSpec


def launcher_for(request: JudgeRequest, folder: Path) -> Any:
    """The launcher the judge built: a C++ kernel's compiled record loaded, or the DSL plan replayed."""
    spec = request.spec
    if isinstance(spec, DslSpec):
        from .dsl_replay import ReplayLauncher

        return ReplayLauncher(spec.launch_for, spec.convention)
    from .launcher import TrustedLauncher

    record = json.loads((folder / "compiled.json").read_text())
    return TrustedLauncher(Compiled.from_record(record, spec.source), spec)


def burst(request: JudgeRequest, launcher: Any) -> Any:
    """One call of the kernel on operands of the request's shape (no check): what the power burst repeats."""
    import torch

    M, N, K = request.shape
    dtype = getattr(torch, request.dtype)
    if request.is_copy:
        from .copying import CopyLauncher

        src = torch.randn((M, N), device="cuda").to(dtype)
        dst = torch.empty((N, M) if (request.copy or {}).get("transpose") else (M, N), device="cuda", dtype=dtype)
        copy = CopyLauncher(launcher, False)
        return lambda: copy(src, dst)
    A = torch.randn((M, K), device="cuda").to(dtype)
    B = torch.randn((N, K) if request.spec.convention == "tn" else (K, N), device="cuda").to(dtype)
    out = torch.zeros((M, N), device="cuda", dtype=getattr(torch, request.out_dtype or request.dtype))
    if request.spec.convention == "tn":
        return lambda: launcher(A, B, out)
    alpha = 1.0 if request.alpha is None else request.alpha
    beta = 0.0 if request.beta is None else request.beta
    return lambda: launcher(A, B, out, alpha, beta)


def run(folder: Path) -> dict[str, Any]:
    """The checked call, the profiled call and the power burst; what ``result.json`` holds."""
    import torch

    from gemmlab.running.gpu import device_name
    from ..profiling.power import while_running

    request = JudgeRequest.from_json((folder / "request.json").read_bytes())
    launcher = launcher_for(request, folder)
    backend = GpuBackend()
    backend.adopt(launcher)
    try:
        checks = [run_check(backend, request)]
        if checks[0].passed:
            checks.append(run_check(backend, request))           # the launches ncu profiles
        power = None
        if checks[-1].passed:
            power = while_running(burst(request, launcher), torch.cuda.synchronize, torch.cuda.current_device())
    except GemmlabError as exc:
        return {"error": type(exc).__name__, "message": str(exc)[:2000]}
    return {"device": device_name(), "checks": [c.to_dict() for c in checks],
            "power": dataclasses.asdict(power) if power is not None else None}


def _die_with_parent() -> None:
    """Killed with ncu: a profile that outlives its judge would hold the GPU."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python -m gemmlab.judge.profile_target FOLDER (the judge's profile folder)", file=sys.stderr)
        return 2
    _die_with_parent()
    folder = Path(args[0])
    result = run(folder)
    (folder / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # a hung kernel's context is not torn down (as the judge's own __main__)
