"""Proving a model-cache entry's content: sha256 per file, checked on load with a cheap stamp.

When an entry is written its manifest records, for every file (weights, ``config.json``,
tokenizer files), the size, the modification time (ns) and the sha256 of the content. On load:

* a missing file or a different size: damaged;
* a small file (< `ALWAYS_HASH_BYTES`: config and tokenizer files) is always rehashed — it costs
  milliseconds and catches an edit that kept size and mtime;
* a large file whose size and mtime match its stamp is trusted without rehashing (a normal load
  does not read 500 MB twice); any other large file is rehashed, and if the content still matches
  the stamp is refreshed, else the entry is damaged.

A damaged entry is rebuilt from its source when the source is at hand, or refused in one line.
`weights_sha256` is the hash records carry: the weights files' sha256 (combined when several).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ALWAYS_HASH_BYTES = 16 * 2**20
CHUNK = 8 * 2**20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def describe_files(folder: Path) -> dict[str, dict]:
    """name -> {size, mtime_ns, sha256} for every plain file of ``folder``."""
    files = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            files[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": file_sha256(path)}
    return files


def combined_weights_hash(files: dict[str, dict]) -> str | None:
    """sha256 of the weights: the file's own when there is one, else over 'name sha256' lines."""
    weights = sorted((name, meta["sha256"]) for name, meta in files.items() if name.endswith(WEIGHT_SUFFIXES))
    if not weights:
        return None
    if len(weights) == 1:
        return weights[0][1]
    return hashlib.sha256("".join(f"{n} {h}\n" for n, h in weights).encode()).hexdigest()


def verify_files(folder: Path, files: dict) -> tuple[str | None, bool]:
    """(why the folder does not match ``files``, or None; whether stamps should be refreshed)."""
    restamp = False
    for name, meta in files.items():
        if not isinstance(meta, dict) or not {"size", "mtime_ns", "sha256"} <= set(meta):
            return f"manifest entry for {name} is malformed", False
        path = folder / name
        try:
            st = path.stat()
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}", False
        if st.st_size != meta["size"]:
            return f"{name} is {st.st_size} bytes, the manifest says {meta['size']}", False
        if st.st_size >= ALWAYS_HASH_BYTES and st.st_mtime_ns == meta["mtime_ns"]:
            continue  # stamp matches: trusted without rereading
        try:
            actual = file_sha256(path)
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}", False
        if actual != meta["sha256"]:
            return f"{name} content changed (sha256 {actual[:12]}…, the manifest says {meta['sha256'][:12]}…)", False
        if st.st_mtime_ns != meta["mtime_ns"]:
            meta["mtime_ns"] = st.st_mtime_ns
            restamp = True
    return None, restamp


def state_dict_sha256(model) -> str:
    """sha256 of a loaded model's tensors (names, dtypes, shapes, bytes): for models without a cache entry."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        if t.numel():
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
