"""Reading files a user hands us: bounded in size, strict UTF-8 text, YAML (1.2 core schema) without aliases; and
writing checkpoints and caches so that a full disk is one line, not a traceback. The one JSON layer: every JSON
file specbench reads or writes goes through `read_json` / `write_json` (tests/test_code_rules.py scans for others).

Every failure is a `SpecbenchError` naming the file: missing, a directory, a symlink loop,
unreadable, too large, binary, not UTF-8, malformed YAML, or YAML using anchors/aliases (a
"billion laughs" document expands exponentially; specbench's files never need them). On the
writing side, `writing` turns what the tensor writers raise when the disk is full or the
folder read-only — OSError, safetensors' SafetensorError ("... os error 28"), torch's
RuntimeError ("PytorchStreamWriter failed writing file") — into one line naming the file.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
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
        raise SpecbenchError(
            f"{what} {path} is not valid UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from None


class WrittenInt(int):
    """An integer read from YAML that remembers how it was written (``0x1F``, ``+5``, ``007``), for messages."""

    written: str


class WrittenFloat(float):
    """A float read from YAML that remembers how it was written (``1e3``, ``.5``, ``.inf``), for messages."""

    written: str


def _written(cls, value, text: str):
    number = cls(value)
    number.written = text
    return number


# YAML 1.2 core schema (yaml.org/spec/1.2.2 §10.3.2): the only implicit types. YAML 1.1's yes/no/on/off/y/n
# booleans, sexagesimal numbers, 0b / 017 / 1_000 integers, timestamps and '=' are plain text here.
_CORE_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_TAG = "tag:yaml.org,2002:"


class DuplicateKey(yaml.YAMLError):
    """A mapping key written twice: the key as written and the lines of both."""

    def __init__(self, first: tuple[str, int], again: tuple[str, int]):
        (key, line), (written, again_line) = first, again
        same = "" if written == key else f" (written {written} there: the same key)"
        super().__init__(
            f"duplicate key {key} on lines {line} and {again_line}{same}; a key may appear once per mapping"
        )


def _shown(node) -> str:
    text = node.value if isinstance(node, yaml.ScalarNode) else node.tag.replace(_TAG, "!!")
    return repr(" ".join(str(text).split())[:60])


class CoreSchemaLoader(yaml.SafeLoader):
    """The one YAML loader of specbench (`load_yaml_text`): safe types, YAML 1.2 core-schema implicit types, no
    tags beyond str/int/float/bool/null/seq/map, no anchors or aliases, no very deep nesting, no key written twice
    in one mapping."""

    yaml_implicit_resolvers: dict = {}
    yaml_constructors: dict = {}

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"YAML aliases (*{event.anchor}) are not allowed (line {event.start_mark.line + 1})")
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

    def construct_mapping(self, node, deep=False):
        """A mapping whose keys are all different: a key written twice (at any depth) is refused, naming the key
        and both lines, where PyYAML would silently keep the last value."""
        first_line: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first_line.get(key)
            except TypeError:
                continue  # an unhashable key: the base class says so
            here = (_shown(key_node), key_node.start_mark.line + 1)
            if seen is not None:
                raise DuplicateKey(seen, here)
            first_line[key] = here
        return super().construct_mapping(node, deep)

    def construct_core_int(self, node):
        text = self.construct_scalar(node)
        base = 8 if text.startswith("0o") else 16 if text.startswith("0x") else 10
        return _written(WrittenInt, int(text[2:] if base != 10 else text, base), text)

    def construct_core_float(self, node):
        text = self.construct_scalar(node)
        return _written(WrittenFloat, float(text.lower().replace(".inf", "inf").replace(".nan", "nan")), text)

    def construct_core_bool(self, node):
        return self.construct_scalar(node).lower() == "true"

    def construct_other_tag(self, node):
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"the tag {node.tag.replace(_TAG, '!!')} is not allowed (text, numbers, true/false, "
            "null, lists and mappings only)",
            node.start_mark,
        )


for _tag, _pattern, _first in (
    ("null", _CORE_NULL, ["~", "n", "N", ""]),
    ("bool", _CORE_BOOL, list("tTfF")),
    ("int", _CORE_INT, list("-+0123456789")),
    ("float", _CORE_FLOAT, list("-+0123456789.")),
):
    CoreSchemaLoader.add_implicit_resolver(_TAG + _tag, _pattern, _first)
for _tag, _constructor in (
    ("null", yaml.SafeLoader.construct_yaml_null),
    ("bool", CoreSchemaLoader.construct_core_bool),
    ("int", CoreSchemaLoader.construct_core_int),
    ("float", CoreSchemaLoader.construct_core_float),
    ("str", yaml.SafeLoader.construct_yaml_str),
    ("seq", yaml.SafeLoader.construct_yaml_seq),
    ("map", yaml.SafeLoader.construct_yaml_map),
):
    CoreSchemaLoader.add_constructor(_TAG + _tag, _constructor)
CoreSchemaLoader.add_constructor(None, CoreSchemaLoader.construct_other_tag)
# a value read here and written out again (a sweep echoed to YAML) is the number it stands for
yaml.SafeDumper.add_representer(WrittenInt, yaml.SafeDumper.represent_int)
yaml.SafeDumper.add_representer(WrittenFloat, yaml.SafeDumper.represent_float)


def load_yaml_text(text: str, where: str):
    """Parse YAML strictly (`CoreSchemaLoader`: YAML 1.2 core-schema types, no aliases); errors become one line
    naming ``where``. Every YAML file specbench reads (sweeps, workloads, streams, trees, drafter configs, the
    model aliases) comes through here."""
    try:
        return yaml.load(text, Loader=CoreSchemaLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKey as exc:
        raise SpecbenchError(f"{where}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecbenchError(f"{where}: malformed YAML{line}: {' '.join(str(problem).split())}") from None
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise SpecbenchError(f"{where}: unusable YAML ({exc.__class__.__name__})") from None


def load_yaml_file(path: str | Path, what: str = "YAML file", max_bytes: int = YAML_MAX_BYTES):
    return load_yaml_text(read_text_file(path, what, max_bytes), str(path))


_ERRNO = re.compile(r"(?:os error|errno)\s*(\d+)", re.IGNORECASE)
_WRITE_FAILED = (
    "PytorchStreamWriter failed",
    "file write failed",
    "No space left on device",
    "Disk quota exceeded",
    "Read-only file system",
)


def write_failure_reason(exc: BaseException) -> str | None:
    """Why a write failed, when ``exc`` (of any library) says the operating system refused it; else None."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    text = str(exc)
    match = _ERRNO.search(text)
    if match:
        return os.strerror(int(match.group(1)))
    if any(phrase in text for phrase in _WRITE_FAILED):
        return "the file could not be written (is the disk full?)"
    return None


@contextmanager
def writing(path: str | Path, what: str, remove: str | Path | None = None):
    """Write ``what`` at ``path`` inside the block; a failed write is one `SpecbenchError` line, and
    ``remove`` (a folder the block was filling, or a partial file) is deleted so nothing half-written stays."""
    try:
        yield
    except SpecbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - only OS-level write failures become user errors
        reason = write_failure_reason(exc)
        if reason is None:
            raise
        if remove is not None:
            target = Path(remove)
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
        raise SpecbenchError(f"cannot write {what} {path}: {reason}") from None


# ----------------------------------------------------------------------------- writing without following symlinks
#
# Every file specbench creates, truncates or replaces inside a results folder, a cache or a report folder (the
# folder lock, run.json, records, adaptive.json, figures, index.html, cache entries) is written by one of the two
# helpers below. Neither follows a symlink at the file's name: a `.specbench.lock` or `run.json` that is a
# symlink to a file elsewhere (another user's, or ~/.bashrc) is refused in one line, and that file is never
# opened, truncated or replaced.


def _symlink_refusal(path: Path) -> SpecbenchError:
    return SpecbenchError(
        f"{path} is a symlink: specbench does not write through symlinks inside results, cache or report "
        "folders (remove it, or choose another folder)"
    )


def refuse_symlink(path: str | Path) -> None:
    """One line (`SpecbenchError`) when ``path`` itself is a symlink (dangling or not)."""
    if os.path.islink(path):
        raise _symlink_refusal(Path(path))


def open_no_follow(path: str | Path, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags | O_NOFOLLOW)``: a descriptor of ``path`` itself, never of what a symlink there points
    to (refused in one line); other failures raise their OSError."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.EEXIST) and os.path.islink(path):
            raise _symlink_refusal(Path(path)) from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def replacing(path: str | Path, *, text: bool = False):
    """A new file (binary; ``text``: UTF-8 text) that replaces ``path`` whole when the block ends well: created
    exclusively beside it (`mkstemp`), synced, then renamed over ``path``. Readers see the old file or the new
    one, never half of one; a failed block leaves ``path`` as it was. A symlink at ``path`` is refused in one
    line (a rename would replace the link, not follow it, but a results folder holding one was tampered with or
    mis-made, and the user is told rather than having it silently replaced)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    refuse_symlink(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are ordinary files
        with os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def move_into_place(part: str | Path, path: str | Path) -> None:
    """A finished file ``part`` (written beside ``path`` by its own writer) renamed over ``path`` whole; a symlink
    at ``path`` is refused in one line, as `replacing` refuses it."""
    refuse_symlink(path)
    os.replace(part, path)


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """``data`` (bytes, or text written as UTF-8) at ``path``, whole (`replacing`)."""
    with replacing(path, text=isinstance(data, str)) as handle:
        handle.write(data)


def open_appending(path: str | Path, *, text: bool = False):
    """A file object appending to ``path`` (created when absent), opened without following a symlink there:
    a server's log, a growing corpus. Binary unless ``text`` (UTF-8)."""
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    return os.fdopen(fd, "a" if text else "ab", **({"encoding": "utf-8"} if text else {}))


def create_new(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` into a file that must not exist yet (``O_EXCL``: never an existing file or a symlink planted
    at a predictable name, such as a crash log in the shared temporary folder)."""
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)


# ----------------------------------------------------------------------------- JSON files

JSON_MAX_BYTES = 16 * MiB  # run.json, caches, configs; a caller whose files grow larger names its own limit


def json_ready(value):
    """A copy of ``value`` (dicts, lists, tuples, scalars) that `json.dumps` writes as strict JSON: numpy scalars
    and arrays become Python numbers and lists, NaN and ±inf become null, mapping keys text."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_ready(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def read_json(path: str | Path, what: str = "JSON file", max_bytes: int = JSON_MAX_BYTES):
    """The JSON value held by the file ``path`` (`read_text_file`: at most ``max_bytes``, UTF-8 text). Reading
    follows a symlink (a model snapshot's config.json is one); every failure — missing, too large, not text, not
    JSON — is one `SpecbenchError` naming ``what`` and the file."""
    text = read_text_file(path, what, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecbenchError(f"{what} {path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # a number too long to convert, nesting too deep
        raise SpecbenchError(f"{what} {path} is not valid JSON ({type(exc).__name__})") from None


def write_json(path: str | Path, value, indent: int | None = 2, what: str | None = None) -> None:
    """``value`` as strict JSON at ``path``, whole and never through a symlink (`write_atomic`): `json_ready` first
    (numpy values, NaN and ±inf as null), any other object as its text; UTF-8, ``indent`` spaces per level (None:
    one line), a final newline. A write the operating system refuses (a full disk) raises its OSError, or, with
    ``what`` named, is one `SpecbenchError` line (`writing`)."""
    text = json.dumps(json_ready(value), indent=indent, ensure_ascii=False, allow_nan=False, default=str)
    if what is None:
        write_atomic(path, text + "\n")
        return
    with writing(path, what):
        write_atomic(path, text + "\n")
