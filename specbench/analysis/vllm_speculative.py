"""The one mapping from a specbench drafter (type, params, γ) to vLLM's ``speculative_config``.

Every place that hands vLLM a speculative config builds it here, so the config that ran is the
config that is recommended:

* the in-process vLLM backend (`specbench.backends.vllm_config`, via `vllm_engine`);
* the ``vllm-server`` backend, as the ``--speculative-config`` JSON (`backends.vllm_server`);
* ``specbench recommend --engine vllm`` (`analysis.engine_settings`), and the per-batch-size
  schedules built on it (`analysis.concurrency`, `analysis.cost_profile`);
* ``specbench export-drafter --format vllm`` (`training.vllm_export`).

It lives in ``analysis``, the lowest layer all of them may import (backends and measure sit above
analysis; analysis may import neither). Analysis never loads models, so the caller says how a
model spec becomes the name vLLM gets (``model_name``): a local folder for the backends, a
Hugging Face id for a pasted snippet, the spec as given otherwise.

Keys as in vLLM 0.32.0's ``SpeculativeConfig`` (vllm/config/speculative.py):

=============== ==========================================================================================
drafter          speculative_config
=============== ==========================================================================================
ngram            ``{"method": "ngram", "num_speculative_tokens": γ, "prompt_lookup_min": n_min,
                 "prompt_lookup_max": n_max}`` (specbench's defaults: n_min 1, n_max 3)
draft-model      ``{"method": "draft_model", "model": <model>, "num_speculative_tokens": γ}``
eagle, eagle3,   ``{"method": <type>, "model": <checkpoint, or model>, "num_speculative_tokens": γ}``
medusa
mtp              ``{"method": "mtp", "num_speculative_tokens": γ}`` (the layers live in the target)
=============== ==========================================================================================

``draft_tensor_parallel_size`` is added for drafters with a model of their own when given.

What this mapping does not decide is whether a given engine can run the config: a tree (vLLM 0.32
has none), MTP on a target without MTP layers, a checkpoint in specbench's own format. The backends
refuse those before anything starts (`backends.vllm_config.check_runnable`); a recommendation
says so in its notes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from specbench.errors import SpecbenchError

# specbench drafter type -> vLLM's SpeculativeConfig.method
METHODS = {"ngram": "ngram", "draft-model": "draft_model", "eagle": "eagle", "eagle3": "eagle3",
           "medusa": "medusa", "mtp": "mtp"}
TRAINED = ("eagle", "eagle3", "medusa")  # heads trained for a target: vLLM loads them from a checkpoint folder
WITH_MODEL = ("draft-model",) + TRAINED  # methods whose config names a model of the drafter's own
NGRAM_DEFAULTS = {"n_min": 1, "n_max": 3}  # specbench's ngram drafter (engine.drafters.ngram)


def _params(params: Mapping | str | None) -> Mapping:
    if isinstance(params, str):
        return json.loads(params or "{}")  # the records' drafter_params column
    return params or {}


def draft_model_spec(drafter: str, params: Mapping | str | None) -> str | None:
    """The model spec vLLM's drafter loads: draft-model's ``model``; a trained head's ``checkpoint``
    (or ``model``, a published head named by hub id); None for ngram and MTP, or when not given."""
    params = _params(params)
    if drafter == "draft-model":
        return str(params["model"]) if params.get("model") else None
    if drafter in TRAINED:
        spec = params.get("model") or params.get("checkpoint")
        return str(spec) if spec else None
    return None


def speculative_config(drafter: str | None, params: Mapping | str | None, gamma: int, *,
                       model_name: Callable[[str | None], str] | None = None,
                       draft_tensor_parallel_size: int | None = None) -> dict | None:
    """vLLM's ``speculative_config`` for ``drafter`` (a specbench drafter type) with ``params`` (a dict
    or the records' JSON) drafting ``gamma`` tokens per step; None for target-only decoding
    (no drafter, or γ = 0).

    ``model_name`` turns the drafter's model spec (None when the params name none) into what the
    config names; without it the spec goes in as given. A drafter type vLLM has no method for is a
    `SpecbenchError`.
    """
    if drafter in (None, "", "none") or int(gamma) == 0:
        return None
    if drafter not in METHODS:
        raise SpecbenchError(f"vLLM has no speculative method for drafter '{drafter}' "
                             f"(vLLM runs: {', '.join(METHODS)})")
    params = _params(params)
    config: dict = {"method": METHODS[drafter]}
    if drafter in WITH_MODEL:
        spec = draft_model_spec(drafter, params)
        config["model"] = model_name(spec) if model_name is not None else spec
    config["num_speculative_tokens"] = int(gamma)
    if drafter == "ngram":
        config["prompt_lookup_min"] = int(params.get("n_min", NGRAM_DEFAULTS["n_min"]))
        config["prompt_lookup_max"] = int(params.get("n_max", NGRAM_DEFAULTS["n_max"]))
    if draft_tensor_parallel_size is not None and drafter in WITH_MODEL:
        config["draft_tensor_parallel_size"] = int(draft_tensor_parallel_size)
    return config
