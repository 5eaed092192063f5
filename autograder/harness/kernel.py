"""One notebook kernel per submission, started inside the sandbox, driven from outside it.

The trusted side (this module, in the grader's process) keeps the notebook, the clock and the
verdicts; only the kernel runs student code. They talk over ZeroMQ on Unix sockets in a
run directory that both sides see (the sandbox has no network, not even loopback). Every cell
gets a time limit, an output limit and a memory limit; breaking one ends the cell (interrupt,
or kill when the kernel does not respond) and the verdict says which limit in plain words.
"""
from __future__ import annotations

import os
import queue
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client import KernelManager
from nbformat.v4 import output_from_msg

from ..records import Limits
from .sandbox import SandboxSpec, bwrap_prefix, sandbox_env


@dataclass
class CellRun:
    """What happened when one cell ran. ``status``: ok, error, timeout, died, output_limit, memory, not_run."""

    status: str
    outputs: list = field(default_factory=list)
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0
    message: str = ""

    @property
    def completed(self) -> bool:
        return self.status in ("ok", "error")


def _rss_tree(pid: int) -> int:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def describe_exit(code: int | None) -> str:
    if code is None:
        return "the notebook's kernel stopped responding"
    if code < 0:
        return f"the notebook's kernel was killed by {_signal_name(-code)}"
    if code > 128:
        return f"the notebook's kernel was killed by {_signal_name(code - 128)} (exit status {code})"
    return f"the notebook's kernel exited with status {code} (os._exit, sys.exit in a thread, or a crash)"


class _SandboxedManager(KernelManager):
    """A KernelManager whose kernel command runs inside bubblewrap (or not, when spec is None)."""

    sandbox_spec: SandboxSpec | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        return bwrap_prefix(self.sandbox_spec) + cmd if self.sandbox_spec is not None else cmd


class SandboxedKernel:
    """A Python kernel in a sandbox with a private ``scratch`` directory.

    ``sandbox=False`` runs the kernel as a plain child process (trusted notebooks only, e.g.
    the instructor's own solutions, or machines without bubblewrap in tests that say so).
    """

    def __init__(self, scratch: Path, run_dir: Path, gpu: str | None, limits: Limits, sandbox: bool = True,
                 extra_env: dict[str, str] | None = None) -> None:
        self.scratch, self.run_dir, self.gpu, self.limits = Path(scratch), Path(run_dir), gpu, limits
        self.sandbox = sandbox
        self.extra_env = dict(extra_env or {})
        self.km: _SandboxedManager | None = None
        self.kc: Any = None
        self.exit_code: int | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.scratch, 0o777)   # the kernel runs as nobody inside the sandbox
        os.chmod(self.run_dir, 0o777)
        spec = SandboxSpec(self.scratch, self.run_dir, self.gpu, env=self.extra_env)
        km = _SandboxedManager(transport="ipc", ip=str(self.run_dir / "k"),
                               connection_file=str(self.run_dir / "kernel.json"))
        km.sandbox_spec = spec if self.sandbox else None
        km.kernel_spec.interrupt_mode = "message"
        env = dict(os.environ)
        env.update(sandbox_env(spec))
        env.pop("JPY_PARENT_PID", None)
        for p in self.run_dir.glob("k-*"):
            p.unlink()
        log = open(self.scratch.parent / "kernel.log", "ab")  # outside the sandbox's view
        try:
            km.start_kernel(env=env, cwd=str(self.scratch), stdout=log, stderr=log)
        finally:
            log.close()
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=self.limits.startup_s)
        except RuntimeError as exc:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            raise RuntimeError(f"the notebook kernel did not start: {exc}") from None
        self.km, self.kc, self.exit_code = km, kc, None

    @property
    def pid(self) -> int | None:
        proc = getattr(getattr(self.km, "provisioner", None), "process", None)
        return proc.pid if proc is not None else None

    def alive(self) -> bool:
        if self.km is None:
            return False
        proc = self.km.provisioner.process if self.km.provisioner else None
        if proc is not None and proc.poll() is not None:
            self.exit_code = proc.returncode
            return False
        return True

    def kill(self) -> None:
        """End the kernel and everything it started (bwrap's PID namespace goes with it)."""
        if self.km is None:
            return
        try:
            self.kc.stop_channels()
        except Exception:  # noqa: BLE001 - tearing down a broken kernel
            pass
        proc = self.km.provisioner.process if self.km.provisioner else None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.wait(timeout=30)
        try:
            self.km.cleanup_resources()
        except Exception:  # noqa: BLE001
            pass
        self.km = self.kc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    # ------------------------------------------------------------------ running code
    def _drain(self, msg_id: str, deadline: float) -> bool:
        """Wait (until ``deadline``) for the kernel to go idle after ``msg_id``; True if it did."""
        while time.monotonic() < deadline and self.alive():
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                return True
        return False

    def execute(self, code: str, timeout_s: float) -> CellRun:
        """Run ``code``; never raises for anything the code does."""
        if self.km is None or not self.alive():
            return CellRun("died", message=describe_exit(self.exit_code))
        limits = self.limits
        t0 = time.monotonic()
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=False)
        outputs: list = []
        sent = 0
        run = CellRun("ok")
        clear_pending = False
        deadline = t0 + timeout_s
        next_mem = t0
        while True:
            now = time.monotonic()
            if now > deadline:
                run = CellRun("timeout", message=f"the cell did not finish within its time limit of {timeout_s:g} s "
                                                 "(an endless loop, a deadlocked kernel or a hung GPU)")
                self._stop_cell(msg_id)
                break
            if now >= next_mem:
                next_mem = now + 0.25
                if not self.alive():
                    run = CellRun("died", message=describe_exit(self.exit_code) + " while this cell ran")
                    break
                pid = self.pid
                if pid is not None and _rss_tree(pid) > limits.memory_bytes:
                    run = CellRun("memory", message=f"the cell used more than {limits.memory_bytes / 2**30:g} GiB of "
                                                    "memory; its kernel was stopped")
                    self.kill()
                    break
            try:
                msg = self.kc.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind == "clear_output":
                if content.get("wait"):
                    clear_pending = True
                else:
                    outputs.clear()
                continue
            if kind not in ("stream", "display_data", "execute_result", "error", "update_display_data"):
                continue
            sent += len(str(content))
            if sent > limits.output_bytes:
                run = CellRun("output_limit", message=f"the cell printed more than {limits.output_bytes / 1e6:g} MB; "
                                                      "it was stopped")
                # Killed, not interrupted: a flooding kernel has megabytes more queued for us, and
                # draining them (while its memory grows) took longer than the next cells' time limits
                # on a busy machine. The runner restarts it and re-runs the cells before the next one.
                self.kill()
                break
            if kind == "update_display_data":
                continue
            if clear_pending:
                outputs.clear()
                clear_pending = False
            out = output_from_msg(msg)
            if kind == "stream" and outputs and outputs[-1].get("output_type") == "stream" \
                    and outputs[-1].get("name") == out.get("name"):
                outputs[-1]["text"] += out["text"]
            else:
                outputs.append(out)
            if kind == "error":
                run = CellRun("error", ename=content.get("ename", ""), evalue=content.get("evalue", ""))
        run.outputs = outputs
        run.seconds = time.monotonic() - t0
        if run.status == "ok":
            errors = [o for o in outputs if o.get("output_type") == "error"]
            if errors:
                run.status, run.ename, run.evalue = "error", errors[-1].get("ename", ""), errors[-1].get("evalue", "")
        return run

    def _stop_cell(self, msg_id: str) -> None:
        """Interrupt the running cell; kill the kernel if it does not go idle within 10 s."""
        try:
            self.km.interrupt_kernel()
        except Exception:  # noqa: BLE001
            pass
        if not self._drain(msg_id, time.monotonic() + 10.0):
            self.kill()
