"""The one mapping from a specbench drafter (type, params, γ) to vLLM's ``speculative_config``.

Every place that hands vLLM a speculative config builds it here, so the config that ran is the
config that is recommended:

* the in-process vLLM backend (`specbench.backends.vllm.config`, via `vllm_engine`);
* the ``vllm-server`` backend, as the ``--speculative-config`` JSON (`backends.vllm.server`);
* ``specbench recommend --engine vllm`` (`analysis.settings.engine_settings`), and the per-batch-size
  schedules built on it (`analysis.concurrency`, `analysis.cost.profile`);
* ``specbench export-drafter --format vllm`` (`training.vllm_export`).

Everything it needs to know about a drafter kind is the kind's catalogue entry
(`specbench.catalogue.drafters`): ``vllm_method``, where vLLM loads the drafter's weights from
(``vllm_weights``) and which parameters become config keys (``vllm_params``).

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
medusa           (``vllm_weights: checkpoint``)
mtp              ``{"method": "mtp", "num_speculative_tokens": γ}`` (``vllm_weights: target``: the layers
                 live in the target)
suffix           ``{"method": "suffix", "num_speculative_tokens": γ}`` (a kind only serving engines run)
=============== ==========================================================================================

``draft_tensor_parallel_size`` is added for drafters with a model of their own when given.

What this mapping does not decide is whether a given engine can run the config: a tree (vLLM 0.32
has none), MTP on a target without MTP layers, a checkpoint in specbench's own format. The backends
refuse those before anything starts (`backends.vllm.config.check_runnable`); a recommendation
says so in its notes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from specbench.catalogue import drafters as catalogue
from specbench.errors import SpecbenchError


def _params(params: Mapping | str | None) -> Mapping:
    if isinstance(params, str):
        return json.loads(params or "{}")  # the records' drafter_params column
    return params or {}


def draft_model_spec(drafter: str, params: Mapping | str | None) -> str | None:
    """The model spec vLLM's drafter loads: a draft model's ``model``; a trained head's ``checkpoint``
    (or ``model``, a published head named by hub id); None for a kind without weights of its own
    (ngram, MTP), or when not given."""
    params = _params(params)
    weights = catalogue.get(drafter).vllm_weights if drafter in catalogue.DRAFTERS else None
    if weights == "model":
        return str(params["model"]) if params.get("model") else None
    if weights == "checkpoint":
        spec = params.get("model") or params.get("checkpoint")
        return str(spec) if spec else None
    return None


def names_a_model(drafter: str) -> bool:
    """Whether the config of ``drafter`` names a model of the drafter's own (a draft model, a checkpoint)."""
    return catalogue.get(drafter).vllm_weights in ("model", "checkpoint")


def vllm_kinds() -> list[str]:
    """The drafter kinds vLLM has a method for."""
    return [name for name in catalogue.names(buildable=False) if catalogue.get(name).vllm_method]


def speculative_config(
    drafter: str | None,
    params: Mapping | str | None,
    gamma: int,
    *,
    model_name: Callable[[str | None], str] | None = None,
    draft_tensor_parallel_size: int | None = None,
    per_batch_size: Sequence[Sequence[int]] | None = None,
    adaptive: bool = False,
) -> dict | None:
    """vLLM's ``speculative_config`` for ``drafter`` (a specbench drafter kind) with ``params`` (a dict
    or the records' JSON) drafting ``gamma`` tokens per step; None for target-only decoding
    (no drafter, or γ = 0).

    ``model_name`` turns the drafter's model spec (None when the params name none) into what the
    config names; without it the spec goes in as given. A drafter kind vLLM has no method for is a
    `SpecbenchError`.

    A schedule of vLLM's own goes in here too, so that this is the one builder of the config:
    ``per_batch_size`` (``[[start_bs, end_bs, K], ...]``: batch sizes start..end draft K tokens, K = 0 none;
    ``gamma`` is then the largest K, vLLM's cap) becomes ``num_speculative_tokens_per_batch_size``, and
    ``adaptive`` the acceptance-adaptive K (``enable_adaptive_verification``).
    """
    if drafter is None or catalogue.is_target_only(drafter) or int(gamma) == 0:
        return None
    kind = catalogue.get(drafter) if drafter in catalogue.DRAFTERS else None
    if kind is None or kind.vllm_method is None:
        raise SpecbenchError(
            f"vLLM has no speculative method for drafter '{drafter}' (vLLM runs: {', '.join(vllm_kinds())})"
        )
    params = _params(params)
    config: dict = {"method": kind.vllm_method}
    if names_a_model(drafter):
        spec = draft_model_spec(drafter, params)
        config["model"] = model_name(spec) if model_name is not None else spec
    config["num_speculative_tokens"] = int(gamma)
    for ours, theirs in kind.vllm_params.items():
        config[theirs] = int(params.get(ours, kind.default(ours)))
    if draft_tensor_parallel_size is not None and names_a_model(drafter):
        config["draft_tensor_parallel_size"] = int(draft_tensor_parallel_size)
    if per_batch_size is not None:
        config["num_speculative_tokens_per_batch_size"] = [[int(v) for v in row] for row in per_batch_size]
    if adaptive:
        config["enable_adaptive_verification"] = True
    return config
