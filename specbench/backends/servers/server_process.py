"""A serving engine started by specbench: a free port on 127.0.0.1, a health wait, and a stop
that leaves nothing behind.

The server runs in its own session (``start_new_session=True``), so it and every process it
spawns (vLLM's engine core and workers) share one process group, and stopping signals the
whole group: SIGTERM, a grace period, then SIGKILL for whatever is left. `ServerProcess.stop`
runs on every exit path: the backend's ``close()`` (the runner calls it in ``finally``), an
``atexit`` hook, and SIGTERM/SIGHUP handlers that turn those signals into an exception so the
``finally`` blocks run (Ctrl-C already raises KeyboardInterrupt). On Linux the server also gets
``PR_SET_PDEATHSIG`` = SIGTERM, so that even a SIGKILLed specbench does not leave it running.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from specbench.backends.servers.http_client import HEALTH_S, HttpClient, ServerError
from specbench.errors import SpecbenchError
from specbench.safe_files import open_appending

HOST = "127.0.0.1"
STOP_GRACE_S = 15.0
INTERRUPT_GRACE_S = 2.0  # SIGTERM to SIGKILL when the stop is due to Ctrl-C or SIGTERM: the user wants out now


def free_port(host: str = HOST) -> int:
    """A port the OS says is free now (bind to port 0); the server binds it moments later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def check_port_free(port: int, host: str = HOST) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, int(port)))
        except OSError:
            raise SpecbenchError(
                f"port {port} on {host} is in use: choose another port or leave it out "
                "(specbench then picks a free one)"
            ) from None


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes of group ``pgid``, from /proc (Linux)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies do not count)."""
    if Path("/proc/self/stat").exists():
        return bool(group_members(pgid))
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _parent_death_signal() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Terminated(SystemExit):
    """SIGTERM/SIGHUP arrived: unwinds (exit code 128 + signal) so that `finally` blocks stop servers."""


_live: set[ServerProcess] = set()
_handlers_installed = False
_previous_handlers: dict = {}


def _stop_all(grace: float | None = None) -> None:
    for server in list(_live):
        server.stop(grace)


def _on_signal(signum, frame) -> None:
    _stop_all(INTERRUPT_GRACE_S)
    previous = _previous_handlers.get(signum)
    if callable(previous):
        previous(signum, frame)
    raise _Terminated(128 + signum)


def _install_handlers() -> None:
    """Once per process, from the main thread: stop servers on SIGTERM/SIGHUP, and at exit."""
    global _handlers_installed
    if _handlers_installed:
        return
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            previous = signal.getsignal(signum)
            if previous in (signal.SIG_IGN,):
                continue
            _previous_handlers[signum] = previous if callable(previous) else None
            signal.signal(signum, _on_signal)
    _handlers_installed = True


class ServerProcess:
    """One server process group: ``command`` is run with its output in ``log_path``."""

    def __init__(
        self,
        command: list[str],
        *,
        port: int,
        env: dict | None = None,
        log_dir: str | None = None,
        name: str = "server",
        grace: float = STOP_GRACE_S,
    ):
        self.command, self.port, self.name, self.grace = command, port, name, grace
        self.env = {**os.environ, **(env or {})}
        folder = Path(log_dir or tempfile.mkdtemp(prefix="specbench-server-"))
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / f"{name}-{port}.log"
        self.proc: subprocess.Popen | None = None
        self.pgid: int | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> None:
        _install_handlers()
        log = open_appending(self.log_path)  # never through a symlink (`specbench.safe_files`)
        try:
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=_parent_death_signal if self._death_signal_ok() else None,
            )
        except OSError as exc:
            raise SpecbenchError(f"could not start {self.name} ({self.command[0]}): {exc.strerror or exc}") from None
        finally:
            log.close()
        self.pgid = self.proc.pid  # session leader: its pid is the group id
        _live.add(self)

    @staticmethod
    def _death_signal_ok() -> bool:
        """PR_SET_PDEATHSIG fires when the *thread* that started the child ends: only from the main thread."""
        return sys.platform == "linux" and threading.current_thread() is threading.main_thread()

    def last_log_line(self) -> str:
        try:
            lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        errors = [line for line in lines if "Error" in line or "error:" in line]
        return (errors or lines or [""])[-1][:300]

    def check_alive(self, wait: float = 0.0) -> None:
        """Raise a one-line error when the server process has exited (waiting up to ``wait`` s for
        an exit that a failed request suggests is under way)."""
        if self.proc is not None and wait > 0:
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            last = self.last_log_line()
            self.stop()
            raise SpecbenchError(
                f"{self.name} on port {self.port} exited (code {code})"
                + (f": {last}" if last else "")
                + f" — log: {self.log_path}"
            )

    def wait_healthy(self, timeout: float, status=None, path: str = "/health") -> None:
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        last_report = 0.0
        while True:
            self.check_alive()
            try:
                if HttpClient(self.url).get(path, deadline_s=HEALTH_S).status == 200:
                    return
            except ServerError:  # not up yet (or answering garbage): the deadline below decides
                pass
            now = time.monotonic()
            if now > deadline:
                self.stop()
                raise SpecbenchError(
                    f"{self.name} on port {self.port} was not healthy after {timeout:.0f} s "
                    f"(raise startup_timeout_s) — log: {self.log_path}"
                )
            if status is not None and now - last_report >= 15.0:
                status(f"waiting for {self.name} on port {self.port} ({now - started:.0f} s)")
                last_report = now
            time.sleep(0.5)

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM the whole group, wait, SIGKILL what is left; reap the leader. Safe to call twice."""
        proc, pgid = self.proc, self.pgid
        if proc is None or pgid is None:  # never started, or stopped already (`start` sets both)
            return
        grace = self.grace if grace is None else grace
        self.proc = None
        _live.discard(self)
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if proc.poll() is not None and not group_alive(pgid):
                break
            time.sleep(0.1)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 5.0
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
