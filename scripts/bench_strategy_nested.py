"""Nested speculation vs sequential drafting, per γ: tokens/s, hit rate, drafting hidden.

For every γ the same prompts run three ways, interleaved prompt by prompt so that load from other
jobs falls on all of them alike: target only, sequential speculation (draft, then verify) and
nested speculation (`specbench.engine.strategies.nested`: while the target verifies round r, the drafter
prepares round r + 1's draft for the P likeliest outcomes). Greedy, fixed-length outputs.

Columns: decode tokens/s of each; nested ÷ sequential; the hit rate (rounds after a generation's
first that verified a prepared draft); drafting hidden (time of the used prepared drafts, spent
during verification) and drafting left on the critical path, as shares of decode time; the verify
phase of a nested round ÷ a sequential one's (1.0: the preparation ran truly in parallel; above:
it competed with the target for the cores or the round waited for it); whether every output
equals the target's.

    python scripts/bench_strategy_nested.py                 # SmolLM2-135M + its shipped EAGLE drafter
    python scripts/bench_strategy_nested.py --heavy         # Qwen2.5-Coder 1.5B + 0.5B draft model
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from specbench.cli.views.progress_lines import Steps
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.strategies.nested import NestedDriver
from specbench.models.prompting import encode_conversation
from specbench.models.resolve import load_model
from specbench.workloads.catalog import load_workload

PAIRS = {  # target, drafter type, drafter params
    "light": ("smollm2-135m", "eagle", {}),
    "heavy": ("qwen2.5-coder-1.5b", "draft-model", {"model": "qwen2.5-coder-0.5b"}),
}


def totals(results) -> dict:
    """Sums over a list of GenerationResult: tokens, seconds, rounds and the nested counters."""
    out = {"tokens": 0, "decode_s": 0.0, "draft_s": 0.0, "verify_s": 0.0, "rounds": 0, "hits": 0, "hidden_s": 0.0}
    for r in results:
        out["tokens"] += r.decode_tokens
        out["decode_s"] += r.decode_s
        out["draft_s"] += r.draft_s
        out["verify_s"] += r.verify_s
        out["rounds"] += len(r.rounds)
        out["hits"] += r.prepared_hits or 0
        out["hidden_s"] += r.draft_hidden_s or 0.0
    return out


def run(args) -> str:
    if args.threads:
        torch.set_num_threads(args.threads)
    target_name, drafter_type, params = PAIRS["heavy" if args.heavy else "light"]
    target = load_model(target_name)
    drafter = make_drafter(drafter_type, target, params)
    workload = load_workload(args.workload, count=args.prompts, seed=0)
    prompts = [encode_conversation(target.tokenizer, [p.turns[0]]) for p in workload.prompts]
    base = SpeculativeEngine(target, None, gamma=0)
    base.generate(prompts[0], 8, stop_at_eos=False)  # warm-up
    load_before = os.getloadavg()[0]
    reference = {}
    title = (
        f"{target_name} + {drafter_type}{params or ''}, {args.workload} × {len(prompts)} prompts, "
        f"{args.new_tokens} new tokens, greedy, P = {args.prepared}, torch threads {torch.get_num_threads()}"
    )
    header = (
        f"{'γ':>2} {'target':>8} {'seq':>8} {'nested':>8} {'nest/seq':>8} {'hit rate':>8} {'hidden':>7} "
        f"{'on path':>7} {'seq draft':>9} {'verify n/s':>10} {'identical':>9}"
    )
    lines = [title, header]
    # a line per prompt on stderr while it runs (piped: where it is and its pace), a bar on a terminal
    with Steps("bench-strategy-nested", total=len(args.gammas) * len(prompts)) as steps:
        for gamma in args.gammas:
            engines = {
                "target": base,
                "seq": SpeculativeEngine(target, drafter, gamma=gamma, decoder=base.decoder),
                "nested": SpeculativeEngine(
                    target, drafter, gamma=gamma, decoder=base.decoder, driver=NestedDriver(prepared=args.prepared)
                ),
            }
            for engine in engines.values():
                engine.generate(prompts[0], 8, stop_at_eos=False)  # warm-up
            runs = {name: [] for name in engines}
            for i, ids in enumerate(prompts):
                steps.say(f"γ {gamma}: prompt {i + 1}/{len(prompts)} (target, seq, nested)")
                for name, engine in engines.items():
                    runs[name].append(engine.generate(ids, args.new_tokens, stop_at_eos=False))
                reference[i] = runs["target"][-1].tokens
                steps.update()
            t = {name: totals(r) for name, r in runs.items()}
            tps = {name: v["tokens"] / v["decode_s"] for name, v in t.items()}
            nested, seq = t["nested"], t["seq"]
            hit_rate = nested["hits"] / max(1, nested["rounds"] - len(prompts))
            identical = all(r.tokens == reference[i] for name in ("seq", "nested") for i, r in enumerate(runs[name]))
            lines.append(
                f"{gamma:>2} {tps['target']:>8.2f} {tps['seq']:>8.2f} {tps['nested']:>8.2f} "
                f"{tps['nested'] / tps['seq']:>8.3f} {hit_rate:>8.2f} {nested['hidden_s'] / nested['decode_s']:>7.2f} "
                f"{nested['draft_s'] / nested['decode_s']:>7.2f} {seq['draft_s'] / seq['decode_s']:>9.2f} "
                f"{(nested['verify_s'] / nested['rounds']) / (seq['verify_s'] / seq['rounds']):>10.2f} "
                f"{'yes' if identical else 'NO':>9}"
            )
    lines.append(
        f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; "
        f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M:%S')}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heavy", action="store_true", help="Qwen2.5-Coder 1.5B target + 0.5B draft model (slow)")
    parser.add_argument("--gammas", type=lambda s: [int(g) for g in s.split(",")], default=[2, 3, 4, 5, 6])
    parser.add_argument("--prepared", type=int, default=2, help="outcomes prepared per round (P)")
    parser.add_argument("--workload", default="mt-bench")
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    print(run(parser.parse_args()))


if __name__ == "__main__":
    main()
