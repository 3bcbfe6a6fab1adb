"""One linear layer's product in each form the CPU offers, per row count: which form streams the weights fastest.

For every distinct linear shape of a model (from its config; the model is loaded for it and dropped: attention q/o, k/v, MLP gate/up, down),
it allocates as many random copies as the model has layers (so the weights stream from memory, as in
a real forward, instead of sitting in cache) and times one pass over them for N = 1, 2, 5, 16, 64,
512 rows of x, in the forms `specbench.engine.cpu.weight_layout` chooses between:

  * ``x·Wᵀ row-major``    — ``F.linear`` on W as torch stores it (an NT GEMM, a GEMV at N = 1);
  * ``x·Wᵀ column-major`` — ``F.linear`` on W stored column-major (an NN GEMM; the previous layout);
  * ``weight-first``      — (W · xᵀ)ᵀ on the row-major W;
  * ``oneDNN packed``     — oneDNN's product from W re-ordered into its blocked format (where torch has oneDNN).

The LM head (vocabulary × hidden, one copy) is timed the same way.

    python scripts/bench_product_forms.py                       # Qwen2.5-Coder-1.5B's shapes, 28 layers
    python scripts/bench_product_forms.py --model smollm2-135m
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from specbench.engine.cpu.weight_layout import linear, onednn_packing, pack_for_onednn, to_column_major
from specbench.models.resolve import load_model

ROWS = (1, 2, 5, 16, 64, 512)


def shapes_of(config) -> dict[str, tuple[int, int]]:
    """The distinct [out, in] linear shapes of a Llama-family layer."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv = (getattr(config, "num_key_value_heads", None) or heads) * head_dim
    return {
        "q/o": (heads * head_dim, hidden),
        "k/v": (kv, hidden),
        "gate/up": (config.intermediate_size, hidden),
        "down": (hidden, config.intermediate_size),
    }


def pass_ms(weights: list[torch.Tensor], product, x: torch.Tensor, repeats: int) -> float:
    """Median ms of one product per weight, in order (the first pass untimed)."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for w in weights:
            product(x, w)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="a Llama-family alias (only its config is read)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = load_model(args.model).model.config  # the weights are dropped at once: only the shapes matter
    layers = config.num_hidden_layers
    # form name -> (how its weights are stored from a row-major W, the product)
    forms = {
        "x·Wᵀ row-major": (lambda w: w, lambda x, w: F.linear(x, w)),
        "x·Wᵀ column-major": (to_column_major, lambda x, w: F.linear(x, w)),
        "weight-first": (lambda w: w, lambda x, w: torch.mm(w, x.t()).t().contiguous()),
    }
    if onednn_packing():
        forms["oneDNN packed"] = (pack_for_onednn, lambda x, w: linear(x, None, packed=w))
    print(
        f"{args.model}: {layers} copies of each layer shape, {torch.get_num_threads()} thread(s); ms per pass "
        f"({' / '.join(forms)}), fastest in bold"
    )
    print("| shape | MB | " + " | ".join(f"N={n}" for n in ROWS) + " |")
    print("|---|---:|" + "---|" * len(ROWS))
    shapes = {
        **{name: (shape, layers) for name, shape in shapes_of(config).items()},
        "LM head": ((config.vocab_size, config.hidden_size), 1),
    }
    for name, ((out, inp), copies) in shapes.items():
        plain = [torch.randn(out, inp) for _ in range(copies)]
        cells = []
        for n in ROWS:
            x = torch.randn(n, inp)
            times = []
            for store, product in forms.values():
                weights = [store(w) for w in plain]
                times.append(pass_ms(weights, product, x, args.repeats))
                del weights
            best = min(times)
            cells.append(" / ".join(f"**{t:.1f}**" if t == best else f"{t:.1f}" for t in times))
        print(f"| {name} {out}×{inp} | {copies * out * inp * 4 / 1e6:.0f} | " + " | ".join(cells) + " |", flush=True)
        del plain


if __name__ == "__main__":
    main()
