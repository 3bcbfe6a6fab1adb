"""How close the engine's decode and verify steps come to the memory-bandwidth bound.

A decode step must stream every weight once, so with B bytes of weights and a read bandwidth
of W bytes/s no forward can take less than B / W seconds. For each model this measures, in one
run: the machine's read bandwidth (CPU: timed reads of a large tensor; CUDA: the device's
copy bandwidth), the single-token decode time and the verify time for k = 1, 2, 4, 8 new
tokens (KV cache pre-filled), each in ms and as a fraction of the bound; then end-to-end
tokens/s of target-only decoding and of the best speculative configuration tried.

    python scripts/bench_roofline.py                 # SmolLM2-135M (+ the Qwen pair when pulled)
    python scripts/bench_roofline.py --write-docs    # also update docs/bench-engine.md (## Roofline)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

import torch

from specbench.cli.views.progress_lines import Steps
from specbench.engine.cpu.weight_layout import linear, single_row_weight
from specbench.engine.decoder import NativeDecoder
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.timing import DeviceClock
from specbench.errors import SpecbenchError
from specbench.models.prompting import encode_conversation
from specbench.models.resolve import load_model
from specbench.workloads.catalog import load_workload

CONTEXT = 256
K_VALUES = (1, 2, 4, 5, 8)


def read_bandwidth(device: torch.device, size_bytes: int = 1 << 30, repeats: int = 5) -> float:
    """Bytes/s of streaming reads over a tensor far larger than any cache: the best of a reduction
    (`sum`) and a matrix-vector product (the access pattern of a decode step), so the bound is
    what this machine's kernels can actually reach, not one kernel's shortfall."""
    clock = DeviceClock(device)
    x = torch.ones(size_bytes // 4, dtype=torch.float32, device=device)
    matrix = x.view(-1, 4096)  # [size/16 KiB, 4096]
    vector = torch.ones(4096, dtype=torch.float32, device=device)
    best = float("inf")
    for read in (lambda: x.sum(), lambda: matrix @ vector):
        read()
        for _ in range(repeats):
            t0 = clock.now()
            read()
            best = min(best, clock.now() - t0)
    return size_bytes / best


def weight_bytes(model) -> int:
    """Bytes a decode step reads: every parameter once (tied matrices once), minus the embedding
    table, of which a step reads only one row — unless it is also the LM head."""
    seen, total = set(), 0
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        if p is embed and embed.data_ptr() != head.data_ptr():
            continue
        total += p.numel() * p.element_size()
    return total


def step_ms(decoder: NativeDecoder, k: int, repeats: int, clock: DeviceClock) -> float:
    """Median ms of a step over k new tokens after CONTEXT cached tokens, as the engine runs it: on the
    CPU the forward without logits plus the LM head over the first row (decode's only row; the row a
    chain verification always computes — each further row it needs is one more `head_row_ms`); on a
    GPU the forward with every position's logits."""
    ids = torch.randint(100, 1000, (1, k), device=decoder.device)
    times = []
    for _ in range(repeats + 2):
        t0 = clock.now()
        if decoder.lazy_head:
            decoder.head(decoder.forward(ids, logits="none").hidden[:, :1])
        else:
            decoder.forward(ids, logits="all")
        times.append(clock.now() - t0)
        decoder.truncate(CONTEXT)
    return 1000 * statistics.median(times[2:])


def products_ms(model, repeats: int, clock: DeviceClock) -> float:
    """Median ms of a decode step's matrix products alone: every linear layer of the model once, in
    order, over one row, through the engine's own product (`weight_layout.linear`, with the single-row
    copies) — the step's floor with this machine's kernels, whatever the rest of the step costs."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = {
        m.in_features: torch.randn(1, m.in_features, device=m.weight.device, dtype=m.weight.dtype) for m in linears
    }
    times = []
    with torch.inference_mode():
        for _ in range(repeats + 2):
            t0 = clock.now()
            for m in linears:
                linear(inputs[m.in_features], m.weight, m.bias, single_row_weight(m))
            times.append(clock.now() - t0)
    return 1000 * statistics.median(times[2:])


def head_row_ms(decoder: NativeDecoder, repeats: int, clock: DeviceClock) -> float:
    """Median ms of the LM head over one row (final-norm hidden state)."""
    hidden = torch.randn(1, 1, decoder.model.config.hidden_size, device=decoder.device, dtype=decoder.dtype)
    times = []
    for _ in range(repeats + 2):
        t0 = clock.now()
        decoder.head(hidden)
        times.append(clock.now() - t0)
    return 1000 * statistics.median(times[2:])


def end_to_end(target, drafters: dict, prompts: list[list[int]], new_tokens: int) -> dict[str, float]:
    """tokens/s over the prompts for target-only and each (drafter, γ) configuration."""
    base = SpeculativeEngine(target, None, gamma=0)
    engines = {"target only": base}
    for label, (drafter, gamma) in drafters.items():
        engines[label] = SpeculativeEngine(target, drafter, gamma=gamma, decoder=base.decoder)
    for engine in engines.values():
        engine.generate(prompts[0], 8)
    totals = {label: [0, 0.0] for label in engines}
    for ids in prompts:
        for label, engine in engines.items():  # interleaved per prompt
            result = engine.generate(ids, new_tokens)
            totals[label][0] += result.decode_tokens
            totals[label][1] += result.decode_s
    return {label: tokens / seconds for label, (tokens, seconds) in totals.items()}


def bench_model(
    name: str, drafter_specs: list[tuple], device: str, bandwidth: float, args, say=lambda text: None
) -> dict:
    """One model's roofline rows; ``say`` hears of each phase (the progress lines)."""
    say(f"{name}: loading")
    target = load_model(name, device=device)
    clock = DeviceClock(device)
    decoder = NativeDecoder(target.model)
    decoder.reset(1, CONTEXT + 64)
    decoder.forward(torch.randint(100, 1000, (1, CONTEXT), device=decoder.device), logits="none")
    nbytes = weight_bytes(target.model)
    bound_ms = 1000 * nbytes / bandwidth
    say(f"{name}: decode and verify steps, LM head, linear products")
    steps = {k: step_ms(decoder, k, args.repeats, clock) for k in K_VALUES}
    head_ms = head_row_ms(decoder, args.repeats, clock)
    gemv_ms = products_ms(target.model, args.repeats, clock)
    workload = load_workload("humaneval", count=args.prompts, seed=3)
    prompts = [encode_conversation(target.tokenizer, list(p.turns[:1]), chat=False) for p in workload.prompts]
    drafters = {}
    for kind, params, gammas in drafter_specs:
        drafter = make_drafter(kind, target, params, device=device)
        for gamma in gammas:
            drafters[f"{kind} γ={gamma}"] = (drafter, gamma)
    say(f"{name}: end to end over {len(prompts)} prompts")
    speeds = end_to_end(target, drafters, prompts, args.new_tokens)
    best = max((k for k in speeds if k != "target only"), key=speeds.get)
    return {
        "model": name,
        "weight_gb": nbytes / 1e9,
        "bound_ms": bound_ms,
        "steps": steps,
        "head_ms": head_ms,
        "products_ms": gemv_ms,
        "target_only": speeds["target only"],
        "best": best,
        "best_tps": speeds[best],
        "all": speeds,
    }


def render(results: list[dict], bandwidth: float, device: str, load: str, command: str) -> str:
    lines = [
        f"Machine: {platform.processor() or platform.machine()} ({device}), read bandwidth "
        f"{bandwidth / 1e9:.1f} GB/s measured; load average before the run: {load}.",
        "",
        f"Command: `{command}`",
        "",
        "A step = the forward over k new tokens after 256 cached, plus the LM head over its first row "
        "(decode's only row; a chain verification computes one more head row per accepted draft, "
        'the "head row" column). ms (ratio to decode). "products alone": a decode step\'s matrix '
        "products and nothing else, every linear layer once over one row in the engine's own form: "
        "the floor these kernels set for a decode step.",
        "",
        "| model | weights | bound/step | products alone | decode k=1 | verify k=2 | verify k=4 | verify k=5 | verify k=8 | head row | "
        "k=1 of bound | target-only tok/s | best speculative | tok/s | speedup |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r["steps"]
        lines.append(
            f"| {r['model']} | {r['weight_gb']:.2f} GB | {r['bound_ms']:.1f} ms | {r['products_ms']:.1f} ms "
            f"({r['bound_ms'] / r['products_ms']:.0%} of bound) | {s[1]:.1f} ms | "
            f"{s[2]:.1f} ms ({s[2] / s[1]:.2f}×) | {s[4]:.1f} ms ({s[4] / s[1]:.2f}×) | {s[5]:.1f} ms ({s[5] / s[1]:.2f}×) | "
            f"{s[8]:.1f} ms ({s[8] / s[1]:.2f}×) | {r['head_ms']:.1f} ms | {r['bound_ms'] / s[1]:.0%} | {r['target_only']:.1f} | "
            f"{r['best']} | {r['best_tps']:.1f} | {r['best_tps'] / r['target_only']:.2f}× |"
        )
    lines += ["", "All configurations (tokens/s, decode only, greedy, HumanEval prompts):", ""]
    for r in results:
        lines.append(f"* {r['model']}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["all"].items()))
    return "\n".join(lines) + "\n"


def write_section(text: str, heading: str = "## Roofline") -> None:
    path = Path(__file__).resolve().parents[1] / "docs" / "bench-engine.md"
    doc = path.read_text()
    start = doc.index(heading) + len(heading)
    end = doc.find("\n## ", start)
    end = len(doc) if end < 0 else end
    path.write_text(doc[:start] + "\n\n" + text + doc[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    device = torch.device(args.device)
    bandwidth = read_bandwidth(device)
    plan = [
        ("smollm2-135m", [("ngram", {}, (2, 4, 6))]),
        ("qwen2.5-coder-1.5b", [("draft-model", {"model": "qwen2.5-coder-0.5b"}, (2, 3, 4, 5)), ("ngram", {}, (4,))]),
    ]
    results = []
    # a line per phase on stderr while it runs (piped: where it is and its pace), a bar on a terminal
    with Steps("bench-roofline", total=len(plan)) as progress:
        for name, drafters in plan:
            try:
                results.append(bench_model(name, drafters, args.device, bandwidth, args, progress.say))
            except SpecbenchError as exc:
                print(f"skipping {name}: {exc}", file=sys.stderr)
            progress.update()
    command = "make bench-roofline"
    text = render(results, bandwidth, args.device, f"{load:.2f}", command)
    print(text)
    if args.write_docs:
        write_section(text)


if __name__ == "__main__":
    main()
