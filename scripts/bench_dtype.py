"""fp32 vs bf16 weights on the CPU, side by side in one run: decode, verify(k), prefill, end to end.

For each variant the same model is loaded in that dtype and driven by the engine's native
decoder. Timings are interleaved across the variants (one forward of each in turn), so load from
other jobs on a shared machine falls on all of them alike:

* verify(k): one forward over k new tokens after a 256-token cached prefix, logits of every
  position (k = 1 is a decode step); median of --repeats;
* prefill: the prompt below (chat template) and 256 tokens, into an empty cache;
* end to end: target-only and prompt lookup (ngram, γ = 4) greedy, --new-tokens fixed-length
  outputs on that prompt and two HumanEval prompts; decode tokens/s, and whether the speculative
  output equals the same dtype's target-only output (the engine's losslessness at that dtype).

    python scripts/bench_dtype.py                    # SmolLM2-135M, fp32 and bf16
    python scripts/bench_dtype.py --before --profile # + bf16 as main ran it, + torch.profiler top ops

``--before`` adds "bf16 before": bf16 weights stored column-major as main's decoder stored every
CPU weight, bf16 attention and KV cache, neither the float32 prefill nor the row-by-row LM head
(a few forwards only: it is 4-17x slower). ``--profile`` prints the operators with the most self CPU time over 5 decode
steps and 5 verify(4) steps of each variant.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from specbench.cli.views.progress_lines import Steps
from specbench.engine.cpu.weight_layout import prefer_column_major
from specbench.engine.decoder import NativeDecoder
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.models.prompting import encode_conversation
from specbench.models.resolve import load_model
from specbench.workloads.catalog import load_workload

CONTEXT = 256
K_VALUES = (1, 2, 4, 8)
PROMPT = "Write a python function that sorts a list of integers using merge sort."


def make_variant(name: str, model_name: str):
    dtype = "fp32" if name == "fp32" else "bf16"
    target = load_model(model_name, dtype=dtype)
    decoder = NativeDecoder(target.model)
    if name == "bf16 before":  # main's behaviour: every CPU weight column-major, no 16-bit special cases
        prefer_column_major(target.model)
        decoder.reduced_cpu = decoder.lazy_head = decoder.row_attention = False
        decoder.cache_dtype = decoder.dtype  # bf16 KV cache and attention
    return target, decoder


def fill_context(decoder: NativeDecoder) -> None:
    """CONTEXT random tokens into an empty cache (for "bf16 before" through the float32 prefill too:
    its own 16-bit prefill of 256 tokens takes tens of seconds and is not what is timed here)."""
    reduced = decoder.reduced_cpu
    decoder.reduced_cpu = decoder.dtype != torch.float32
    decoder.reset(1, CONTEXT + 64)
    decoder.forward(torch.randint(100, 1000, (1, CONTEXT)), logits="none")
    decoder.reduced_cpu = reduced


def interleaved_ms(fns: dict, repeats: int, reset: dict) -> dict[str, float]:
    times = {name: [] for name in fns}
    for i in range(repeats + 1):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if i:  # the first round warms up
                times[name].append(time.perf_counter() - start)
            reset[name]()
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def steps(decoders: dict, ks: dict, repeats: dict) -> dict:
    out = {name: {} for name in decoders}
    for k in K_VALUES:
        names = [n for n in decoders if k in ks[n]]
        ids = torch.randint(100, 1000, (1, k))
        for name in names:
            fill_context(decoders[name])
        reps = min(repeats[n] for n in names)
        ms = interleaved_ms(
            {n: (lambda d=decoders[n], ids=ids: d.forward(ids, logits="all")) for n in names},
            reps,
            {n: (lambda d=decoders[n]: d.truncate(CONTEXT)) for n in names},
        )
        for name in names:
            out[name][k] = ms[name]
    return out


def heads(decoders: dict, repeats: int) -> dict:
    """LM head alone over k rows: one call over all k rows vs k single-row calls (ms)."""
    out = {name: {} for name in decoders if name != "bf16 before"}
    for k in K_VALUES:
        hidden = {n: torch.randn(1, k, decoders[n].model.config.hidden_size).to(decoders[n].dtype) for n in out}
        fns = {}
        for n in out:
            fns[(n, "together")] = lambda d=decoders[n], h=hidden[n]: d.head(h)
            fns[(n, "one by one")] = lambda d=decoders[n], h=hidden[n], k=k: [d.head(h[:, i : i + 1]) for i in range(k)]
        ms = interleaved_ms(fns, repeats, {key: (lambda: None) for key in fns})
        for (n, how), value in ms.items():
            out[n].setdefault(how, {})[k] = value
    return out


def prefills(decoders: dict, prompt_ids: list[int], repeats: int) -> dict:
    out = {name: {} for name in decoders}
    for label, ids in (
        (f"prompt ({len(prompt_ids)} tokens)", torch.tensor([prompt_ids])),
        (f"{CONTEXT} tokens", torch.randint(100, 1000, (1, CONTEXT))),
    ):
        # "bf16 before": the prompt only, once (its 16-bit prefill takes seconds per 40 tokens)
        names = [n for n in decoders if n != "bf16 before" or label.startswith("prompt")]
        fns = {
            n: (lambda d=decoders[n], ids=ids: (d.reset(1, ids.shape[1] + 8), d.forward(ids, logits="last")))
            for n in names
        }
        reps = 1 if "bf16 before" in names else repeats
        ms = interleaved_ms(fns, reps, {n: (lambda: None) for n in names})
        for name in names:
            out[name][label] = ms[name]
    return out


def end_to_end(targets: dict, decoders: dict, prompts: list[list[int]], new_tokens: int) -> dict:
    engines = {}
    for name, target in targets.items():
        base = SpeculativeEngine(target, None, gamma=0, decoder=decoders[name])
        spec = SpeculativeEngine(target, make_drafter("ngram", target), gamma=4, decoder=decoders[name])
        base.generate(prompts[0], 8)
        spec.generate(prompts[0], 8)
        engines[name] = (base, spec)
    stats = {
        name: {"target only": [0, 0.0, 0.0], "ngram γ=4": [0, 0.0, 0.0], "identical": 0, "outputs": []}
        for name in targets
    }
    for ids in prompts:
        for name, (base, spec) in engines.items():
            results = {}
            for label, engine in (("target only", base), ("ngram γ=4", spec)):
                result = engine.generate(ids, new_tokens, stop_at_eos=False)
                row = stats[name][label]
                row[0] += result.decode_tokens
                row[1] += result.decode_s
                row[2] += result.prefill_s
                results[label] = result.tokens
            stats[name]["identical"] += results["target only"] == results["ngram γ=4"]
            stats[name]["outputs"].append(results["target only"])
    return stats


def profile_table(decoder: NativeDecoder, k: int, rows: int = 8) -> str:
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(100, 1000, (1, k))
    fill_context(decoder)
    decoder.forward(ids, logits="all")
    decoder.truncate(CONTEXT)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            decoder.forward(ids, logits="all")
            decoder.truncate(CONTEXT)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--before", action="store_true", help="add bf16 as main ran it (slow; few forwards)")
    parser.add_argument("--profile", action="store_true", help="torch.profiler top ops per variant")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    names = ["fp32", "bf16"] + (["bf16 before"] if args.before else [])
    # a line per phase while it runs (piped: `make bench-dtype > log` shows where it is), a bar on a terminal
    with Steps("bench-dtype", total=len(names) + 4, stream=sys.stdout) as progress:
        loaded = {}
        for name in names:
            progress.update(None, f"loading {args.model} ({name})")
            loaded[name] = make_variant(name, args.model)
        targets = {name: t for name, (t, _) in loaded.items()}
        decoders = {name: d for name, (_, d) in loaded.items()}
        tokenizer = targets["fp32"].tokenizer
        prompt_ids = encode_conversation(tokenizer, [PROMPT])
        ks = {name: ((1, 4) if name == "bf16 before" else K_VALUES) for name in names}
        repeats = {name: (2 if name == "bf16 before" else args.repeats) for name in names}
        progress.update(None, "verify(k) steps")
        step = steps(decoders, ks, repeats)
        progress.update(None, "prefills")
        prefill = prefills(decoders, prompt_ids, max(1, args.repeats // 2))
        progress.update(None, "LM heads")
        head = heads(decoders, args.repeats)
        humaneval = load_workload("humaneval", count=2, seed=3)
        prompts = [prompt_ids] + [
            encode_conversation(tokenizer, list(p.turns[:1]), chat=False) for p in humaneval.prompts
        ]
        fast = {n: targets[n] for n in names if n != "bf16 before"}
        progress.update(None, "end to end")
        e2e = end_to_end(fast, decoders, prompts, args.new_tokens)
    load_after = os.getloadavg()

    print(
        f"{args.model}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; layouts: "
        + ", ".join(f"{n} {'column-major' if n == 'bf16 before' else decoders[n].layout}" for n in names)
    )
    print("\nverify(k): ms per forward over k new tokens after 256 cached (ratio to k = 1 of the same variant)\n")
    print("| variant | " + " | ".join(f"k={k}" for k in K_VALUES) + " | " + " | ".join(prefill["fp32"]) + " |")
    print("|---|" + "---:|" * (len(K_VALUES) + len(prefill["fp32"])))
    for name in names:
        s = step[name]
        cells = [f"{s[k]:.1f} ({s[k] / s[1]:.2f}×)" if k in s else "–" for k in K_VALUES]
        cells += [f"{prefill[name][label]:.0f} ms" if label in prefill[name] else "–" for label in prefill["fp32"]]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        "\nbf16 ÷ fp32 time: "
        + ", ".join(f"k={k} {step['bf16'][k] / step['fp32'][k]:.2f}" for k in K_VALUES)
        + ", "
        + ", ".join(
            f"prefill {label} {prefill['bf16'][label] / prefill['fp32'][label]:.2f}" for label in prefill["fp32"]
        )
    )
    print("\nLM head alone (ms) over k rows: one call for all rows / k calls of one row\n")
    print("| variant | " + " | ".join(f"k={k}" for k in K_VALUES) + " |")
    print("|---|" + "---:|" * len(K_VALUES))
    for name, row in head.items():
        print(
            f"| {name} | "
            + " | ".join(f"{row['together'][k]:.1f} / {row['one by one'][k]:.1f}" for k in K_VALUES)
            + " |"
        )
    print(
        f"\nend to end, greedy, {len(prompts)} prompts × {args.new_tokens} tokens (decode tokens/s; prefill s "
        "summed over the prompts)\n"
    )
    print("| variant | target only tok/s | ngram γ=4 tok/s | speedup | prefill s | ngram output = target-only |")
    print("|---|---:|---:|---:|---:|---|")
    for name, row in e2e.items():
        base, spec = row["target only"], row["ngram γ=4"]
        base_tps, spec_tps = base[0] / base[1], spec[0] / spec[1]
        print(
            f"| {name} | {base_tps:.1f} | {spec_tps:.1f} | {spec_tps / base_tps:.2f}× | {base[2]:.2f} | "
            f"{row['identical']}/{len(prompts)} |"
        )
    same = sum(a == b for a, b in zip(e2e["fp32"]["outputs"], e2e["bf16"]["outputs"]))
    print(
        f"\nbf16 target-only output = fp32 target-only output on {same}/{len(prompts)} prompts "
        "(not expected: different rounding)"
    )
    if args.profile:
        for name in names:
            for k in (1,) if name == "bf16 before" else (1, 4):
                print(f"\n{name}, {'decode' if k == 1 else f'verify({k})'}, 5 steps, top ops by self CPU time:")
                print(profile_table(decoders[name], k))


if __name__ == "__main__":
    main()
