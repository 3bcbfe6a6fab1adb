"""Costs from a hardware profile, for any batch size and context length, and γ per batch size.

`specbench.hardware.profile` measures forwards of random-weight architectures on a grid of batch sizes
B, context lengths c and tokens per sequence k. This module turns a profile into a `CostModel`
(`ProfiledCost`, the interface `specbench.analysis.cost` defines and `specbench.analysis.recommend` predicts
with) and combines it with the acceptance a sweep measured (`recommend_with_profile`).

The cost model.

* Verify, per measured cell (B, c): t_Bc(k) = a + s·k + s₂·max(0, k − k₀), fitted by
  `specbench.analysis.cost.fit_verify` through the medians over k, each weighted by its timed calls, with
  the calls' robust spread ((IQR / 1.349)², see `robust_totals`) as the noise the hinge must beat:
  the hinge at k₀ — where the forward stops being bound by streaming the weights and starts
  paying for arithmetic — is kept only when BIC prefers it; slopes are clipped so t never falls
  with k. Medians and IQRs, not means and variances: on a shared machine a stalled call is not
  the hardware.
* Across cells, for a query (k, B, c): the cell fits are evaluated at k and made non-decreasing
  in B, then in c, by isotonic regression of log t (pool adjacent violators: a larger batch or a
  longer context never costs less, so an inversion is noise, and its cells are replaced by their
  geometric mean rather than one slow cell raising everything after it; the regression keeps
  the order in k), then interpolated linearly in (log B, log c) on log t — a power law between
  neighbouring measured points — so t(k, B, c) is non-decreasing in k, B and c.
  Outside the measured range: below the smallest B (or c) the smallest's time (an upper bound);
  above the largest, the last segment's log-log slope, one slope for every k (the largest over
  the measured k, clipped to [0, 1]: costs grow at most in proportion, since two batches can
  always run one after the other). `ProfiledCost.notes` says when a query left the grid.
* Draft: t_step(B, c) is the median drafter step (a model drafter's one-token forward) or
  proposal (a model-free drafter's lookup for B sequences), interpolated the same way;
  draft_s(γ) = γ · t_step for model drafters and t_step for model-free ones, 0 at γ = 0.
* overhead_s: a constant per round (default 0): the profile prices the forwards only; a serving
  engine's scheduling and sampling add their own.

Per batch size (`recommend_with_profile`). For a sweep's (target, workload, sampling)
scenario and each chain drafter in it, the acceptance model is fitted to the sweep's rounds
(`specbench.analysis.fit`, as `specbench recommend` does) and, with ρ the share of rounds that drafted,

    tokens(γ)     = ρ · E[tokens](γ) + (1 − ρ)                 per sequence and round
    speedup(γ, B) = tokens(γ) · round_s(0, B, c) ÷ round_s(γ, B, c)

with `specbench.analysis.cost.round_s` (draft + ρ·verify(γ+1) + (1 − ρ)·verify(1) + overhead; for a
batch whose forward carries every sequence's tokens, ρ·t(γ+1) + (1 − ρ)·t(1) = t(1 + ργ) when t
is linear in k). c is the scenario's mean context (prompt + half the output) unless given.
Intervals resample prompts (acceptance only; the profile's times are taken as exact). At each
batch size the chosen γ is the best point estimate among those whose interval lies above 1,
else 0 (no speculation). The choice over every integer batch size up to the largest asked
becomes vLLM's ``num_speculative_tokens_per_batch_size`` (see `vllm_schedule`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from specbench.analysis.cost import VerifyFit, fit_verify, round_s
from specbench.analysis.engine_settings import engine_settings, hub_name
from specbench.analysis.fit import estimate_acceptance, expected_tokens, position_counts
from specbench.analysis.intervals import LEVEL, N_BOOT, bootstrap_interval, bootstrap_weights, few_prompts_note
from specbench.analysis.recommend import GROUP_KEYS, MAX_GAMMA, SCENARIO_KEYS, replicate_models
from specbench.errors import SpecbenchError
from specbench.records.jsonable import json_ready
from specbench.records.profile_file import MODEL_FREE, Profile, summary_frame
from specbench.records.rounds import flatten_rounds, prompt_clusters
from specbench.records.summary import is_baseline, prefer_live

TINY = 1e-12


# ----------------------------------------------------------------------------- interpolation

def _pool_adjacent_violators(y: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to y in least squares (equal weights)."""
    sums: list[float] = []
    counts: list[int] = []
    for v in y:
        sums.append(float(v))
        counts.append(1)
        while len(sums) > 1 and sums[-2] * counts[-1] > sums[-1] * counts[-2]:
            s, c = sums.pop(), counts.pop()
            sums[-1] += s
            counts[-1] += c
    return np.repeat(np.array(sums) / np.array(counts), counts)


def isotonic(values: np.ndarray, axis: int) -> np.ndarray:
    """Isotonic regression of log ``values`` along ``axis``, column by column (geometric means of
    violating runs). Order-preserving: columns that were ordered stay ordered."""
    moved = np.moveaxis(np.log(np.maximum(values, TINY)), axis, 0)
    flat = moved.reshape(moved.shape[0], -1).copy()
    for j in np.flatnonzero((np.diff(flat, axis=0) < 0).any(axis=0)):
        flat[:, j] = _pool_adjacent_violators(flat[:, j])
    return np.moveaxis(np.exp(flat.reshape(moved.shape)), 0, axis)


def _slope(values: np.ndarray, grid: np.ndarray) -> float:
    """Largest last-segment log-log slope over the columns of values [n, m], clipped to [0, 1]."""
    if len(grid) < 2:
        return 0.0
    lv = np.log(np.maximum(values[-2:], TINY))
    slopes = (lv[1] - lv[0]) / (np.log(grid[-1]) - np.log(grid[-2]))
    return float(np.clip(np.max(slopes), 0.0, 1.0))


def _interp(values: np.ndarray, grid: np.ndarray, x: float, slope: float) -> np.ndarray:
    """values [n, m] at grid [n] (ascending) → [m] at x: linear in (log x, log value) between
    neighbours, the first row below the grid, the last row × (x / last)^slope above it."""
    if x <= grid[0] or len(grid) == 1:
        return values[0] if x <= grid[0] else values[-1] * (x / grid[-1]) ** slope
    if x >= grid[-1]:
        return values[-1] * (x / grid[-1]) ** slope
    i = int(np.searchsorted(grid, x, side="right")) - 1
    w = (np.log(x) - np.log(grid[i])) / (np.log(grid[i + 1]) - np.log(grid[i]))
    lv = np.log(np.maximum(values[i:i + 2], TINY))
    return np.exp((1 - w) * lv[0] + w * lv[1])


@dataclass
class GridTable:
    """Times on a batch × context grid, interpolated as the module docstring says.

    ``interpolate`` takes [nb, nc, m] values: the query columns first, then the reference
    columns that set the extrapolation slopes (the measured k), so an answer never depends on
    which other k were asked with it. ``notes`` says how far queries left the grid.
    """
    batches: np.ndarray  # [nb] ascending
    contexts: np.ndarray  # [nc] ascending
    name: str
    fixed_notes: set = field(default_factory=set)
    outside: dict = field(default_factory=dict)  # (axis, 'above' | 'below') -> furthest query

    def _track(self, batch: float, context: float) -> None:
        for axis, x, grid in (("batch", batch, self.batches), ("context", context, self.contexts)):
            if x > grid[-1]:
                self.outside[(axis, "above")] = max(x, self.outside.get((axis, "above"), x))
            elif x < grid[0]:
                self.outside[(axis, "below")] = min(x, self.outside.get((axis, "below"), x))

    @property
    def notes(self) -> set:
        out = set(self.fixed_notes)
        for (axis, side), x in self.outside.items():
            grid = self.batches if axis == "batch" else self.contexts
            plural = "batch sizes" if axis == "batch" else "context lengths"
            measured = ", ".join(f"{v:g}" for v in grid)
            if side == "above" and len(grid) >= 2:
                out.add(f"{self.name}: {axis} up to {x:g} lies beyond the profiled {plural} ({measured}): "
                        "extrapolated along the last segment's power law")
            elif side == "above":
                out.add(f"{self.name}: one {axis} profiled ({measured}): its time is used up to {axis} {x:g}")
            else:
                out.add(f"{self.name}: {axis} down to {x:g} lies below the profiled {plural} ({measured}): "
                        "the smallest one's time is used (an upper bound)")
        return out

    def interpolate(self, table: np.ndarray, n_query: int, batch: float, context: float) -> np.ndarray:
        """table [nb, nc, n_query + n_ref] → [n_query] at (batch, context)."""
        self._track(batch, context)
        table = isotonic(isotonic(table, axis=0), axis=1)  # non-decreasing in B, then in c
        table = np.maximum.accumulate(np.maximum.accumulate(table, axis=0), axis=1)  # guard against rounding
        ref = table[:, :, n_query:] if table.shape[2] > n_query else table
        # one extrapolation slope per axis, over every measured row and reference column: then
        # extrapolated values keep the order in k, batch and context that the grid has
        batch_slope = max(_slope(ref[:, j], self.batches) for j in range(len(self.contexts)))
        context_slope = max(_slope(ref[i], self.contexts) for i in range(len(self.batches)))
        by_context = np.stack([_interp(table[:, j], self.batches, batch, batch_slope)
                               for j in range(len(self.contexts))])  # [nc, m]
        return _interp(by_context, self.contexts, context, context_slope)[:n_query]


def _complete_grid(cells: dict[tuple[int, int], object], what: str, notes: set) -> tuple[np.ndarray, np.ndarray]:
    """The batches and contexts of the largest complete grid in ``cells`` (dropping the largest
    batches that miss a context, e.g. after running out of device memory)."""
    batches = sorted({b for b, _ in cells})
    contexts = sorted({c for _, c in cells})
    while batches and not all((batches[-1], c) in cells for c in contexts):
        notes.add(f"{what}: batch {batches[-1]} lacks some contexts in the profile: left out")
        batches.pop()
    if not batches:
        raise SpecbenchError(f"the profile has no complete batch × context grid for the {what}")
    return np.asarray(batches, dtype=float), np.asarray(contexts, dtype=float)


# ----------------------------------------------------------------------------- the cost model

@dataclass
class ProfiledCost:
    """A `specbench.analysis.cost.CostModel` from a profile: verify per (k, batch, context), the drafter's
    step per (batch, context), a constant overhead (see the module docstring)."""
    verify_grid: GridTable
    verify_fits: list[list[VerifyFit]]  # [nb][nc]
    measured_tokens: np.ndarray  # the k the profile timed (extrapolation slopes)
    draft_grid: GridTable | None
    draft_table: np.ndarray | None  # [nb, nc] median step (model) or proposal (model-free) seconds
    model_free: bool
    drafter: str | None
    target: str
    round_overhead_s: float = 0.0
    default_context: int | None = None

    @property
    def notes(self) -> list[str]:
        notes = set(self.verify_grid.notes) | (set(self.draft_grid.notes) if self.draft_grid else set())
        return sorted(notes)

    def _context(self, context: int | None) -> float:
        if context is not None:
            return float(context)
        if self.default_context is not None:
            return float(self.default_context)
        return float(self.verify_grid.contexts[0])

    def with_context(self, context: int | None) -> "ProfiledCost":
        """The same costs with ``context`` as the default (what ``context=None`` means)."""
        return replace(self, default_context=context)

    def verify_s(self, tokens, batch: int = 1, context: int | None = None):
        k = np.asarray(tokens, dtype=float)
        columns = np.concatenate([k.ravel(), self.measured_tokens])
        table = np.array([[fit(columns) for fit in row] for row in self.verify_fits])  # [nb, nc, m]
        values = self.verify_grid.interpolate(table, k.size, float(batch), self._context(context))
        return values.reshape(k.shape)

    def step_s(self, batch: int = 1, context: int | None = None) -> float:
        """One drafter step (model drafter) or one proposal for the batch (model-free)."""
        if self.draft_table is None:
            raise SpecbenchError("the cost profile holds no drafter timings: profile with --drafter NAME (or ngram)")
        return float(self.draft_grid.interpolate(self.draft_table[:, :, None], 1, float(batch),
                                                 self._context(context))[0])

    def draft_s(self, gamma, batch: int = 1, context: int | None = None):
        g = np.asarray(gamma, dtype=float)
        if not (g > 0).any():
            return np.zeros_like(g)
        step = self.step_s(batch, context)
        return np.where(g > 0, step if self.model_free else step * g, 0.0)

    def overhead_s(self, gamma, batch: int = 1, context: int | None = None):
        return np.full(np.shape(gamma), self.round_overhead_s, dtype=float)

    def summary(self) -> pd.DataFrame:
        """The fitted verify model per measured cell."""
        rows = []
        for i, batch in enumerate(self.verify_grid.batches):
            for j, context in enumerate(self.verify_grid.contexts):
                fit = self.verify_fits[i][j]
                knee = fit.kind == "knee"
                rows.append({"batch": int(batch), "context": int(context), "model": fit.kind, "a_ms": 1e3 * fit.a,
                             "slope_ms": 1e3 * fit.b, "knee": fit.knee if knee else None,
                             "slope2_ms": 1e3 * fit.b2 if knee else None,
                             "t1_ms": 1e3 * float(fit(1)), "t_max_ms": 1e3 * float(fit(max(fit.sizes or (1,)))),
                             "draft_ms": None if self.draft_table is None else 1e3 * self.step_s(batch, context)})
        return pd.DataFrame(rows)


def robust_totals(cell: pd.DataFrame) -> np.ndarray:
    """Per k, the (n, Σy, Σy²) of a pseudo-sample of the n timed calls with the cell's median as
    its mean and (IQR / 1.349)² as its variance: least squares then runs through the medians,
    weighted by the calls, and the residual sum of squares carries the calls' own spread, while
    a call stalled by another process moves neither (as it would a mean and a variance)."""
    n = cell["repeats"].to_numpy(dtype=float) if "repeats" in cell else np.ones(len(cell))
    median = cell["median_s"].to_numpy(dtype=float)
    sigma = cell["iqr_s"].to_numpy(dtype=float) / 1.349 if "iqr_s" in cell else np.zeros(len(cell))
    return np.stack([n, n * median, n * median**2 + np.maximum(n - 1, 0) * sigma**2], axis=-1)


def fit_cells(rows: pd.DataFrame) -> dict[tuple[int, int], VerifyFit]:
    """t_Bc(k) per (batch, context): `specbench.analysis.cost.fit_verify` on `robust_totals` over k."""
    fits = {}
    for (batch, context), cell in rows.groupby(["batch", "context"], sort=True):
        cell = cell.sort_values("tokens")
        fits[(int(batch), int(context))], _ = fit_verify(cell["tokens"].to_numpy(dtype=float), robust_totals(cell))
    return fits


def profile_drafter(profile: Profile, drafter: str | None) -> str | None:
    """The profile drafter ``drafter`` names (None: the only one, or none when the profile has none)."""
    names = profile.drafters
    if drafter is None:
        if len(names) > 1:
            raise SpecbenchError(f"the profile holds several drafters ({', '.join(names)}): name one")
        return names[0] if names else None
    if drafter not in names:
        raise SpecbenchError(f"the profile holds no drafter '{drafter}' (it has: {', '.join(names) or 'none'})")
    return drafter


def fit_profile(profile: Profile, drafter: str | None = None, *, overhead_s: float = 0.0,
                context: int | None = None) -> ProfiledCost:
    """`ProfiledCost` of the profile's target with one of its drafters (see `profile_drafter`)."""
    verify_rows = profile.rows(role="target", measure="verify")
    if verify_rows.empty:
        raise SpecbenchError("the cost profile holds no target timings")
    verify_notes: set = set()
    fits = fit_cells(verify_rows)
    batches, contexts = _complete_grid(fits, "target", verify_notes)
    verify_grid = GridTable(batches, contexts, f"verify ({profile.target})", fixed_notes=verify_notes)
    verify_fits = [[fits[(int(b), int(c))] for c in contexts] for b in batches]
    name = profile_drafter(profile, drafter)
    draft_grid = draft_table = None
    model_free = name in MODEL_FREE
    if name is not None:
        rows = profile.rows(role="drafter", model=name)
        medians = {(int(b), int(c)): float(cell["median_s"].median())
                   for (b, c), cell in rows.groupby(["batch", "context"], sort=True)}
        if medians:
            draft_notes: set = set()
            d_batches, d_contexts = _complete_grid(medians, f"drafter {name}", draft_notes)
            draft_grid = GridTable(d_batches, d_contexts, f"draft ({name})", fixed_notes=draft_notes)
            draft_table = np.array([[medians[(int(b), int(c))] for c in d_contexts] for b in d_batches])
    measured = np.asarray(sorted(verify_rows["tokens"].unique()), dtype=float)
    return ProfiledCost(verify_grid=verify_grid, verify_fits=verify_fits, measured_tokens=measured,
                        draft_grid=draft_grid, draft_table=draft_table, model_free=model_free, drafter=name,
                        target=profile.target, round_overhead_s=overhead_s, default_context=context)


def what_if(cost: ProfiledCost, alphas, batches, *, context: int | None = None,
            max_gamma: int = MAX_GAMMA) -> pd.DataFrame:
    """Best γ and its speedup per (α, batch) for a constant acceptance α — what a profile says
    before any sweep: speedup(γ) = E[tokens](α, γ) · round_s(0) ÷ round_s(γ), every round drafting."""
    gammas = np.arange(max_gamma + 1)
    rows = []
    for batch in batches:
        seconds = np.asarray(round_s(cost, gammas, batch=int(batch), context=context), dtype=float)
        for alpha in alphas:
            speedup = expected_tokens(float(alpha), gammas) * seconds[0] / seconds
            best = int(np.argmax(speedup))
            rows.append({"alpha": float(alpha), "batch": int(batch), "gamma": best, "speedup": float(speedup[best]),
                         "speedup_gamma_1": float(speedup[1]) if max_gamma >= 1 else float("nan"),
                         "speedup_gamma_4": float(speedup[4]) if max_gamma >= 4 else float("nan")})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- γ per batch size

@dataclass
class DrafterPlan:
    """One drafter of one scenario: predicted speedups over (batch, γ) and the γ chosen per batch."""
    drafter: str
    drafter_label: str
    drafter_params: str
    profile_drafter: str
    alpha: float
    acceptance_model: str
    propose_rate: float
    batches: np.ndarray  # [nB] every integer batch size 1..max
    gammas: np.ndarray  # [G] 0..max_gamma
    speedup: np.ndarray  # [nB, G] point estimates (γ = 0: 1)
    lo: np.ndarray  # [nB, G]
    hi: np.ndarray  # [nB, G]
    round_s: np.ndarray  # [nB, G] predicted seconds per round
    tokens: np.ndarray  # [G] tokens per sequence and round
    chosen: np.ndarray  # [nB] γ chosen (0: no speculation)

    def at(self, batch: int) -> dict:
        i = int(batch) - 1
        g = int(self.chosen[i])
        return {"drafter_label": self.drafter_label, "batch": int(batch), "gamma": g,
                "speedup": float(self.speedup[i, g]), "lo": float(self.lo[i, g]), "hi": float(self.hi[i, g]),
                "best_gamma": int(np.argmax(self.speedup[i])),
                "tokens_per_s": float(batch * self.tokens[g] / self.round_s[i, g]),
                "baseline_tokens_per_s": float(batch / self.round_s[i, 0])}


@dataclass
class ProfileRecommendation:
    keys: dict  # the scenario: target, temperature, top_p, top_k, workload
    context: int
    n_prompts: int
    batches: list[int]
    plans: list[DrafterPlan]
    table: pd.DataFrame  # per asked batch: the best drafter's choice (or none)
    vllm: dict | None  # {"drafter_label", "config", "snippet", "notes"}
    notes: list[str]


def _choose(point: np.ndarray, lo: np.ndarray, n_prompts: int) -> np.ndarray:
    """γ per batch: the best point estimate among γ ≥ 1 whose lower bound is above 1, else 0."""
    gate = lo if n_prompts >= 2 else point
    candidates = np.where((gate > 1.0) & (np.arange(point.shape[1]) > 0)[None, :], point, -np.inf)
    best = np.argmax(candidates, axis=1)
    return np.where(np.isfinite(candidates[np.arange(len(best)), best]), best, 0)


def ranges(chosen: np.ndarray) -> list[list[int]]:
    """[[first batch, last batch, γ], ...] runs of equal γ over batch sizes 1..len(chosen)."""
    out: list[list[int]] = []
    for i, g in enumerate(np.asarray(chosen, dtype=int), start=1):
        if out and out[-1][2] == g:
            out[-1][1] = i
        else:
            out.append([i, i, int(g)])
    return out


def vllm_schedule(plan: DrafterPlan, target: str, hub_ids: Mapping[str, str] | None = None) -> dict | None:
    """vLLM's speculative_config for a plan, γ per batch size as ``num_speculative_tokens_per_batch_size``.

    vLLM's Dynamic Speculative Decoding (docs.vllm.ai, features/speculative_decoding/
    dynamic_speculative_decoding, v0.25 and latest) takes a list of [start_bs, end_bs, K]:
    concurrency in [start_bs, end_bs] drafts K tokens, K = 0 turns speculation off there; K is
    capped by ``num_speculative_tokens``, set here to the largest K. Batch sizes above the last
    range get the last range's K (vLLM 0.32 ``build_dynamic_sd_schedule_lookup`` carries it to
    max_num_seqs). None when no batch size speculates.
    """
    schedule = ranges(plan.chosen)
    top = max(k for _, _, k in schedule)
    if top == 0:
        return None
    setting = engine_settings(plan.drafter, plan.drafter_params, "chain", top, target=target, engines=("vllm",),
                              hub_ids=hub_ids)["vllm"]
    notes = list(setting.notes)
    if not setting.supported or not setting.config:
        return {"drafter_label": plan.drafter_label, "config": {}, "snippet": "", "supported": False,
                "notes": notes or [f"vLLM has no method for drafter '{plan.drafter}'"]}
    config = {**setting.config, "num_speculative_tokens": top, "num_speculative_tokens_per_batch_size": schedule}
    text = json.dumps(config)
    snippet = f"vllm serve {hub_name(target, hub_ids)} --speculative-config '{text}'"
    last = schedule[-1][2]
    notes.append(f"vLLM applies the last range's K ({last}) to every batch size above {len(plan.chosen)} (and fills "
                 f"gaps with the previous range's K); batch sizes above {len(plan.chosen)} were not evaluated: "
                 f"add a final range [{len(plan.chosen) + 1}, <max_num_seqs>, K] (K = 0 turns speculation off) "
                 "if the largest profiled batch is not representative")
    notes.append("num_speculative_tokens_per_batch_size is vLLM's Dynamic Speculative Decoding (documented from "
                 "v0.25): check that your version has it")
    return {"drafter_label": plan.drafter_label, "config": config, "snippet": snippet, "supported": True,
            "notes": notes}


def match_drafter(drafter: str, params: str, profile: Profile) -> tuple[str | None, str | None]:
    """(profile drafter whose costs price this sweep drafter, a note) — or (None, why not)."""
    names = profile.drafters
    models = [n for n in names if n not in MODEL_FREE]
    if drafter in MODEL_FREE:
        if drafter in names:
            return drafter, None
        return None, f"the profile has no '{drafter}' proposal timings (profile with --drafter {drafter})"
    wanted = json.loads(params or "{}").get("model")
    if wanted and wanted in models:
        return wanted, None
    if len(models) == 1:
        return models[0], (f"{drafter}({wanted or '?'}) priced with the profiled drafter '{models[0]}'"
                           if wanted != models[0] else None)
    if not models:
        return None, f"the profile has no model drafter timings for '{drafter}' (profile with --drafter ARCH)"
    return None, f"no profiled drafter matches '{wanted}' (profiled: {', '.join(models)})"


def _plan(group: pd.DataFrame, clusters: pd.Index, weights: np.ndarray, cost: ProfiledCost, context: int,
          max_batch: int, max_gamma: int, level: float, notes: list[str]) -> DrafterPlan:

    rounds = flatten_rounds(group, clusters)
    counts = position_counts(rounds, len(clusters))
    acceptance = estimate_acceptance(counts, n_boot=0, level=level)
    rho = float(np.mean(rounds.drafted > 0)) if len(rounds) else 1.0
    gammas = np.arange(max_gamma + 1)

    def tokens_of(model) -> np.ndarray:  # [G] tokens per sequence and round, ρ·E[tokens](γ) + (1 − ρ)
        expected = 1.0 + np.concatenate([[0.0], np.cumsum(np.cumprod(model.rates(max_gamma)))])
        return np.where(gammas > 0, rho * expected + (1 - rho), 1.0)

    tokens = tokens_of(acceptance.model)
    batches = np.arange(1, max_batch + 1)
    seconds = np.stack([np.asarray(round_s(cost, gammas, propose_rate=rho, batch=int(b), context=context),
                                   dtype=float) for b in batches])  # [nB, G]
    relative = seconds[:, :1] / seconds  # baseline round ÷ round
    point = tokens[None, :] * relative
    if len(weights):
        reps = np.stack([tokens_of(m) for m in replicate_models(acceptance.model, counts, weights)])  # [R, G]
        lo, hi = bootstrap_interval(point, reps[:, None, :] * relative[None], len(clusters), level, positive=True)
    else:
        lo = hi = point
    label = str(group["drafter_label"].iloc[0])
    notes.extend(f"{label}: {n}" for n in acceptance.notes)
    return DrafterPlan(drafter=str(group["drafter"].iloc[0]), drafter_label=label,
                       drafter_params=str(group["drafter_params"].iloc[0]), profile_drafter=str(cost.drafter),
                       alpha=float(acceptance.alpha), acceptance_model=acceptance.model.name, propose_rate=rho,
                       batches=batches, gammas=gammas, speedup=point, lo=np.asarray(lo), hi=np.asarray(hi),
                       round_s=seconds, tokens=tokens, chosen=_choose(point, np.asarray(lo), len(clusters)))


def workload_context(records: pd.DataFrame) -> int:
    """Mean context while decoding: prompt tokens + half the generated tokens."""
    return max(1, int(round(float((records["prompt_tokens"] + records["new_tokens"] / 2).mean()))))


def recommend_with_profile(records: pd.DataFrame, profile: Profile, *, batches=None, context: int | None = None,
                           max_gamma: int = MAX_GAMMA, n_boot: int | None = None, level: float | None = None,
                           seed: int = 0, overhead_s: float = 0.0,
                           hub_ids: Mapping[str, str] | None = None) -> list[ProfileRecommendation]:
    """γ (or no speculation) per scenario and batch size: the sweep's acceptance × the profile's costs."""
    n_boot = N_BOOT if n_boot is None else n_boot
    level = LEVEL if level is None else level
    batches = sorted({int(b) for b in (batches or profile.rows(role="target")["batch"].unique())})
    if not batches or min(batches) < 1:
        raise SpecbenchError(f"--batch: every batch size must be >= 1, got {batches}")
    if max_gamma < 1:
        raise SpecbenchError(f"--max-gamma must be >= 1, got {max_gamma}")
    if context is not None and context < 1:
        raise SpecbenchError(f"--context must be >= 1, got {context}")
    if records.empty:
        raise SpecbenchError("the results folder holds no records")
    spec_all = prefer_live(records[~is_baseline(records) & (records["gamma"] > 0)])
    if spec_all.empty:
        raise SpecbenchError("no speculative records (γ ≥ 1): the acceptance to combine with the profile is missing")
    costs: dict[str, ProfiledCost] = {}
    out = []
    for i, (key, scenario) in enumerate(spec_all.groupby(SCENARIO_KEYS, dropna=False, sort=True)):
        keys = dict(zip(SCENARIO_KEYS, key))
        notes: list[str] = []
        if str(keys["target"]) != profile.target:
            notes.append(f"acceptance measured with target '{keys['target']}', costs profiled for "
                         f"'{profile.target}': the acceptance is assumed to carry over")
        chains = scenario[scenario["tree"] == "chain"]
        if len(chains) < len(scenario):
            notes.append("tree configurations left out: the profile prices chains (vLLM's per-batch γ is a chain "
                         "length)")
        clusters = prompt_clusters(chains) if not chains.empty else pd.Index([])
        rng = np.random.default_rng(seed + i)
        weights = bootstrap_weights(len(clusters), n_boot if len(clusters) >= 2 else 0, rng)
        if len(clusters) < 2:
            notes.append("one prompt: no interval; γ chosen where the point estimate exceeds 1")
        elif few_prompts_note(len(clusters)):
            notes.append(few_prompts_note(len(clusters)))
        ctx = context or workload_context(chains if not chains.empty else scenario)
        plans = []
        for gkey, group in chains.groupby(GROUP_KEYS, dropna=False, sort=True):
            row = dict(zip(GROUP_KEYS, gkey))
            name, why = match_drafter(row["drafter"], str(group["drafter_params"].iloc[0]), profile)
            if why:
                notes.append(f"{row['drafter_label']}: {why}")
            if name is None:
                continue
            if name not in costs:
                costs[name] = fit_profile(profile, name, overhead_s=overhead_s)
            plans.append(_plan(group, clusters, weights, costs[name], ctx, max(batches), max_gamma, level, notes))
        table = _batch_table(plans, batches)
        vllm = None
        if plans:
            lead = _lead_plan(plans, batches)
            vllm = vllm_schedule(lead, str(keys["target"]), hub_ids)
        for name in {p.profile_drafter for p in plans}:
            notes.extend(costs[name].notes)
        out.append(ProfileRecommendation(keys=keys, context=ctx, n_prompts=len(clusters), batches=batches,
                                         plans=plans, table=table, vllm=vllm, notes=list(dict.fromkeys(notes))))
    return out


def _batch_table(plans: list[DrafterPlan], batches: list[int]) -> pd.DataFrame:
    """Per asked batch size: the drafter whose chosen γ gives the highest speedup, or none."""
    rows = []
    for b in batches:
        options = [p.at(b) for p in plans]
        chosen = [o for o in options if o["gamma"] > 0]
        if chosen:
            best = max(chosen, key=lambda o: o["speedup"])
        else:
            base = options[0] if options else {"baseline_tokens_per_s": float("nan")}
            best = {"drafter_label": "none", "batch": b, "gamma": 0, "speedup": 1.0, "lo": 1.0, "hi": 1.0,
                    "best_gamma": max(options, key=lambda o: o["speedup"])["best_gamma"] if options else 0,
                    "tokens_per_s": base["baseline_tokens_per_s"], "baseline_tokens_per_s": base["baseline_tokens_per_s"]}
            if options:  # say what the best speculative option would have given
                top = max(plans, key=lambda p: p.speedup[b - 1, 1:].max())
                g = int(np.argmax(top.speedup[b - 1, 1:])) + 1
                best.update(best_drafter=top.drafter_label, best_gamma=g, best_speedup=float(top.speedup[b - 1, g]),
                            best_lo=float(top.lo[b - 1, g]), best_hi=float(top.hi[b - 1, g]))
        rows.append(best)
    return pd.DataFrame(rows)


def _lead_plan(plans: list[DrafterPlan], batches: list[int]) -> DrafterPlan:
    """The drafter to export: chosen at the most asked batch sizes, then the best at the smallest."""
    def score(plan: DrafterPlan):
        wins = sum(1 for b in batches if plan.chosen[b - 1] > 0)
        return wins, float(plan.speedup[batches[0] - 1, plan.chosen[batches[0] - 1]])

    return max(plans, key=score)


def recommendation_dict(rec: ProfileRecommendation) -> dict:
    """Plain JSON-ready data for one scenario."""
    plans = []
    for plan in rec.plans:
        plans.append({"drafter": plan.drafter, "drafter_label": plan.drafter_label,
                      "profile_drafter": plan.profile_drafter, "alpha": plan.alpha,
                      "acceptance_model": plan.acceptance_model, "propose_rate": plan.propose_rate,
                      "per_batch": [plan.at(b) for b in rec.batches],
                      "schedule": ranges(plan.chosen)})
    return json_ready({**rec.keys, "context": rec.context, "n_prompts": rec.n_prompts, "batches": rec.batches,
                       "choices": rec.table.to_dict("records"), "drafters": plans, "vllm": rec.vllm,
                       "notes": rec.notes})


def to_json(recs: list[ProfileRecommendation]) -> str:
    return json.dumps([recommendation_dict(r) for r in recs], indent=2)


def markdown_summary(profile: Profile) -> str:
    """A profile as Markdown: what ran where, the per-cell times and bandwidth, the fitted verify model."""
    info = profile.info
    bandwidth = info.get("bandwidth", {})
    target = info["target"]
    grid = info.get("grid", {})
    peak = f"{bandwidth['peak_gb_s']:.0f} GB/s ({bandwidth.get('peak_source', '?')})" if bandwidth.get("peak_gb_s") \
        else "unknown"
    lines = [f"### {target['name']} on {info['device']['device_name']} ({info['dtype']})", "",
             f"- target: {target.get('layers')} layers, hidden {target.get('hidden_size')}, "
             f"{target.get('parameters', 0) / 1e9:.3f} B parameters, random weights from {target.get('source')}; "
             f"{target.get('weight_bytes', 0) / 1e9:.3f} GB streamed per forward, "
             f"{target.get('kv_bytes_per_position', 0) / 1024:.1f} KiB of KV cache per position and sequence",
             f"- drafters: {', '.join(d['name'] for d in info.get('drafters', [])) or 'none'}",
             f"- grid: batch {grid.get('batches')}, context {grid.get('contexts')}, k {grid.get('tokens')}; "
             f"{grid.get('repeats')} timed calls after {grid.get('warmup')} warm-up per cell",
             f"- peak bandwidth: {peak}; measured read: {bandwidth.get('measured_read_gb_s', float('nan')):.1f} GB/s",
             f"- {info.get('seconds', float('nan')):.0f} s; load average {info.get('load_average_start', ['?'])[0]} at "
             f"start; torch threads {info.get('torch_threads')}; torch {info.get('versions', {}).get('torch')}",
             ""]
    lines += ["| model | what | B | c | ms (k min) [IQR] | ms (k max) | k max ÷ k min | GB/s | % peak | memory MiB |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for _, r in summary_frame(profile).iterrows():
        k_max = f"{r['ms_k_max']:.3f} (k={r['k_max']})" if r["k_max"] > r["k_min"] else "-"
        ratio = f"{r['ratio']:.2f}" if r["k_max"] > r["k_min"] else "-"
        gb_s = "-" if r["gb_s"] != r["gb_s"] else f"{r['gb_s']:.1f}"
        share = "-" if r["peak_fraction"] != r["peak_fraction"] else f"{100 * r['peak_fraction']:.0f}"
        lines.append(f"| {r['model']} | {r['measure']} | {r['batch']} | {r['context']} | "
                     f"{r['ms_k_min']:.3f} [{r['iqr_ms_k_min']:.3f}] | {k_max} | {ratio} | {gb_s} | {share} | "
                     f"{r['memory_bytes'] / 2**20:.0f} |")
    if info.get("skipped"):
        lines += [""] + [f"- skipped: {s}" for s in info["skipped"]]
    model_drafters = [d["name"] for d in info.get("drafters", []) if not d.get("model_free")]
    drafter = (model_drafters or profile.drafters or [None])[0]  # the step column: a model drafter's if any
    fits = fit_profile(profile, drafter).summary()
    if not fits.empty:
        lines += ["", "Fitted verify model t(k) = a + s·k (+ s₂·max(0, k − k₀) where a knee shows):", "",
                  f"| B | c | model | a ms | s ms/token | knee k₀ | s₂ ms/token | t(1) ms | {drafter or 'no'} drafter ms |",
                  "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for _, f in fits.iterrows():
            knee = "-" if f["knee"] is None or f["knee"] != f["knee"] else f"{f['knee']:g}"
            slope2 = "-" if f["slope2_ms"] is None or f["slope2_ms"] != f["slope2_ms"] else f"{f['slope2_ms']:.4f}"
            draft = "-" if f["draft_ms"] is None or f["draft_ms"] != f["draft_ms"] else f"{f['draft_ms']:.3f}"
            lines.append(f"| {f['batch']} | {f['context']} | {f['model']} | {f['a_ms']:.3f} | {f['slope_ms']:.4f} | "
                         f"{knee} | {slope2} | {f['t1_ms']:.3f} | {draft} |")
    return "\n".join(lines) + "\n"
