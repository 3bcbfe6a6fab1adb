"""Converted-model cache: a GGUF is dequantized once into a safetensors folder.

Layout: ``$SPECBENCH_CACHE/models/<key>/`` holding ``config.json``, ``*.safetensors``,
tokenizer files and ``specbench-cache.json`` — a manifest written last, listing every file
with its size, mtime stamp and content sha256 (`specbench.models.integrity`). An entry without
a manifest (a conversion killed half-way), of an older format, with a file of the wrong size or
content, or with an unreadable safetensors header is treated as absent and rebuilt.
Entries are built in a temporary sibling folder and renamed into place, so readers never see
a partial entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from safetensors import safe_open

from specbench.errors import SpecbenchError
from specbench.models import integrity
from specbench.safe_files import read_json, refuse_symlink, write_json

MANIFEST = "specbench-cache.json"
QUANTIZED = "quantized"  # the cache folder of llama-quantize's variants (specbench.backends.llamacpp.quantized)
CACHE_FORMAT = 2  # 2: every file's sha256 and (size, mtime) stamp


def cache_root() -> Path:
    """``$SPECBENCH_CACHE``, else ``$XDG_CACHE_HOME/specbench``, else ``~/.cache/specbench``."""
    env = os.environ.get("SPECBENCH_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specbench"


def cached_copy(source: Path, folder: str, kind: str) -> Path:
    """Where a copy of ``source`` at weight type ``kind`` lives in the cache, ``<cache>/gguf/<folder>/<source
    stem>-<key>-<kind>.gguf``, the key being the source file's identity (path, size, mtime); it may not exist yet.
    The dequantized copies (``dequantized``) and llama-quantize's variants (``quantized``) are named so."""
    stat = source.stat()
    key = hashlib.sha256(f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_root() / "gguf" / folder / f"{source.stem}-{key}-{kind}.gguf"


def entry_dir(key: str) -> Path:
    return cache_root() / "models" / key


def key_for_file(path: Path) -> str:
    """A cache key for an arbitrary GGUF: its name plus a digest of path, size and mtime."""
    st = path.stat()
    digest = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return f"{path.stem}-{digest}"


def is_valid(entry: Path) -> bool:
    """True when the entry is complete and proves its content (see `damage`)."""
    return damage(entry) is None


def damage(entry: Path) -> str | None:
    """Why ``entry`` cannot be used (absent, incomplete, content changed), or None when it is sound."""
    manifest_path = entry / MANIFEST
    if not manifest_path.is_file():
        return "no manifest (absent or never finished)"
    try:
        manifest = read_json(manifest_path, "model cache manifest")
        if manifest.get("format") != CACHE_FORMAT:
            return f"cache format {manifest.get('format')}, this specbench writes {CACHE_FORMAT}"
        why, restamp = integrity.verify_files(entry, manifest["files"])
        if why:
            return why
        if restamp:  # refresh the stamps in place; skipped where the cache is read-only
            with contextlib.suppress(OSError):
                write_json(manifest_path, manifest, indent=1)
        if not _headers_readable(entry, manifest):
            return "a safetensors header is unreadable"
    except (SpecbenchError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"manifest unreadable ({exc.__class__.__name__})"
    return None


def weights_sha256(entry: Path) -> str | None:
    """The recorded sha256 of the entry's weights (valid entries only: call after `is_valid`)."""
    try:
        return integrity.combined_weights_hash(read_json(entry / MANIFEST, "model cache manifest")["files"])
    except (SpecbenchError, KeyError, TypeError):
        return None


def _headers_readable(entry: Path, manifest: dict) -> bool:
    try:
        for name in manifest["files"]:
            if name.endswith(".safetensors"):
                with safe_open(str(entry / name), framework="pt") as f:
                    if not list(f.keys()):
                        return False
    except (OSError, ValueError, KeyError, TypeError, Exception):  # noqa: BLE001 - any damage means rebuild
        return False
    return True


def entry_size(entry: Path) -> int:
    return sum(p.stat().st_size for p in entry.iterdir() if p.is_file()) if entry.is_dir() else 0


def build_entry(key: str, source: str, writer) -> Path:
    """Build the entry ``key`` with ``writer(tmp_dir)`` unless a valid one exists.

    ``writer`` saves model and tokenizer files into the folder it is given; the manifest is
    added afterwards and the folder renamed into place atomically.
    """
    final = entry_dir(key)
    if is_valid(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=final.parent))
    try:
        writer(tmp)
        files = integrity.describe_files(tmp)  # content sha256 + (size, mtime) stamp of every file
        write_json(
            tmp / MANIFEST,
            {
                "format": CACHE_FORMAT,
                "source": source,
                "files": files,
                "weights_sha256": integrity.combined_weights_hash(files),
            },
            indent=1,
        )
        refuse_symlink(final)
        if final.exists():
            shutil.rmtree(final)  # damaged entry
        try:
            os.replace(tmp, final)
        except OSError:
            if not is_valid(final):  # another process won the race with a bad entry: retry once
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
