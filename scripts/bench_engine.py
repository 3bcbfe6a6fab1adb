"""specbench's engine against transformers on the same models, prompts and γ (greedy).

For each pair it times, in one run and one process:
  * transformers `generate` (target only),
  * transformers assisted generation — `assistant_model` with a constant schedule of γ
    tokens for a draft model, `prompt_lookup_num_tokens=γ` for prompt lookup,
  * the specbench engine (target only, and speculative with the same drafter and γ),
and prints tokens/s (generated tokens ÷ wall time of the whole call, prefill included), the
ratios, and whether every output is identical to transformers' greedy output. Both engines run
on the same model objects with the same weight layout (on the CPU: column-major linear weights,
`specbench.engine.weight_layout`, which speeds up transformers' forward as much as ours).

    python scripts/bench_engine.py                    # SmolLM2-135M + prompt lookup (and the Qwen pair if pulled)
    python scripts/bench_engine.py --pairs qwen --gamma 5 --new-tokens 128
"""

from __future__ import annotations

import argparse
import time

import torch

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.weight_layout import prefer_column_major
from specbench.errors import SpecbenchError
from specbench.models.resolve import load_model
from specbench.models.prompting import encode_conversation
from specbench.measure.workloads import load_workload

PAIRS = {
    "smollm2": ("smollm2-135m", "ngram", None),
    "qwen": ("qwen2.5-coder-1.5b", "draft-model", "qwen2.5-coder-0.5b"),
}


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def hf_generate(model, ids, new_tokens, **kwargs):
    out = model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False, **kwargs)
    return out[0, len(ids):].tolist()


def bench_pair(name: str, gamma: int, new_tokens: int, prompts: int) -> list[dict]:
    target_name, drafter_name, draft_model_name = PAIRS[name]
    target = load_model(target_name)
    if target.model.device.type == "cpu":
        prefer_column_major(target.model)  # what our decoder does; transformers gets it too
    workload = load_workload("humaneval", count=prompts, seed=1)
    prompt_ids = [encode_conversation(target.tokenizer, list(p.turns[:1]), chat=False) for p in workload.prompts]
    if drafter_name == "draft-model":
        draft = load_model(draft_model_name)
        if draft.model.device.type == "cpu":
            prefer_column_major(draft.model)  # the assistant gets the layout our drafter's decoder uses
        draft.model.generation_config.num_assistant_tokens = gamma
        draft.model.generation_config.num_assistant_tokens_schedule = "constant"
        draft.model.generation_config.assistant_confidence_threshold = 0.0
        hf_spec = dict(assistant_model=draft.model)
        ours = make_drafter("draft-model", target, {"model": draft_model_name})
    else:
        hf_spec = dict(prompt_lookup_num_tokens=gamma, max_matching_ngram_size=3)
        ours = make_drafter("ngram", target, {"n_min": 1, "n_max": 3})
    base_engine = SpeculativeEngine(target, None, gamma=0)
    spec_engine = SpeculativeEngine(target, ours, gamma=gamma, decoder=base_engine.decoder)
    runs = {
        "transformers generate": lambda ids: hf_generate(target.model, ids, new_tokens),
        f"transformers assisted ({drafter_name}, γ={gamma})": lambda ids: hf_generate(target.model, ids, new_tokens,
                                                                                      **hf_spec),
        "specbench target-only": lambda ids: base_engine.generate(ids, new_tokens).tokens,
        f"specbench {drafter_name} γ={gamma}": lambda ids: spec_engine.generate(ids, new_tokens).tokens,
    }
    for fn in runs.values():  # warm-up, untimed
        fn(prompt_ids[0][:32])
    rows = {label: {"tokens": 0, "seconds": 0.0, "identical": True} for label in runs}
    for ids in prompt_ids:
        reference = None
        for label, fn in runs.items():  # interleaved per prompt: drift hits every method alike
            tokens, seconds = timed(lambda: fn(ids))
            reference = reference if reference is not None else tokens
            rows[label]["tokens"] += len(tokens)
            rows[label]["seconds"] += seconds
            rows[label]["identical"] &= tokens == reference
    out = []
    for label, r in rows.items():
        out.append({"pair": name, "method": label, "tokens_per_s": r["tokens"] / r["seconds"],
                    "identical": r["identical"], "tokens": r["tokens"]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", default="smollm2,qwen", help="comma list of: " + ", ".join(PAIRS))
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prompts", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    results = []
    for name in args.pairs.split(","):
        try:
            results.extend(bench_pair(name, args.gamma, args.new_tokens, args.prompts))
        except SpecbenchError as exc:
            print(f"skipping {name}: {exc}")
    print(f"\n{'pair':8} {'method':48} {'tokens/s':>9} {'vs generate':>12} {'vs assisted':>12}  identical")
    for name in dict.fromkeys(r["pair"] for r in results):
        rows = [r for r in results if r["pair"] == name]
        plain, assisted = rows[0]["tokens_per_s"], rows[1]["tokens_per_s"]
        for r in rows:
            print(f"{name:8} {r['method']:48} {r['tokens_per_s']:9.2f} {r['tokens_per_s'] / plain:11.2f}x "
                  f"{r['tokens_per_s'] / assisted:11.2f}x  {'yes' if r['identical'] else 'NO'}")


if __name__ == "__main__":
    main()
