"""What a `specbench` exit code means, and how each kind of failure becomes one.

* 0   — done;
* 2   — bad input: a flag, a file, a model name, a folder that is busy, read-only or of another
        spec. One line on stderr, ``specbench: error: ...``; nothing was changed;
* 3   — `specbench compare`: NEW regressed beyond the margin (one line per regression on stderr);
* 4   — `specbench compare`: inconclusive — no regression shown, but not every quantity shown within the
        margin (docs/compare.md);
* 130 — interrupted (Ctrl-C / SIGINT; SIGTERM gives 143): every finished unit's records are safe
        and the same command resumes;
* 1   — an internal error (a bug): the traceback goes to a log file and one line on stderr names it.

Failures of the operating system around files the user named (permission denied, a directory
where a file was expected, a full disk, a symlink loop) and files that are not UTF-8 text are
bad input too: one line, exit 2.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from specbench.models.cache import cache_root
from specbench.safe_files import create_new
from specbench.text_sinks import for_terminal

OK = 0
INTERNAL = 1
BAD_INPUT = 2
REGRESSED_CODE = 3  # specbench compare: NEW regressed beyond the margin
INCONCLUSIVE_CODE = 4  # specbench compare: neither equivalent nor regressed
INTERRUPTED = 130
TERMINATED = 143

PREFIX = "specbench"


def one_line(message: str) -> str:
    """``message`` squeezed onto one line, whatever the source wrote, safe for a terminal
    (`specbench.text_sinks.for_terminal`: a control character or escape sequence from data is written as its escape)."""
    return for_terminal(" ".join(str(message).split()))


def say(message: str) -> None:
    """Write one line to stderr (plain: no Rich markup or wrapping)."""
    try:
        sys.stderr.write(one_line(message) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the exit code still speaks
        pass


def os_error_message(exc: OSError) -> str:
    """An OSError as the user sees it: which path, what went wrong."""
    what = exc.strerror or exc.__class__.__name__
    if exc.filename is not None:
        target = f" -> {exc.filename2}" if getattr(exc, "filename2", None) else ""
        return f"{exc.filename}{target}: {what}"
    return str(exc) or what


def unicode_error_message(exc: UnicodeError) -> str:
    return f"a file is not UTF-8 text ({exc.__class__.__name__}: {one_line(str(exc))[:120]})"


def log_folder() -> Path:
    """Where crash logs go: ``$SPECBENCH_LOG_DIR``, else the cache's ``logs/``, else the temp folder."""
    env = os.environ.get("SPECBENCH_LOG_DIR")
    if env:
        return Path(env).expanduser()
    return cache_root() / "logs"


def write_crash_log(exc: BaseException, argv: list[str] | None) -> Path | None:
    """The traceback of ``exc`` in a new log file; its path, or None when nothing could be written."""
    text = (
        f"specbench internal error, {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        f"command: specbench {' '.join(argv if argv is not None else sys.argv[1:])}\n"
        f"python {sys.version.split()[0]}, pid {os.getpid()}\n\n"
        + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in (log_folder, lambda: Path(tempfile.gettempdir())):
        try:
            path = folder() / name
            path.parent.mkdir(parents=True, exist_ok=True)
            create_new(path, text)  # a new file: never one a symlink at this predictable name points to
            return path
        except Exception:  # noqa: BLE001 - try the next place
            continue
    return None


def internal_error(exc: BaseException, argv: list[str] | None) -> int:
    """Log the traceback, say where in one line, return exit code 1."""
    path = write_crash_log(exc, argv)
    where = f"traceback in {path}" if path else "the traceback could not be written to a log file"
    say(f"{PREFIX}: internal error: {exc.__class__.__name__}: {one_line(str(exc))[:200]} ({where}; please report it)")
    return INTERNAL


def exit_now(code: int) -> None:
    """End the process with ``code`` at once, after an interruption was handled (records written, locks
    released, servers stopped: every ``finally`` has run). The exit handlers still run and the output is
    flushed; what is skipped is the interpreter's final garbage collection of torch and transformers,
    which takes seconds on a busy machine — Ctrl-C is promised to end within a few."""
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - exiting anyway
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs; exit code 143."""


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) carried past Typer, which would otherwise turn it into a silent exit code."""

    def __init__(self, terminated: bool = False):
        super().__init__("terminated" if terminated else "interrupted")
        self.terminated = terminated


def _on_sigterm(signum, frame):
    raise Terminated()


def install_signal_handlers() -> None:
    """SIGTERM unwinds like Ctrl-C (locks released, the unit in flight dropped cleanly)."""
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main thread
        pass
