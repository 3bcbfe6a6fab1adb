"""Reading files a user hands us: bounded in size, strict UTF-8 text, YAML without aliases.

Every failure is a `SpecbenchError` naming the file: missing, a directory, a symlink loop,
unreadable, too large, binary, not UTF-8, malformed YAML, or YAML using anchors/aliases (a
"billion laughs" document expands exponentially; specbench's files never need them).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from specbench.errors import SpecbenchError

MiB = 2**20
YAML_MAX_BYTES = 1 * MiB  # sweep specs, workload definitions, tree files
TEXT_MAX_BYTES = 4 * MiB  # prompt files
YAML_MAX_DEPTH = 64


def read_bytes(path: str | Path, what: str, max_bytes: int) -> bytes:
    path = Path(path)
    try:
        if not path.exists():
            if path.is_symlink():
                raise SpecbenchError(f"{what} {path} is a dangling symlink or a symlink loop")
            raise SpecbenchError(f"{what} not found: {path}")
        if path.is_dir():
            raise SpecbenchError(f"{what} {path} is a directory, not a file")
        size = path.stat().st_size
        if size > max_bytes:
            raise SpecbenchError(f"{what} {path} is {size / MiB:.1f} MiB, over the {max_bytes / MiB:.0f} MiB limit")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:  # symlink loops, permissions, special files
        raise SpecbenchError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # a pipe or a file that grew
        raise SpecbenchError(f"{what} {path} is over the {max_bytes / MiB:.0f} MiB limit")
    return data


def read_text_file(path: str | Path, what: str = "file", max_bytes: int = TEXT_MAX_BYTES) -> str:
    """The file as text: at most ``max_bytes``, valid UTF-8, no NUL bytes (binary files are refused)."""
    data = read_bytes(path, what, max_bytes)
    if b"\x00" in data:
        raise SpecbenchError(f"{what} {path} is a binary file (it contains NUL bytes), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecbenchError(f"{what} {path} is not valid UTF-8 text (byte {exc.start}: "
                             f"{data[exc.start:exc.start + 1]!r})") from None


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases and very deep nesting."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"YAML aliases (*{event.anchor}) are not allowed "
                                 f"(line {event.start_mark.line + 1})")
        event = self.peek_event()
        if getattr(event, "anchor", None):
            raise yaml.YAMLError(f"YAML anchors (&{event.anchor}) are not allowed (line {event.start_mark.line + 1})")
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > YAML_MAX_DEPTH:
                raise yaml.YAMLError(f"YAML nested deeper than {YAML_MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml_text(text: str, where: str):
    """Parse YAML strictly (safe types, no aliases); errors become one line naming ``where``."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecbenchError(f"{where}: malformed YAML{line}: {' '.join(str(problem).split())}") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise SpecbenchError(f"{where}: unusable YAML ({exc.__class__.__name__})") from None


def load_yaml_file(path: str | Path, what: str = "YAML file", max_bytes: int = YAML_MAX_BYTES):
    return load_yaml_text(read_text_file(path, what, max_bytes), str(path))
