"""Trained-drafter checkpoints: a folder with ``config.json`` and ``model.safetensors``.

config.json records what the weights are (``type``, ``architecture``), which target they
belong to (``target``: name, hidden size, vocabulary, layer count and a *fingerprint* of the
target's weights) and how they were made (``training``: command, data, time, held-out
accuracy). The drafter shares the target's embedding and LM head by reference, so neither is
ever written here; a drafter with a reduced draft vocabulary stores only the target ids of
that vocabulary (``draft_vocab``).

The fingerprint is a probe: 64 weights read at fixed positions of the target's parameters
(embedding, first and last layers, final norm), plus every parameter's name and shape. It is
cheap on any model size and independent of the dtype the target was loaded in: a checkpoint
loads when the shapes match and the probe agrees to within bf16 rounding, otherwise it is
refused with one line naming both models.

A checkpoint is named by a path, by a shipped name, ``<target>/<type>``, found in the
``drafters/`` folder installed with the package (``specbench.builtin_drafters``), or by a hub id
(`specbench.engine.drafters.checkpoints.checkpoint_location`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from specbench.engine.drafters.checkpoints.checkpoint_location import (
    fetch_hub_checkpoint,
    looks_like_hub_id,
    shipped_names,
    shipped_root,
)
from specbench.errors import SpecbenchError, did_you_mean
from specbench.models.limits import check_config_sizes
from specbench.models.memory import require
from specbench.safe_files import read_json, write_atomic, write_json, writing

__all__ = ["shipped_names", "shipped_root"]  # re-exported: where the shipped checkpoints are

FORMAT = "specbench-drafter"
FORMAT_VERSION = 1
CONFIG = "config.json"
WEIGHTS = "model.safetensors"
PROBE_TENSORS = 8  # parameters probed
PROBE_VALUES = 8  # values read from each


# ----------------------------------------------------------------------------- fingerprint


def _probe_parameters(model) -> list[tuple[str, torch.Tensor]]:
    """The parameters the probe reads: first, last and evenly spaced ones, in name order."""
    named = sorted(model.named_parameters(), key=lambda item: item[0])
    if len(named) <= PROBE_TENSORS:
        return named
    step = (len(named) - 1) / (PROBE_TENSORS - 1)
    return [named[round(i * step)] for i in range(PROBE_TENSORS)]


@torch.no_grad()
def target_probe(model) -> list[float]:
    """PROBE_TENSORS × PROBE_VALUES weights at fixed flat positions, as float32 numbers."""
    values: list[float] = []
    for _, param in _probe_parameters(model):
        flat = param.detach().reshape(-1)
        n = flat.numel()
        index = torch.tensor([(i * 7919 + 13) % n for i in range(PROBE_VALUES)], device=flat.device)
        values.extend(float(v) for v in flat.index_select(0, index).float().cpu())
    return values


def target_shapes_digest(model) -> str:
    text = ";".join(f"{name}:{tuple(p.shape)}" for name, p in sorted(model.named_parameters(), key=lambda i: i[0]))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def target_fingerprint(model) -> dict:
    """{"id": short hex, "shapes": digest, "probe": [floats]} identifying a target's weights."""
    probe = target_probe(model)
    shapes = target_shapes_digest(model)
    rounded = ",".join(f"{v:.2e}" for v in probe)
    digest = hashlib.sha256(f"{shapes}|{rounded}".encode()).hexdigest()[:16]
    return {"id": digest, "shapes": shapes, "probe": probe}


def same_target(recorded: dict, model) -> bool:
    """Shapes identical and probe equal within bf16 rounding (dtype-independent)."""
    if recorded.get("shapes") != target_shapes_digest(model):
        return False
    probe = torch.tensor(target_probe(model))
    stored = torch.tensor(recorded.get("probe", []), dtype=torch.float32)
    if stored.shape != probe.shape:
        return False
    return bool(torch.allclose(stored, probe, rtol=1.6e-2, atol=1e-6))


def target_record(target) -> dict:
    """What config.json says about the target (``target`` is a LoadedModel)."""
    cfg = target.model.config
    return {
        "name": target.name,
        "fingerprint": target_fingerprint(target.model),
        "hidden_size": int(cfg.hidden_size),
        "vocab_size": int(target.vocab_size),
        "num_layers": int(cfg.num_hidden_layers),
        "model_type": str(cfg.model_type),
    }


def check_target(config: dict, target, where: str) -> None:
    """One-line refusal when a checkpoint belongs to another target."""
    recorded = config.get("target") or {}
    if same_target(recorded.get("fingerprint") or {}, target.model):
        return
    theirs = recorded.get("name", "an unknown target")
    their_id = (recorded.get("fingerprint") or {}).get("id", "?")
    ours = target_fingerprint(target.model)["id"]
    raise SpecbenchError(
        f"drafter checkpoint {where} was trained for target '{theirs}' (weights {their_id}), "
        f"not for target '{target.name}' (weights {ours}); train one with "
        f"`specbench train-drafter --target {target.name}`"
    )


# ----------------------------------------------------------------------------- files


@dataclass
class Checkpoint:
    """A loaded checkpoint folder: its config and its tensors (on CPU, as stored)."""

    path: Path
    config: dict
    tensors: dict[str, torch.Tensor]

    @property
    def type(self) -> str:
        return str(self.config.get("type"))


def resolve_checkpoint(spec: str | None, drafter_type: str, target_name: str) -> Path:
    """A path or shipped name -> the checkpoint folder; None -> the shipped one for the target."""
    if spec is None or str(spec).strip() == "":
        folder = shipped_root() / target_name / drafter_type
        if (folder / CONFIG).is_file():
            return folder
        shipped = [n for n in shipped_names() if n.endswith(f"/{drafter_type}")]
        raise SpecbenchError(
            f"drafter '{drafter_type}' needs a checkpoint for target '{target_name}' "
            f"(shipped: {', '.join(shipped) or 'none'}); train one with `specbench train-drafter "
            f"--target {target_name} --type {drafter_type} --out DIR` and pass checkpoint=DIR"
        )
    text = str(spec).strip()
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    if (shipped_root() / text / CONFIG).is_file():
        return shipped_root() / text
    if looks_like_hub_id(text):  # a published head (speculators format, EAGLE's, Medusa's) on the hub
        return fetch_hub_checkpoint(text)
    raise SpecbenchError(
        f"drafter checkpoint '{text}' is neither a folder nor a shipped name"
        f"{did_you_mean(text, shipped_names())} (shipped: {', '.join(shipped_names()) or 'none'})"
    )


def read_checkpoint(folder: Path, expected_type: str | None = None) -> Checkpoint:
    folder = Path(folder)
    config_path, weights_path = folder / CONFIG, folder / WEIGHTS
    if not config_path.is_file():
        raise SpecbenchError(f"drafter checkpoint {folder}: no {CONFIG}")
    config = read_json(config_path, "drafter checkpoint file")
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise SpecbenchError(
            f"drafter checkpoint {folder}: {CONFIG} is not a specbench drafter config "
            "(for Medusa or EAGLE folders use the drafter type's load_published)"
        )
    check_config_sizes(config, f"drafter checkpoint {folder}")  # before any tensor of these sizes is made
    if config.get("format_version", 0) > FORMAT_VERSION:
        raise SpecbenchError(
            f"drafter checkpoint {folder}: format version {config['format_version']} is newer "
            f"than this specbench reads ({FORMAT_VERSION})"
        )
    if expected_type is not None and config.get("type") != expected_type:
        raise SpecbenchError(
            f"drafter checkpoint {folder} holds a '{config.get('type')}' drafter, not '{expected_type}'"
        )
    if not weights_path.is_file():
        raise SpecbenchError(f"drafter checkpoint {folder}: no {WEIGHTS}")
    require({"weights file": weights_path.stat().st_size}, f"drafter checkpoint {folder}: reading {WEIGHTS}")
    try:
        tensors = load_file(str(weights_path))
    except (SafetensorError, OSError) as exc:
        raise SpecbenchError(
            f"drafter checkpoint {folder}: cannot read {WEIGHTS}: {str(exc).splitlines()[0]}"
        ) from None
    return Checkpoint(path=folder, config=config, tensors=tensors)


def write_checkpoint(
    folder: Path, config: dict, tensors: dict[str, torch.Tensor], dtype: torch.dtype | None = None
) -> Path:
    """Write config.json + model.safetensors (floating tensors cast to ``dtype`` when given)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, tensor in tensors.items():
        tensor = tensor.detach().cpu().contiguous()
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        out[name] = tensor
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        **config,
        "dtype": str(dtype).replace("torch.", "") if dtype is not None else "as trained",
    }
    with writing(folder, "drafter checkpoint", remove=folder / WEIGHTS):  # a full disk: one line
        write_atomic(folder / WEIGHTS, safetensors_bytes(out))
        write_json(folder / CONFIG, config)
    return folder
