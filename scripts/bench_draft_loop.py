"""Draft model chain: milliseconds per drafted token, generic tree growth vs the chain fast path.

A draft-model drafter for SmolLM2-135M (the model itself, and its 8-layer early exit
smollm2-135m-exit8) drafts γ-token chains round after round on one prompt; every draft is taken
as accepted and followed by one more token, so each round feeds the drafter what a fully
accepted round feeds it (γ − 1 + 2 tokens over the γ steps). The paths — ``fast_chain``
False (`growth.grow_proposal`, what main ran), True (`chain.draft_chain`) and, with --compile,
True with the drafter's steps through torch.compile (one drafter of the model each) — run in turns,
a block of --rounds rounds each, --repeats times, the order reversed every other time; the
figure is the median over blocks of propose() seconds / drafted tokens. The eager paths propose
the same tokens (checked here too; compiled steps may differ in the last bits). "loop µs/tok" is
the same propose() with the drafter's forwards answered instantly from a cached output
(`ForwardFree`): the draft loop's own cost per token, which the fast path is about and which the
forwards' noise hides in the totals. From a git worktree, run it with PYTHONPATH=. (the editable
install points at the main checkout).

    python scripts/bench_draft_loop.py                  # γ 4, greedy, one thread
    python scripts/bench_draft_loop.py --temperature 1  # sampling
    python scripts/bench_draft_loop.py --compile        # + the fast chain with compiled drafter steps
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from specbench.cli.views.progress_lines import Steps
from specbench.engine.decoder import DecoderOutput
from specbench.engine.drafters import make_drafter
from specbench.engine.drafters.base import RoundOutcome
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import shape_for
from specbench.models.prompting import encode_conversation
from specbench.models.resolve import load_model

PROMPT = "Write a python function that sorts a list of integers using merge sort, then explain it."
DRAFTERS = ("smollm2-135m", "smollm2-135m-exit8")


def block(
    drafter, prompt: list[int], gamma: int, rounds: int, sampling: SamplingParams, seed: int
) -> tuple[float, list[list[int]]]:
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
        drafter.observe(
            RoundOutcome(
                context_length=context.shape[1],
                accepted=len(tokens),
                next_token=next_token,
                accepted_nodes=list(range(len(tokens))),
            )
        )
        context = torch.cat([context, torch.tensor([tokens + [next_token]])], dim=1)
    return seconds / drafted, drafts


class ForwardFree:
    """Stands in for the drafter's decoder with every forward answered from one cached output (the
    last T positions of a real forward over the context): what remains of propose() is the draft
    loop's own cost — choosing tokens, scores, bookkeeping."""

    def __init__(self, decoder, context: torch.Tensor):
        decoder.reset(1, context.shape[1] + 8)
        self.out = decoder.forward(context, logits="all")  # logits [1, L, V], hidden [1, L, H]
        self.device = decoder.device

    def truncate(self, length: int) -> None:
        pass

    def forward(self, ids, *, tree=None, logits="all", hidden_layers=()):
        new = ids.shape[1]
        return DecoderOutput(
            logits=None if logits == "none" else self.out.logits[:, -new:], hidden=self.out.hidden[:, -new:]
        )


def loop_overhead(drafter, prompt: list[int], gamma: int, rounds: int, sampling: SamplingParams, seed: int) -> float:
    """Seconds per drafted token of propose() with the drafter's forwards taking no time (`ForwardFree`)."""
    context = torch.tensor([prompt])
    real = drafter.decoder
    drafter.decoder, drafter.synced = ForwardFree(real, context), context.shape[1] - 1
    generator = torch.Generator().manual_seed(seed)
    shape = shape_for("chain", gamma)
    try:
        t0 = time.perf_counter()
        drafted = sum(drafter.propose(context, shape, sampling, generator).tree_nodes for _ in range(rounds))
        return (time.perf_counter() - t0) / drafted
    finally:
        drafter.decoder = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=8, help="rounds per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="blocks per path (interleaved)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="add a third path: the fast chain with the drafter's steps through torch.compile",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sampling = SamplingParams(temperature=args.temperature)
    target = load_model("smollm2-135m", dtype=args.dtype)
    prompt = encode_conversation(target.tokenizer, [PROMPT])
    paths = ["generic", "fast"] + (["fast compiled"] if args.compile else [])
    print(
        f"draft model chain, γ {args.gamma}, {args.rounds} rounds x {args.repeats} interleaved blocks, "
        f"{torch.get_num_threads()} thread(s), {args.dtype}, temperature {args.temperature:g}"
    )
    print(
        f"{'drafter':<20}"
        + "".join(f"{p + ' ms/tok':>22}" for p in paths)
        + "".join(f"{p + '/generic':>22}" for p in paths[1:])
        + "  same drafts"
        + f"{'loop µs/tok generic':>22}{'fast':>8}"
    )
    # a line per timed block on stderr while it runs (piped: where it is and its pace), a bar on a terminal
    with Steps("bench-draft-loop", total=len(DRAFTERS) * (args.repeats + 1) * len(paths)) as steps:
        for name in DRAFTERS:
            drafters = {path: make_drafter("draft-model", target, {"model": name}, dtype=args.dtype) for path in paths}
            drafters["generic"].fast_chain = False
            if args.compile:
                drafters["fast compiled"].compile_steps()
            times: dict[str, list[float]] = {path: [] for path in paths}
            overhead: dict[str, list[float]] = {path: [] for path in paths[:2]}
            drafts: dict[str, list] = {}
            for repeat in range(args.repeats + 1):  # block 0 of each path: untimed warm-up (and compilation)
                order = paths if repeat % 2 else paths[::-1]  # who goes first alternates
                for path in order:
                    steps.update(None, f"{name}: block {repeat}/{args.repeats} · {path}")
                    per_token, drafts[path] = block(
                        drafters[path], prompt, args.gamma, args.rounds, sampling, seed=repeat
                    )
                    if repeat:
                        times[path].append(per_token * 1e3)
                    if repeat and path in overhead:
                        loop = loop_overhead(drafters[path], prompt, args.gamma, 4 * args.rounds, sampling, seed=repeat)
                        overhead[path].append(loop * 1e6)
            median = {path: statistics.median(times[path]) for path in paths}
            same = all(
                drafts[path] == drafts["generic"] for path in paths[:2]
            )  # compiled numbers may differ in last bits
            print(
                f"{name:<20}"
                + "".join(f"{median[p]:>22.2f}" for p in paths)
                + "".join(f"{median[p] / median['generic']:>22.3f}" for p in paths[1:])
                + f"  {str(same):<11}"
                + f"{statistics.median(overhead['generic']):>22.0f}{statistics.median(overhead['fast']):>8.0f}"
            )


if __name__ == "__main__":
    main()
