"""gemmlab.compiling.sass: disassembly through cuda.pathfinder, and reading a wgmma chain off the SASS."""
from __future__ import annotations

import pytest

import gemmlab
from gemmlab.compiling import sass
from gemmlab.errors import ToolchainError

PIPELINED = """
        HGMMA.64x256x16.F32 R24, gdesc[UR12], R24 ;
        HGMMA.64x256x16.F32 R24, gdesc[UR12], R24 ;
        HGMMA.64x256x16.F32 R24, gdesc[UR12], R24, gsb0 ;
        WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
"""
SERIALIZED = """
        HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;
        WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;
        WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
"""


def test_wgmma_waits_tells_a_pipelined_chain_from_a_serialized_one() -> None:
    assert sass.wgmma_waits(PIPELINED) == (3, 1)
    assert sass.wgmma_waits(SERIALIZED) == (2, 2)
    assert sass.wgmma_waits("FFMA R1, R2, R3, R4 ;") == (0, 0)


SPILLS = """
        /*0620*/                   STL [R1+0x220], R14                      (*"SpillRefill"*);
        /*08c0*/                   STL.64 [R1+0x8], R18                     (*"SpillRefill"*);
        /*22e0*/                   LDL R201, [R1]                           (*"SpillRefill"*);
        /*3d90*/                   LDL.LU.128 R4, [R1+0x10]                 (*"SpillRefill"*);
        /*3da0*/                   STL.128 [R1+0x40], R8 ;
        /*3db0*/                   LDL R9, [R1+0x40] ;
"""


def test_spill_bytes_counts_only_what_ptxas_marked_as_spills() -> None:
    # lines as nvdisasm prints them; the last two are a local array, which is not a spill
    assert sass.spill_bytes(SPILLS) == (4 + 8, 4 + 16)
    assert sass.spill_bytes(PIPELINED) == (0, 0)


def test_without_a_disassembler_the_error_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(sass, "disassembler", lambda: None)
    with pytest.raises(ToolchainError, match="pip install nvidia-cuda-nvdisasm"):
        sass.disassemble(b"\x7fELF", "k")


def test_a_cubin_disassembles() -> None:
    if sass.disassembler() is None:
        pytest.skip("no nvdisasm or cuobjdump here (pip install nvidia-cuda-nvdisasm)")
    k = gemmlab.compile('extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 3.0f; }',
                        "twice", arch="sm_90a")
    text = k.sass()
    assert "twice" in text and "FMUL" in text
    with pytest.raises(ToolchainError, match="no cubin"):
        sass.disassemble(b"", "twice")


def test_serialized_chain_gets_a_message_a_pipelined_one_none(monkeypatch) -> None:
    monkeypatch.setattr(sass, "disassembler", lambda: ("nvdisasm", ["-c"]))
    ptx = "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 ..."
    monkeypatch.setattr(sass, "disassemble", lambda cubin, name: SERIALIZED)
    message = sass.serialized_wgmma_message(ptx, b"\x7fELF", "ws_kernel")
    assert message and "`ws_kernel`" in message and "ACCUMULATE" in message and "2 HGMMA" in message
    with pytest.warns(sass.WgmmaSerializedWarning, match="serialized"):
        sass.warn_if_wgmma_serialized(ptx, b"\x7fELF", "ws_kernel")
    monkeypatch.setattr(sass, "disassemble", lambda cubin, name: PIPELINED)
    assert sass.serialized_wgmma_message(ptx, b"\x7fELF", "ws_kernel") is None
    assert sass.serialized_wgmma_message("mma.sync.aligned.m16n8k16", b"\x7fELF", "k") is None  # no wgmma: no look


def _counting_tool(folder, name: str = "fake-nvdisasm"):
    """A stand-in disassembler that logs each run and prints the cubin's bytes (and fails on b'bad')."""
    log = folder / f"{name}.runs"
    tool = folder / name
    tool.write_text(f'#!/bin/sh\necho run >> "{log}"\ngrep -q bad "$2" && exit 1\necho SASS; cat "$2"\n')
    tool.chmod(0o755)
    return str(tool), lambda: len(log.read_text().splitlines()) if log.exists() else 0


def test_a_cubin_is_disassembled_once_per_process_and_a_changed_one_again(tmp_path, monkeypatch) -> None:
    tool, runs = _counting_tool(tmp_path)
    monkeypatch.setattr(sass, "disassembler", lambda: (tool, ["-c"]))
    first = sass.disassemble(b"cubin-one", "k")
    assert first == "SASS\ncubin-one" and runs() == 1
    assert sass.disassemble(b"cubin-one", "k") == first and runs() == 1     # read again: not run again
    assert sass.disassemble(b"cubin-two", "k") == "SASS\ncubin-two" and runs() == 2
    other, other_runs = _counting_tool(tmp_path, "other-tool")                # another tool reads it afresh
    monkeypatch.setattr(sass, "disassembler", lambda: (other, ["-c"]))
    assert sass.disassemble(b"cubin-one", "k") == first and other_runs() == 1


def test_a_failed_disassembly_is_not_remembered(tmp_path, monkeypatch) -> None:
    tool, runs = _counting_tool(tmp_path)
    monkeypatch.setattr(sass, "disassembler", lambda: (tool, ["-c"]))
    for expected_runs in (1, 2):
        with pytest.raises(ToolchainError, match="could not disassemble"):
            sass.disassemble(b"bad cubin", "k")
        assert runs() == expected_runs
