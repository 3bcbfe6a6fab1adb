"""One writer per results folder: an OS file lock, and records written whole despite Ctrl-C.

`FolderLock` takes ``fcntl.flock`` on ``FOLDER/.specbench.lock`` for as long as a sweep, a
profile or a merge writes there; the file holds the writer's PID for the message a second
writer gets ("FOLDER is in use by PID N"); it is opened without following a symlink
(`specbench.safe_files.open_no_follow`): a lock file that is a symlink is refused, its target untouched. The kernel drops the lock when the process ends,
however it ends (SIGKILL included), so a stale lock cannot outlive its writer. On release —
every exit path of the writer, success or failure — the lock file is removed (while still
locked; a writer that locked a file just unlinked sees its inode gone and locks the new one),
and a folder the lock itself created is removed again when the writer left it empty: a
command that failed (a typo in the target, a tokenizer mismatch) leaves nothing behind. Only
a killed writer leaves the (unlocked) file.
Readers (`results show`, `fit`, `recommend`, `plot`) take no lock: every record file appears
by an atomic rename, so they see whole records only.

`interrupts_deferred` holds SIGINT/SIGTERM back while a unit's record is written, so Ctrl-C
lands between units: the record is either complete on disk or was never started.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.safe_files import open_no_follow

LOCK_FILE = ".specbench.lock"

_held: dict[str, list] = {}  # resolved folder -> [fd, depth]: re-entrant inside one process


def another(flag: str | None) -> str:
    """The end of a 'folder in use' line: the flag that chooses another folder, where the command has one."""
    return f" or choose another {flag}" if flag else ""


def check_writable_folder(folder: Path, flag: str | None = "--out") -> None:
    """A folder we may write: absent (its parent then must be creatable) or a writable directory. ``flag``: the
    option that named it, shown in the message (None: a folder the command chose itself, as confirm's)."""
    folder = Path(folder)
    label = f"{flag} {folder}" if flag else str(folder)
    try:
        if folder.exists() and not folder.is_dir():
            raise SpecbenchError(f"{label} is a file, not a folder; choose a folder path")
    except OSError as exc:  # symlink loops, names too long
        raise SpecbenchError(f"{label}: {exc.strerror or exc}") from None
    probe = folder
    while not probe.exists():
        if probe.is_symlink():
            raise SpecbenchError(f"{label}: {probe} is a dangling symlink")
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise SpecbenchError(f"{label}: {probe} is a file, not a folder")
    if not is_writable_dir(probe):
        what = "results folder" if probe == folder else "parent folder"
        raise SpecbenchError(f"{label}: the {what} {probe} is read-only")


def is_writable_dir(path: Path) -> bool:
    """Writable for us, and not marked read-only (no write bit at all: refused even for root)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK) and bool(mode & 0o222)


def _holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        return "?"
    return text.split()[0] if text else "?"


class FolderLock:
    """Exclusive writer lock on a folder (created if absent); a context manager."""

    def __init__(self, folder: str | Path, flag: str | None = "--out"):
        self.folder = Path(folder)
        self.flag = flag
        self._key: str | None = None

    def acquire(self) -> FolderLock:
        check_writable_folder(self.folder, self.flag)
        created = _missing_folders(self.folder)  # deepest first: removed again if left empty
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecbenchError(f"cannot create {self.folder}: {exc.strerror or exc}") from None
        key = str(self.folder.resolve())
        if key in _held:
            _held[key][1] += 1
            self._key = key
            return self
        try:
            fd = self._lock(self.folder / LOCK_FILE)
        except BaseException:
            _remove_if_empty(created)
            raise
        _held[key] = [fd, 1, self.folder / LOCK_FILE, created]
        self._key = key
        return self

    def _lock(self, path: Path) -> int:
        """An open, exclusively locked descriptor of ``path`` holding our PID."""
        for _ in range(100):
            try:
                fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)  # a symlink here is refused, never truncated
            except OSError as exc:
                raise SpecbenchError(f"{self.folder} is not writable ({exc.strerror or exc})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise SpecbenchError(
                    f"{self.folder} is in use by PID {_holder(path)} (another specbench is "
                    f"writing there); wait for it to finish{another(self.flag)}"
                ) from None
            except OSError as exc:
                os.close(fd)
                raise SpecbenchError(f"cannot lock {path}: {exc.strerror or exc}") from None
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return fd
            os.close(fd)  # the previous writer removed the file as we locked it: lock the new one
        raise SpecbenchError(f"cannot lock {path}: it keeps being replaced")

    def release(self) -> None:
        if self._key is None or self._key not in _held:
            return
        entry = _held[self._key]
        entry[1] -= 1
        if entry[1] == 0:
            del _held[self._key]
            fd, _, path, created = entry
            try:
                os.unlink(path)  # still locked: no other writer can be inside
            except OSError:
                pass
            os.close(fd)  # closing the descriptor drops the flock
            _remove_if_empty(created)
        self._key = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    probe = Path(folder)
    while not probe.exists() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove folders a lock created, deepest first, while they are empty (a writer that failed)."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def lock_holder(folder: str | Path) -> int | None:
    """PID of the process writing ``folder`` now, or None when nobody holds its lock."""
    path = Path(folder) / LOCK_FILE
    try:
        if str(Path(folder).resolve()) in _held:
            return None  # this process is the writer
        fd = open_no_follow(path, os.O_RDONLY)
    except (OSError, SpecbenchError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        holder = _holder(path)
        return int(holder) if holder.isascii() and holder.isdigit() and len(holder) < 19 else -1
    finally:
        os.close(fd)


@contextlib.contextmanager
def interrupts_deferred():
    """Run the block to its end even if SIGINT/SIGTERM arrives; the signal is acted on afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[tuple[int, object]] = []
    previous = {}

    def remember(signum, frame):
        pending.append((signum, frame))

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, remember)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signum, frame = pending[0]
            handler = previous.get(signum)
            if callable(handler):
                handler(signum, frame)
            elif signum == signal.SIGINT:
                raise KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), signum)
