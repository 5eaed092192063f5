"""One notebook kernel per submission, started inside the sandbox, driven from outside it.

The trusted side (this module, in the grader's process) keeps the notebook, the clock and the
verdicts; only the kernel runs student code. They talk over ZeroMQ on Unix sockets in a
run directory that both sides see (the sandbox has no network, not even loopback). Every cell
gets a time limit, an output limit and a memory limit; breaking one ends the cell (interrupt,
or kill when the kernel does not respond) and the verdict says which limit in plain words.

Time limits count the work the kernel's processes did, not the clock (:mod:`.cellclock`): waiting
for a busy machine's CPU is not charged, and a cell the machine starved past a wall-clock backstop
raises :class:`~.cellclock.MachineBusy` (the grader's failure: retried, never graded). Processes a
cell of the student's kernel starts are stopped at that cell's limit (:mod:`.leftovers`). Every
message is read within a size limit before it is put together (:mod:`.channels`), and a notebook's
kept outputs have a total (``keep_bytes`` of :meth:`SandboxedKernel.execute`).

Memory is what the kernel's processes use without counting a page twice (the proportional set
size, so a fork bomb's copy-on-write pages count once) plus the files in its tmpfs mounts
(scratch, ``/tmp``, ``/dev/shm``). A kernel that cannot start says why within seconds: its exit
status and the last lines it printed, or that it never answered.
"""
from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from jupyter_client import KernelManager

from ..records import Limits
from gemmlab.answers.wire import ANSWER_FD_ENV, MAX_DESCRIPTION_CHARS
from gemmlab.running.proctime import tree

from .cellclock import CellClock, MachineBusy
from .channels import Disconnects, UnreadableMessage, client_class, client_context
from .leftovers import Leftovers
from .wellformed import clean_outputs
from .sandbox import SANDBOX_UID, SandboxSpec, bwrap_prefix, drops_privileges, private_mounts, sandbox_env

#: A kernel that takes no notice of a request for this long (not even to say it is busy) has stopped answering
#: (seconds of its work, as a cell's limit counts them).
ANSWER_S = 30.0
#: How often the kernel's processes are looked at while it runs something (memory, work, leftover processes).
LOOK_S = 0.25
#: The largest reply to a request the grader reads (the description of the answers, a repr, escaped twice).
SHELL_REPLY_BYTES = 4 * MAX_DESCRIPTION_CHARS
#: How much of a cell's value (``text/plain``) is kept for its partial score whether or not its outputs are.
RESULT_TEXT_CHARS = 256
#: Shown once in place of the outputs a notebook sends after its kept outputs reached their total.
NOT_KEPT = "[further output not kept: this notebook's outputs passed {mb:g} MB in all]\n"


class KernelStartError(RuntimeError):
    """The notebook kernel could not start; ``reason`` says why in words (exit status, its last output)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the notebook kernel did not start: {reason}")
        self.reason = reason


@dataclass
class CellRun:
    """What happened when one cell ran. ``status``: ok, error, timeout, died, output_limit, memory, not_run.
    ``seconds``: on the clock; ``active_s``: of its limit (not kept waiting for a CPU); ``kept_bytes``: the
    size of the outputs kept; ``result_text``: the start of its value's ``text/plain`` (a test's partial score),
    kept even when its outputs are not."""

    status: str
    outputs: list = field(default_factory=list)
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0
    message: str = ""
    active_s: float = 0.0
    kept_bytes: int = 0
    result_text: str | None = None

    @property
    def completed(self) -> bool:
        return self.status in ("ok", "error")


def _proportional_size(pid: int) -> int | None:
    """The process's proportional set size in bytes (shared pages divided among their sharers),
    or None where the kernel does not report it."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _mount_used(pid: int, path: str) -> int | None:
    """Bytes in use on the file system mounted at ``path`` as process ``pid`` sees it."""
    try:
        st = os.statvfs(f"/proc/{pid}/root{path}")
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def memory_in_use(pid: int, mounts: list[str]) -> int:
    """Memory of the process tree under ``pid`` (PSS, RSS where PSS is unknown) plus the files in
    its tmpfs ``mounts`` (paths inside the sandbox; their pages are memory too)."""
    import psutil

    procs = tree(pid)
    total = 0
    for p in procs:
        size = _proportional_size(p)
        if size is None:
            try:
                size = psutil.Process(p).memory_info().rss
            except psutil.Error:
                size = 0
        total += size
    inside = next((p for p in procs if _in_own_mount_namespace(p)), None)
    for path in mounts if inside is not None else ():
        total += _mount_used(inside, path) or 0
    return total


def _in_own_mount_namespace(pid: int) -> bool:
    """Whether ``pid`` sees other mounts than the grader does (it is inside the sandbox)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    except OSError:
        return False


class _OutputTail:
    """Reads what the kernel's processes print to their stdout and stderr, keeping only the
    last ``keep`` bytes: enough to say why a kernel would not start, never a full disk."""

    def __init__(self, keep: int = 16384) -> None:
        self.keep = keep
        self._data = b""
        self._lock = threading.Lock()
        read_fd, self.write_fd = os.pipe()
        self._thread = threading.Thread(target=self._pump, args=(read_fd,), daemon=True)
        self._thread.start()

    def _pump(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                with self._lock:
                    self._data = (self._data + chunk)[-self.keep:]

    def close_writer(self) -> None:
        """Close the grader's copy of the pipe's write end (the kernel keeps its own)."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def last_lines(self, n: int = 6, wait_s: float = 1.0) -> str:
        self._thread.join(wait_s)      # the kernel's last words, if it is gone
        with self._lock:
            text = self._data.decode("utf-8", "replace")
        return "\n".join(line for line in text.strip().splitlines()[-n:])


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def how_it_ended(code: int) -> str:
    """A process's exit status in words: 'exited with status 1', 'was killed by SIGKILL'."""
    if code < 0:
        return f"was killed by {_signal_name(-code)}"
    if code > 128:
        return f"was killed by {_signal_name(code - 128)} (exit status {code})"
    return f"exited with status {code}"


def describe_exit(code: int | None) -> str:
    if code is None:
        return "the notebook's kernel stopped responding"
    hint = " (os._exit, sys.exit in a thread, or a crash)" if 0 <= code <= 128 else ""
    return f"the notebook's kernel {how_it_ended(code)}{hint}"


class _SandboxedManager(KernelManager):
    """A KernelManager whose kernel command runs inside bubblewrap (or not, when spec is None)."""

    sandbox_spec: SandboxSpec | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        return bwrap_prefix(self.sandbox_spec) + cmd if self.sandbox_spec is not None else cmd

    def write_connection_file(self, **kwargs: Any) -> None:
        """The connection file (mode 0600) belongs to the uid the kernel runs as, so it can read it."""
        super().write_connection_file(**kwargs)
        if self.sandbox_spec is not None and drops_privileges(self.sandbox_spec):
            os.chown(self.connection_file, SANDBOX_UID, SANDBOX_UID)


@contextlib.contextmanager
def _interrupts_unblocked() -> Iterator[None]:
    """Start children with SIGINT unblocked. A kernel is interrupted by a SIGINT it sends itself, and a
    child inherits its parent thread's signal mask: Ray runs tasks in threads that block SIGINT, so a
    kernel started there could never be interrupted, and a cell that runs past its limit lost the whole
    kernel (and the grade its earlier cells earned) instead of just that cell."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class SandboxedKernel:
    """A Python kernel in a sandbox with a private ``scratch`` directory, fresh at every start
    (a restart replays cells; nothing the previous kernel wrote is there).

    ``sandbox=False`` runs the kernel as a plain child process (trusted notebooks only, e.g.
    the instructor's own solutions, or machines without bubblewrap in tests that say so).
    ``stops_leftovers``: the processes its cells start are stopped at their cell's limit (the student's
    kernel; the judge runs only the instructor's code).
    """

    #: The longest run folder whose IPC sockets ("<folder>/k-<port>") fit a Unix socket's path (107 bytes).
    RUN_DIR_MAX = 96

    def __init__(self, scratch: Path, run_dir: Path, gpu: str | None, limits: Limits, sandbox: bool = True,
                 extra_env: dict[str, str] | None = None, stops_leftovers: bool = False) -> None:
        self.scratch, self.run_dir, self.gpu, self.limits = Path(scratch), Path(run_dir), gpu, limits
        # A grading folder deep in the instructor's tree would give sockets no kernel can bind ("File name too
        # long"): their folder is then a short one of its own, removed with the kernel.
        self._own_run_dir = len(os.fsencode(self.run_dir)) > self.RUN_DIR_MAX
        if self._own_run_dir:
            self.run_dir = Path(tempfile.mkdtemp(prefix="gemmlab-run-"))
        self.sandbox = sandbox
        self.extra_env = dict(extra_env or {})
        self.stops_leftovers = stops_leftovers
        self.km: _SandboxedManager | None = None
        self.kc: Any = None
        self.exit_code: int | None = None
        self.spec: SandboxSpec | None = None
        self.leftovers: Leftovers | None = None
        self._context: Any = None
        self._disconnects: Disconnects | None = None
        self._cells = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self, inherit: socket.socket | None = None) -> None:
        """Start a fresh kernel; raises :class:`KernelStartError` with the reason when it cannot,
        as soon as its process has ended (or after ``limits.startup_s`` of its work without an answer).
        ``inherit``: a socket the kernel inherits (its descriptor in ``GEMMLAB_ANSWER_FD``); closed here."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        # A fresh run folder: nothing a previous kernel left there (a link in place of the
        # connection file, a socket) is used by the next one.
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        os.chmod(self.scratch, 0o777)   # the kernel runs as nobody
        os.chmod(self.run_dir, 0o777)
        env = dict(self.extra_env)
        if inherit is not None:
            env[ANSWER_FD_ENV] = str(inherit.fileno())
        spec = SandboxSpec(self.scratch, self.run_dir, self.gpu, env=env)
        self.spec = spec
        context = client_context(max(self.limits.output_bytes, SHELL_REPLY_BYTES))
        km = _SandboxedManager(transport="ipc", ip=str(self.run_dir / "k"),
                               connection_file=str(self.run_dir / "kernel.json"), context=context)
        km.client_factory = client_class(self.limits.output_bytes, SHELL_REPLY_BYTES)
        km.sandbox_spec = spec if self.sandbox else None
        km.kernel_spec.interrupt_mode = "message"
        tail = _OutputTail()
        try:
            with _interrupts_unblocked():
                km.start_kernel(env=sandbox_env(spec), cwd=str(self.scratch), stdout=tail.write_fd,
                                stderr=tail.write_fd, pass_fds=(inherit.fileno(),) if inherit is not None else ())
        except Exception as exc:  # noqa: BLE001 - bwrap or the interpreter could not be run at all
            context.destroy(linger=0)
            raise KernelStartError(f"its command could not be run: {exc}") from None
        finally:
            tail.close_writer()
            if inherit is not None:
                inherit.close()
        kc = km.client(context=context)      # its sockets refuse an oversized frame unread (channels.client_context)
        kc.start_channels()
        proc = km.provisioner.process if km.provisioner else None
        why = self._wait_until_ready(kc, proc)
        if why:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            context.destroy(linger=0)
            said = tail.last_lines()
            raise KernelStartError(why + (f"; its last output:\n{said}" if said else "")) from None
        self._close_run_dir(km)
        self.km, self.kc, self.exit_code, self._context = km, kc, None, context
        self._disconnects = Disconnects([kc.iopub_channel.socket, kc.shell_channel.socket])
        self.leftovers = Leftovers(proc.pid) if self.stops_leftovers and proc is not None else None

    def _wait_until_ready(self, kc: Any, proc: Any) -> str:
        """'' once the kernel answers; else why not: it ended, or used ``startup_s`` of work without answering.
        A machine that starved it past the backstop raises MachineBusy."""
        clock = CellClock(self.limits.startup_s, lambda: [proc.pid] if proc is not None else [])
        while True:
            try:
                kc.wait_for_ready(timeout=min(5.0, self.limits.startup_s))
                return ""
            except RuntimeError:
                pass
            code = proc.poll() if proc is not None else None
            if code is not None:
                return f"it {how_it_ended(code)} before answering"
            clock.update()
            if clock.over():
                return f"it did not answer within {self.limits.startup_s:g} s"
            if clock.starved():
                raise clock.busy("starting the notebook's kernel")

    def _close_run_dir(self, km: _SandboxedManager) -> None:
        """Once the kernel's sockets exist, it may write nothing more into the run folder (on the
        grader's disk, outside its quota): the folder and the connection file go back to root."""
        if km.sandbox_spec is None or not drops_privileges(km.sandbox_spec):
            return
        os.chown(km.connection_file, 0, 0)
        os.chmod(km.connection_file, 0o400)
        os.chmod(self.run_dir, 0o555)

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
        try:
            self._end()
        finally:
            if self._own_run_dir:       # the next start makes it again
                shutil.rmtree(self.run_dir, ignore_errors=True)

    def _end(self) -> None:
        if self.km is None:
            return
        if self._disconnects is not None:
            self._disconnects.close()
            self._disconnects = None
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
        if self._context is not None:
            self._context.destroy(linger=0)
        self.km = self.kc = self._context = self.leftovers = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop_expired_processes(self) -> int:
        """Stop the processes this kernel's cells started whose cell's limit has run out; how many."""
        return self.leftovers.stop_expired() if self.leftovers is not None and self.alive() else 0

    def _roots(self, watch: tuple["SandboxedKernel", ...] = ()) -> list[int]:
        return [k.pid for k in (self, *watch) if k.km is not None and k.pid is not None]

    # ------------------------------------------------------------------ running code
    def _drain(self, msg_id: str, deadline: float) -> bool:
        """Wait (until ``deadline``) for the kernel to go idle after ``msg_id``; True if it did."""
        while time.monotonic() < deadline and self.alive():
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except (queue.Empty, UnreadableMessage):
                continue
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                return True
        return False

    def evaluate(self, expression: str, timeout_s: float) -> tuple[bool, str]:
        """``(True, text/plain of expression's value)`` or ``(False, why not)``: evaluated silently
        (no history, no outputs kept) as a user expression; a kernel that does not answer within
        ``timeout_s`` (of its work) has its work interrupted."""
        ok, value = self.evaluate_data(expression, timeout_s)
        if not ok:
            return False, value
        text = value.get("text/plain")
        return (True, text) if isinstance(text, str) else (False, "it answered no text")

    def evaluate_data(self, expression: str, timeout_s: float) -> tuple[bool, Any]:
        """``(True, the display data of expression's value)`` or ``(False, why not)``, as :meth:`evaluate`.
        Raises MachineBusy when the machine starved the kernel past the backstop."""
        if self.km is None or not self.alive():
            return False, describe_exit(self.exit_code)
        msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"v": expression},
                                 allow_stdin=False)
        clock = CellClock(timeout_s, self._roots)
        next_look = time.monotonic() + LOOK_S
        while True:
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + LOOK_S
                if not self.alive():
                    return False, describe_exit(self.exit_code)
                if self._disconnects is not None and self._disconnects.seen():
                    self.kill()
                    return False, f"its answer was larger than the {SHELL_REPLY_BYTES / 1e6:g} MB the grader reads"
                clock.update()
                if clock.over():
                    break
                if clock.starved():
                    raise clock.busy("a request to the notebook's kernel")
            try:
                reply = self.kc.get_shell_msg(timeout=0.1)
            except queue.Empty:
                continue
            except UnreadableMessage as exc:
                self.kill()
                return False, f"it answered with {exc}"
            if reply["parent_header"].get("msg_id") != msg_id:
                continue
            value = reply["content"].get("user_expressions", {}).get("v", {})
            if value.get("status") != "ok":
                return False, f"{value.get('ename', 'error')}: {str(value.get('evalue', ''))[:2000]}"
            data = value.get("data", {})
            return (True, data) if isinstance(data, dict) else (False, "it answered no data")
        self._stop_cell(msg_id)
        return False, f"it did not answer within {timeout_s:g} s"

    def execute(self, code: str, timeout_s: float, watch: tuple["SandboxedKernel", ...] = (),
                keep_bytes: int | None = None) -> CellRun:
        """Run ``code``; never raises for anything the code does (MachineBusy when the machine starved it).

        ``timeout_s`` counts the work of this kernel's processes and of ``watch``'s (a test in the judge that
        calls the student's code waits for the student's kernel); ``keep_bytes``: the most output bytes to keep
        (the rest of the notebook's total), after which outputs are counted but not kept."""
        if self.km is None or not self.alive():
            return CellRun("died", message=describe_exit(self.exit_code))
        limits = self.limits
        self._cells += 1
        cell = self._cells
        t0 = time.monotonic()
        deadline = t0 + timeout_s            # for the processes this cell starts
        clock = CellClock(timeout_s, lambda: self._roots(watch))
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=False)
        outputs: list = []
        sent = kept = 0
        dropped = False
        run = CellRun("ok")
        clear_pending = False
        next_look = t0
        answered = False
        result_text: str | None = None
        while True:
            now = time.monotonic()
            if now >= next_look:
                next_look = now + LOOK_S
                if not self.alive():
                    run = CellRun("died", message=describe_exit(self.exit_code) + " while this cell ran")
                    break
                if self.leftovers is not None:
                    self.leftovers.note(cell, deadline)
                    self.leftovers.stop_expired(now)
                for other in watch:
                    other.stop_expired_processes()
                clock.update()
                if clock.over():
                    run = CellRun("timeout", message=f"the cell did not finish within its time limit of {timeout_s:g} s "
                                                     f"(an endless loop, a deadlocked kernel or a hung GPU){clock.spent()}")
                    if self.leftovers is not None:
                        self.leftovers.stop_cell(cell)
                    self._stop_cell(msg_id)
                    break
                if clock.starved():
                    raise clock.busy("the cell")
                pid = self.pid
                if pid is not None and memory_in_use(pid, self._mounts()) > limits.memory_bytes:
                    run = CellRun("memory", message=f"the cell used more than {limits.memory_bytes / 2**30:g} GiB of "
                                                    "memory (its processes and the files it wrote); its kernel was "
                                                    "stopped")
                    self.kill()
                    break
                if not answered and clock.active_s > ANSWER_S:
                    run = CellRun("died", message=f"the notebook's kernel did not answer within {ANSWER_S:g} s; "
                                                  "it was stopped")
                    self.kill()
                    break
                if self._disconnects is not None and self._disconnects.seen():
                    run = self._flooded(f"a single message over the {limits.output_bytes / 1e6:g} MB a cell may send")
                    break
            try:
                msg = self.kc.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            except UnreadableMessage as exc:
                run = self._flooded(str(exc))
                break
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            answered = True
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
            size = self.kc.iopub_channel.last_bytes
            sent += size
            if sent > limits.output_bytes:
                run = self._flooded(f"more than {limits.output_bytes / 1e6:g} MB")
                break
            if kind == "update_display_data":
                continue
            if clear_pending:
                outputs.clear()
                clear_pending = False
            if kind == "error":
                run = CellRun("error", ename=str(content.get("ename", ""))[:200], evalue=str(content.get("evalue", "")))
            if kind == "execute_result":
                value = (content.get("data") or {}).get("text/plain") if isinstance(content.get("data"), dict) else None
                result_text = value[:RESULT_TEXT_CHARS] if isinstance(value, str) else None
            if keep_bytes is not None and kept + size > keep_bytes and kind != "error":
                room = keep_bytes - kept
                if kind == "stream" and room > 0 and isinstance(content.get("text"), str):
                    content = {**content, "text": content["text"][:room]}    # the start of the text that fits
                    size = room
                elif not dropped:
                    outputs.append({"output_type": "stream", "name": "stdout",
                                    "text": NOT_KEPT.format(mb=round(limits.notebook_output_bytes / 1e6, 1))})
                    dropped = True
                    continue
                else:
                    continue
            # Kept only when well-formed: nbformat's own conversion raises on a display of {'text/plain': 5}.
            cleaned = clean_outputs([{"output_type": kind, **{k: v for k, v in content.items() if k != "transient"}}])
            if not cleaned:
                continue
            kept += size
            out = cleaned[0]
            if kind == "stream" and outputs and outputs[-1].get("output_type") == "stream" \
                    and outputs[-1].get("name") == out.get("name"):
                outputs[-1]["text"] += out["text"]
            else:
                outputs.append(out)
        if self.leftovers is not None and self.alive():
            self.leftovers.note(cell, deadline)      # what the cell started just before it ended is its, too
        run.result_text = result_text
        run.outputs = outputs
        run.seconds = time.monotonic() - t0
        run.active_s = clock.update().active_s if run.status != "timeout" else max(clock.active_s, timeout_s)
        run.kept_bytes = kept
        if run.status == "ok":
            errors = [o for o in outputs if o.get("output_type") == "error"]
            if errors:
                run.status, run.ename, run.evalue = "error", errors[-1].get("ename", ""), errors[-1].get("evalue", "")
        return run

    def _flooded(self, what: str) -> CellRun:
        """The cell sent too much: ended with its kernel. Killed, not interrupted: a flooding kernel has megabytes
        more queued for us, and draining them (while its memory grows) took longer than the next cells' time limits
        on a busy machine. The runner restarts it and re-runs the cells before the next one."""
        self.kill()
        return CellRun("output_limit", message=f"the cell printed {what}; it was stopped")

    def _mounts(self) -> list[str]:
        """The kernel's tmpfs mounts whose files count as its memory (none outside a sandbox)."""
        return list(private_mounts(self.spec)) if self.sandbox and self.spec is not None else []

    def _stop_cell(self, msg_id: str) -> None:
        """Interrupt the running cell; kill the kernel if it does not go idle within 10 s."""
        try:
            self.km.interrupt_kernel()
        except Exception:  # noqa: BLE001
            pass
        if not self._drain(msg_id, time.monotonic() + 10.0):
            self.kill()


__all__ = ["ANSWER_S", "CellRun", "KernelStartError", "MachineBusy", "SandboxedKernel", "describe_exit", "how_it_ended",
           "memory_in_use"]
