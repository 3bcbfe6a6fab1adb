"""Nested speculation (Saguaro / SSD, arXiv 2603.03251): draft round r + 1 while the target verifies round r.

A chain round of γ drafts d_1..d_γ ends in one of γ + 1 outcomes: the target keeps the first j
drafts and appends a token of its own, a correction c ≠ d_{j+1} (j < γ) or a bonus token (j = γ).
While the target's forward runs (in a worker thread; on CUDA on a stream of its own), the drafter
prepares the next round's draft for the P likeliest outcomes:

* all accepted: the bonus guess b is the drafter's argmax after d_γ, and the draft continues
  d_1..d_γ b;
* rejected at j: the correction guess c is the drafter's best token other than d_{j+1}, and the
  draft continues d_1..d_j c.

The guesses are argmaxes even when sampling (they only choose which contexts to draft for); the
drafts after them are drawn as any draft is.

The drafter's confidence stands in for the acceptance probability when ranking outcomes: with
q_i = q(d_i | prefix) (`Proposal.path_logq` holds the running sums of log q_i),

    P(all accepted) = Π_{i≤γ} q_i,        P(rejected at j) = Π_{i≤j} q_i · (1 − q_{j+1}).

When the verdict's tokens (the kept drafts and the target's token) are those of a prepared
outcome, the next round verifies that draft as it is: it was drafted during verification, so its
latency is hidden. Otherwise the drafter drafts as usual.

Losslessness. Verification is the sequential engine's own code (`SpeculativeEngine.verify`), so
greedy output is the target's whatever the drafts are. With sampling, a prepared draft is drawn
from q given its guessed prefix with a generator of its own (never the verification's), so when
the guess is right it is a draft from q given the actual context, independent of the coins that
verify it: speculative sampling keeps the target distribution (tests/test_nested.py checks it).

The drafter's state. Drafters that support nesting (``drafts_ahead``) implement ``propose_ahead(context, verified,
shape, sampling, generator)``: a draft for a context whose tokens from index ``verified`` on are
not verified yet, after which the drafter holds the verified context only and no proposal is
pending. The draft model's prepared draft is token for token what it would draft from the real
context (its KV cache is rolled back to the verified tokens and caught up next time); EAGLE's
uses its own predicted features for the guessed tokens, where sequential drafting would have the
target's, so a prepared EAGLE draft can differ from the sequential one — it is still a draft from
the drafter's distribution, and the drafter's cache is brought to the state sequential drafting
has (true-feature entries only) when the next draft is made.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.engine.drafters.base import Proposal
from specbench.engine.rounds import RoundDriver, Verification
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import StaticTree
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.engine.loop import SpeculativeEngine
    from specbench.engine.stats import GenerationResult

MAX_PREPARED = 16
TOP_TWO = StaticTree.from_branching("2")  # the drafter's two best next tokens
GREEDY = SamplingParams()


@dataclass
class PreparedDraft:
    """A next-round draft for one outcome of the round being verified."""

    start: int  # context length when the round was drafted (the outcome's tokens follow)
    tail: list[int]  # the outcome's tokens: kept drafts, then the guessed correction or bonus
    proposal: Proposal  # the draft continuing context + tail
    seconds: float  # time spent preparing it


def likeliest_outcomes(path_logq: list[float] | None, gamma: int, count: int) -> list[int]:
    """Accepted-draft counts j ∈ 0..γ of the ``count`` likeliest outcomes, likeliest first (ties:
    shorter j first). Without the drafter's confidence: all accepted, then rejected at 0, 1, ..."""
    if path_logq is None:
        return ([gamma] + list(range(gamma)))[:count]
    kept = [0.0] + list(path_logq[:gamma])  # kept[j] = log Π_{i≤j} q_i
    scores = [math.exp(kept[j]) * (1.0 - math.exp(kept[j + 1] - kept[j])) for j in range(gamma)]
    scores.append(math.exp(kept[gamma]))
    return sorted(range(gamma + 1), key=lambda j: (-scores[j], j))[:count]


def truncated(proposal: Proposal, gamma: int) -> Proposal:
    """A chain proposal cut to its first ``gamma`` tokens."""
    if proposal.tree_nodes <= gamma:
        return proposal
    return Proposal(
        tokens=proposal.tokens[:, :gamma],
        probs=None if proposal.probs is None else proposal.probs[:, :gamma],
        parents=None,
        draft_steps=proposal.draft_steps,
        path_logq=None if proposal.path_logq is None else proposal.path_logq[:gamma],
    )


class NestedDriver(RoundDriver):
    """A round driver whose drafter prepares the next round's draft while the target verifies:
    ``SpeculativeEngine(..., driver=NestedDriver(prepared=2))``.

    ``prepared``: P, how many outcomes of each round get a draft prepared (at most γ + 1 exist).
    Chains only; the drafter must draft ahead (``drafts_ahead``: draft-model, eagle, eagle3).
    """

    def __init__(self, prepared: int = 1):
        if not 1 <= prepared <= MAX_PREPARED:
            raise SpecbenchError(f"nested speculation: prepared must be 1..{MAX_PREPARED}, got {prepared}")
        self.prepared = prepared
        self._ready: list[PreparedDraft] = []
        self._counts = [0, 0, 0.0]  # prepared drafts, hits, hidden draft seconds

    def bind(self, engine: SpeculativeEngine) -> None:
        super().bind(engine)
        if engine.drafter is None:
            raise SpecbenchError("nested speculation needs a drafter and γ > 0")
        if not engine.shape.is_chain:
            raise SpecbenchError("nested speculation drafts chains only (tree: chain)")
        if not engine.drafter.drafts_ahead:
            raise SpecbenchError(
                f"nested speculation needs a drafter that can draft ahead of verification "
                f"(draft-model, eagle, eagle3); '{engine.drafter.name}' cannot"
            )
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specbench-verify")
        self._stream = torch.cuda.Stream(engine.device) if engine.device.type == "cuda" else None
        self._ahead_generator = torch.Generator(device=engine.device)

    def begin(self, prompt_ids: list[int], max_new_tokens: int, seed: int, stop_at_eos: bool) -> None:
        self._ready, self._counts = [], [0, 0, 0.0]
        self._ahead_generator.manual_seed((seed + 1) % 2**63)  # prepared drafts never draw verification's coins

    def end(self, result: GenerationResult) -> None:
        result.prepared_drafts, result.prepared_hits, result.draft_hidden_s = self._counts

    # ------------------------------------------------------------------ the round's two steps
    def draft(self, context: torch.Tensor, round_gamma: int, generator) -> Proposal:
        """The prepared draft of the outcome that happened, if there is one; else draft now."""
        ready, self._ready = self._ready, []
        if round_gamma > 0:
            for prepared in ready:
                if (
                    context.shape[1] == prepared.start + len(prepared.tail)
                    and context[0, prepared.start :].tolist() == prepared.tail
                ):
                    self._counts[1] += 1
                    self._counts[2] += prepared.seconds
                    return truncated(prepared.proposal, round_gamma)
        return super().draft(context, round_gamma, generator)

    def verify(self, proposal: Proposal, context: torch.Tensor, generator) -> Verification:
        """Verify in the worker thread while this thread prepares the next round's drafts."""
        if proposal.tree_nodes == 0:
            return super().verify(proposal, context, generator)
        device = self.engine.device
        if self._stream is not None:
            self._stream.wait_stream(torch.cuda.current_stream(device))  # the context is written
        verdict = self._worker.submit(self._verify_concurrently, proposal, context, generator)
        try:
            self._ready = self._prepare(context, proposal)
        finally:
            outcome = verdict.result()
        if self._stream is not None:
            torch.cuda.current_stream(device).wait_stream(self._stream)
        return outcome

    def _verify_concurrently(self, proposal: Proposal, context: torch.Tensor, generator) -> Verification:
        with torch.inference_mode():  # grad mode is per thread
            if self._stream is None:
                return super().verify(proposal, context, generator)
            with torch.cuda.stream(self._stream):
                outcome = super().verify(proposal, context, generator)
            self._stream.synchronize()
            return outcome

    # ------------------------------------------------------------------ preparing
    def _prepare(self, context: torch.Tensor, proposal: Proposal) -> list[PreparedDraft]:
        """Drafts continuing context [1, L] + the P likeliest outcomes of ``proposal``.

        An outcome's guessed token is the drafter's best next token after the kept drafts — for a
        rejection, its best other than the refused draft — and the draft after it is made as any
        draft (sampled from q when sampling), with the prepared drafts' own generator.
        """
        engine = self.engine
        drafter, gamma, start = engine.drafter, proposal.tree_nodes, context.shape[1]
        ready = []
        for kept in likeliest_outcomes(proposal.path_logq, gamma, self.prepared):
            t0 = self._now()
            stem = torch.cat([context, proposal.tokens[:, :kept]], dim=1)  # [1, L + kept]
            best = drafter.propose_ahead(stem, start, TOP_TWO, GREEDY, None).tokens[0].tolist()
            refused = int(proposal.tokens[0, kept]) if kept < gamma else None
            guess = next((t for t in best if t != refused), None)
            if guess is None:
                continue
            guessed = torch.cat([stem, stem.new_tensor([[guess]])], dim=1)  # [1, L + kept + 1]
            draft = drafter.propose_ahead(guessed, start, engine.shape, engine.sampling, self._ahead_generator)
            ready.append(PreparedDraft(start, proposal.tokens[0, :kept].tolist() + [guess], draft, self._now() - t0))
            self._counts[0] += 1
        return ready

    def _now(self) -> float:
        """Time on this thread's work only (the verifying stream keeps running on CUDA)."""
        if self.engine.device.type == "cuda":
            torch.cuda.current_stream(self.engine.device).synchronize()
        return time.perf_counter()
