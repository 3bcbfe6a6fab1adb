"""What a model can hold and what it may cost: its context window (and the one-line refusal when a request is
over it), and the sizes a config declares, checked against the bounds table with the memory they imply before
anything is allocated."""

from __future__ import annotations

import os

from specbench.bounds import check
from specbench.errors import SpecbenchError


def context_window(model) -> int | None:
    """Positions the model was trained for (``max_position_embeddings``), when its config says."""
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def check_context(model, name: str, prompt_tokens: int, max_new_tokens: int, what: str = "") -> None:
    """prompt + max_new_tokens must fit ``model``'s context window (see `check_window`)."""
    check_window(context_window(model), name, prompt_tokens, max_new_tokens, what)


def check_window(window: int | None, name: str, prompt_tokens: int, max_new_tokens: int, what: str = "") -> None:
    """prompt + max_new_tokens must fit ``window`` (None: unknown, no check); the message says by how much not."""
    if window is None:
        return
    need = int(prompt_tokens) + int(max_new_tokens)
    if need > window:
        where = f" ({what})" if what else ""
        raise SpecbenchError(
            f"prompt of {prompt_tokens} tokens + max_new_tokens {max_new_tokens} = {need} tokens "
            f"exceeds the context window of '{name}' ({window} tokens) by {need - window}{where}; "
            "lower --max-new-tokens or shorten the prompt"
        )


# ----------------------------------------------------------------------------- sizes read from configs

# config.json key -> its row of the bounds table (specbench.bounds), wherever in the config it sits (a
# speculators config nests its layer's config)
SIZE_ROWS = {
    "hidden_size": "model.hidden_size",
    "intermediate_size": "model.intermediate_size",
    "moe_intermediate_size": "model.intermediate_size",
    "vocab_size": "model.vocab_size",
    "draft_vocab_size": "model.vocab_size",
    "num_hidden_layers": "model.layers",
    "num_attention_heads": "model.heads",
    "num_key_value_heads": "model.heads",
    "medusa_num_heads": "model.heads",
    "num_heads": "model.heads",
    "num_experts": "model.experts",
    "num_local_experts": "model.experts",
    "n_routed_experts": "model.experts",
}
BYTES_PER_PARAMETER = 4  # weights are loaded in float32 before any cast
MEMORY_VARIABLE = "SPECBENCH_MAX_MEMORY_GIB"


def _sizes(config, found: dict) -> dict:
    """The first value of every `SIZE_ROWS` key in ``config`` and the mappings nested in it."""
    if isinstance(config, dict):
        for key, value in config.items():
            if key in SIZE_ROWS and key not in found and value is not None:
                found[key] = value
        for value in config.values():
            if isinstance(value, (dict, list)):
                _sizes(value, found)
    elif isinstance(config, list):
        for value in config[:64]:
            _sizes(value, found)
    return found


def memory_limit_bytes() -> float:
    """What a model, a drafter or a profile grid may imply: ``SPECBENCH_MAX_MEMORY_GIB`` (a row of the bounds
    table) when set, else the machine's memory."""
    text = os.environ.get(MEMORY_VARIABLE)
    if text:
        try:
            gib = float(text)
        except ValueError:
            raise SpecbenchError(f"{MEMORY_VARIABLE} must be a number of GiB, got {text!r}") from None
        return check("memory_gib", gib, MEMORY_VARIABLE, MEMORY_VARIABLE) * 2**30
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return float("inf")


def check_memory(implied_bytes: float, what: str) -> None:
    """Refuse, in one line, what would need more memory than the limit (`memory_limit_bytes`), before it is
    allocated."""
    limit = memory_limit_bytes()
    if implied_bytes > limit:
        raise SpecbenchError(
            f"{what} implies about {implied_bytes / 2**30:,.1f} GiB, over the limit of {limit / 2**30:,.1f} GiB "
            f"(the machine's memory; set {MEMORY_VARIABLE} to raise it)"
        )


def implied_parameters(sizes: dict) -> float:
    """Parameters a transformer of these sizes holds, roughly: per layer attention (4·h²) and MLP (3·h·i per
    expert), plus the embedding and the LM head (2·v·h), plus Medusa's heads (h² each)."""
    h = float(sizes.get("hidden_size") or 0)
    i = float(sizes.get("intermediate_size") or sizes.get("moe_intermediate_size") or 4 * h)
    v = float(sizes.get("vocab_size") or sizes.get("draft_vocab_size") or 0)
    layers = float(sizes.get("num_hidden_layers") or 1)
    experts = float(sizes.get("num_experts") or sizes.get("num_local_experts") or sizes.get("n_routed_experts") or 1)
    heads = float(sizes.get("medusa_num_heads") or 0)
    return layers * (4 * h * h + 3 * h * i * experts) + 2 * v * h + heads * h * h


def check_config_sizes(config, where: str) -> None:
    """Every size ``config`` (a model's or a drafter's config.json, nested sections included) holds, against its
    row of the bounds table, and then the memory its weights imply (`check_memory`): one line, before any
    tensor is allocated (a hidden size of 10^7 once asked for 256 TB)."""
    sizes = _sizes(config, {})
    for key, value in sizes.items():
        check(SIZE_ROWS[key], value, where, key)
    check_memory(implied_parameters(sizes) * BYTES_PER_PARAMETER, f"{where}: a model of these sizes")
