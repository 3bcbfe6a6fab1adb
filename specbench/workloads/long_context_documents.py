"""Long documents every machine has: Python's standard-library sources and whole ShareGPT conversations.

Selection is deterministic. The candidates of a source are listed in a fixed order, ranked by
``sha256(f"{seed}:{document id}")`` and the first ``count`` at least ``min_chars`` long are kept
(the same nested, seeded rule workloads use for prompts):

* ``python-stdlib``: the ``.py`` files under ``sysconfig.get_paths()["stdlib"]`` (``site-packages``,
  ``dist-packages`` and ``__pycache__`` are not the standard library and are never walked), minus
  the ``exclude`` globs. Ids are ``stdlib-<major>.<minor>/<path>``: the same files on every machine
  with the same Python minor version, and a different Python shows in the prompt ids.
* ``sharegpt``: the conversations of a ShareGPT file, their split parts joined back together
  (`specbench.workloads.readers.sharegpt_format.whole_conversations`) and written as a transcript
  (``User: …`` / ``Assistant: …``); ``min_ascii`` keeps conversations that are mostly ASCII.
  Parsing the file takes seconds, so the selected transcripts are cached under
  ``<cache>/workloads/``, keyed by the file's path, size and mtime and the selection.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.models import cache as model_cache
from specbench.safe_files import read_json, write_json
from specbench.workloads.long_context_spec import DocumentSource
from specbench.workloads.readers import sharegpt_format
from specbench.workloads.readers.sources import SourceUnavailable, package_file

NOT_STDLIB = ("site-packages", "dist-packages", "__pycache__")
ROLE_NAMES = {
    "human": "User",
    "user": "User",
    "gpt": "Assistant",
    "chatgpt": "Assistant",
    "assistant": "Assistant",
    "bard": "Assistant",
    "bing": "Assistant",
    "system": "System",
}
CACHE_VERSION = 1  # bump when the transcript format or the selection changes


@dataclass(frozen=True)
class Document:
    """One long text, its stable id and where it came from."""

    doc_id: str  # 'stdlib-3.11/argparse.py', 'sharegpt/wNBG8Gp'
    origin: str  # 'python 3.11 stdlib: argparse.py'
    kind: str  # 'stdlib' or 'sharegpt': the prompt category's first half
    text: str


def _rank(seed: int, doc_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()[:8], "big")


def read_documents(source: DocumentSource) -> tuple[list[Document], str]:
    """The documents a source selects, and a description of where they were read from."""
    if source.source == "python-stdlib":
        return stdlib_documents(source)
    return sharegpt_documents(source)


# ----------------------------------------------------------------------------- Python's standard library


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def stdlib_files(root: Path, exclude: tuple[str, ...]) -> list[str]:
    """Relative paths of the ``.py`` files under ``root``, sorted, minus ``exclude`` globs and non-stdlib folders."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in NOT_STDLIB]
        rel = Path(folder).relative_to(root)
        for name in files:
            if name.endswith(".py"):
                path = (rel / name).as_posix()
                if not any(fnmatch.fnmatchcase(path, pattern) for pattern in exclude):
                    found.append(path)
    return sorted(found)


def stdlib_documents(source: DocumentSource, root: Path | None = None) -> tuple[list[Document], str]:
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise SpecbenchError(f"Python's standard library was not found at {root}")
    version = python_version()
    chosen = []
    for path in sorted(stdlib_files(root, source.exclude), key=lambda p: _rank(source.seed, p)):
        text = (root / path).read_text(encoding="utf-8", errors="replace")
        if len(text) >= source.min_chars:
            chosen.append(Document(f"stdlib-{version}/{path}", f"python {version} stdlib: {path}", "stdlib", text))
            if len(chosen) == source.count:
                break
    return _enough(chosen, source, f"python {version} stdlib ({root})")


def _enough(chosen: list[Document], source: DocumentSource, description: str) -> tuple[list[Document], str]:
    if len(chosen) < source.count:
        raise SpecbenchError(
            f"{description} has {len(chosen)} {source.source} document(s) of at least "
            f"{source.min_chars} characters; the workload asks for {source.count}"
        )
    return chosen, description


# ----------------------------------------------------------------------------- ShareGPT conversations


def transcript(messages: list[dict]) -> str:
    """A conversation as plain text: 'User: …' and 'Assistant: …' paragraphs."""
    lines = []
    for message in messages:
        text = message.get("value")
        if isinstance(text, str) and text.strip():
            role = str(message.get("from", "")).lower()
            lines.append(f"{ROLE_NAMES.get(role, role.capitalize() or 'Unknown')}: {text.strip()}")
    return "\n\n".join(lines)


def ascii_share(text: str) -> float:
    return sum(ch < "\x80" for ch in text) / len(text) if text else 0.0


def select_conversations(items: list, source: DocumentSource) -> list[Document]:
    """The ``count`` whole conversations, long and ASCII enough, first in seeded-hash order."""
    chosen = []
    conversations = sharegpt_format.whole_conversations(items)
    for conversation_id in sorted(conversations, key=lambda c: _rank(source.seed, c)):
        text = transcript(conversations[conversation_id])
        if len(text) >= source.min_chars and ascii_share(text) >= source.min_ascii:
            chosen.append(
                Document(f"sharegpt/{conversation_id}", f"sharegpt conversation {conversation_id}", "sharegpt", text)
            )
            if len(chosen) == source.count:
                break
    return chosen


def sharegpt_documents(source: DocumentSource) -> tuple[list[Document], str]:
    if source.path is not None:
        path, description = Path(source.path), f"sharegpt:{source.path}"
        if not path.is_file():
            raise SpecbenchError(f"file not found: {path}")
    else:
        try:
            path, description = package_file(source.package, source.file)
        except SourceUnavailable as exc:
            raise SpecbenchError(f"long-context documents: {exc}") from None
    cached = _cache_path(path, source)
    try:
        data = read_json(cached, "long-context cache", sharegpt_format.CACHE_MAX_BYTES)
        return _enough([Document(**d) for d in data["documents"]], source, description)
    except (SpecbenchError, ValueError, KeyError, TypeError):
        pass  # absent or damaged: rebuild
    try:
        items = sharegpt_format.parse_truncated_array(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        raise SpecbenchError(f"cannot read {path} as ShareGPT conversations (a JSON array): {exc}") from None
    chosen = select_conversations(items, source)
    with contextlib.suppress(OSError):  # a cache that cannot be written is skipped
        write_json(cached, {"source": str(path), "documents": [d.__dict__ for d in chosen]}, indent=None)
    return _enough(chosen, source, description)


def _cache_path(path: Path, source: DocumentSource) -> Path:
    """A cache file per (file content as of its size and mtime, selection)."""
    st = path.stat()
    key = (
        f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{source.count}|{source.seed}|{source.min_chars}|"
        f"{source.min_ascii}|{CACHE_VERSION}"
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return model_cache.cache_root() / "workloads" / f"sharegpt-long-{digest}.json"
