"""``gemmlab doctor``: what works on this machine, and how to fix what does not.

Every row is checked for real (a tiny NVRTC compile, not just "the file exists"),
because "installed but broken" is the usual failure. Only required pieces can fail;
a machine without a GPU is healthy: it compiles, draws and explains, it just cannot run.
"""
from __future__ import annotations

import html
import importlib.metadata
import platform
import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Literal

Status = Literal["ok", "warn", "fail"]

_TEST_KERNEL = r"""
#include <cuda_fp16.h>
__global__ void doctor_probe(const half* a, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __half2float(a[i]) * 2.0f;
}
"""


@dataclass(frozen=True)
class Row:
    item: str
    status: Status
    detail: str
    fix: str = ""


@dataclass
class Report:
    """The rows of a doctor run; ``ok`` is False only when something required is broken."""

    rows: list[Row] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.status != "fail" for r in self.rows)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def __str__(self) -> str:
        width = max((len(r.item) for r in self.rows), default=4)
        lines = []
        for r in self.rows:
            lines.append(f"[{r.status:>4}] {r.item:<{width}}  {r.detail}")
            if r.fix and r.status != "ok":
                lines.append(f"       {'':<{width}}  fix: {r.fix}")
        verdict = "healthy" if self.ok else "BROKEN: fix the 'fail' rows above"
        lines.append(f"gemmlab doctor: {verdict}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colors = {"ok": "#2a2", "warn": "#c80", "fail": "#c00"}
        body = "".join(
            f"<tr><td style='color:{colors[r.status]};font-weight:bold'>{r.status}</td>"
            f"<td style='text-align:left'>{html.escape(r.item)}</td>"
            f"<td style='text-align:left'>{html.escape(r.detail)}</td>"
            f"<td style='text-align:left'>{html.escape(r.fix if r.status != 'ok' else '')}</td></tr>"
            for r in self.rows
        )
        return f"<table><tr><th></th><th>item</th><th>detail</th><th>fix</th></tr>{body}</table>"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _python() -> list[Row]:
    version = platform.python_version()
    if sys.version_info < (3, 10):
        return [Row("Python", "fail", version, "gemmlab needs Python 3.10 or newer")]
    return [Row("Python", "ok", f"{version} ({sys.executable})")]


def _gemmlab() -> list[Row]:
    from gemmlab import __version__

    return [Row("gemmlab", "ok", __version__)]


def _torch_and_gpu() -> list[Row]:
    try:
        import torch
    except ImportError:
        return [Row("torch", "fail", "not installed", "pip install torch")]
    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    rows = [Row("torch", "ok", f"{torch.__version__} ({build})")]
    from gemmlab.running.gpu import has_gpu

    if not has_gpu():
        what = ("no GPU: compiling kernels (pass arch='sm_90a'), layouts, bank models, pictures and "
                "widgets all work; running, checking and timing kernels need a CUDA GPU")
        fix = "" if torch.version.cuda else "on a GPU machine install a CUDA build of torch"
        rows.append(Row("GPU", "warn", what, fix))
        return rows
    from gemmlab.running.gpu import compute_capability, current_arch, device_name

    major, minor = compute_capability()
    detail = f"{device_name()} (compute capability {major}.{minor}, target {current_arch()})"
    driver = _driver_version()
    if driver:
        detail += f", driver supports CUDA {driver}"
    rows.append(Row("GPU", "ok", detail))
    return rows


def _driver_version() -> str | None:
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        if int(err) != 0:
            return None
        return f"{version // 1000}.{(version % 1000) // 10}"
    except Exception:  # reporting only: a broken driver shows up elsewhere
        return None


def _nvrtc() -> list[Row]:
    from gemmlab.compiling import toolchain
    from gemmlab.errors import GemmlabError

    try:
        major, minor = toolchain.nvrtc_version()
    except GemmlabError as exc:
        return [Row("NVRTC", "fail", str(exc), f"pip install {toolchain.NVRTC_PIP}")]
    rows = [Row("NVRTC", "ok", f"{major}.{minor} (wheel {toolchain.dist_version('nvidia-cuda-nvrtc') or 'none: CUDA toolkit'})")]
    try:
        from gemmlab.compiling.compiler import compile_to

        start = time.perf_counter()
        compiled = compile_to(_TEST_KERNEL, "doctor_probe", arch="sm_90a", use_cache=False)
        seconds = time.perf_counter() - start
        rows.append(Row("test compile", "ok",
                        f"raw CUDA kernel for sm_90a in {seconds:.2f} s ({compiled.resources.registers} registers)"))
    except GemmlabError as exc:
        rows.append(Row("test compile", "fail", str(exc).splitlines()[0], "reinstall the pins: pip install -e ."))
    return rows


def _headers() -> list[Row]:
    from gemmlab.compiling import toolchain
    from gemmlab.errors import ToolchainError

    rows = []
    checks: list[tuple[str, Callable[[], object], str, Status]] = [
        ("CUDA runtime headers", toolchain.cudart_include, toolchain.RUNTIME_PIP, "fail"),
        ("CCCL headers", toolchain.cccl_include, toolchain.CCCL_PIP, "fail"),
        ("CuTe/CUTLASS headers", toolchain.cute_include, toolchain.CUTLASS_PIP, "fail"),
    ]
    for item, finder, pip, severity in checks:
        try:
            rows.append(Row(item, "ok", str(finder())))
        except ToolchainError as exc:
            rows.append(Row(item, severity, str(exc), f"pip install {pip}"))
    if toolchain.has_crt():
        rows.append(Row("crt/mma.h (WMMA)", "ok", str(toolchain.crt_include())))
    else:
        rows.append(Row("crt/mma.h (WMMA)", "warn", "missing: '#include <mma.h>' will not compile",
                        f"pip install {toolchain.CRT_PIP}"))
    versions = toolchain.versions()
    try:
        toolchain.check_compatible()
        rows.append(Row("CUTLASS / CCCL versions", "ok", f"CUTLASS {versions['cutlass']}, CCCL {versions['cccl']}"))
    except ToolchainError as exc:
        rows.append(Row("CUTLASS / CCCL versions", "fail", str(exc), f"pip install {toolchain.CCCL_PIP}"))
    return rows


def _dsl() -> list[Row]:
    """The DSL's own report (gemmlab.dsl.info: a real tiny compile per target), or a bare import check."""
    fix = "pip install nvidia-cutlass-dsl==4.8.1"
    try:
        from gemmlab.dsl import info
    except ImportError:
        info = None
    if info is not None:
        report = info()
        version = report.get("version") or "unknown version"
        if not report.get("importable"):
            return [Row("CuTe DSL", "warn", f"{version}: {report.get('reason') or 'does not import'}", fix)]
        targets = report.get("targets", {})
        good = [arch for arch, t in targets.items() if t.get("ok")]
        bad = [f"{arch} ({t.get('error')})" for arch, t in targets.items() if not t.get("ok")]
        if not good:
            return [Row("CuTe DSL", "warn", f"{version}: {report.get('reason')}", fix)]
        detail = f"{version}; compiles for {', '.join(good)}"
        return [Row("CuTe DSL", "warn" if bad else "ok", detail + (f"; fails for {', '.join(bad)}" if bad else ""),
                    fix)]
    version = _version("nvidia-cutlass-dsl")
    try:
        import cutlass  # noqa: F401
        import cutlass.cute  # noqa: F401
    except Exception as exc:  # the DSL can fail at import in many ways; report, do not crash
        return [Row("CuTe DSL", "warn", f"import cutlass.cute failed ({type(exc).__name__}: {exc})", fix)]
    version = getattr(cutlass, "__version__", None) or version
    return [Row("CuTe DSL", "ok", f"{version or 'unknown version'}; import cutlass.cute works")]


def _tools() -> list[Row]:
    rows = []
    for tool, why in (("ncu", "Nsight Compute profiles (bank conflicts, throughput)"),
                      ("compute-sanitizer", "finds out-of-bounds and misaligned accesses")):
        path = shutil.which(tool)
        if path:
            rows.append(Row(tool, "ok", path))
        else:
            rows.append(Row(tool, "warn", f"not on PATH (optional: {why})", "comes with the CUDA toolkit"))
    from gemmlab.compiling.sass import disassembler

    found = disassembler()
    if found:
        rows.append(Row("disassembler", "ok", f"{found[0]} (Kernel.sass() shows the machine code)"))
    else:
        rows.append(Row("disassembler", "warn", "no nvdisasm or cuobjdump (optional: Kernel.sass())",
                        "pip install nvidia-cuda-nvdisasm"))
    return rows


def _cache() -> list[Row]:
    from gemmlab.compiling.cache import cache_root

    try:
        root = cache_root()
        probe = root / ".doctor-probe"
        probe.write_bytes(b"ok")
        probe.unlink()
        return [Row("cache", "ok", str(root))]
    except OSError as exc:
        return [Row("cache", "warn", f"not writable ({exc}); every compile starts cold",
                    "set GEMMLAB_CACHE to a writable folder")]


SECTIONS: tuple[Callable[[], list[Row]], ...] = (
    _python, _gemmlab, _torch_and_gpu, _nvrtc, _headers, _dsl, _tools, _cache,
)


def doctor() -> Report:
    """Run every check; a check that crashes becomes a 'fail' row instead of a traceback."""
    report = Report()
    for section in SECTIONS:
        try:
            report.rows.extend(section())
        except Exception as exc:  # doctor must always finish and say something useful
            name = section.__name__.strip("_")
            report.rows.append(Row(name, "fail", f"check crashed: {type(exc).__name__}: {exc}",
                                   "please report this with the output of `gemmlab doctor`"))
    return report
