"""One memory estimate, checked before every allocation that sizes come from a user or a file.

Every allocation whose size a config, a checkpoint, a flag or a grid decides asks `require` first, with the bytes
one of the estimators below gives; `require` refuses, in one line, what exceeds the limit
(`specbench.models.limits.memory_limit_bytes`: ``SPECBENCH_MAX_MEMORY_GIB``, else the machine's memory) — before
anything is allocated, so a config asking for 10^7 MLP rows costs a config read, not 3 GB and a traceback.

The estimators (bytes; E the element size of the dtype the tensors are made in):

* `module_bytes`: a network as its builder makes it — built on PyTorch's ``meta`` device (shapes, no storage),
  so the count is exact for every drafter kind and checkpoint format: Σ numel · E over parameters and buffers;
  `checked_module` also compares its shapes with a checkpoint's tensors before the real build;
* `kv_cache_bytes`: keys and values, 2 · L · B · H_kv · S · D · E;
* `forward_bytes`: the transient tensors of one forward of B sequences × T new tokens over S positions: hidden
  states and MLP rows, B·T·(4·h + 3·i)·E, logits in float32, B·T·V·4, and the attention's scores and weights in
  float32, 2 · B · H · T · S · 4 (the CPU's scaled-dot-product attention materialises them), plus keys and values
  repeated for grouped-query heads, 2 · B · H · S · D · E;
* `array_bytes`: a plain array, Π shape · E.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from specbench.errors import SpecbenchError
from specbench.models.limits import check_memory

FLOAT32 = 4


def array_bytes(shape, element_size: int = 8) -> int:
    """Π shape · element size, in Python integers (no overflow however large)."""
    return math.prod(int(n) for n in shape) * int(element_size)


def kv_cache_bytes(layers: int, batch: int, kv_heads: int, head_dim: int, capacity: int, element_size: int) -> int:
    """Keys and values of ``layers`` layers for ``batch`` sequences of ``capacity`` positions."""
    return 2 * array_bytes((layers, batch, kv_heads, capacity, head_dim), element_size)


def forward_bytes(sizes: Mapping, batch: int, new_tokens: int, positions: int, element_size: int) -> int:
    """Transient bytes of one forward (module docstring); ``sizes``: hidden_size, intermediate_size, vocab_size,
    num_attention_heads, num_key_value_heads, head_dim (a config's keys; missing ones read as the usual
    defaults)."""
    hidden = int(sizes.get("hidden_size") or 0)
    mlp = int(sizes.get("intermediate_size") or 4 * hidden)
    vocab = int(sizes.get("vocab_size") or 0)
    heads = int(sizes.get("num_attention_heads") or 1)
    kv_heads = int(sizes.get("num_key_value_heads") or heads)
    head_dim = int(sizes.get("head_dim") or max(hidden // heads, 1))
    rows = int(batch) * int(new_tokens)
    states = rows * (4 * hidden + 3 * mlp) * element_size + rows * vocab * FLOAT32
    scores = 2 * array_bytes((batch, heads, new_tokens, positions), FLOAT32)
    repeated = 2 * array_bytes((batch, heads, positions, head_dim), element_size) if kv_heads != heads else 0
    return states + scores + repeated


def require(parts: Mapping[str, float], what: str) -> None:
    """Refuse ``what`` in one line when the bytes of its ``parts`` add up to more than the limit."""
    total = float(sum(parts.values()))
    named = ", ".join(f"{name} {value / 2**30:,.2f} GiB" for name, value in parts.items() if value >= 2**20)
    check_memory(total, f"{what}{f' ({named})' if named and len(parts) > 1 else ''}")


def module_bytes(build: Callable[[], object], element_size: int = FLOAT32):
    """(the module built on the meta device, its bytes at ``element_size``): exact, and nothing allocated."""
    import torch  # lazy: models/ is imported by torch-free readers

    with torch.device("meta"):
        module = build()
    tensors = list(module.parameters()) + list(module.buffers())
    return module, sum(t.numel() for t in tensors) * element_size


def checked_module(
    build: Callable[[], object],
    what: str,
    tensors: Mapping | None = None,
    strict: bool = False,
    config: str = "its config",
):
    """``build()`` after the one estimate: built on the meta device first, its weights compared with
    ``tensors`` (a checkpoint's, by name: a shape that differs, or with ``strict`` a name missing on either
    side, is one line naming ``config``) and its bytes checked against the limit; then built for real."""
    meta, size = module_bytes(build)
    if tensors is not None:
        expected = {name: tuple(t.shape) for name, t in meta.state_dict().items()}
        for name, tensor in tensors.items():
            if name in expected and tuple(tensor.shape) != expected[name]:
                raise SpecbenchError(
                    f"{what}: weights do not fit {config} ({name} is {list(tensor.shape)}, {config} makes it "
                    f"{list(expected[name])})"
                )
        if strict:
            missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
            if missing or unexpected:
                raise SpecbenchError(f"{what}: missing {missing[:3]} unexpected {unexpected[:3]} weights")
    require({"weights": size}, f"{what}: a network of {size // FLOAT32:,} parameters")
    return build()
