#!/usr/bin/env python
"""Held-out top-1 of the shipped SmolLM2-135M drafters on one common set of held-out sequences.

    python scripts/drafter_heldout.py generate --out HELDOUT          # once: 15 sequences (slow on a CPU)
    python scripts/drafter_heldout.py evaluate --heldout HELDOUT      # every shipped type
    python scripts/drafter_heldout.py evaluate --heldout HELDOUT --types eagle3,eagle3.1 --count 8
    python scripts/drafter_heldout.py evaluate --heldout HELDOUT --drafters drafters   # this tree's checkpoints

``generate`` answers the prompts the shipped drafters' training held out — the last 15 of the 300
kept ShareGPT train-split prompts of the shared corpus (docs/drafters.md, "The shipped SmolLM2-135M
drafters") — exactly as the corpus generator does (greedy, prompt-lookup speculation, 160 new
tokens), and stores their target features. A drafter trained on a shorter prefix of the same
corpus never saw them either, so every type is scored on the same unseen sequences.

``evaluate`` scores each checkpoint as training's held-out evaluation does
(`specbench.training.train.evaluate`): per head / unrolled step / module, the fraction of answer
positions whose drafted argmax equals the target's argmax over the full vocabulary (3 steps for
the unrolled types), and prints one markdown row per type.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

from specbench.engine.drafters import registry
from specbench.engine.drafters.checkpoints.checkpoint import read_checkpoint, resolve_checkpoint
from specbench.engine.drafters.networks.feature_layers import VocabHead
from specbench.engine.drafters.ngram import NgramDrafter
from specbench.engine.loop import SpeculativeEngine
from specbench.models.resolve import load_model
from specbench.training.data import (
    GENERATION,
    MAX_PROMPT_TOKENS,
    Corpus,
    Sequence,
    ensure_features,
    training_prompts,
)
from specbench.training.train import (
    collate,
    corpus_feature_layers,
    evaluate,
    load_examples,
    make_batches,
)
from specbench.workloads.catalog import encode_turn

SHIPPED_PROMPTS, HELDOUT = 300, 15  # the shipped drafters' corpus and its held-out tail
MAX_NEW_TOKENS = 160


def heldout_prompts(target) -> list[tuple]:
    """(workload, prompt, ids) of the last HELDOUT of the first SHIPPED_PROMPTS kept training prompts."""
    kept = []
    for workload, prompt in training_prompts(("sharegpt",), "train", 0):
        ids = encode_turn(target.tokenizer, workload, prompt, 0, [])
        if len(ids) <= MAX_PROMPT_TOKENS:  # the corpus generator skips longer prompts
            kept.append((workload, prompt, ids))
        if len(kept) == SHIPPED_PROMPTS:
            break
    return kept[-HELDOUT:]


def generate(out: Path) -> None:
    target = load_model("smollm2-135m")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "sequences.jsonl"
    done = {json.loads(line)["prompt_id"] for line in path.read_text().splitlines()} if path.is_file() else set()
    engine = SpeculativeEngine(
        target, NgramDrafter(GENERATION["n_min"], GENERATION["n_max"]), gamma=GENERATION["gamma"]
    )
    with path.open("a") as handle:
        for _, prompt, ids in heldout_prompts(target):
            if prompt.prompt_id in done:
                continue
            start = time.perf_counter()
            result = engine.generate(ids, MAX_NEW_TOKENS)
            seq = Sequence(
                prompt_id=prompt.prompt_id,
                ids=list(ids) + list(result.tokens),
                prompt_len=len(ids),
                stop=result.stop_reason,
                seconds=round(time.perf_counter() - start, 3),
            )
            handle.write(json.dumps(asdict(seq)) + "\n")
            handle.flush()
            print(f"{prompt.prompt_id}: {seq.answer_len} answer tokens in {seq.seconds:.0f} s", flush=True)


def evaluate_types(folder: Path, types: list[str], count: int | None, drafters: Path | None) -> None:
    target = load_model("smollm2-135m")
    lines = (folder / "sequences.jsonl").read_text().splitlines()
    corpus = Corpus(spec=None, folder=folder, sequences=[Sequence(**json.loads(line)) for line in lines])
    indices = list(range(len(corpus.sequences)))[:count]
    layers = corpus_feature_layers(target.model.config)
    ensure_features(target, corpus, indices, layers)
    examples = load_examples(corpus, indices, layers, 512)
    print(
        f"{len(examples)} held-out sequences, {sum(s.answer_len for s in corpus.sequences[: len(examples)])} "
        "answer tokens"
    )
    print("| type | held-out top-1 per head / step / module | positions |")
    print("|---|---|---:|")
    for kind in types:
        drafter_type = registry.get(kind, trained=True)
        checkpoint = resolve_checkpoint(
            None if drafters is None else str(drafters / target.name / kind), kind, target.name
        )
        net, vocab = drafter_type.load(read_checkpoint(checkpoint, kind), target)
        head = VocabHead(target.model.get_output_embeddings(), target.vocab_size, vocab).float()
        batches = [
            collate([examples[i] for i in group], target.model, head, full_top=True)
            for group in make_batches(examples, 2048, None)
        ]
        with torch.no_grad():
            result = evaluate(kind, net.float(), batches, head, None)
        print(f"| `{kind}` | {', '.join(f'{a:.3f}' for a in result['top1'])} | {result['positions']} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--out", type=Path, required=True)
    ev = sub.add_parser("evaluate")
    ev.add_argument("--heldout", type=Path, required=True)
    ev.add_argument("--types", default=",".join(registry.names(trained=True)))
    ev.add_argument("--count", type=int, default=None, help="only the first N held-out sequences")
    ev.add_argument(
        "--drafters",
        type=Path,
        default=None,
        help="a folder of <target>/<type>/ checkpoints (default: the shipped ones)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.command == "generate":
        generate(args.out)
    else:
        evaluate_types(args.heldout, [t for t in args.types.split(",") if t], args.count, args.drafters)


if __name__ == "__main__":
    main()
