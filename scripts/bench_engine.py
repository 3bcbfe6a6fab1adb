"""specbench's engine against transformers on the same models, prompts and γ (greedy).

For each pair it times, in one run and one process:
  * transformers `generate` (target only),
  * transformers assisted generation — `assistant_model` with a constant schedule of γ
    tokens for a draft model, `prompt_lookup_num_tokens=γ` for prompt lookup,
  * the specbench engine (target only, and speculative with the same drafter and γ),
and prints tokens/s (generated tokens ÷ wall time of the whole call, prefill included), the
ratios, and whether every output is identical to transformers' greedy output. Both engines run
on the same target model object, each with its fastest CPU weight layout, set (untimed) before each of
its calls: transformers' ``F.linear`` is fastest on column-major fp32 weights (an NN GEMM), specbench's
decoder uses `apply_cpu_layout` (row-major weight-first products, column-major LM head and single-row
copies; `specbench.engine.weight_layout`); in bf16 both use row-major. `--dtypes fp32,bf16` runs every pair in both dtypes in the same run ("= transformers": the
output equals transformers' greedy output in that dtype; "= own target-only": equals the same engine's
target-only output — the lossless check, which must hold in bf16 too).

    python scripts/bench_engine.py                    # SmolLM2-135M + prompt lookup (and the Qwen pair if pulled)
    python scripts/bench_engine.py --pairs qwen --gamma 5 --new-tokens 128
"""

from __future__ import annotations

import argparse
import time

import torch

from specbench.catalogue import drafters as catalogue
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.weight_layout import REDUCED_PRECISION, apply_cpu_layout, prefer_column_major
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


def bench_pair(name: str, gamma: int, new_tokens: int, prompts: int, dtype: str = "fp32") -> list[dict]:
    target_name, drafter_name, draft_model_name = PAIRS[name]
    target = load_model(target_name, dtype=dtype)
    on_cpu = target.model.device.type == "cpu"
    # transformers' fastest CPU layout: column-major in fp32 (F.linear's NN GEMM), row-major in 16 bits
    hf_layout = prefer_column_major if on_cpu and target.model.dtype not in REDUCED_PRECISION else apply_cpu_layout
    workload = load_workload("humaneval", count=prompts, seed=1)
    prompt_ids = [encode_conversation(target.tokenizer, list(p.turns[:1]), chat=False) for p in workload.prompts]
    if catalogue.get(drafter_name).transformers == "assistant":  # transformers runs it as an assistant model
        draft = load_model(draft_model_name, dtype=dtype)
        if on_cpu:
            hf_layout(draft.model)  # the assistant (our drafter loads its own copy of the model)
        draft.model.generation_config.num_assistant_tokens = gamma
        draft.model.generation_config.num_assistant_tokens_schedule = "constant"
        draft.model.generation_config.assistant_confidence_threshold = 0.0
        hf_spec = dict(assistant_model=draft.model)
        ours = make_drafter("draft-model", target, {"model": draft_model_name}, dtype=dtype)
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
    layouts = dict(zip(runs, (hf_layout, hf_layout, apply_cpu_layout, apply_cpu_layout)))
    for label, fn in runs.items():  # warm-up, untimed
        if on_cpu:
            layouts[label](target.model)
        fn(prompt_ids[0][:32])
    rows = {label: {"tokens": 0, "seconds": 0.0, "identical": True, "same_engine": True} for label in runs}
    labels = list(runs)
    for ids in prompt_ids:
        outputs = {}
        for label, fn in runs.items():  # interleaved per prompt: drift hits every method alike
            if on_cpu:
                layouts[label](target.model)  # untimed; a no-op when the layout is already in place
            tokens, seconds = timed(lambda: fn(ids))
            outputs[label] = tokens
            rows[label]["tokens"] += len(tokens)
            rows[label]["seconds"] += seconds
        for i, label in enumerate(labels):
            # identical: = transformers' greedy output; same_engine: = the same engine's target-only output
            # (the lossless check; in bf16 the two engines may round differently, fp32 they agree)
            rows[label]["identical"] &= outputs[label] == outputs[labels[0]]
            rows[label]["same_engine"] &= outputs[label] == outputs[labels[0 if i < 2 else 2]]
    out = []
    for label, r in rows.items():
        out.append({"pair": name, "dtype": dtype, "method": label, "tokens_per_s": r["tokens"] / r["seconds"],
                    "identical": r["identical"], "same_engine": r["same_engine"], "tokens": r["tokens"]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", default="smollm2,qwen", help="comma list of: " + ", ".join(PAIRS))
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--dtypes", default="fp32", help="comma list of fp32, bf16: every pair in each, in one run")
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    results = []
    for name in args.pairs.split(","):
        for dtype in args.dtypes.split(","):
            try:
                results.extend(bench_pair(name, args.gamma, args.new_tokens, args.prompts, dtype))
            except SpecbenchError as exc:
                print(f"skipping {name} {dtype}: {exc}")
    print(f"\n{'pair':8} {'dtype':5} {'method':48} {'tokens/s':>9} {'vs generate':>12} {'vs assisted':>12}  "
          "= transformers  = own target-only")
    for name, dtype in dict.fromkeys((r["pair"], r["dtype"]) for r in results):
        rows = [r for r in results if (r["pair"], r["dtype"]) == (name, dtype)]
        plain, assisted = rows[0]["tokens_per_s"], rows[1]["tokens_per_s"]
        for r in rows:
            print(f"{name:8} {dtype:5} {r['method']:48} {r['tokens_per_s']:9.2f} {r['tokens_per_s'] / plain:11.2f}x "
                  f"{r['tokens_per_s'] / assisted:11.2f}x  {'yes' if r['identical'] else 'NO':>14}  "
                  f"{'yes' if r['same_engine'] else 'NO':>16}")


if __name__ == "__main__":
    main()
