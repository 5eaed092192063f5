"""Whether the GPU a worker was given is really there: the grader's own answer, never the notebook's.

A test cell that needs a GPU (:func:`autograder.cell_metadata.needs_gpu`) pays out only when
this says the worker has one, whatever the cell's code found (``if GPU:`` branches included). The
question is asked in a fresh process of the grader's Python with the worker's
``CUDA_VISIBLE_DEVICES`` (the CUDA driver, no torch, no student code), once per GPU and process.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys

from gemmlab.running.gpu import HIDE_ENV

#: Counts the CUDA devices the driver shows; prints the count or a reason.
_PROBE = r"""
import ctypes, sys
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    print("no NVIDIA driver (libcuda.so.1 not found)"); sys.exit()
n = ctypes.c_int(0)
rc = cuda.cuInit(0)
if rc == 0:
    rc = cuda.cuDeviceGetCount(ctypes.byref(n))
print(n.value if rc == 0 else f"the CUDA driver answered error {rc}")
"""


@functools.lru_cache(maxsize=None)
def missing_gpu(gpu: str | None) -> str:
    """'' when the worker's GPU ``gpu`` (a CUDA_VISIBLE_DEVICES value) is usable, else why not."""
    if gpu is None or gpu == "":
        return "this worker was given no GPU (grade with --gpus, or on Ray GPU workers)"
    if os.environ.get(HIDE_ENV, "") not in ("", "0"):
        return f"{HIDE_ENV} is set for the grader"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return f"GPU {gpu} did not answer within 60 s"
    answer = proc.stdout.strip()
    if answer.isdigit() and int(answer) > 0:
        return ""
    return f"GPU {gpu} is not usable here: {answer or 'the driver shows no device'}"


#: Prints the compute capability of device 0 as ``sm_XY``, or nothing.
_ARCH_PROBE = r"""
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
major, minor, dev = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0:
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
    print(f"sm_{major.value}{minor.value}")
"""


@functools.lru_cache(maxsize=None)
def gpu_arch(gpu: str | None) -> str:
    """The worker's GPU as ``sm_XY`` (e.g. ``sm_90`` for an H100), '' when it has none or the driver will not say."""
    if missing_gpu(gpu):
        return ""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
    try:
        proc = subprocess.run([sys.executable, "-c", _ARCH_PROBE], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ""
    answer = proc.stdout.strip()
    return answer if answer.startswith("sm_") else ""


__all__ = ["gpu_arch", "missing_gpu"]
