"""The kernel judge: a C++ GEMM kernel checked and timed by trusted host code, in a process that runs no student Python.

The contract:

- **In** (``protocol.JudgeRequest``, JSON on stdin of ``python -m gemmlab.judge``): a
  ``spec.KernelSpec`` (the kernel's C++ source as plain text, its name, the GEMM convention, and
  the grid, block and shared memory as expressions in a small integer language over M, N, K and
  named constants, ``expressions``), the action (``"check"`` on shapes or a suite, ``"bench"`` on
  one shape), dtypes, and time limits no higher than the judge's ceilings. Sizes are bounded
  (source length, number of shapes, elements); anything else is refused with the reason. No
  request field picks input values: the judge draws its own seed.
- **Out** (``protocol.JudgeReport``, JSON on stdout and nothing else): a verdict (passed,
  failed, error, refused, context_lost, timeout, crashed), the plain result of
  ``CheckResult.to_dict()`` (rows, messages, per-tile heatmap data, seed) or
  ``BenchResult.to_dict()`` (times, TFLOPS, ratio to cuBLAS), the error text, the device name and
  the judge's version.
- **How** (``backend.GpuBackend``): compile the source with ``gemmlab.compile``'s worker under a
  time limit, in a process of its own under an address-space limit (``compiling``), bind the kernel's parameters by name
  (``binding``: A, B, C/D, M, N, K, lda/ldb/ldc/ldd, alpha, beta), build the launcher itself
  (``launcher.TrustedLauncher``, on ``gemmlab.running``), and run ``check_gemm`` (fresh seeded
  inputs, NaN-poisoned and guarded output, library GEMMs forbidden) or ``bench_gemm`` (verified,
  against cuBLAS in the same run). A lost context or a kernel that does not finish is reported as
  such and ends the process. ``client.judge(request, timeout_s)`` runs one judge process
  per request with a wall-clock limit, an allow-listed environment and bounded reads.

A CuTe DSL kernel cannot be described as source the judge compiles (its Python is the student's), so
the grader's judge replays what the student's process *recorded* instead: ``dsl_replay.Replay`` takes a
plan (module images, launches, copies and buffers as plain data, made by ``gemmlab.dsl.recording``),
checks it and runs it on the judge's own tensors; ``gemmlab.answers`` (its
judge-side stand-ins) records and replays a judged test's calls.

What the judge trusts: gemmlab itself and the Python environment it is started in (chosen by the
trusted caller), the GPU driver and torch as the reference. What it does not trust: every field
of the request, above all the kernel source, which only NVRTC reads and only the GPU runs. The
launch is always the judge's own, so the launcher cheats of a notebook (a library call, work
left on another stream, a result cached between calls) cannot be expressed in a request.
"""
from __future__ import annotations

from .errors import JudgeError
from .protocol import JudgeLimits, JudgeReport, JudgeRequest
from .spec import KernelSpec

__all__ = ["JudgeError", "JudgeLimits", "JudgeReport", "JudgeRequest", "KernelSpec"]
