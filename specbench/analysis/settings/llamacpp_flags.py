"""The one mapping from a specbench drafter (type, params, γ) to llama.cpp's ``llama-server`` flags.

Every place that hands llama.cpp a speculative setup builds it here, so the flags that ran are the flags
that are recommended: the ``llamacpp-server`` backend (the servers it launches, `backends.llamacpp.server`)
and ``specbench recommend --engine llamacpp`` (`analysis.settings.engine_settings`). It lives in ``analysis``, the
lowest layer both may import; the caller says how a model spec becomes the GGUF file llama.cpp loads
(``model_file``).

What a kind is called in llama.cpp is its catalogue entry (`specbench.catalogue.drafters`): ``llamacpp_type``
(``--spec-type``), where the drafter's weights come from (``llamacpp_weights``), the flag γ sets
(``llamacpp_gamma``) and which parameters become flags (``llamacpp_params``). Flag names as in llama.cpp's
``common/arg.cpp`` (the tree the ``llama-cpp-python`` 0.3.36 sdist vendors, llama.cpp@0c1e57098):

============== ==============================================================================================
drafter         llama-server flags
============== ==============================================================================================
draft-model     ``--spec-type draft-simple --model-draft <draft GGUF> --spec-draft-n-max γ
                --spec-draft-n-min 0 --spec-draft-p-min 0`` (a fixed γ-token greedy draft, as specbench's)
draft-simple    the same with the kind's ``n_min`` / ``p_min``: llama.cpp's adaptive draft length — a draft
                stops before a token the draft model gives probability < p_min, and one shorter than n_min
                is dropped
ngram-simple,   ``--spec-type NAME --spec-NAME-size-m γ --spec-NAME-size-n N [--spec-NAME-min-hits H]``
ngram-map-k,    (llama.cpp's own n-gram matchers; γ is the m-gram drafted)
ngram-map-k4v
ngram-mod       ``--spec-type ngram-mod --spec-ngram-mod-n-max γ --spec-ngram-mod-n-min N
                --spec-ngram-mod-n-match M``
eagle3          ``--spec-type draft-eagle3 --model-draft <EAGLE-3 GGUF> --spec-draft-n-max γ``
semi-ar         ``--spec-type draft-dspark --model-draft <DSpark GGUF> --spec-draft-n-max γ``
mtp             ``--spec-type draft-mtp --spec-draft-n-max γ`` (the layers live in the target's GGUF)
============== ==============================================================================================

The draft kinds' ``--spec-draft-n-min`` / ``--spec-draft-p-min`` are always written, so a llama.cpp
release with other defaults (p_min was 0.75 in older ones) runs what was measured. specbench's own
``ngram`` (longest match of n_max down to n_min tokens) has no llama.cpp equivalent and is refused with
the closest kind named; the target-only baseline (γ = 0) has no speculative flags at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from specbench.catalogue import drafters as catalogue
from specbench.errors import SpecbenchError

DRAFT_LENGTH_FLAGS = {"n_min": "--spec-draft-n-min", "p_min": "--spec-draft-p-min"}  # the draft kinds' pinned ones


def _params(params: Mapping | str | None) -> Mapping:
    if isinstance(params, str):
        return json.loads(params or "{}")  # the records' drafter_params column
    return params or {}


def llamacpp_kinds() -> list[str]:
    """The drafter kinds llama.cpp has a speculation type for."""
    return [name for name in catalogue.names(buildable=False) if catalogue.get(name).llamacpp_type]


def draft_file_spec(drafter: str, params: Mapping | str | None) -> str | None:
    """The model spec of the GGUF llama.cpp loads with ``--model-draft``: a draft model's ``model``, a head's
    ``checkpoint``; None for a kind without weights of its own (n-gram, MTP) or when not given."""
    params = _params(params)
    weights = catalogue.get(drafter).llamacpp_weights
    if weights == "model":
        return str(params["model"]) if params.get("model") else None
    if weights == "checkpoint":
        spec = params.get("checkpoint") or params.get("model")
        return str(spec) if spec else None
    return None


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(int(value))


def spec_flags(
    drafter: str | None,
    params: Mapping | str | None,
    gamma: int,
    *,
    model_file: Callable[[str], str] | None = None,
) -> list[str]:
    """llama-server's speculation flags for ``drafter`` with ``params`` (a dict or the records' JSON) drafting
    ``gamma`` tokens per round; [] for target-only decoding (no drafter, or γ = 0). ``model_file`` turns the
    drafter's model spec into the GGUF path written (default: the spec as given). A kind llama.cpp cannot run,
    or a draft kind without its GGUF, is one `SpecbenchError` line."""
    if drafter is None or catalogue.is_target_only(drafter) or int(gamma) == 0:
        return []
    kind = catalogue.get(drafter)
    if kind.llamacpp_type is None:
        closest = f"; {kind.llamacpp_note}" if kind.llamacpp_note else ""
        raise SpecbenchError(
            f"llama.cpp has no speculation type for drafter '{drafter}'{closest} "
            f"(llama.cpp runs: {', '.join(llamacpp_kinds())})"
        )
    params = _params(params)
    floor = kind.llamacpp_gamma_at_least
    least = None if floor is None else int(params.get(floor, kind.default(floor)))
    if least is not None and int(gamma) < least:
        raise SpecbenchError(
            f"{drafter} at γ {int(gamma)} with {floor} {least} would never draft: llama.cpp keeps its draft only "
            f"when it is at least {floor} tokens long (use γ ≥ {least}, or {floor} ≤ {int(gamma)})"
        )
    flags = ["--spec-type", kind.llamacpp_type]
    if kind.llamacpp_weights in ("model", "checkpoint"):
        spec = draft_file_spec(drafter, params)
        if spec is None:
            what = "model=NAME" if kind.llamacpp_weights == "model" else "checkpoint=FILE.gguf"
            raise SpecbenchError(f"drafter {drafter} cannot run on llama.cpp without its GGUF (params: {what})")
        flags += ["--model-draft", model_file(spec) if model_file is not None else spec]
    flags += [kind.llamacpp_gamma, str(int(gamma))]
    named = dict(kind.llamacpp_params)
    if kind.llamacpp_type.startswith("draft-"):
        named = {**DRAFT_LENGTH_FLAGS, **named}
    for ours, flag in named.items():
        value = params.get(ours, kind.default(ours) if ours in kind.params else 0)
        flags += [flag, _number(value)]
    return flags
