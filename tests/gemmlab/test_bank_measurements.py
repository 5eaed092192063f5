"""The bank model against Nsight Compute measurements, and the measuring script's CPU parts.

``gemmlab/data/bank_measurements.json`` is written on the GPU machine by
``python3 benchmarks/bank_validation.py --out gemmlab/data/bank_measurements.json``.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys

import pytest

from gemmlab.seeing import banks

from tests.support import ROOT
DATA = ROOT / "gemmlab" / "data" / "bank_measurements.json"


@functools.lru_cache(maxsize=1)
def _script():
    """The validation script as a module (registered first: its dataclasses need that)."""
    spec = importlib.util.spec_from_file_location("bank_validation", ROOT / "benchmarks" / "bank_validation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bank_validation"] = mod
    spec.loader.exec_module(mod)
    return mod


def _rows():
    if not DATA.exists():
        return []
    return json.loads(DATA.read_text())["patterns"]


@pytest.mark.skipif(not DATA.exists(), reason="gemmlab/data/bank_measurements.json not measured yet: run "
                    "benchmarks/bank_validation.py under ncu on the GPU machine and commit its --out file")
@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["name"])
def test_model_matches_ncu(row):
    a = banks.analyze(row["addresses"], row["op"])
    assert (a.wavefronts, a.conflicts) == (row["wavefronts"], row["conflicts"]), \
        f"{row['name']}: model {a.wavefronts} wavefronts/{a.conflicts} conflicts, ncu {row['wavefronts']}/{row['conflicts']}"


def test_patterns_cover_every_op_and_are_valid():
    mod = _script()
    pats = mod.patterns()
    assert {p.op for p in pats} == set(banks.OPS)
    assert len({p.name for p in pats}) == len(pats)
    for p in pats:
        assert len(p.addresses) == 32
        assert all(a is None or a < mod.SMEM_BYTES for a in p.addresses)
        banks.analyze(list(p.addresses), p.op)  # raises on misaligned/invalid addresses
    assert pats == mod.patterns()  # fixed seed: the same patterns every run


def test_source_has_one_shared_instruction_per_kernel():
    mod = _script()
    pats = mod.patterns()
    src = mod.kernel_source(pats)
    bodies = re.split(r'extern "C" __global__ void ', src)[1:]
    assert len(bodies) == len(pats) + 1
    assert "asm" not in bodies[0]  # the baseline touches no shared memory
    for p, body in zip(pats, bodies[1:]):
        assert body.count("asm volatile") == 1 and '"memory"' in body
        instr = re.search(r'asm volatile\("(\S+)', body).group(1)
        assert instr.startswith(p.op.split(".")[0].rstrip("0123456789") if "matrix" in p.op else p.op[:2])


def test_source_compiles_for_sm90a_and_keeps_every_instruction():
    from cuda.bindings import nvrtc

    mod = _script()
    pats = mod.patterns()
    src = mod.kernel_source(pats)
    assert mod.compile_cubin(src)[:4] == b"\x7fELF"
    # PTX: each pattern kernel holds exactly its one shared-memory instruction
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"v.cu", 0, [], [])
    opts = [b"--gpu-architecture=compute_90a", b"-std=c++17"]
    assert nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    entries = re.split(r"\.entry ", ptx.decode())[1:]
    by_name = {e.split("(")[0].strip(): e for e in entries}
    assert not re.search(r"(ld|st)\.shared|ldmatrix|stmatrix", by_name[f"{mod.KERNEL_PREFIX}baseline"])
    for i, p in enumerate(pats):
        body = by_name[f"{mod.KERNEL_PREFIX}{i}"]
        assert len(re.findall(r"\b(?:ld\.shared|st\.shared|ldmatrix|stmatrix)\.", body)) == 1, p.name


NCU_SAMPLE = '''==PROF== Connected to process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3","127.0.0.1","bk_baseline","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","0"
"1","4242","python3","127.0.0.1","bk_0","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","1"
"1","4242","python3","127.0.0.1","bk_0","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","0"
"2","4242","python3","127.0.0.1","bk_1","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","1,024"
==PROF== Disconnected from process 4242
'''


def test_parse_ncu_csv_and_rows():
    mod = _script()
    meas = mod.parse_ncu_csv(NCU_SAMPLE)
    ld = mod.METRICS[("ld", "wavefronts")]
    assert meas["bk_0"][ld] == 1 and meas["bk_1"][ld] == 1024 and meas["bk_baseline"][ld] == 0
    pats = mod.patterns()[:1]
    rows = mod.rows_from_measurements(pats, meas)
    assert rows[0]["wavefronts"] == 1 and rows[0]["conflicts"] == 0 and rows[0]["op"] == pats[0].op
    assert mod.report(rows) == 0


@pytest.mark.gpu
def test_validation_kernels_run_on_the_gpu():
    """Every pattern kernel loads and runs (no misaligned address, no illegal instruction)."""
    import subprocess

    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bank_validation.py"), "--run-only"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "kernels ran" in proc.stdout
