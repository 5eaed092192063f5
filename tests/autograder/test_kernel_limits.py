"""A cell's limits in a real sandboxed kernel: the processes it starts end at its limit, one message is refused
before it is read, a notebook's kept outputs have a total, and a starved cell is the machine's failure.

CPU only; needs bubblewrap.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from autograder.harness import cellclock
from autograder.harness import sandbox as sb
from autograder.harness.cellclock import MachineBusy
from autograder.harness.kernel import NOT_KEPT, SandboxedKernel
from autograder.records import Limits
from gemmlab.running.proctime import tree
from tests.support.busy import burners, one_core, pinned

pytestmark = pytest.mark.skipif(bool(sb.check_bwrap()) and os.environ.get("GEMMLAB_CI") != "1",
                                reason=f"no usable bubblewrap: {sb.check_bwrap()}")


def _kernel(tmp_path: Path, limits: Limits = Limits(), **kw) -> SandboxedKernel:
    k = SandboxedKernel(tmp_path / "scratch", tmp_path / "run", None, limits, **kw)
    k.start()
    return k


def _commands(k: SandboxedKernel) -> list[str]:
    """The command names of the kernel's live processes (not ended ones its parent has not reaped yet)."""
    names = []
    for pid in tree(k.pid):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z":
            names.append(stat[stat.index("(") + 1:stat.rindex(")")])
    return names


def _text(run) -> str:
    return "".join(o.get("text", "") for o in run.outputs if o.get("output_type") == "stream")


def test_a_process_a_cell_starts_ends_at_that_cells_limit_and_the_kernel_lives_on(tmp_path: Path) -> None:
    k = _kernel(tmp_path, stops_leftovers=True)
    try:
        run = k.execute("import subprocess\nbackground = subprocess.Popen(['sleep', '600'])\nkept = 41", 3)
        assert run.status == "ok" and "sleep" in _commands(k), "it runs after its cell ended, within the limit"
        run = k.execute("import time\ntime.sleep(5)\nprint(background.poll(), kept + 1)", 30)
        assert run.status == "ok" and "sleep" not in _commands(k), _commands(k)
        assert _text(run).split() == ["-9", "42"], "stopped by SIGKILL at its cell's limit; the kernel kept its state"
    finally:
        k.kill()


def test_a_cell_past_its_limit_takes_its_processes_with_it(tmp_path: Path) -> None:
    """A cell that starts processes and never ends: at its limit they are killed at once, not when the kernel ends
    (a fork bomb of tiny processes is stopped by the cell's limit, as the threat model says)."""
    k = _kernel(tmp_path, stops_leftovers=True)
    try:
        run = k.execute("import subprocess, time\nkids = [subprocess.Popen(['sleep', '600']) for _ in range(5)]\n"
                        "while True:\n    time.sleep(0.1)", 3)
        assert run.status == "timeout", (run.status, run.message)
        assert k.alive() and "sleep" not in _commands(k), _commands(k)
        assert k.execute("print(sorted(p.poll() for p in kids))", 30).status == "ok"
    finally:
        k.kill()


def test_the_judge_keeps_the_processes_the_instructors_cells_start(tmp_path: Path) -> None:
    """Only the student's kernel has its cells' processes stopped (the judge runs the instructor's code alone)."""
    k = _kernel(tmp_path)
    try:
        assert k.execute("import subprocess\nbackground = subprocess.Popen(['sleep', '600'])", 2).status == "ok"
        assert k.execute("import time\ntime.sleep(3)", 30).status == "ok"
        assert "sleep" in _commands(k)
    finally:
        k.kill()


def test_one_huge_message_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A 256 MB display message: ZeroMQ refuses it from its size header, the grader's memory does not grow by it,
    and the cell fails on the output limit (1 GiB took the grader from 0.32 to 2.84 GB before)."""
    k = _kernel(tmp_path, Limits(output_bytes=1_000_000))
    try:
        Path("/proc/self/clear_refs").write_text("5")          # start counting this process's peak memory anew
        run = k.execute("from IPython.display import display\nblob = 'x' * (256 << 20)\n"
                        "display({'text/plain': blob}, raw=True)", 120)
        peak = int(next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                        if line.startswith("VmHWM:"))) << 10
        rss = int(next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                       if line.startswith("VmRSS:"))) << 10
    finally:
        k.kill()
    assert run.status == "output_limit" and "single message" in run.message, (run.status, run.message)
    assert peak - rss < 64 << 20, f"the grader's memory peaked {(peak - rss) >> 20} MiB above where it ended"


def test_frames_that_add_up_past_the_limit_are_refused_one_by_one(tmp_path: Path) -> None:
    """Many frames, each under the frame limit, make one message over the channel's limit: refused as they arrive."""
    k = _kernel(tmp_path, Limits(output_bytes=1_000_000))
    try:
        run = k.execute("ip = get_ipython()\nkernel = ip.kernel\n"
                        "kernel.session.send(kernel.iopub_socket, 'display_data', {'data': {'text/plain': 'x'},"
                        " 'metadata': {}}, parent=kernel.get_parent('shell'), buffers=[b'y' * (3 << 20)] * 40)", 60)
    finally:
        k.kill()
    assert run.status == "output_limit" and "single message of more than" in run.message, (run.status, run.message)


def test_outputs_past_the_notebooks_total_are_counted_not_kept_and_the_value_still_scores(tmp_path: Path) -> None:
    k = _kernel(tmp_path)
    try:
        run = k.execute("for _ in range(30):\n    print('z' * 100_000)\n0.5", 60, keep_bytes=1_000_000)
    finally:
        k.kill()
    assert run.status == "ok" and run.kept_bytes <= 1_000_000
    text = _text(run)
    assert 800_000 < text.count("z") <= 1_000_000 and text.endswith(NOT_KEPT.format(mb=32.0)), text[-200:]
    assert run.result_text == "0.5", "the test's value (its partial score) is kept whether or not its outputs are"
    assert not any(o.get("output_type") == "execute_result" for o in run.outputs)


def test_a_cell_the_machine_starves_is_the_machines_failure_and_a_loop_is_the_cells(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """On one core beside three burners a 3 s loop gets about a quarter of the core: with a backstop of 6 s on the
    clock it has done under 2 s of its work, so the machine is at fault (MachineBusy: retried, never graded).
    Given the backstop's usual length, the same loop is stopped at its limit and scored as a timeout."""
    core = one_core()
    with pinned(core):
        k = _kernel(tmp_path)
    try:
        with pinned(core), burners(3, core):
            monkeypatch.setattr(cellclock, "BACKSTOP_FACTOR", 2.0)
            monkeypatch.setattr(cellclock, "BACKSTOP_MIN_EXTRA_S", 0.0)
            with pytest.raises(MachineBusy, match=r"had used \d+ s of its 3 s limit after \d+ s on the clock"):
                k.execute("while True:\n    pass", 3)
            monkeypatch.undo()
            k.kill()
            k.start()
            run = k.execute("while True:\n    pass", 3)
        assert run.status == "timeout" and "time limit of 3 s" in run.message and "waited for a busy CPU" in \
            run.message, run.message
    finally:
        k.kill()


def test_a_run_folder_too_deep_for_a_socket_gets_a_short_one_of_its_own(tmp_path: Path) -> None:
    """An instructor's grading folder deep in their tree: the kernel starts (its sockets in a short folder of
    its own, removed with it) rather than failing with "File name too long"."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    k = SandboxedKernel(deep / "scratch", deep / "run", None, Limits())
    own = k.run_dir
    assert len(str(own)) <= SandboxedKernel.RUN_DIR_MAX and own != deep / "run"
    try:
        k.start()
        assert k.execute("print(6 * 7)", 30).status == "ok"
    finally:
        k.kill()
    assert not own.exists()
