"""Draft model chain: milliseconds per drafted token, generic tree growth vs the chain fast path.

A draft-model drafter for SmolLM2-135M (the model itself, and its 8-layer early exit
smollm2-135m-exit8) drafts γ-token chains round after round on one prompt; every draft is taken
as accepted and followed by one more token, so each round feeds the drafter what a fully
accepted round feeds it (γ − 1 + 2 tokens over the γ steps). The two paths — ``fast_chain``
False (`growth.grow_proposal`, what main ran) and True (`chain.draft_chain`) — run in turns,
a block of --rounds rounds each, --repeats times, which of the two goes first alternating; the
figure is the median over blocks of propose() seconds / drafted tokens. Both paths propose the
same tokens (checked here too). From a git worktree, run it with PYTHONPATH=. (the editable
install points at the main checkout).

    python scripts/bench_draft_loop.py                  # γ 4, greedy, one thread
    python scripts/bench_draft_loop.py --temperature 1  # sampling
    python scripts/bench_draft_loop.py --compile        # the drafter's steps through torch.compile
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from specbench.engine.drafters import make_drafter
from specbench.engine.drafters.base import RoundOutcome
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import shape_for
from specbench.models.prompting import encode_conversation
from specbench.models.resolve import load_model

PROMPT = "Write a python function that sorts a list of integers using merge sort, then explain it."
DRAFTERS = ("smollm2-135m", "smollm2-135m-exit8")


def block(drafter, prompt: list[int], gamma: int, rounds: int, sampling: SamplingParams,
          seed: int) -> tuple[float, list[list[int]]]:
    """Seconds spent in propose() per drafted token over ``rounds`` fully accepted rounds, and the drafts."""
    context = torch.tensor([prompt])
    drafter.start(context[:, :-1], context.shape[1] + rounds * (gamma + 1) + 8)
    generator = torch.Generator().manual_seed(seed)
    shape = shape_for("chain", gamma)
    seconds, drafted, drafts = 0.0, 0, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        proposal = drafter.propose(context, shape, sampling, generator)
        seconds += time.perf_counter() - t0
        tokens = proposal.tokens[0].tolist()
        drafted += len(tokens)
        drafts.append(tokens)
        next_token = tokens[-1]  # a stand-in for the target's bonus token
        drafter.observe(RoundOutcome(context_length=context.shape[1], accepted=len(tokens), next_token=next_token,
                                     accepted_nodes=list(range(len(tokens)))))
        context = torch.cat([context, torch.tensor([tokens + [next_token]])], dim=1)
    return seconds / drafted, drafts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=8, help="rounds per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="blocks per path (interleaved)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--compile", action="store_true", help="torch.compile the drafter's steps (both paths)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sampling = SamplingParams(temperature=args.temperature)
    target = load_model("smollm2-135m", dtype=args.dtype)
    prompt = encode_conversation(target.tokenizer, [PROMPT])
    print(f"draft model chain, γ {args.gamma}, {args.rounds} rounds x {args.repeats} interleaved blocks, "
          f"{torch.get_num_threads()} thread(s), {args.dtype}, temperature {args.temperature:g}"
          f"{', compiled steps' if args.compile else ''}")
    print(f"{'drafter':<22}{'generic ms/tok':>16}{'fast ms/tok':>14}{'fast/generic':>14}  same drafts")
    for name in DRAFTERS:
        drafter = make_drafter("draft-model", target, {"model": name}, dtype=args.dtype)
        if args.compile:
            drafter.compile_steps()
        times: dict[bool, list[float]] = {False: [], True: []}
        drafts: dict[bool, list] = {}
        for repeat in range(args.repeats + 1):  # block 0 of each path: untimed warm-up
            for fast in ((False, True) if repeat % 2 else (True, False)):  # who goes first alternates
                drafter.fast_chain = fast
                per_token, drafts[fast] = block(drafter, prompt, args.gamma, args.rounds, sampling, seed=repeat)
                if repeat:
                    times[fast].append(per_token * 1e3)
        generic, fast = statistics.median(times[False]), statistics.median(times[True])
        print(f"{name:<22}{generic:>16.2f}{fast:>14.2f}{fast / generic:>14.3f}  {drafts[False] == drafts[True]}")


if __name__ == "__main__":
    main()
