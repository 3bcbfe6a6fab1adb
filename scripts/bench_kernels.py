#!/usr/bin/env python
"""Time the Triton kernels against their torch references on a CUDA GPU.

    python scripts/bench_kernels.py                       # both kernels, full grid
    python scripts/bench_kernels.py --kernel tree --quick # a few shapes
    python scripts/bench_kernels.py --json results/kernels.json
    python scripts/bench_kernels.py --smoke               # no GPU: tiny interpreted check

For each shape: median milliseconds over ``--reps`` timed runs (CUDA events, after ``--warmup``
runs, L2 flushed before each run unless ``--no-flush``), effective GB/s = the bytes a kernel
must move (below) ÷ time, the speedup of the kernel over the reference, and the largest
difference between the two (attention) or whether every token matches (sampling).

Bytes counted:
* tree attention: K and V over each sequence's prefix + T nodes, plus q, the output and the
  mask; the reference is ``scaled_dot_product_attention`` with the boolean mask built
  beforehand (the engine builds it once per forward, not per layer).
* rejection sampling: per sequence the rows p_a, q_a (none for one-hot drafts) and E over the
  vocabulary; the reference is ``specbench.engine.verify.verify_sampling``.

Without CUDA it prints that it needs a GPU and exits 0; ``--smoke`` instead runs a tiny check of
both kernels against their references (under Triton's interpreter when there is no GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

HEAD_CONFIGS = {  # name: (query heads, key/value heads, head_dim)
    "qwen2.5-0.5b": (14, 2, 64),
    "qwen2.5-1.5b": (12, 2, 128),
    "llama-3-8b": (32, 8, 128),
}
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DEVICE = "cuda"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", choices=("tree", "sampling", "all"), default="all")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="bf16", help="attention dtype (default bf16)")
    parser.add_argument(
        "--probs-dtype",
        choices=tuple(DTYPES),
        default="fp32",
        help="probability dtype for rejection sampling (default fp32, as the engine's softmax)",
    )
    parser.add_argument("--quick", action="store_true", help="a few shapes only")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--no-flush", action="store_true", help="do not flush the L2 cache before each timed run")
    parser.add_argument("--json", type=Path, help="also write the records and the environment to this file")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="run a tiny check of both kernels and exit (under TRITON_INTERPRET=1 without CUDA)",
    )
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------ timing
class Timer:
    """Median time of a CUDA callable, events around each run, L2 flushed before it."""

    def __init__(self, torch, warmup: int, reps: int, flush: bool):
        self.torch, self.warmup, self.reps = torch, warmup, reps
        self.scratch = torch.empty(256 * 2**20, dtype=torch.int8, device=DEVICE) if flush else None

    def __call__(self, fn) -> float:
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        pairs = []
        for _ in range(self.reps):
            if self.scratch is not None:
                self.scratch.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in pairs)  # ms


def environment(torch) -> dict:
    import triton

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1), sms=props.multi_processor_count)
    return env


# ------------------------------------------------------------------------------------------ tree attention
def tree_shapes(quick: bool):
    batches, prefixes, nodes = ((1, 8), (512, 1024, 2048, 4096), (8, 16, 32, 64))
    if quick:
        batches, prefixes, nodes = (1, 8), (1024, 4096), (16, 64)
    for name, (heads, kv_heads, dim) in HEAD_CONFIGS.items():
        for bsz in batches:
            for prefix in prefixes:
                for t in nodes:
                    yield name, heads, kv_heads, dim, bsz, prefix, t


def bench_tree(args, torch, timer) -> list[dict]:
    import torch.nn.functional as F

    from specbench_kernels.tree_attention import tree_attention_mask, tree_attention_triton

    dtype = getattr(torch, DTYPES[args.dtype])
    elsize = torch.tensor([], dtype=dtype).element_size()
    records = []
    for name, heads, kv_heads, dim, bsz, prefix, t in tree_shapes(args.quick):
        gen = torch.Generator(device=DEVICE).manual_seed(0)
        s_max = prefix + t
        q = torch.randn(bsz, heads, t, dim, device=DEVICE, dtype=dtype, generator=gen)
        k = torch.randn(bsz, kv_heads, s_max, dim, device=DEVICE, dtype=dtype, generator=gen)
        v = torch.randn(bsz, kv_heads, s_max, dim, device=DEVICE, dtype=dtype, generator=gen)
        lens = torch.tensor(
            [prefix - (37 * b) % max(1, prefix // 4) for b in range(bsz)], device=DEVICE, dtype=torch.int32
        )  # ragged, at most `prefix`
        tree = _binary_tree_mask(t, torch)
        mask = tree_attention_mask(lens, tree, s_max)  # [B, 1, T, S]

        def kernel(q=q, k=k, v=v, lens=lens, tree=tree, prefix=prefix):
            return tree_attention_triton(q, k, v, lens, tree, max_prefix_len=prefix)

        def reference(q=q, k=k, v=v, mask=mask, gqa=heads != kv_heads):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)

        err = (kernel().float() - reference().float()).abs().max().item()
        ms_kernel, ms_ref = timer(kernel), timer(reference)
        moved = (int(lens.sum()) + bsz * t) * kv_heads * dim * 2 * elsize + 2 * q.numel() * elsize + tree.numel()
        records.append(
            dict(
                kernel="tree_attention",
                model=name,
                heads=heads,
                kv_heads=kv_heads,
                head_dim=dim,
                batch=bsz,
                prefix=prefix,
                nodes=t,
                dtype=args.dtype,
                ms_triton=ms_kernel,
                ms_torch=ms_ref,
                gbps_triton=moved / ms_kernel / 1e6,
                gbps_torch=moved / ms_ref / 1e6,
                speedup=ms_ref / ms_kernel,
                max_abs_diff=err,
            )
        )
        _print_row(records[-1])
    return records


def _binary_tree_mask(nodes: int, torch):
    """Ancestor mask of a complete binary tree with ``nodes`` nodes (parent of i is (i − 1) // 2)."""
    mask = torch.eye(nodes, dtype=torch.bool)
    for i in range(1, nodes):
        mask[i] |= mask[(i - 1) // 2]
    return mask.to(DEVICE)


# ------------------------------------------------------------------------------------------ sampling
def sampling_shapes(quick: bool):
    batches, drafts = ((1, 8, 32, 64), (1, 2, 4, 8))
    if quick:
        batches, drafts = (1, 64), (1, 8)
    for has_q in (True, False):
        for bsz in batches:
            for k in drafts:
                yield bsz, k, has_q


def bench_sampling(args, torch, timer) -> list[dict]:
    from specbench_kernels.rejection_sampling import rejection_sampling_triton
    from specbench_kernels.rejection_sampling_reference import verify_sampling

    vocab = 152064
    dtype = getattr(torch, DTYPES[args.probs_dtype])
    elsize = torch.tensor([], dtype=dtype).element_size()
    records = []
    for bsz, k, has_q in sampling_shapes(args.quick):
        gen = torch.Generator(device=DEVICE).manual_seed(0)
        target = torch.softmax(torch.randn(bsz, k + 1, vocab, device=DEVICE, generator=gen), -1).to(dtype)
        draft = torch.softmax(torch.randn(bsz, k, vocab, device=DEVICE, generator=gen), -1).to(dtype) if has_q else None
        tokens = torch.randint(0, vocab, (bsz, k), device=DEVICE, generator=gen)
        uniform = torch.rand(bsz, k, device=DEVICE, generator=gen)
        expo = torch.empty(bsz, vocab, device=DEVICE).exponential_(generator=gen)
        args_ = (tokens, draft, target, uniform, expo)

        got, ref = rejection_sampling_triton(*args_), verify_sampling(*args_)
        match = bool(torch.equal(got.accepted, ref.accepted) and torch.equal(got.next_token, ref.next_token))
        ms_kernel = timer(lambda args_=args_: rejection_sampling_triton(*args_))
        ms_ref = timer(lambda args_=args_: verify_sampling(*args_))
        moved = bsz * vocab * ((3 if has_q else 2) * elsize) + bsz * k * 40
        records.append(
            dict(
                kernel="rejection_sampling",
                batch=bsz,
                draft_len=k,
                vocab=vocab,
                draft_probs=has_q,
                dtype=args.probs_dtype,
                ms_triton=ms_kernel,
                ms_torch=ms_ref,
                gbps_triton=moved / ms_kernel / 1e6,
                gbps_torch=moved / ms_ref / 1e6,
                speedup=ms_ref / ms_kernel,
                tokens_match=match,
            )
        )
        _print_row(records[-1])
    return records


# ------------------------------------------------------------------------------------------ output
_printed_header: set[str] = set()


def _print_row(rec: dict) -> None:
    if rec["kernel"] == "tree_attention":
        head = f"{'model':<14}{'B':>4}{'prefix':>8}{'T':>5}"
        left = f"{rec['model']:<14}{rec['batch']:>4}{rec['prefix']:>8}{rec['nodes']:>5}"
        check = f"{rec['max_abs_diff']:>10.2e}"
        check_head = f"{'max|diff|':>10}"
    else:
        head = f"{'draft':<14}{'B':>4}{'K':>8}{'V':>8}"
        kind = "probs" if rec["draft_probs"] else "one-hot"
        left = f"{kind:<14}{rec['batch']:>4}{rec['draft_len']:>8}{rec['vocab']:>8}"
        check = f"{'yes' if rec['tokens_match'] else 'NO':>10}"
        check_head = f"{'tokens =':>10}"
    if rec["kernel"] not in _printed_header:
        _printed_header.add(rec["kernel"])
        print(f"\n{rec['kernel']} ({rec['dtype']})")
        print(f"{head}{'triton ms':>11}{'torch ms':>11}{'triton GB/s':>13}{'torch GB/s':>12}{'speedup':>9}{check_head}")
    print(
        f"{left}{rec['ms_triton']:>11.4f}{rec['ms_torch']:>11.4f}{rec['gbps_triton']:>13.1f}"
        f"{rec['gbps_torch']:>12.1f}{rec['speedup']:>8.2f}x{check}",
        flush=True,
    )


# ------------------------------------------------------------------------------------------ smoke
def smoke() -> int:
    """Tiny run of both kernels against their references: on the GPU, else interpreted (a few seconds)."""
    import torch

    from specbench_kernels._triton import triton_available
    from specbench_kernels.rejection_sampling import rejection_sampling_triton
    from specbench_kernels.rejection_sampling_reference import verify_sampling
    from specbench_kernels.tree_attention import tree_attention_reference, tree_attention_triton

    if not triton_available():
        print("triton is not installed: nothing to check")
        return 0
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 32, generator=gen).to(device)
    k, v = torch.randn(2, 2, 24, 32, generator=gen).to(device), torch.randn(2, 2, 24, 32, generator=gen).to(device)
    lens, tree = torch.tensor([3, 19], device=device), torch.ones(5, 5, dtype=torch.bool, device=device).tril()
    err = tree_attention_triton(q, k, v, lens, tree, num_splits=2) - tree_attention_reference(q, k, v, lens, tree)
    print(f"tree attention: max |triton − torch| = {err.abs().max().item():.2e}")
    target = torch.softmax(torch.randn(3, 4, 500, generator=gen), -1)
    draft = torch.softmax(torch.randn(3, 3, 500, generator=gen), -1)
    tokens, uniform = torch.randint(0, 500, (3, 3), generator=gen), torch.rand(3, 3, generator=gen)
    expo = torch.empty(3, 500).exponential_(generator=gen)
    inputs = tuple(t.to(device) for t in (tokens, draft, target, uniform, expo))
    got, ref = rejection_sampling_triton(*inputs, num_splits=2), verify_sampling(*inputs)
    same = torch.equal(got.accepted, ref.accepted) and torch.equal(got.next_token, ref.next_token)
    print(f"rejection sampling: tokens match the reference: {same}")
    return 0 if err.abs().max().item() < 1e-4 and same else 1


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if args.smoke:
        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels (and triton) are imported
        return smoke()
    if not torch.cuda.is_available():
        print("bench_kernels needs a CUDA GPU (none found); `--smoke` runs a tiny interpreted check instead.")
        return 0
    from specbench_kernels._triton import interpreter_enabled, triton_available

    if not triton_available():
        print("bench_kernels needs the 'triton' package: pip install 'triton>=3.0'")
        return 0
    if interpreter_enabled():
        print("TRITON_INTERPRET is set: unset it to benchmark compiled kernels")
        return 2
    env = environment(torch)
    print(" · ".join(f"{key} {value}" for key, value in env.items()))
    timer = Timer(torch, args.warmup, args.reps, flush=not args.no_flush)
    records = []
    if args.kernel in ("tree", "all"):
        records += bench_tree(args, torch, timer)
    if args.kernel in ("sampling", "all"):
        records += bench_sampling(args, torch, timer)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps({"environment": env, "records": records}, indent=2))
        tmp.replace(args.json)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
