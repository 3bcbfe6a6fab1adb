"""specbench's engine against transformers on the same models, prompts and γ (greedy), per dtype.

For each pair and dtype it times, in one process:
  * transformers `generate` (target only),
  * transformers assisted generation — `assistant_model` with a constant schedule of γ tokens for a
    draft model, `prompt_lookup_num_tokens=γ` for prompt lookup,
  * the specbench engine (target only, and speculative with the same drafter and γ).

The protocol (so that the figures mean what they say on a machine others share):
  1. every method makes one untimed call before anything is timed (first-call costs: oneDNN primitives,
     caches, lazy initialisation);
  2. both engines run on the same model object, each in its fastest CPU weight layout, set (untimed) before
     each of its calls: specbench's is measured on this machine by the layout probe
     (`specbench.engine.cpu.layout_probe`, as `--layout auto` does; its one-line choice is printed), transformers'
     is the faster of row-major and column-major in two untimed calls each;
  3. ``--repeats`` repeats (≥ 3), each running every prompt once per method, methods interleaved per prompt
     and their order rotated per repeat, so that drift in the machine's load falls on every method alike;
  4. tokens/s = generated tokens ÷ wall time of the whole call, prefill included, per repeat (all prompts);
     every ratio is computed within a repeat and printed as median [min–max] over the repeats;
  5. the CPU (model, cores, AVX2 / AVX-512 / AVX512-BF16 / AMX flags), torch's threads and the load
     average before and after are printed beside the table.

"= transformers": every output equals transformers' greedy output in that dtype; "= own target-only":
equals the same engine's target-only output — the lossless check (for transformers' rows, its assisted
output against its own `generate`). In bf16 the two engines round differently, so the first may say no
while the second must say yes.

    python scripts/bench_engine.py                   # = make bench-engine: SmolLM2 + prompt lookup, fp32 and bf16
    python scripts/bench_engine.py --pairs qwen --dtypes fp32 --gamma 5   # the Qwen2.5-Coder 1.5B / 0.5B pair
    python scripts/bench_engine.py --profile   # + where a decode and a verify step's time goes, both engines

``--profile`` ends each (pair, dtype) with torch.profiler over 5 decode steps and 5 verify steps (γ + 1 new
tokens after 64 cached, with the LM-head rows each engine computes) of both engines in their layouts: ms per
step, the matrix products' share (``aten::mm`` / ``addmm``), attention's, and the rest (norms, RoPE, cache
writes, Python and dispatch).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from specbench.catalogue import drafters as catalogue
from specbench.cli.views.progress_lines import Steps
from specbench.engine.cpu.cpu_info import describe_cpu
from specbench.engine.cpu.layout_probe import choose_layout
from specbench.engine.cpu.weight_layout import apply_layout, prefer_column_major, prefer_row_major
from specbench.engine.decoder import NativeDecoder
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.errors import SpecbenchError
from specbench.models.prompting import encode_conversation
from specbench.models.resolve import load_model
from specbench.workloads.catalog import load_workload

PRODUCT_OPS = ("aten::mm", "aten::addmm", "aten::bmm")
ATTENTION_OPS = (
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_attention_math",
    "aten::_scaled_dot_product_efficient_attention",
)

PAIRS = {
    "smollm2": ("smollm2-135m", "ngram", None),
    "qwen": ("qwen2.5-coder-1.5b", "draft-model", "qwen2.5-coder-0.5b"),
}
HF_LAYOUTS = {"row-major": prefer_row_major, "column-major": prefer_column_major}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def hf_generate(model, ids, new_tokens, **kwargs):
    out = model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False, **kwargs)
    return out[0, len(ids) :].tolist()


def fastest_hf_layout(model, ids, new_tokens: int) -> tuple[str, dict[str, float]]:
    """transformers' faster CPU layout for this model: two untimed-for-the-table calls of `generate` per layout,
    interleaved, the second of each kept."""
    seconds: dict[str, float] = {}
    for _ in range(2):
        for name, relayout in HF_LAYOUTS.items():
            relayout(model)
            start = time.perf_counter()
            hf_generate(model, ids, new_tokens)
            seconds[name] = time.perf_counter() - start
    return min(seconds, key=seconds.get), {name: new_tokens / s for name, s in seconds.items()}


def step_profile(target, decoder, ours_layout, hf_layout: str, ids: list[int], k: int) -> list[dict]:
    """torch.profiler over 5 decode and 5 verify(k) steps of each engine after 64 cached tokens: ms per step in
    products, attention and the rest (self CPU time)."""
    from torch.profiler import ProfilerActivity, profile
    from transformers import DynamicCache

    model, prompt = target.model, torch.tensor([ids[:64]])
    step = torch.tensor([ids[64 : 64 + k] if len(ids) >= 64 + k else ids[:k]])  # [1, k]
    apply_layout(model, ours_layout)
    decoder.reset(1, 128)
    decoder.forward(prompt, logits="none")

    def ours(n: int) -> None:
        hidden = decoder.forward(step[:, :n], logits="none").hidden
        decoder.head(hidden[:, :1] if decoder.lazy_head or n == 1 else hidden)  # a lazy head: the first row
        decoder.truncate(prompt.shape[1])

    cache = DynamicCache(config=model.config)

    def hf(n: int) -> None:
        with torch.inference_mode():
            model(input_ids=step[:, :n], cache=cache, use_cache=True, logits_to_keep=n)
        cache.crop(-n)

    rows = []
    for engine, fn in (("specbench", ours), ("transformers", hf)):
        if engine == "transformers":
            HF_LAYOUTS[hf_layout](model)
            with torch.inference_mode():
                model(input_ids=prompt, cache=cache, use_cache=True, logits_to_keep=1)
        for n in (1, k):
            for _ in range(2):
                fn(n)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                start = time.perf_counter()
                for _ in range(5):
                    fn(n)
                wall = (time.perf_counter() - start) / 5
            events = prof.key_averages()
            self_ms = {e.key: e.self_cpu_time_total / 1e3 / 5 for e in events}
            total = sum(self_ms.values())
            products = sum(self_ms.get(op, 0.0) for op in PRODUCT_OPS)
            attention = sum(self_ms.get(op, 0.0) for op in ATTENTION_OPS)
            rows.append(
                {
                    "engine": engine,
                    "k": n,
                    "wall_ms": wall * 1e3,
                    "total_ms": total,
                    "products_ms": products,
                    "attention_ms": attention,
                    "calls": sum(e.count for e in events) / 5,
                }
            )
    return rows


def bench_pair(
    name: str,
    gamma: int,
    new_tokens: int,
    prompts: int,
    repeats: int,
    dtype: str,
    profile_steps: bool = False,
    steps: Steps | None = None,
) -> dict:
    """One pair in one dtype; ``steps`` hears of each phase and of every timed call (the progress lines)."""
    target_name, drafter_name, draft_model_name = PAIRS[name]
    say = steps.say if steps is not None else (lambda text: None)
    say(f"{name} {dtype}: loading {target_name}")
    target = load_model(target_name, dtype=dtype)
    workload = load_workload("humaneval", count=prompts, seed=1)
    prompt_ids = [encode_conversation(target.tokenizer, list(p.turns[:1]), chat=False) for p in workload.prompts]
    # specbench: the layout probe on this machine, for verify steps of γ + 1 tokens (fresh, not from the cache)
    decoder = NativeDecoder(target.model)
    say(f"{name} {dtype}: measuring specbench's CPU layouts (the layout probe)")
    choice = choose_layout({dtype: decoder}, gamma + 1, target.weights_sha256 or target_name, use_cache=False)
    ours_layout = choice.layout
    say(f"{name} {dtype}: transformers' faster layout")
    hf_layout, hf_speeds = fastest_hf_layout(target.model, prompt_ids[0][:32], 16)
    if catalogue.get(drafter_name).transformers == "assistant":  # transformers runs it as an assistant model
        draft = load_model(draft_model_name, dtype=dtype)
        HF_LAYOUTS[hf_layout](draft.model)  # the assistant (our drafter loads its own copy of the model)
        draft.model.generation_config.num_assistant_tokens = gamma
        draft.model.generation_config.num_assistant_tokens_schedule = "constant"
        draft.model.generation_config.assistant_confidence_threshold = 0.0
        hf_spec = dict(assistant_model=draft.model)
        ours = make_drafter("draft-model", target, {"model": draft_model_name}, dtype=dtype)
    else:
        hf_spec = dict(prompt_lookup_num_tokens=gamma, max_matching_ngram_size=3)
        ours = make_drafter("ngram", target, {"n_min": 1, "n_max": 3})
    base_engine = SpeculativeEngine(target, None, gamma=0, decoder=decoder)
    spec_engine = SpeculativeEngine(target, ours, gamma=gamma, decoder=decoder)

    def ours(engine):
        def run(ids):
            result = engine.generate(ids, new_tokens)
            run.tau = result.tau  # tokens per target forward, for the table
            return result.tokens

        return run

    methods = {
        "transformers generate": (lambda ids: hf_generate(target.model, ids, new_tokens), "hf"),
        f"transformers assisted ({drafter_name}, γ={gamma})": (
            lambda ids: hf_generate(target.model, ids, new_tokens, **hf_spec),
            "hf",
        ),
        "specbench target-only": (ours(base_engine), "ours"),
        f"specbench {drafter_name} γ={gamma}": (ours(spec_engine), "ours"),
    }

    def relayout(engine: str) -> None:  # untimed; a no-op when the layout is already in place
        if engine == "hf":
            HF_LAYOUTS[hf_layout](target.model)
        else:
            apply_layout(target.model, ours_layout)

    for label, (fn, engine) in methods.items():  # one untimed call per method
        say(f"{name} {dtype}: untimed first call · {label}")
        relayout(engine)
        fn(prompt_ids[0])
    labels = list(methods)
    tokens = {label: [0] * repeats for label in labels}
    seconds = {label: [0.0] * repeats for label in labels}
    identical = dict.fromkeys(labels, True)
    taus = {label: [] for label in labels}
    same_engine = dict.fromkeys(labels, True)
    for repeat in range(repeats):
        order = labels[repeat % len(labels) :] + labels[: repeat % len(labels)]  # rotated per repeat
        for ids in prompt_ids:
            outputs = {}
            for label in order:  # interleaved per prompt
                if steps is not None:
                    steps.update(None, f"{name} {dtype}: repeat {repeat + 1}/{repeats} · {label}")
                fn, engine = methods[label]
                relayout(engine)
                start = time.perf_counter()
                outputs[label] = fn(ids)
                seconds[label][repeat] += time.perf_counter() - start
                tokens[label][repeat] += len(outputs[label])
                if hasattr(fn, "tau"):
                    taus[label].append(fn.tau)
            for i, label in enumerate(labels):
                identical[label] &= outputs[label] == outputs[labels[0]]
                same_engine[label] &= outputs[label] == outputs[labels[0 if i < 2 else 2]]
    speeds = {label: [t / s for t, s in zip(tokens[label], seconds[label])] for label in labels}
    if profile_steps:
        say(f"{name} {dtype}: profiling decode and verify steps")
    profiled = step_profile(target, decoder, ours_layout, hf_layout, prompt_ids[0], gamma + 1) if profile_steps else []
    return {
        "pair": name,
        "dtype": dtype,
        "labels": labels,
        "speeds": speeds,
        "identical": identical,
        "taus": taus,
        "profile": profiled,
        "same_engine": same_engine,
        "ours_layout": choice.summary(),
        "probe_s": choice.probe_s,
        "candidates": choice.candidates,
        "verify_tokens": gamma + 1,
        "hf_layout": hf_layout,
        "hf_speeds": hf_speeds,
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


def print_candidates(candidates, k: int) -> None:
    """The layout probe's measurements: what each candidate costs here and whether its verify rows are
    bit-identical to decode rows (required in 16 bits; not checked in float32)."""

    def ms(value) -> str:
        return "-" if value is None else f"{value * 1e3:.1f}"

    def flag(value) -> str:
        return "-" if value is None else ("yes" if value else "no")

    print(
        f"| layout probe: dtype · layout | decode ms | verify({k}) ms | head 1 row / {k} rows ms | prefill "
        "16-bit / fp32 ms | rows exact | k-row head exact | score ms | note |"
    )
    print("|---|---:|---:|---:|---:|---|---|---:|---|")
    for c in candidates:
        score = c.score(k)
        print(
            f"| {c.dtype} · {c.layout} | {ms(c.decode_s)} | {ms(c.verify_s)} | {ms(c.head_row_s)} / "
            f"{ms(c.head_rows_s)} | {ms(c.prefill_s)} / {ms(c.prefill_upcast_s)} | {flag(c.exact_rows)} | "
            f"{flag(c.exact_head)} | {'-' if score == float('inf') else f'{score * 1e3:.1f}'} | {c.dropped or ''} |"
        )
    print()


def print_result(result: dict, repeats: int) -> None:
    labels, speeds = result["labels"], result["speeds"]
    plain, assisted = speeds[labels[0]], speeds[labels[1]]
    print(f"\n### {result['pair']} · {result['dtype']}")
    print(f"specbench's layout ({result['dtype']}, probe {result['probe_s']:.1f} s): {result['ours_layout']}")
    hf = ", ".join(f"{n} {v:.1f} tok/s" for n, v in result["hf_speeds"].items())
    print(f"transformers' layout: {result['hf_layout']} (warm-up: {hf})\n")
    print_candidates(result["candidates"], result["verify_tokens"])
    print(
        f"| method | tokens/s, median [min–max] of {repeats} | vs assisted | vs generate | τ | = transformers "
        "| = own target-only |"
    )
    print("|---|---:|---:|---:|---:|---|---|")
    for label in labels:
        mine = speeds[label]
        vs_assisted = [a / b for a, b in zip(mine, assisted)]
        vs_plain = [a / b for a, b in zip(mine, plain)]
        tau = f"{statistics.mean(result['taus'][label]):.2f}" if result["taus"][label] else "-"
        print(
            f"| {label} | {spread(mine)} | {spread(vs_assisted)}× | {spread(vs_plain)}× | {tau} | "
            f"{'yes' if result['identical'][label] else 'NO'} | {'yes' if result['same_engine'][label] else 'NO'} |"
        )
    if result["profile"]:
        print(
            "\n| profiled step (5 each) | ms per step | products ms | attention ms | rest ms | profiler events per step |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for row in result["profile"]:
            step = "decode" if row["k"] == 1 else f"verify({row['k']})"
            rest = row["total_ms"] - row["products_ms"] - row["attention_ms"]
            print(
                f"| {row['engine']} {step} | {row['wall_ms']:.1f} | {row['products_ms']:.1f} "
                f"({row['products_ms'] / row['total_ms']:.0%}) | {row['attention_ms']:.1f} | {rest:.1f} | "
                f"{row['calls']:.0f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", default="smollm2", help="comma list of: " + ", ".join(PAIRS))
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (at least 3)")
    parser.add_argument("--dtypes", default="fp32,bf16", help="comma list of fp32, bf16, fp16: every pair in each")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--profile", action="store_true", help="end with where each engine's steps spend their time")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3 (each ratio is printed as its range over the repeats)")
    if args.threads:
        torch.set_num_threads(args.threads)
    started, load_before = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load_average()
    results = []
    runs = [(name, dtype) for name in args.pairs.split(",") for dtype in args.dtypes.split(",")]
    timed_calls = len(runs) * args.repeats * args.prompts * 4  # four methods per prompt and repeat
    # progress while it runs (a line per call when piped: `make bench-engine > log` shows its pace), each
    # pair's table on stdout as soon as it is measured
    with Steps("bench-engine", total=timed_calls, stream=sys.stdout) as steps:
        for name, dtype in runs:
            try:
                results.append(
                    bench_pair(
                        name, args.gamma, args.new_tokens, args.prompts, args.repeats, dtype, args.profile, steps
                    )
                )
            except SpecbenchError as exc:
                print(f"skipping {name} {dtype}: {exc}", flush=True)
                continue
            print_result(results[-1], args.repeats)
            print(flush=True)
    print(f"\nCPU: {describe_cpu()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{started}; load average (1, 5, 15 min) before {load_before}, after {load_average()}")
    print(
        f"{args.prompts} HumanEval prompts × {args.new_tokens} new tokens, greedy, γ = {args.gamma}, "
        f"{args.repeats} interleaved repeats; tokens/s include prefill"
    )


if __name__ == "__main__":
    main()
