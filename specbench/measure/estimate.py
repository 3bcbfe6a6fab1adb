"""Rough cost of a sweep before it runs: units, tokens, and a time bound from model size."""

from __future__ import annotations

from specbench.measure.spec import SweepSpec
from specbench.models import cache as model_cache
from specbench.models.resolve import DTYPES, aliases

# effective weight-streaming bandwidth of a decode step, bytes/s (order of magnitude only)
BANDWIDTH_GUESS = {"cpu": 20e9, "cuda": 1.5e12}
BYTES_PER_PARAM = {name: {"float32": 4, "bfloat16": 2, "float16": 2}[torch_name]  # every name of models.resolve.DTYPES
                   for name, torch_name in DTYPES.items() if torch_name != "auto"}


def parameter_count(target: str) -> int | None:
    """Parameters of a target from its config alone (meta device: no weights are read)."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM


        if target in aliases():
            entry = aliases()[target]
            if entry["source"] == "random":
                cfg = dict(entry["config"])
                config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
            else:
                base = entry.get("base", target)
                folder = model_cache.entry_dir(base)
                if not (folder / "config.json").exists():
                    return None
                config = AutoConfig.from_pretrained(str(folder))
        else:
            config = AutoConfig.from_pretrained(target)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        return sum(p.numel() for p in model.parameters())
    except Exception:  # noqa: BLE001 - an estimate is optional
        return None


def estimate(spec: SweepSpec, units) -> dict:
    tokens = sum(u.max_new_tokens for u in units)
    params = parameter_count(spec.target)
    out = {"units": len(units), "configs": len(spec.configs), "max_new_tokens_total": tokens,
           "target_parameters": params, "seconds_upper": None}
    if params:
        kind = "cuda" if spec.device.startswith("cuda") else "cpu"
        step = params * BYTES_PER_PARAM.get(spec.dtype, 4) / BANDWIDTH_GUESS[kind]
        out["seconds_upper"] = tokens * step  # one target forward per token: the baseline's cost
    return out
