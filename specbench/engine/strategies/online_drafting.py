"""Online adaptation (Aurora, arXiv 2602.06932): a trained drafter that keeps learning from the traffic it serves.

Every verification already computes what a drafter trains on: the target's hidden states at every
kept position (the prefill's for the prompt, each round's for its root and accepted drafts) and the
target's verdict on the drafts. `OnlineDriver` (a round driver, `specbench.engine.rounds`) keeps them as a
*trace* per generation —

* the verified tokens x_0 .. x_{n−1} (prompt, then every emitted token: accepted drafts, corrections,
  bonus tokens — all of them the target's);
* the target features f_t of the positions that have them (the drafter's feature layers and the final
  hidden state, whose softmax(W_lm f_t) is the target's distribution of x_{t+1});
* the rejected drafts: in a round drafted from a context of L tokens that kept a drafts, the draft(s)
  tested at depth s = a + 1 (a chain's d_{a+1}, a tree's children of its last accepted node) were
  refused; each is recorded as (row t = L − 2, depth s, token d) — row and depth as in the drafters'
  training objectives, where row t's step s predicts x_{t+s+1} (`specbench.training.objectives`),

and hands them to a *learner* (the drafter type's ``learner``: `specbench.training.online_learning.OnlineLearner`,
which holds the losses and the optimizer) every N prompts or every M verified tokens (`OnlinePlan`).
The learner trains its own copy of the network; the new weights are swapped into the serving drafter
between two rounds (a *hot swap*: the drafter's caches are rebuilt from the trace's features under
the new weights), and the drafter's *version* counts the swaps.

Losslessness. Verification is the sequential engine's code and decides every token, so the output is
the target's (greedy) or distributed as the target's (sampling) whatever weights drafted it; the
updates read only the trace (no generator of the generation), so a run's tokens under sampling are
what any drafter would let through. tests/test_online.py checks greedy identity and the sampling
distribution with a drafter that changes between (and within) generations, and that the test rejects
a broken acceptance rule.

Costs. The update time (training steps and the swap) is spent between rounds but is not decode time:
the loop keeps it out of ``decode_s`` (`RoundDriver.between_rounds`) and the generation reports
it per update (``GenerationResult.online``), with the training positions used, so that speedups can be
stated with it (training shares the machine) and without it (training on other hardware, as Aurora's
training server does; there the swap would land later than here, where new weights serve at once).

Re-timed units. The sweep's timing protocol may run a unit again (a disturbed attempt, ``order: abba``).
A second generation of the same prompt with the same seed *replays* the first: the drafter is put back
to the version the first attempt started from, takes the first attempt's swaps at the same rounds (no
training), and ends at the version the first attempt ended at, so both attempts draft alike and the
learner sees each prompt once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from specbench.engine.drafters import registry
from specbench.engine.drafters.base import Proposal
from specbench.engine.rounds import RoundDriver, Verification
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.engine.loop import SpeculativeEngine
    from specbench.engine.stats import GenerationResult

STARTS = ("checkpoint", "scratch")  # the drafter's configured weights (the shipped head by default), or re-initialised
LOSSES = ("accepted", "accepted+rejected")  # distillation on the verified traffic; plus the rejected drafts' term


@dataclass(frozen=True)
class OnlinePlan:
    """How a drafter learns online; exactly one of ``every_prompts`` and ``every_tokens`` is set."""

    start: str = "checkpoint"
    loss: str = "accepted+rejected"
    every_prompts: int | None = 2  # an update after every N generations ...
    every_tokens: int | None = None  # ... or once M verified tokens arrived since the last one (between rounds)
    steps: int = 2  # optimizer steps per update
    lr: float = 3e-4
    reject_weight: float = 0.5  # β of the rejected-draft term (loss accepted+rejected)
    window: int = 8  # generations the learner keeps to replay with the new traffic
    batch_tokens: int = 512  # positions per optimizer step (a generation longer than this: its last ones)
    seed: int = 0  # the scratch start's initialisation and the learner's sampling of its window

    @property
    def uses_rejections(self) -> bool:
        return self.loss == "accepted+rejected"

    @property
    def trigger(self) -> str:
        return f"{self.every_prompts}p" if self.every_prompts else f"{self.every_tokens}t"


@dataclass
class TrafficExample:
    """One generation's trace as the learner takes it (`specbench.training.online_learning`)."""

    ids: torch.Tensor  # [n] long: verified tokens, cut to the positions with features
    features: dict  # key ("final" or a layer index) -> [n, H]: the target's features at those positions
    prompt_len: int
    rejected: list[tuple[int, int, int]]  # (row t, depth s, token d): draft d at depth s from entry t was refused


@dataclass
class Update:
    """One drafter update: when, what it cost, what it reached."""

    version: int  # the drafter's version after it
    at_round: int  # rounds of the generation before it (its round count: at the end of the generation)
    seconds: float  # training steps + swap (+ cache rebuild), wall clock
    tokens: int  # training positions the steps used (summed over steps)
    loss: float  # mean over steps of the accepted (distillation) term
    reject_loss: float  # mean over steps of the rejected-draft term (NaN: not used or no rejection seen)
    rejections: int  # rejected drafts the steps scored

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class _Trace:
    """The generation in progress: tokens, features by key (chunks [n, H]), rejected drafts."""

    tokens: list[int]
    prompt_len: int
    features: dict = field(default_factory=dict)
    rows: int = 0  # positions with features (they are the first `rows` tokens' positions)
    rejected: list[tuple[int, int, int]] = field(default_factory=list)

    def add_features(self, chunk: dict) -> None:
        """Features of the next positions {key: [1, n, H]} (the prefill's, then each round's kept ones)."""
        for key, value in chunk.items():
            self.features.setdefault(key, []).append(value[0].detach().clone())
        self.rows += next(iter(chunk.values())).shape[1]

    def example(self, device) -> TrafficExample:
        n = min(self.rows, len(self.tokens))
        features = {key: torch.cat(chunks)[:n] for key, chunks in self.features.items()}
        return TrafficExample(
            torch.tensor(self.tokens[:n], device=device),
            features,
            self.prompt_len,
            [r for r in self.rejected if r[0] < n],
        )


@dataclass
class _Attempt:
    """What a generation needs to be replayed: its key, the versions around it, the swaps it took."""

    key: tuple
    start_version: int
    start_state: dict
    swaps: list[tuple[int, int, dict]]  # (at_round, version, serving state)
    end_version: int = 0
    end_state: dict | None = None
    updates: list[Update] = field(default_factory=list)


def _state(net: torch.nn.Module) -> dict:
    return {key: value.detach().clone() for key, value in net.state_dict().items()}


class OnlineDriver(RoundDriver):
    """A round driver whose trained drafter learns from the verified traffic (module docstring):
    ``SpeculativeEngine(..., driver=OnlineDriver(plan))``.

    ``plan``: an `OnlinePlan`. The drafter must be a trained kind (`TrainedType`) built for this engine
    alone: its weights change. Learning starts with `arm` (the untimed warm-up a backend runs first
    teaches nothing).
    """

    features = ("final",)  # the teacher of the drafter's training, at every verified position

    def __init__(self, plan: OnlinePlan = OnlinePlan()):
        self.plan = plan
        self.version = 0  # swaps so far
        self.armed = False
        self._trace: _Trace | None = None
        self._prompts_since = 0  # generations since the last update (every_prompts)
        self._tokens_since = 0  # verified tokens since the last update (every_tokens)
        self._round = 0
        self._capacity = 0
        self._attempt: _Attempt | None = None
        self._replay: list[tuple[int, int, dict]] | None = None  # a re-timed attempt: the swaps to take again
        self._again = False  # the generation in progress re-times the last one

    def bind(self, engine: SpeculativeEngine) -> None:
        super().bind(engine)
        if engine.drafter is None:
            raise SpecbenchError("online adaptation needs a drafter and γ > 0")
        name = engine.drafter.name
        kind = registry.get(name)
        if not kind.trained:
            raise SpecbenchError(
                f"online adaptation trains the drafter's network: '{name}' is not a trained "
                f"drafter ({', '.join(registry.names(trained=True))})"
            )
        self.kind = kind
        self.net = kind.net_of(engine.drafter)
        if self.plan.start == "scratch":
            kind.reinitialise(self.net, self.plan.seed)
        self.learner = kind.online_learner(engine.drafter, engine.target, self.plan)

    def arm(self) -> None:
        """Start learning (after the backend's untimed warm-up)."""
        self.armed = True

    # ------------------------------------------------------------------ a generation
    def begin(self, prompt_ids: list[int], max_new_tokens: int, seed: int, stop_at_eos: bool) -> None:
        self._trace, self._replay, self._again = None, None, False
        if not self.armed:
            return
        key = (tuple(prompt_ids), int(max_new_tokens), int(seed), bool(stop_at_eos))
        self._again = self._attempt is not None and self._attempt.key == key
        if self._again:  # a re-timed attempt of the last generation: the same versions at the same rounds
            attempt = self._attempt
            with torch.no_grad():
                self.net.load_state_dict(attempt.start_state)
            self.version = attempt.start_version
            self._replay = list(attempt.swaps)
        else:
            self._attempt = _Attempt(key, self.version, _state(self.net), [])
        self._capacity = self.engine.capacity(len(prompt_ids), max_new_tokens)
        self._round = 0
        self._trace = _Trace(list(prompt_ids), len(prompt_ids))

    def end(self, result: GenerationResult) -> None:
        trace, again, attempt = self._trace, self._again, self._attempt
        self._trace, self._replay = None, None
        if trace is None:  # not armed: nothing learned, nothing to report
            return
        if again:
            with torch.no_grad():
                self.net.load_state_dict(attempt.end_state)
            self.version = attempt.end_version
        else:
            self._learn_from(trace, len(result.rounds))
            attempt.end_version, attempt.end_state = self.version, _state(self.net)
        result.online = {"version": attempt.start_version, "updates": [u.to_dict() for u in attempt.updates]}

    # ------------------------------------------------------------------ the trace
    def took_features(self, features: dict) -> None:
        if self._trace is not None:
            self._trace.add_features(features)

    def verify(self, proposal: Proposal, context: torch.Tensor, generator) -> Verification:
        verdict = super().verify(proposal, context, generator)
        trace = self._trace
        if trace is not None:
            path = verdict.path
            kept = proposal.tokens[0, path].tolist() if path else []
            trace.tokens = context[0].tolist() + kept + [int(verdict.next_token)]
            last = path[-1] if path else -1
            parents = proposal.parents if proposal.parents is not None else list(range(-1, proposal.tree_nodes - 1))
            refused = [i for i, p in enumerate(parents) if p == last and i not in path]
            row = context.shape[1] - 2
            trace.rejected.extend((row, len(path) + 1, int(proposal.tokens[0, i])) for i in refused)
            if self._replay is None:
                self._tokens_since += len(kept) + 1
        return verdict

    # ------------------------------------------------------------------ updates
    def between_rounds(self, context: torch.Tensor) -> float:
        self._round += 1
        if self._replay is not None:
            return self._take_replayed_swaps(context)
        if self._trace is None or self.plan.every_tokens is None or self._tokens_since < self.plan.every_tokens:
            return 0.0
        return self._update(context)

    def _update(self, context: torch.Tensor | None, rounds: int | None = None) -> float:
        """Train, swap the new weights in and — mid-generation (``context`` [1, L] given) — rebuild the
        drafter's caches under them; at the end of a generation, ``rounds`` is its round count. Returns the
        seconds it took."""
        t0 = time.perf_counter()
        current = self._trace.example(self.engine.device) if context is not None else None
        with torch.inference_mode(False), torch.enable_grad():
            state, stats = self.learner.update(current)
        self._swap(state, context)
        self.version += 1
        self._prompts_since = self._tokens_since = 0
        seconds = time.perf_counter() - t0
        at_round = self._round if context is not None else rounds
        self._attempt.updates.append(Update(self.version, at_round, seconds, **stats))
        if context is not None:  # a re-timed attempt takes this swap again at the same round
            self._attempt.swaps.append((self._round, self.version, state))
        return seconds

    def _swap(self, state: dict, context: torch.Tensor | None) -> None:
        """Load ``state`` into the serving network; mid-generation, rebuild the drafter from the trace."""
        with torch.no_grad():
            self.net.load_state_dict(state)
        if context is not None:
            trace = self._trace
            rows = trace.rows  # positions 0 .. rows−1 have features; the context's last token is the root
            features = {key: torch.cat(chunks)[None] for key, chunks in trace.features.items()}  # [1, rows, H]
            self.engine.drafter.start(context[:, :rows], self._capacity, features=features)

    def _take_replayed_swaps(self, context: torch.Tensor) -> float:
        t0 = time.perf_counter()
        took = False
        while self._replay and self._replay[0][0] == self._round:
            _, self.version, state = self._replay.pop(0)
            self._swap(state, context)
            took = True
        return time.perf_counter() - t0 if took else 0.0

    def _learn_from(self, trace: _Trace, rounds: int) -> None:
        """A finished generation joins the learner's window; an update follows when one is due."""
        self.learner.remember(trace.example(self.engine.device))
        self._prompts_since += 1
        due = (self.plan.every_prompts is not None and self._prompts_since >= self.plan.every_prompts) or (
            self.plan.every_tokens is not None and self._tokens_since >= self.plan.every_tokens
        )
        if due:  # between this generation's last round and the next one's first
            self._update(None, rounds)
