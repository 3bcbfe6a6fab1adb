"""What one generation records, round by round, and the metrics derived from it.

Definitions (the same everywhere in specbench):

* drafted: draft tokens offered to the target in a round (tree: nodes), accepted: how many of
  them the target kept (tree: depth of the accepted path);
* α (observed) = Σ accepted / Σ drafted;
* τ = tokens emitted per target forward, bonus/correction token included = Σ emitted / rounds;
* per-position acceptance at position i = P(position i accepted | positions < i accepted) =
  (rounds accepting > i) / (rounds accepting ≥ i that drafted > i).

Unknown stays unknown. A backend that cannot see the rounds (a server that streams text without
per-step counts) hands over `RoundLog.unobserved()`: every quantity made of rounds is then None
(counts) or NaN (rates, seconds), never the 0 an empty sum would give; the decode tokens still come
from the output (every token after the first).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RoundLog:
    """Per-round arrays, appended to by the engine loop (one entry per target forward)."""

    drafted: list[int] = field(default_factory=list)  # tokens (or tree nodes) offered
    depth: list[int] = field(default_factory=list)  # longest draft path (= drafted for a chain)
    accepted: list[int] = field(default_factory=list)  # accepted draft tokens
    emitted: list[int] = field(default_factory=list)  # tokens added to the output (accepted + 1, cut at stop)
    draft_steps: list[int] = field(default_factory=list)  # drafter forwards (0 for model-free drafters)
    draft_s: list[float] = field(default_factory=list)  # proposal time
    verify_s: list[float] = field(default_factory=list)  # target forward + acceptance
    round_s: list[float] = field(default_factory=list)  # whole round, bookkeeping included
    # MoE targets only (empty for dense ones): per round, the distinct experts the verify forward touched
    # per layer (mean over layers), and the expert weight bytes it read (Σ over layers distinct × one expert)
    experts: list[float] = field(default_factory=list)
    expert_bytes: list[int] = field(default_factory=list)
    observed: bool = True  # False: the backend could not see the rounds (the lists stay empty, and mean unknown)

    @classmethod
    def unobserved(cls) -> RoundLog:
        """The rounds of a generation nobody could see: none recorded, and none claimed."""
        return cls(observed=False)

    def add(
        self,
        *,
        drafted: int,
        depth: int,
        accepted: int,
        emitted: int,
        draft_steps: int,
        draft_s: float,
        verify_s: float,
        round_s: float,
        experts: float | None = None,
        expert_bytes: int | None = None,
    ) -> None:
        self.drafted.append(drafted)
        self.depth.append(depth)
        self.accepted.append(accepted)
        self.emitted.append(emitted)
        self.draft_steps.append(draft_steps)
        self.draft_s.append(draft_s)
        self.verify_s.append(verify_s)
        self.round_s.append(round_s)
        if experts is not None:
            self.experts.append(experts)
            self.expert_bytes.append(expert_bytes)

    def __len__(self) -> int:
        return len(self.accepted)


@dataclass
class GenerationResult:
    prompt_tokens: int
    tokens: list[int]  # generated token ids (the first comes from the prefill)
    rounds: RoundLog
    prefill_s: float  # target (and drafter) prefill, first token included
    decode_s: float  # all rounds
    stop_reason: str  # "eos" or "length"
    peak_memory_bytes: int = 0
    # Serving-engine backends measure these per request; None: derive from prefill_s / decode_s.
    ttft_s: float | None = None  # time to first token, s
    itl_s: float | None = None  # mean inter-token latency over the request, s
    # Serving-engine backends, per request of a batch: seconds after the batch began when the request arrived
    # (open loop: its scheduled arrival; closed loop: when it was sent) and when its last token arrived.
    arrival_s: float | None = None
    finish_s: float | None = None
    # MoE target: {"experts": E, "top_k": k, "expert_bytes": one expert's bytes, "step_bytes": weight bytes of
    # one target-only forward as computed here (each MLP once)}
    moe: dict | None = None
    # Nested speculation (specbench.engine.strategies.nested); None for sequential rounds.
    prepared_drafts: int | None = None  # next-round drafts prepared while the target verified
    prepared_hits: int | None = None  # rounds whose draft was one of them (draft latency hidden)
    draft_hidden_s: float | None = None  # drafting time of those rounds, spent during verification
    # Online adaptation (specbench.engine.strategies.online_drafting); None otherwise: {"version": the drafter's version at the start,
    # "updates": [{version, at_round, seconds, tokens, loss, reject_loss, rejections}, ...] during or after it}
    online: dict | None = None

    # ------------------------------------------------------------------ derived metrics
    @property
    def new_tokens(self) -> int:
        return len(self.tokens)

    @property
    def decode_tokens(self) -> int:
        """Tokens produced by the rounds (everything after the prefill's first token; from the output itself
        when the rounds were not observed)."""
        if not self.rounds.observed:
            return max(len(self.tokens) - 1, 0)
        return int(sum(self.rounds.emitted))

    @property
    def target_forwards(self) -> int | None:
        """Target forwards of the decode phase (None: not observed)."""
        return len(self.rounds) if self.rounds.observed else None

    @property
    def drafted(self) -> int | None:
        return int(sum(self.rounds.drafted)) if self.rounds.observed else None

    @property
    def accepted(self) -> int | None:
        return int(sum(self.rounds.accepted)) if self.rounds.observed else None

    @property
    def alpha(self) -> float:
        """Observed acceptance rate, accepted ÷ drafted (NaN when nothing was drafted, or nothing observed)."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def tau(self) -> float:
        """Tokens per target forward in the decode phase, bonus token included (NaN: not observed)."""
        return self.decode_tokens / self.target_forwards if self.target_forwards else float("nan")

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput: round tokens ÷ round time (prefill excluded)."""
        return self.decode_tokens / self.decode_s if self.decode_s > 0 else float("nan")

    @property
    def draft_s(self) -> float:
        return float(sum(self.rounds.draft_s)) if self.rounds.observed else float("nan")

    @property
    def verify_s(self) -> float:
        return float(sum(self.rounds.verify_s)) if self.rounds.observed else float("nan")

    @property
    def overhead_s(self) -> float:
        rest = self.decode_s - self.draft_s - self.verify_s
        return max(rest, 0.0) if np.isfinite(rest) else float("nan")

    @property
    def experts_per_verify(self) -> float:
        """Distinct experts one verify forward touched per layer, mean over layers and rounds (NaN: dense)."""
        return float(np.mean(self.rounds.experts)) if self.rounds.experts else float("nan")

    @property
    def expert_bytes_per_verify(self) -> float:
        """Expert weight bytes one verify forward read, mean over rounds (NaN: dense target)."""
        return float(np.mean(self.rounds.expert_bytes)) if self.rounds.expert_bytes else float("nan")

    @property
    def expert_bytes_per_token(self) -> float:
        """Expert weight bytes read per emitted token: Σ over rounds ÷ decode tokens (NaN: dense target)."""
        if not self.rounds.expert_bytes or not self.decode_tokens:
            return float("nan")
        return float(sum(self.rounds.expert_bytes)) / self.decode_tokens

    def accepted_length_histogram(self, gamma: int) -> np.ndarray:
        """hist[j] = rounds that accepted exactly j draft tokens, j = 0..γ (empty: not observed)."""
        if not self.rounds.observed:
            return np.zeros(0, dtype=np.int64)
        return np.bincount(np.asarray(self.rounds.accepted, dtype=np.int64), minlength=gamma + 1)[: gamma + 1]

    def position_counts(self, gamma: int) -> tuple[np.ndarray, np.ndarray]:
        """(attempts[i], accepts[i]) for draft position i = 0..γ−1.

        A round reaches position i when it drafted deeper than i and accepted all positions < i;
        it accepts position i when it accepted more than i tokens.
        """
        if not self.rounds.observed:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        acc = np.asarray(self.rounds.accepted, dtype=np.int64)[:, None]
        depth = np.asarray(self.rounds.depth, dtype=np.int64)[:, None]
        pos = np.arange(gamma)[None, :]
        attempts = ((depth > pos) & (acc >= pos)).sum(0)
        accepts = (acc > pos).sum(0)
        return attempts, accepts

    def metrics(self, gamma: int) -> dict:
        """Scalar metrics and per-position acceptance (positions 0..γ−1), for tables and JSON output."""
        attempts, accepts = self.position_counts(gamma)
        return {
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "target_forwards": self.target_forwards,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "alpha": self.alpha,
            "tau": self.tau,
            "tokens_per_s": self.tokens_per_s,
            "prefill_s": self.prefill_s,
            "decode_s": self.decode_s,
            "draft_s": self.draft_s,
            "verify_s": self.verify_s,
            "overhead_s": self.overhead_s,
            "position_acceptance": [float(a) / n if n else None for a, n in zip(accepts, attempts)],
            "peak_memory_bytes": self.peak_memory_bytes,
            **(
                {
                    "experts_per_verify": self.experts_per_verify,
                    "expert_bytes_per_verify": self.expert_bytes_per_verify,
                    "expert_bytes_per_token": self.expert_bytes_per_token,
                }
                if self.moe
                else {}
            ),
            "stop_reason": self.stop_reason,
        }
