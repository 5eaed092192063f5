"""The timeline's marks compiled without a GPU: in C++ (NVRTC, gemmlab_trace.h) and in the CuTe DSL (marks),
checked in their PTX and SASS. They exist only in a traced build: the plain build is the kernel without them."""
from __future__ import annotations

import re
import struct

import pytest

from gemmlab.compiling import elf
from gemmlab.compiling.compiler import compile_to
from gemmlab.errors import CompileError
from gemmlab.profiling import switch
from gemmlab.profiling.trace_format import BEGIN_PTX, BUFFER_SYMBOL, CPP_SWITCH, MARK_PTX, STATES, cpp_asm

from tests.support import KERNELS, ROOT

HEADER = ROOT / "gemmlab" / "include" / "gemmlab_trace.h"
TRACED = (KERNELS / "traced_tiled.cu").read_text()
#: The kernel's marks: BEGIN (its START), and LOAD, SYNC, MMA, SYNC in the k-loop, EPILOGUE, DONE.
MARKS = 7


def symbols(cubin: bytes) -> dict[str, tuple[int, str]]:
    """The cubin's ELF symbols: name -> (size, the section it is in)."""
    secs = elf.sections(cubin)
    table = next(s for s in secs if s.name == ".symtab")
    strings = next(s for s in secs if s.name == ".strtab").data
    out = {}
    for at in range(0, len(table.data), 24):
        name, _info, _other, shndx, _value, size = struct.unpack_from("<IBBHQQ", table.data, at)
        text = strings[name:strings.index(b"\0", name)].decode()
        if text:
            out[text] = (size, secs[shndx].name if shndx < len(secs) else "")
    return out


def loop_bodies(ptx: str) -> list[str]:
    """The PTX between each label and the branch back to it: the bodies of the kernel's loops."""
    bodies = []
    for label in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, flags=re.M):
        back = re.search(rf"bra(?:\.uni)?\s+{re.escape(label.group(1))};", ptx[label.end():])
        if back:
            bodies.append(ptx[label.end():label.end() + back.start()])
    return bodies


def sass_of(cubin: bytes) -> str:
    from gemmlab.compiling.sass import disassembler, disassemble

    if disassembler() is None:
        pytest.skip("no disassembler (nvidia-cuda-nvdisasm) here")
    return disassemble(cubin, "traced")


def _asm_literals(name: str) -> str:
    """The inline asm string of the header's function ``name``, as the compiler reads it."""
    body = HEADER.read_text().split(f"{name}(", 1)[1].split("asm volatile(", 1)[1].split(": \"=l\"", 1)[0]
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body)).replace("\\n", "\n")


def test_the_header_carries_the_same_ptx_and_states_as_the_format() -> None:
    assert _asm_literals("gemmlab_trace_begin") == cpp_asm(BEGIN_PTX)
    assert _asm_literals("gemmlab_trace_mark") == cpp_asm(MARK_PTX)
    defined = dict(re.findall(r"#define GEMMLAB_([A-Z_]+) (\d+)u", HEADER.read_text()))
    assert {k: int(v) for k, v in defined.items()} == STATES
    assert f"#if defined({CPP_SWITCH})" in HEADER.read_text() and BUFFER_SYMBOL in HEADER.read_text()


def test_a_traced_cpp_build_writes_one_record_per_mark() -> None:
    traced = compile_to(TRACED, "traced_tiled", "sm_90a", (f"-D{CPP_SWITCH}=1",), use_cache=False)
    assert traced.ptx.count("%globaltimer") == MARKS and traced.ptx.count("%clock;") == MARKS
    assert traced.ptx.count("st.global.v4.u32") == MARKS and traced.ptx.count("activemask.b32") == MARKS
    assert len(re.findall(rf"ld\.volatile\.global\.u64\s+%rd\d+, \[{BUFFER_SYMBOL}\]", traced.ptx)) == 1
    size, section = symbols(traced.cubin)[BUFFER_SYMBOL]
    assert size == 8 and section == ".nv.global"                 # where the judge writes the buffer's address
    sass = sass_of(traced.cubin)
    assert sass.count("SR_GLOBALTIMERLO") == MARKS and len(re.findall(r"\bSTG\.E\.128\b", sass)) == MARKS


def test_a_plain_build_is_the_kernel_without_marks() -> None:
    plain = compile_to(TRACED, "traced_tiled", "sm_90a", (), use_cache=False)
    assert "globaltimer" not in plain.ptx and BUFFER_SYMBOL not in plain.ptx
    assert BUFFER_SYMBOL not in symbols(plain.cubin)
    unmarked = re.sub(r"^\s*GEMMLAB_TRACE(_BEGIN)?\((\w*)\);\n", "", TRACED, flags=re.M)
    assert "GEMMLAB_TRACE" not in unmarked.replace("#include <gemmlab_trace.h>", "")
    bare = compile_to(unmarked, "traced_tiled", "sm_90a", (), use_cache=False)
    assert sass_of(plain.cubin) == sass_of(bare.cubin)            # the very same machine code
    assert plain.resources.registers == bare.resources.registers


def test_a_misspelt_state_fails_to_compile_in_either_build() -> None:
    wrong = TRACED.replace("GEMMLAB_TRACE(EPILOGUE);", "GEMMLAB_TRACE(EPILOG);")
    for options in ((), (f"-D{CPP_SWITCH}=1",)):
        with pytest.raises(CompileError, match="GEMMLAB_EPILOG"):
            compile_to(wrong, "traced_tiled", "sm_90a", options, use_cache=False)


def test_a_dsl_kernel_carries_marks_only_in_a_traced_build() -> None:
    torch = pytest.importorskip("torch")
    import gemmlab.dsl

    from tests.dsl_kernels.traced_gemm import traced_gemm

    args = (torch.zeros(64, 40, dtype=torch.float16), torch.zeros(48, 40, dtype=torch.float16),
            torch.zeros(64, 48, dtype=torch.float16))
    plain = gemmlab.dsl.compile(traced_gemm, *args, arch="sm_90a")
    assert "globaltimer" not in plain.ptx and BUFFER_SYMBOL not in plain.ptx
    with switch.tracing():
        traced = gemmlab.dsl.compile(traced_gemm, *args, arch="sm_90a")
    # never the plain build's cache entry (another test may have built this traced one already): the marks are in it
    # begin's START, LOAD and MMA once each in the k-loop's body (not unrolled), EPILOGUE, DONE
    assert traced.ptx.count("%globaltimer") == 5 and traced.ptx.count(f".global .align 8 .u64 {BUFFER_SYMBOL}") == 1
    assert loop_bodies(traced.ptx) and [body.count("%globaltimer") for body in loop_bodies(traced.ptx)] == [2]
    assert symbols(traced.cubin)[BUFFER_SYMBOL][0] == 8
    sass = sass_of(traced.cubin)
    assert sass.count("SR_GLOBALTIMERLO") == 5 and sass.count("SR_CLOCKLO") == 5
    again = gemmlab.dsl.compile(traced_gemm, *args, arch="sm_90a")
    assert "globaltimer" not in again.ptx                          # outside the timeline: the plain build again
