"""What a loaded model can hold: its context window, and the one-line refusal when a request is over it."""

from __future__ import annotations

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
        raise SpecbenchError(f"prompt of {prompt_tokens} tokens + max_new_tokens {max_new_tokens} = {need} tokens "
                             f"exceeds the context window of '{name}' ({window} tokens) by {need - window}{where}; "
                             "lower --max-new-tokens or shorten the prompt")
