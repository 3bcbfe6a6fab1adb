"""Verify-length schedules: how many tokens a chain drafts this round, up to the configuration's γ.

The configuration's γ is the cap. A schedule decides, round by round, how many of those γ
tokens the drafter actually drafts — before the round (``round_gamma``) and, for schedules that
read the drafter's confidence, token by token while it drafts (``keep_drafting``: called with
the confidences c_1..c_i of the i tokens drafted so far, c_j being the drafter's probability of
the token it proposed at position j; False stops the drafter's loop, so no drafter forward is
spent on a token that will not be verified). After the target's verdict, ``observe`` gets the
round's outcome and timings. The chosen length of every round is the record's ``round_drafted``.

* ``fixed`` (the default) — always γ; the engine calls the drafter exactly as without a schedule.
* ``heuristic`` — transformers' ``num_assistant_tokens_schedule="heuristic"``
  (transformers/generation/candidate_generator.py, ``AssistedCandidateGenerator.
  update_candidate_strategy``): a draft length n that starts at γ; after a round where every
  drafted token was accepted n ← n + 2, otherwise n ← max(1, n − 1). The round drafts
  min(n, γ) (transformers cuts n the same way at its length limit, and n itself is never
  clipped). n restarts at γ with each generation (transformers' ``heuristic_transient``; its
  ``heuristic`` carries n over to the next ``generate`` call).
* ``threshold`` (param ``threshold`` t) — stop once the last drafted token's confidence is
  below t (transformers' ``ConfidenceCriteria`` with ``assistant_confidence_threshold``, without
  its ROC re-tuning): the low-confidence token is still verified, none is drafted after it.
* ``dspark`` — throughput-aware (DSpark's confidence scheduler, arXiv 2607.05147), `DSpark`.

Confidence-reading schedules (threshold, dspark) need a drafter with probabilities (draft model,
the trained heads); every schedule but ``fixed`` needs a chain. `ScheduleSpec` is the
configuration's value (name + params, hashed into unit ids only when not ``fixed``);
`make_schedule` builds the per-engine state. Pure Python: no torch here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from specbench.engine.named_params import NamedParams, named_mapping
from specbench.errors import SpecbenchError, did_you_mean

DEFAULT = "fixed"
# name -> {param: default (None: required)}; the one place the schedules and their parameters are listed
PARAMS: dict[str, dict[str, float | None]] = {
    "fixed": {},
    "heuristic": {},
    "threshold": {"threshold": None},
    "dspark": {"warmup": 2, "calibrate": 1},
}
NEEDS_CONFIDENCE = ("threshold", "dspark")
# Schedules a serving engine runs, not this one (`make_schedule` refuses them; `specbench confirm` runs them as
# contenders): vLLM's per-batch-size K (``num_speculative_tokens_per_batch_size``; params "FIRST-LAST" → K for
# each range of batch sizes, and ``adaptive: 1`` to add vLLM's acceptance-adaptive K) and that adaptive K alone.
BATCH_SIZE, ADAPTIVE_K = "batch-size", "adaptive-k"
SERVING_SCHEDULES = (BATCH_SIZE, ADAPTIVE_K)

KeepDrafting = Callable[[list[float]], bool]


@dataclass(frozen=True)
class ScheduleSpec(NamedParams):
    """A schedule as configured: its name and the parameters given that differ from their defaults
    (sorted (key, value) pairs), so that one schedule has one identity however it is written."""

    name: str = DEFAULT
    params: tuple[tuple[str, float], ...] = ()

    @property
    def is_fixed(self) -> bool:
        return self.name == DEFAULT

    @property
    def needs_confidence(self) -> bool:
        return self.name in NEEDS_CONFIDENCE

    @property
    def label(self) -> str:
        """Human readable, one per schedule configuration: the record's ``schedule`` column."""
        if not self.params:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v:g}" for k, v in self.params) + ")"


def batch_size_schedule(ranges, adaptive: bool = False) -> ScheduleSpec:
    """vLLM's per-batch-size schedule as a configuration's schedule: ``[[first, last, K], ...]``."""
    params = {f"{int(first)}-{int(last)}": float(k) for first, last, k in ranges}
    if adaptive:
        params["adaptive"] = 1.0
    return ScheduleSpec(BATCH_SIZE, tuple(sorted(params.items())))


def schedule_ranges(spec: ScheduleSpec) -> list[list[int]]:
    """The ``[[first, last, K], ...]`` ranges of a `batch_size_schedule`, by first batch size."""
    ranges = [[*map(int, key.split("-")), int(k)] for key, k in spec.params if key != "adaptive"]
    return sorted(ranges)


def parse_schedule(item, where: str = "schedule") -> ScheduleSpec:
    """``NAME`` or ``{name: NAME, param: value, ...}`` -> a checked `ScheduleSpec`."""
    name, item = named_mapping(item, where, "schedule", PARAMS, "each schedule is a name or {name: NAME, ...params}")
    allowed = PARAMS[name]
    params = {}
    for key, value in item.items():
        if key == "name":
            continue
        if key not in allowed:
            takes = f"takes {', '.join(allowed)}" if allowed else "takes no parameters"
            hint = did_you_mean(str(key), list(allowed))
            raise SpecbenchError(f"{where}: schedule '{name}' {takes}, not '{key}'{hint}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecbenchError(f"{where}: schedule '{name}' param '{key}' must be a number, got {value!r}")
        params[key] = value
    missing = [k for k, default in allowed.items() if default is None and k not in params]
    if missing:
        raise SpecbenchError(
            f"{where}: schedule '{name}' needs {', '.join(missing)} (e.g. {{name: {name}, {missing[0]}: 0.4}})"
        )
    merged = {**allowed, **params}
    if name == "threshold" and not 0 < merged["threshold"] <= 1:
        raise SpecbenchError(f"{where}: threshold must be in (0, 1], got {merged['threshold']}")
    if name == "dspark" and (merged["warmup"] < 0 or int(merged["warmup"]) != merged["warmup"]):
        raise SpecbenchError(f"{where}: dspark warmup must be a whole number of rounds >= 0, got {merged['warmup']}")
    if name == "dspark" and merged["calibrate"] not in (0, 1):
        raise SpecbenchError(f"{where}: dspark calibrate must be 0 or 1, got {merged['calibrate']}")
    given = {k: v for k, v in params.items() if v != allowed[k]}
    return ScheduleSpec(name, tuple(sorted(given.items())))


def check_schedule(spec: ScheduleSpec, *, chain: bool, drafter: str, confident: bool) -> None:
    """Refuse combinations that cannot run: a non-fixed schedule on a tree, a confidence schedule on a
    drafter without probabilities (``confident``: the drafter's, or its type's, attribute)."""
    if spec.is_fixed:
        return
    if not chain:
        raise SpecbenchError(
            f"schedule '{spec.label}' needs a chain: verify-length schedules cut a single draft "
            "path (use tree: chain, or schedule: fixed with trees)"
        )
    if spec.needs_confidence and not confident:
        raise SpecbenchError(
            f"schedule '{spec.label}' reads the drafter's confidence, which drafter '{drafter}' "
            "does not have (it proposes without probabilities): use fixed or heuristic with it"
        )


# ----------------------------------------------------------------------------- the schedules


@dataclass
class RoundVerdict:
    """What a schedule learns after a round: the chosen length, the verdict and the timings."""

    drafted: int
    accepted: int
    emitted: int
    confidences: list[float] | None  # c_1..c_drafted (None: the drafter was not asked for them)
    draft_s: float
    verify_s: float
    round_s: float


class Schedule:
    """``fixed``: every round drafts γ (the cap); the base of the other schedules."""

    def __init__(self, cap: int):
        self.cap = cap

    keep_drafting: KeepDrafting | None = None  # None: draft the round's γ without asking

    def start(self) -> None:
        """A new generation begins."""

    def round_gamma(self) -> int:
        """Tokens to draft at most this round (≤ the cap)."""
        return self.cap

    def observe(self, outcome: RoundVerdict) -> None:
        """The last round's verdict and timings."""


class Heuristic(Schedule):
    """transformers' heuristic: n ← n + 2 after a fully accepted round, else max(1, n − 1); drafts min(n, γ)."""

    def __init__(self, cap: int):
        super().__init__(cap)
        self.length = cap

    def start(self) -> None:
        self.length = self.cap

    def round_gamma(self) -> int:
        return min(self.length, self.cap)

    def observe(self, outcome: RoundVerdict) -> None:
        if outcome.accepted == outcome.drafted:
            self.length += 2
        else:
            self.length = max(1, self.length - 1)


class Threshold(Schedule):
    """Stop once the last drafted token's confidence is below t (that token is still verified)."""

    def __init__(self, cap: int, threshold: float):
        super().__init__(cap)
        self.threshold = threshold

    def keep_drafting(self, confidences: list[float]) -> bool:
        return confidences[-1] >= self.threshold


class RunningLine:
    """Least-squares line y ≈ a + b·x over the points seen so far (running sums, no history kept).

    ``slope`` is b, clipped at 0; with fewer than two distinct x it is the proportional prior ȳ / x̄
    (cost proportional to tokens: pessimistic where a forward's cost is mostly fixed, and replaced by
    the fit as soon as two lengths have been measured)."""

    def __init__(self):
        self.n = self.sx = self.sy = self.sxx = self.sxy = 0.0

    def add(self, x: float, y: float) -> None:
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.sxy += x * y

    def slope(self) -> float:
        if self.n == 0:
            return 0.0
        spread = self.sxx - self.sx * self.sx / self.n  # n · var(x)
        if spread > 1e-9 * max(1.0, self.sxx):
            return max(0.0, (self.sxy - self.sx * self.sy / self.n) / spread)
        return self.sy / self.sx if self.sx > 0 else 0.0


class DSpark(Schedule):
    """Throughput-aware verify length: draft one more token only while its expected gain pays its cost.

    With c_j the drafter's confidence in draft j, the chance that drafts 1..i are all accepted is
    estimated as P_i = Π_{j≤i} a(c_j), a(c) = min(1, κ·c), where κ calibrates confidence to the
    acceptance seen so far in the run: κ = (1 + Σ accepted) / (1 + Σ c over the drafts the target
    tested — the accepted ones and the first rejected one of each round); ``calibrate: 0`` fixes
    κ = 1. Before drafting token i + 1 its own confidence is unknown (computing it is the drafter
    forward being decided on), so it is forecast by the last one: P_{i+1} = P_i · a(c_i).

    Drafting token i + 1 adds P_{i+1} expected tokens to the round (the prefix must survive for it
    to count) and costs t_draft + (t_verify(k+1) − t_verify(k)): one more drafter step and one more
    token in the target's forward. An emitted token is worth r = (Σ round time) ÷ (Σ emitted
    tokens), the time per emitted token at the rate measured so far. Draft on while

        P_{i+1} · r ≥ t_draft + Δt_verify,

    stop at the first i where it fails (or at γ). t_draft and Δt_verify are the slopes of running
    least-squares lines through (drafted, draft_s) and (drafted + 1, verify_s) of the rounds
    measured so far (`RunningLine`); during the first ``warmup`` rounds, and whenever no round has
    been measured, the schedule drafts γ (the prior). Its estimates live as long as the engine —
    one configuration of a sweep: every prompt it ran so far, the untimed warm-up included.
    """

    def __init__(self, cap: int, warmup: float = 2, calibrate: float = 1):
        super().__init__(cap)
        self.warmup, self.calibrate = int(warmup), bool(calibrate)
        self.draft_line, self.verify_line = RunningLine(), RunningLine()
        self.rounds = 0
        self.round_s = self.emitted = 0.0
        self.accepted = self.tested_confidence = 0.0

    @property
    def kappa(self) -> float:
        return (1.0 + self.accepted) / (1.0 + self.tested_confidence) if self.calibrate else 1.0

    @property
    def seconds_per_token(self) -> float:
        return self.round_s / self.emitted if self.emitted else 0.0

    def marginal_cost(self) -> float:
        """t_draft + Δt_verify: seconds one more drafted token costs."""
        return self.draft_line.slope() + self.verify_line.slope()

    def keep_drafting(self, confidences: list[float]) -> bool:
        if self.rounds < max(self.warmup, 1):
            return True
        kappa = self.kappa
        survive = 1.0
        for c in confidences + confidences[-1:]:  # P_{i+1}: the drafted prefix, then the forecast c_{i+1} = c_i
            survive *= min(1.0, kappa * c)
        return survive * self.seconds_per_token >= self.marginal_cost()

    def observe(self, outcome: RoundVerdict) -> None:
        self.rounds += 1
        self.draft_line.add(outcome.drafted, outcome.draft_s)
        self.verify_line.add(outcome.drafted + 1, outcome.verify_s)
        self.round_s += outcome.round_s
        self.emitted += outcome.emitted
        if outcome.confidences:
            tested = min(outcome.accepted + 1, len(outcome.confidences))
            self.accepted += outcome.accepted
            self.tested_confidence += sum(outcome.confidences[:tested])


def make_schedule(spec: ScheduleSpec, cap: int) -> Schedule:
    """The per-engine schedule state for a configuration's schedule and γ cap."""
    params = {**{k: v for k, v in PARAMS.get(spec.name, {}).items() if v is not None}, **spec.params_dict}
    if spec.name == "fixed":
        return Schedule(cap)
    if spec.name == "heuristic":
        return Heuristic(cap)
    if spec.name == "threshold":
        return Threshold(cap, float(params["threshold"]))
    if spec.name == "dspark":
        return DSpark(cap, **params)
    if spec.name in SERVING_SCHEDULES:
        raise SpecbenchError(f"schedule '{spec.label}' is a serving engine's (vLLM), not specbench's own engine's")
    raise SpecbenchError(f"unknown schedule '{spec.name}'{did_you_mean(spec.name, list(PARAMS))}")
