"""A preallocated (static) key/value cache with O(1) roll-back and in-place tree compaction."""

from __future__ import annotations

import torch

from specbench.models.memory import kv_cache_bytes, require


class StaticKVCache:
    """Keys and values of every layer in one buffer each.

    keys, values: [L, B, H_kv, capacity, D]. The first ``length`` positions are valid for every
    sequence of the batch. Rolling back is moving ``length``; nothing is freed or copied.
    """

    def __init__(
        self,
        num_layers: int,
        batch_size: int,
        kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ):
        shape = (num_layers, batch_size, kv_heads, capacity, head_dim)
        element = torch.empty((), dtype=dtype).element_size()
        require(
            {"kv cache": kv_cache_bytes(num_layers, batch_size, kv_heads, head_dim, capacity, element)},
            f"a KV cache of {batch_size} sequence(s) × {capacity} positions × {num_layers} layer(s)",
        )
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.keys.shape[3]

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more positions, doubling the buffers if needed."""
        need = self.length + extra
        if need <= self.capacity:
            return
        new_capacity = max(need, 2 * self.capacity)
        layers, batch, kv_heads, _, head_dim = self.keys.shape
        require(  # the grown buffers, while the old ones are still held
            {
                "kv cache": kv_cache_bytes(
                    layers, batch, kv_heads, head_dim, new_capacity + self.capacity, self.keys.element_size()
                )
            },
            f"growing a KV cache to {new_capacity} positions",
        )
        for name in ("keys", "values"):
            old = getattr(self, name)
            grown = old.new_zeros(old.shape[:3] + (new_capacity,) + old.shape[4:])
            grown[:, :, :, : self.length] = old[:, :, :, : self.length]
            setattr(self, name, grown)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [B, H_kv, T, D] at positions length..length+T-1 of ``layer``.

        Returns the layer's keys and values over [0, length + T) for attention. ``length``
        itself moves only in `advance`, once every layer has been written.
        """
        end = self.length + k.shape[2]
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def write_at(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store k, v [B, H_kv, T, D] at the given positions [T] (a tensor, so that a compiled
        graph does not depend on where in the cache it writes)."""
        self.keys[layer].index_copy_(2, positions, k)
        self.values[layer].index_copy_(2, positions, v)

    def advance(self, count: int) -> None:
        self.length += count

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` positions (roll back rejected draft tokens)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of length {self.length} to {length}")
        self.length = length

    @torch.inference_mode()  # the buffers may have been (re)allocated inside inference mode
    def keep(self, start: int, offsets: torch.Tensor) -> None:
        """Compact after tree verification: positions start+offsets[i] move to start+i.

        offsets: [n] increasing offsets into the block written at ``start``; everything after the
        kept entries is dropped.
        """
        n = int(offsets.numel())
        src = start + offsets.to(self.keys.device)
        self.keys[:, :, :, start : start + n] = self.keys.index_select(3, src)
        self.values[:, :, :, start : start + n] = self.values.index_select(3, src)
        self.length = start + n
