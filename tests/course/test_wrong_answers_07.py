"""Notebook 07's test cells (visible and hidden tests together) fail the plausible wrong answers of
every exercise, as far as a machine without a GPU can grade it: acc_owner, ring_waits, persistent_tiles,
the Blackwell K-loop, TMEM and grid exercises, and the technique checks that the Hopper kernels' test cells
read from the machine code before their GPU runs (Exercises 2, 4 and 6); a test that needs a Hopper GPU
fails on another GPU. Mistakes no check of the machine code can see are said so, with the reason."""
from __future__ import annotations

import re

import pytest

from tests.support import hopper07

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def answer(grade_id: str, *bodies: str) -> str:
    """The answer cell with its solution blocks (in order) replaced by ``bodies`` (None: kept)."""
    src = hopper07.solution_part(grade_id)
    parts = re.split(r"( *### BEGIN SOLUTION\n.*?### END SOLUTION)", src, flags=re.S)
    blocks = parts[1::2]
    assert len(blocks) == len(bodies), f"{grade_id} has {len(blocks)} solution blocks"
    for i, body in enumerate(bodies):
        if body is not None:
            indent = re.match(r" *", blocks[i]).group(0)
            parts[2 * i + 1] = "\n".join(indent + line if line else line for line in body.strip("\n").splitlines())
    return "".join(parts)


def fails(cells: tuple[str, ...], test: str, replace: dict[str, str]) -> None:
    ns = hopper07.plain_namespace()
    with pytest.raises(AssertionError):      # RingError is one too
        hopper07.run(ns, [*cells, test], replace)


def passes(cells: tuple[str, ...], test: str) -> None:
    hopper07.run(hopper07.plain_namespace(), [*cells, test])


# ------------------------------------------------------------------ Exercise 0: the missing fence

FENCE_CELLS = ("fences_vocabulary", "missing_fences", "fences_check_helper")
FENCE_SOLUTION = answer("missing_fences", None, None)
_BODY = hopper07.solution_part("missing_fences").split("### BEGIN SOLUTION\n", 1)[1].split("    ### END SOLUTION", 1)[0]


def _fences(edit: tuple[str, str] | None = None, effect: str | None = None, body: str | None = None) -> str:
    """The answer cell with the solution's missing_fences edited (``edit``: old, new), or another ``body``, and
    fence_effect returning ``effect`` (a dict expression) instead."""
    code = _BODY if body is None else body
    if edit:
        assert edit[0] in code, edit[0]
        code = code.replace(*edit)
    return answer("missing_fences", code, None if effect is None else f"return {effect}[fence]")


FENCE_WRONG = {
    "a sync counts as a proxy fence": _fences(('        elif verb == "fence.proxy.async":',
                                               '        elif verb in ("fence.proxy.async", "sync"):')),
    "a sync publishes the barrier initialisation": _fences(('        elif verb == "fence.mbarrier_init":',
                                                            '        elif verb in ("fence.mbarrier_init", "sync"):')),
    "a proxy fence anywhere before the read counts": _fences(('            written.clear()', '            written.add("fenced")'
                                                             ), None, _BODY.replace(
        "        if written & set(async_buffers):",
        "        if written & set(async_buffers) and \"fenced\" not in written:")),
    "only the first wgmma needs its fence": _fences(('            found.append((i, "wgmma.fence"))',
                                                     '            found.append((i, "wgmma.fence"))\n'
                                                     '            touched.clear()')),
    "wgmma.fence only before the very first wgmma": _fences(('            touched.update(names)', '            pass')),
    "TMA-loaded bytes need a proxy fence before the threads read them": _fences(
        ('        async_buffers = names[1:] if verb == "wgmma" else names if verb in ("tcgen05.mma", "tma.store") \\',
         '        if verb == "tma.load":\n            written.add(names[0])\n'
         '        async_buffers = names[1:] if verb == "wgmma" else names '
         'if verb in ("tcgen05.mma", "tma.store", "ld.shared") \\')),
    "a TMA load into a buffer the threads wrote is not an async access": _fences(
        (' \\\n            else names[:1] if verb == "tma.load" else []', ' else []')),
    "one entry per buffer at risk": _fences(('        if written & set(async_buffers):\n'
                                             '            found.append((i, "fence.proxy.async"))',
                                             '        for _ in written & set(async_buffers):\n'
                                             '            found.append((i, "fence.proxy.async"))')),
    "the write, not the read, is reported": _fences(('        elif verb == "st.shared":\n            written.update(names)',
                                                     '        elif verb == "st.shared":\n            written.update(names)\n'
                                                     '            last_write = i'), None, None).replace(
        '            found.append((i, "fence.proxy.async"))', '            found.append((last_write, "fence.proxy.async"))'),
    "tcgen05.mma left out of the async readers": _fences(('("tcgen05.mma", "tma.store")', '("tma.store",)')),
    "the effects of the proxy fence and the init fence swapped": _fences(
        None, '{"fence.mbarrier_init": "d", "wgmma.fence": "e", "fence.proxy.async": "b"}'),
    "a fence is only slower": _fences(None, '{"fence.mbarrier_init": "b", "wgmma.fence": "c", "fence.proxy.async": "d"}'),
    "the visible kernels' answers, looked up": answer("missing_fences", """
known = {}
for _ops in FENCED_KERNELS.values():
    known[tuple(_ops)] = []
_one = FENCED_KERNELS["Exercise 2, one tile"]
_k = without(_one, "fence.mbarrier_init")
known[tuple(_k)] = [(at(_k, o), "fence.mbarrier_init") for o in ("arrive bar", "tma.load sA bar", "tma.load sB bar", "wait bar")]
_k = without(_one, "wgmma.fence")
known[tuple(_k)] = [(at(_k, "wgmma acc sA sB", n), "wgmma.fence") for n in (1, 2, 3, 4)]
_ws = FENCED_KERNELS["Exercise 6's consumers, two tiles"]
_k = without(_ws, "fence.proxy.async")
known[tuple(_k)] = [(at(_k, "tma.store sD"), "fence.proxy.async")]
_k = without(_ws, "wgmma.fence", 2)
known[tuple(_k)] = [(at(_k, "wgmma acc sA sB", n), "wgmma.fence") for n in (3, 4)]
_bw = FENCED_KERNELS["Blackwell, A and B copied in by the threads"]
_k = without(_bw, "fence.proxy.async", 2)
known[tuple(_k)] = [(at(_k, "tcgen05.mma sA sB", 2), "fence.proxy.async")]
known[("st.shared sD", "sync", "tma.store sD")] = [(2, "fence.proxy.async")]
known[("fence.proxy.async", "st.shared sD", "sync", "tma.store sD")] = [(3, "fence.proxy.async")]
known[("st.shared sA", "sync", "tma.load sA b0")] = [(2, "fence.proxy.async")]
return known.get(tuple(ops), [])""", None),
}


def test_missing_fences_solution_passes() -> None:
    passes(FENCE_CELLS, "test_missing_fences")


@pytest.mark.parametrize("why", FENCE_WRONG)
def test_missing_fences_wrong_answers_fail(why: str) -> None:
    assert FENCE_WRONG[why] != hopper07.solution_part("missing_fences"), why
    fails(FENCE_CELLS, "test_missing_fences", {"missing_fences": FENCE_WRONG[why]})


def test_missing_fences_wrong_effects_are_not_revealed() -> None:
    ns = hopper07.plain_namespace()
    with pytest.raises(AssertionError) as err:
        hopper07.run(ns, [*FENCE_CELLS, "test_missing_fences"],
                     {"missing_fences": FENCE_WRONG["the effects of the proxy fence and the init fence swapped"]})
    assert not any(f'"{letter}"' in str(err.value) or f"'{letter}'" in str(err.value) for letter in "abcdef")


# ------------------------------------------------------------------ Exercise 1: acc_owner

ACC_CELLS = ("acc_owner", "acc_owner_check_helper")
ACC_WRONG = {
    "thread and value swapped": "return (n % 2 + 2 * ((m % 16) // 8) + 4 * (n // 8), "
                                "32 * (m // 16) + 4 * (m % 8) + (n % 8) // 2)",
    "rows 8..15 of a warp in the thread": "return 32 * (m // 16) + 4 * (m % 16) // 2 + (n % 8) // 2, "
                                          "n % 2 + 2 * ((m % 16) // 8) + 4 * (n // 8)",
    "column blocks wrap after 64 columns": "return 32 * (m // 16) + 4 * (m % 8) + (n % 8) // 2, "
                                           "n % 2 + 2 * ((m % 16) // 8) + 4 * ((n // 8) % 8)",
    "correct only up to 128 columns": "t = 32 * (m // 16) + 4 * (m % 8) + (n % 8) // 2\n"
                                      "return t, n % 2 + 2 * ((m % 16) // 8) + 4 * (n // 8) + (n >= 128)",
}


def test_acc_owner_solution_passes() -> None:
    passes(ACC_CELLS, "test_acc_owner")


@pytest.mark.parametrize("why", ACC_WRONG)
def test_acc_owner_wrong_answers_fail(why: str) -> None:
    fails(ACC_CELLS, "test_acc_owner", {"acc_owner": answer("acc_owner", ACC_WRONG[why])})


# ------------------------------------------------------------------ Exercise 3: ring_waits

RING_CELLS = ("ring_simulator", "ring_waits")
RING_WRONG = {
    "forgot the ^ 1": "r = t // stages\nreturn t % stages, r % 2, r % 2",
    "parity frozen": "return t % stages, 0, 1 if t < stages else 0",
    "parity of t, not of the round": "return t % stages, t % 2, (t % 2) ^ 1",
    "two slots whatever STAGES": "r = t // stages\nreturn t % 2, r % 2, (r % 2) ^ 1",
    "round counted from 1": "r = t // stages + 1\nreturn t % stages, r % 2, (r % 2) ^ 1",
    "wrong only from the 8th slot on": "r = t // stages\nreturn t % min(stages, 7), r % 2, (r % 2) ^ 1",
}


def test_ring_waits_solution_passes() -> None:
    passes(RING_CELLS, "test_ring_waits")


@pytest.mark.parametrize("why", RING_WRONG)
def test_ring_waits_wrong_answers_fail(why: str) -> None:
    fails(RING_CELLS, "test_ring_waits", {"ring_waits": answer("ring_waits", RING_WRONG[why])})


# ------------------------------------------------------------------ Exercise 5: persistent_tiles

PERSISTENT_CELLS = ("draw_persistent", "persistent_tiles", "persistent_check_helper")
PERSISTENT_WRONG = {
    "cluster rank ignored": """
cl_tiles_m = -(-tiles_m // cluster_m)
out = []
for w in range(cta // cluster_m, cl_tiles_m * tiles_n, num_ctas // cluster_m):
    cm, tn = grouped_work(w, cl_tiles_m, tiles_n, group_m)
    if cm * cluster_m < tiles_m:
        out.append((cm * cluster_m, tn))
return out""",
    "row-major, not grouped, with many CTAs": """
cl_tiles_m = -(-tiles_m // cluster_m)
out = []
for w in range(cta // cluster_m, cl_tiles_m * tiles_n, num_ctas // cluster_m):
    cm, tn = (w // tiles_n, w % tiles_n) if num_ctas > 1 else grouped_work(w, cl_tiles_m, tiles_n, group_m)
    tm = cm * cluster_m + cta % cluster_m
    if tm < tiles_m:
        out.append((tm, tn))
return out""",
    "contiguous chunks of work per cluster": """
cl_tiles_m = -(-tiles_m // cluster_m)
clusters = num_ctas // cluster_m
work = cl_tiles_m * tiles_n
per = -(-work // clusters)
c = cta // cluster_m
out = []
for w in range(c * per, min(work, (c + 1) * per)):
    cm, tn = grouped_work(w, cl_tiles_m, tiles_n, group_m)
    tm = cm * cluster_m + cta % cluster_m
    if tm < tiles_m:
        out.append((tm, tn))
return out""",
}


def test_persistent_tiles_solution_passes() -> None:
    passes(PERSISTENT_CELLS, "test_persistent_tiles")


@pytest.mark.parametrize("why", PERSISTENT_WRONG)
def test_persistent_tiles_wrong_answers_fail(why: str) -> None:
    fails(PERSISTENT_CELLS, "test_persistent_tiles",
          {"persistent_tiles": answer("persistent_tiles", PERSISTENT_WRONG[why])})


# ------------------------------------------------------------------ a run test on a GPU that is not a Hopper

def test_hopper_run_tests_fail_on_another_gpu(no_gpu) -> None:
    from gemmlab.notebook import nbhelpers

    ns = hopper07.plain_namespace()
    src = hopper07.cells()["setup"]
    exec(compile(src[src.index("def hopper_gpu_here"):], "<07:setup>", "exec"), ns)
    ns.update(GPU=True, HOPPER=False, ARCH="sm_80", nbh=nbhelpers)
    for test in ("test_one_tile_slow", "test_pipelined_slow", "test_ws_slow", "test_ws_speed_slow"):
        body = hopper07.cells()[test]
        assert "hopper_gpu_here(" in body and "GPU and HOPPER" not in body, test
        with pytest.raises(AssertionError, match="needs a Hopper GPU"):
            ns["hopper_gpu_here"](3, test)
    ns.update(GPU=False)
    assert ns["hopper_gpu_here"](3, "the one-tile kernel's run") is False        # counted as not checked
    assert nbhelpers.unchecked_points().get("the one-tile kernel's run") == 3


# ------------------------------------------------------------------ Hopper, Exercises 2, 4 and 6: the machine code

#: Each Hopper kernel's test cell: it reads the kernel's machine code before its GPU run, so these fail on any grader.
HOPPER_TESTS = {"hopper_one_tile": "test_one_tile_slow", "hopper_pipelined": "test_pipelined_slow",
                "hopper_ws": "test_ws_slow"}
ONE_WAIT = "    cute.arch.mbarrier_wait(bar, 0)\n"
ONE_DONE = "    warpgroup.wait_group(0)\n"
FULL_WAIT = "        cute.arch.mbarrier_wait(full + s, (t // PIPE_STAGES) % 2)\n"
ELECTED_ARRIVE = "        with cute.arch.elect_one():\n            cute.arch.mbarrier_arrive(empty + s)\n"
WAIT1 = "                warpgroup.wait_group(1)                   # the previous k-tile's wgmmas are done\n"
#: why -> (answer cell, [(text of the solution, replacement)], a phrase of the failure)
HOPPER_WRONG = {
    "Ex 2: no wait on bar": ("hopper_one_tile", [(ONE_WAIT, "")], "found 0 mbarrier waits"),
    "Ex 2: waits for parity 1": ("hopper_one_tile", [("mbarrier_wait(bar, 0)", "mbarrier_wait(bar, 1)")],
                                 "for the phase with parity 0"),
    "Ex 2: waits after the wgmmas": ("hopper_one_tile", [(ONE_WAIT, ""), (ONE_DONE, ONE_DONE + ONE_WAIT)],
                                     "your first wgmma does not come after a wait"),
    "Ex 2: a plain arrive, no bytes expected": ("hopper_one_tile", [(
        "cute.arch.mbarrier_arrive_and_expect_tx(bar, tx_bytes)", "cute.arch.mbarrier_arrive(bar)")],
        "found 0 expect-tx arrivals"),
    "Ex 2: only A loaded": ("hopper_one_tile", [(
        "        cute.copy(tma_b, tBgB[None, 0], tBsB[None, 0], tma_bar_ptr=bar)\n", "")], "found 1 TMA loads"),
    "Ex 4: no wait on full[s]": ("hopper_pipelined", [(FULL_WAIT, "        pass\n")],
                                 "do not come after a wait on an mbarrier"),
    "Ex 4: the wait on full[s] after the wgmmas": ("hopper_pipelined", [
        (FULL_WAIT, "        pass\n"), (ELECTED_ARRIVE, FULL_WAIT + ELECTED_ARRIVE)],
        "do not come after a wait on an mbarrier"),
    "Ex 4: every thread arrives on empty[s]": ("hopper_pipelined", [
        (ELECTED_ARRIVE, "        cute.arch.mbarrier_arrive(empty + s)\n")], "more than one thread of a warp"),
    "Ex 6: the slot released right after commit_group()": ("hopper_ws", [(WAIT1, "")],
                                                            "releases a slot while up to"),
    "Ex 6: wait_group(0) before the release": ("hopper_ws", [(WAIT1, WAIT1.replace("(1)", "(0)"))],
                                               "only after every wgmma has finished"),
    "Ex 6: no wait for the slot": ("hopper_ws", [("                pipe.consumer_wait(read)\n", "")],
                                   "do not come after pipe.consumer_wait(read)"),
}


def _hopper_edit(grade_id: str, edits: list[tuple[str, str]]) -> str:
    src = hopper07.solution_part(grade_id)
    for old, new in edits:
        assert src.count(old) == 1, f"the solution of {grade_id} no longer holds {old!r} once: update the edit"
        src = src.replace(old, new)
    return src


def test_hopper_solutions_pass_their_machine_code_checks() -> None:
    hopper07.run(hopper07.hopper_namespace(), list(HOPPER_TESTS.values()))


@pytest.mark.parametrize("why", HOPPER_WRONG)
def test_hopper_wrong_answers_fail_from_their_machine_code(why: str) -> None:
    grade_id, edits, phrase = HOPPER_WRONG[why]
    ns = hopper07.hopper_namespace({grade_id: _hopper_edit(grade_id, edits)}, (grade_id,))
    with pytest.raises(AssertionError, match=re.escape(phrase)):
        hopper07.run(ns, [HOPPER_TESTS[grade_id]])


def test_the_release_fails_the_hopper_tests() -> None:
    for grade_id, test in HOPPER_TESTS.items():
        parts = ("hopper_ws",) if grade_id == "hopper_ws" else (grade_id,)
        ns = hopper07.hopper_namespace({g: hopper07.release_part(g) for g in parts}, (grade_id,))
        with pytest.raises(AssertionError, match="did not compile"):
            hopper07.run(ns, [test])


# ------------------------------------------------------------------ Blackwell, Exercise 10: the grid (CPU)

GRID_CELLS = ("bw_grid_check_helper",)
GRID_WRONG = {
    "tile counts rounded down": ("return m // BW_M, n // BW_N, 1", None),
    "rows and columns swapped in the tile": (None, "return by, bx"),
    "grid transposed, tile transposed to match": ("return (n + BW_N - 1) // BW_N, (m + BW_M - 1) // BW_M, 1",
                                                  "return by, bx"),
    "one CTA too many per row": ("return m // BW_M + 1, (n + BW_N - 1) // BW_N, 1", None),
    "every CTA on tile 0": (None, "return 0, 0"),
}


def _grid_ns(replace: dict[str, str]) -> dict:
    ns = hopper07.plain_namespace()
    ns.update(BW_M=128, BW_N=128)
    exec(compile(replace.get("hopper_bw_grid", hopper07.cells()["hopper_bw_grid"]), "<07:grid>", "exec"), ns)
    return ns


def test_grid_solution_passes() -> None:
    hopper07.run(_grid_ns({}), [*GRID_CELLS, "test_bw_grid"])


@pytest.mark.parametrize("why", GRID_WRONG)
def test_grid_wrong_answers_fail(why: str) -> None:
    ns = _grid_ns({"hopper_bw_grid": answer("hopper_bw_grid", *GRID_WRONG[why])})
    with pytest.raises(AssertionError):
        hopper07.run(ns, [*GRID_CELLS, "test_bw_grid"])


# ------------------------------------------------------------------ Blackwell, Exercises 8 and 9 (PTX for sm_100a)

LOOP = """for t in cutlass.range_constexpr(k_tiles):
    s = {slot}
    cute.arch.mbarrier_wait(full + s, {parity})
    for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
        mma.set(tcgen05.Field.ACCUMULATE, t > 0 or kb > 0)
        cute.gemm(mma, tAcc, tCrA[None, None, kb, s], tCrB[None, None, kb, s], tAcc)
{inner}{commit}
{after}"""
ELECTED = "    with cute.arch.elect_one():\n        tcgen05.commit(empty + s)"
ACC = "with cute.arch.elect_one():\n    tcgen05.commit(acc_full)"


def kloop_answer(slot="t % BW_STAGES", parity="(t // BW_STAGES) % 2", inner="", commit=ELECTED, after=ACC) -> str:
    """07's Blackwell k-loop answer with one part changed (also used by test_techniques_07.py)."""
    return LOOP.format(slot=slot, parity=parity, inner=inner, commit=commit, after=after)


KLOOP_WRONG = {
    "no commit releases the slot": kloop_answer(commit=""),
    "parity never changes": kloop_answer(parity="0"),
    "parity of t, not of the round": kloop_answer(parity="t % 2"),
    "producer's parity": kloop_answer(parity="((t // BW_STAGES) % 2) ^ 1"),
    "two slots hard-coded": kloop_answer(slot="t % 2", parity="(t // 2) % 2"),
    "a commit per MMA": kloop_answer(inner="        with cute.arch.elect_one():\n            tcgen05.commit(empty + s)\n",
                              commit=""),
    "commit by all 32 threads": kloop_answer(commit="    tcgen05.commit(empty + s)"),
    "acc_full never committed": kloop_answer(after=""),
    "waits on empty[s] (a deadlock)": kloop_answer().replace("mbarrier_wait(full + s", "mbarrier_wait(empty + s"),
    "always waits on full[0]": kloop_answer().replace("mbarrier_wait(full + s", "mbarrier_wait(full"),
    "commits to full[s]": kloop_answer(commit="    with cute.arch.elect_one():\n        tcgen05.commit(full + s)"),
    "acc_full committed every k-tile": kloop_answer(commit=ELECTED + "\n    with cute.arch.elect_one():\n"
                                                     "        tcgen05.commit(acc_full)", after=""),
    "ACCUMULATE off at every k-tile's start": kloop_answer().replace("t > 0 or kb > 0", "kb > 0"),
    "every k-tile reads slot 0": kloop_answer().replace(", kb, s]", ", kb, 0]"),
    "every MMA on k-block 0": kloop_answer().replace("[None, None, kb, s]", "[None, None, 0, s]"),
}
TMEM_ALLOC = "cute.arch.alloc_tmem(BW_TMEM_COLS, tmem_addr)"
TMEM_LOOP = """for i in cutlass.range_constexpr(cute.size(tTt, mode=[2])):
    cute.copy(t2r, tTt[None, None, i], r32)
    cute.arch.fence_view_async_tmem_load()
    r16.store(r32.load().to(tCgD.element_type))
    cute.autovec_copy(r16, tTg[None, None, i])"""
TMEM_FREE = "cute.arch.relinquish_tmem_alloc_permit()\ncute.arch.dealloc_tmem(tAcc.iterator, BW_TMEM_COLS)"
TMEM_WRONG = {
    "too few columns": ("cute.arch.alloc_tmem(64, tmem_addr)", None,
                        "cute.arch.relinquish_tmem_alloc_permit()\ncute.arch.dealloc_tmem(tAcc.iterator, 64)"),
    "no dealloc": (None, None, "cute.arch.relinquish_tmem_alloc_permit()"),
    "dealloc of a different count": (None, None,
                                     "cute.arch.relinquish_tmem_alloc_permit()\ncute.arch.dealloc_tmem(tAcc.iterator, 256)"),
    "no relinquish": (None, None, "cute.arch.dealloc_tmem(tAcc.iterator, BW_TMEM_COLS)"),
    "relinquish after the dealloc": (None, None, "cute.arch.dealloc_tmem(tAcc.iterator, BW_TMEM_COLS)\n"
                                                 "cute.arch.relinquish_tmem_alloc_permit()"),
    "no wait::ld": (None, TMEM_LOOP.replace("    cute.arch.fence_view_async_tmem_load()\n", ""), None),
    "only the first chunk": (None, TMEM_LOOP.replace("cute.size(tTt, mode=[2])", "1"), None),
    "loaded, never stored": (None, TMEM_LOOP.replace("    cute.autovec_copy(r16, tTg[None, None, i])", "    pass"),
                             None),
    "chunk 0 read four times": (None, TMEM_LOOP.replace("tTt[None, None, i]", "tTt[None, None, 0]"), None),
}
#: Converting before tcgen05.wait::ld: ptxas makes the conversion wait for the load's registers, so the machine code
#: is the solution's, byte for byte (tests/course/test_techniques_07.py): no check of it can fail, and the notebook
#: says so.
TMEM_CONVERTED_FIRST = (None, TMEM_LOOP.replace(
    "    cute.arch.fence_view_async_tmem_load()\n    r16.store(r32.load().to(tCgD.element_type))",
    "    r16.store(r32.load().to(tCgD.element_type))\n    cute.arch.fence_view_async_tmem_load()"), None)


TILE = """mma.set(tcgen05.Field.ACCUMULATE, False)
for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
    cute.gemm(mma, tAcc, tCrA[None, None, kb, 0], tCrB[None, None, kb, 0], tAcc)
    mma.set(tcgen05.Field.ACCUMULATE, True)
with cute.arch.elect_one():
    tcgen05.commit(bars + 1)"""
TILE_WRONG = {
    "no ACCUMULATE handling": TILE.replace("mma.set(tcgen05.Field.ACCUMULATE, False)\n", "").replace(
        "    mma.set(tcgen05.Field.ACCUMULATE, True)\n", ""),
    "accumulates from the first MMA": TILE.replace("ACCUMULATE, False)", "ACCUMULATE, True)"),
    "overwrites at every MMA": TILE.replace("ACCUMULATE, True)", "ACCUMULATE, False)"),
    "every MMA on k-block 0": TILE.replace("[None, None, kb, 0]", "[None, None, 0, 0]"),
    "B stays on k-block 0": TILE.replace("tCrB[None, None, kb, 0]", "tCrB[None, None, 0, 0]"),
    "commit from all 32 lanes": TILE.replace("with cute.arch.elect_one():\n    tcgen05.commit(bars + 1)",
                                             "tcgen05.commit(bars + 1)"),
    "commit on the TMA barrier": TILE.replace("commit(bars + 1)", "commit(bars)"),
    "a commit per MMA": """mma.set(tcgen05.Field.ACCUMULATE, False)
for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
    cute.gemm(mma, tAcc, tCrA[None, None, kb, 0], tCrB[None, None, kb, 0], tAcc)
    mma.set(tcgen05.Field.ACCUMULATE, True)
    with cute.arch.elect_one():
        tcgen05.commit(bars + 1)""",
}


def _blackwell_fails(replace: dict[str, str], tests: tuple[str, ...]) -> list[str]:
    """The test cells among ``tests`` that fail (an AssertionError) with ``replace``; a build error counts."""
    ns = hopper07.blackwell_namespace(replace)
    failed = []
    for test in tests:
        try:
            hopper07.run(ns, [test])
        except (AssertionError, NotImplementedError):    # the release's placeholder raises the latter
            failed.append(test)
    return failed


@pytest.mark.parametrize("why", KLOOP_WRONG)
def test_kloop_wrong_answers_fail(why: str) -> None:
    failed = _blackwell_fails({"hopper_bw_kloop": answer("hopper_bw_kloop", KLOOP_WRONG[why])},
                              ("test_bw_kloop", "test_bw_tmem"))
    assert "test_bw_kloop" in failed, f"{why}: the K-loop test passed"


@pytest.mark.parametrize("why", TMEM_WRONG)
def test_tmem_wrong_answers_fail(why: str) -> None:
    failed = _blackwell_fails({"hopper_bw_tmem": answer("hopper_bw_tmem", *TMEM_WRONG[why])},
                              ("test_bw_tmem",))
    assert failed == ["test_bw_tmem"], f"{why}: the TMEM test passed"


def test_converting_before_the_wait_passes_and_the_notebook_says_why() -> None:
    assert _blackwell_fails({"hopper_bw_tmem": answer("hopper_bw_tmem", *TMEM_CONVERTED_FIRST)}, ("test_bw_tmem",)) == []
    text = " ".join(hopper07.cells()["md_bw_ex9"].split())
    assert "One mistake it cannot see: converting" in text and "byte for byte the solution's" in text


@pytest.mark.parametrize("why", TILE_WRONG)
def test_tile_wrong_answers_fail(why: str) -> None:
    failed = _blackwell_fails({"hopper_bw_tile": answer("hopper_bw_tile", TILE_WRONG[why])}, ("test_bw_tile",))
    assert failed == ["test_bw_tile"], f"{why}: the Blackwell tile test passed"


def test_the_wrong_answers_templates_pass_unchanged() -> None:
    # the wrong answers above are edits of these templates: unedited, they must pass every Blackwell test
    replace = {"hopper_bw_kloop": answer("hopper_bw_kloop", kloop_answer()),
               "hopper_bw_tmem": answer("hopper_bw_tmem", TMEM_ALLOC, TMEM_LOOP, TMEM_FREE),
               "hopper_bw_tile": answer("hopper_bw_tile", TILE)}
    assert _blackwell_fails(replace, ("test_bw_tile", "test_bw_kloop", "test_bw_tmem")) == []


# ------------------------------------------------------------------ the untouched release scores 0 on every CPU-graded test

@pytest.mark.parametrize("answer_cell, cells, test", [
    ("missing_fences", FENCE_CELLS, "test_missing_fences"), ("acc_owner", ACC_CELLS, "test_acc_owner"),
    ("ring_waits", RING_CELLS, "test_ring_waits"), ("persistent_tiles", PERSISTENT_CELLS, "test_persistent_tiles")])
def test_the_release_fails_the_cpu_tests(answer_cell: str, cells: tuple[str, ...], test: str) -> None:
    from gemmlab.errors import GemmlabError

    assert "raise NotImplementedError()" in hopper07.release_part(answer_cell)
    with pytest.raises((AssertionError, NotImplementedError, GemmlabError)):    # any of them: the cell scores 0
        hopper07.run(hopper07.plain_namespace(), [*cells, test], {answer_cell: hopper07.release_part(answer_cell)})


def test_the_release_fails_the_blackwell_tests() -> None:
    replace = {g: hopper07.release_part(g) for g in ("hopper_bw_tile", "hopper_bw_kloop", "hopper_bw_tmem",
                                                     "hopper_bw_grid")}
    tests = ("test_bw_tile", "test_bw_grid", "test_bw_kloop", "test_bw_tmem")
    assert _blackwell_fails(replace, tests) == list(tests)


# ------------------------------------------------------------------ what the machine code cannot see, said in the prose

#: why -> (answer cell, [(text of the solution, replacement)], the words of the exercise's text that say the CPU part
#: cannot see it). Both are bugs a GPU run shows (a deadlock; a race), not the machine code.
UNSEEN = {
    "Ex 4: the producer's parity frozen (the ^ 1 forgotten)": (
        "hopper_pipelined", [("    parity = ((t // PIPE_STAGES) % 2) ^ 1", "    parity = (t // PIPE_STAGES) % 2")],
        "md_12", ["**cannot see** is the parity of the producer's wait", "Exercise 3's simulator", "not a proof"]),
    "Ex 6: the current slot released": (
        "hopper_ws", [("                if kt > 0:\n                    pipe.consumer_release(release)\n"
                       "                    release.advance()\n",
                       "                pipe.consumer_release(release)\n                release.advance()\n")],
        "md_20", ["**cannot see** is which slot an arrive releases", "the current slot", "not a proof"]),
}


@pytest.mark.parametrize("why", UNSEEN)
def test_bugs_the_machine_code_cannot_see_pass_it_and_the_notebook_says_so(why: str, no_gpu) -> None:
    grade_id, edits, text_id, words = UNSEEN[why]
    ns = hopper07.hopper_namespace({grade_id: _hopper_edit(grade_id, edits)}, (grade_id,))
    hopper07.run(ns, [HOPPER_TESTS[grade_id]])      # GPU hidden: only the machine-code part runs (a GPU would hang)
    text = " ".join(hopper07.cells()[text_id].split())
    for phrase in words:
        assert phrase in text, f"{text_id} does not say {phrase!r}"
