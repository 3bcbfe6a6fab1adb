"""Costs from a hardware profile, for any batch size and context length.

`specbench.profile.profiler` measures forwards of random-weight architectures on a grid of batch sizes
B, context lengths c and tokens verified per sequence n (``verify_tokens``; the profile file's
``tokens`` column of its 'verify' rows). This module turns a profile into a `CostModel`
(`ProfiledCost`, the interface `specbench.analysis.cost.round_cost` defines), which the recommender takes as its
cost source (`specbench.analysis.cost.source.ProfiledCosts`).

The cost model.

* Verify, per measured cell (B, c): t_Bc(n) = a + s·n + s₂·max(0, n − n₀), fitted by
  `specbench.analysis.cost.round_cost.fit_verify` through the medians over n, each weighted by its timed calls, with
  the calls' robust spread ((IQR / 1.349)², see `robust_totals`) as the noise the hinge must beat:
  the hinge at n₀ — where the forward stops being bound by streaming the weights and starts
  paying for arithmetic — is kept only when BIC prefers it; slopes are clipped so t never falls
  with n. Medians and IQRs, not means and variances: on a shared machine a stalled call is not
  the hardware.
* Across cells, for a query (n, B, c): the cell fits are evaluated at n and made non-decreasing
  in B, then in c, by isotonic regression of log t (pool adjacent violators: a larger batch or a
  longer context never costs less, so an inversion is noise, and its cells are replaced by their
  geometric mean rather than one slow cell raising everything after it; the regression keeps
  the order in n), then interpolated linearly in (log B, log c) on log t — a power law between
  neighbouring measured points — so t(n, B, c) is non-decreasing in n, B and c.
  Outside the measured range: below the smallest B (or c) the smallest's time (an upper bound);
  above the largest, the last segment's log-log slope, one slope for every n (the largest over
  the measured n, clipped to [0, 1]: costs grow at most in proportion, since two batches can
  always run one after the other). `ProfiledCost.notes` says when a query left the grid.
* Draft: t_step(B, c) is the median drafter step (a model drafter's one-token forward) or
  proposal (a model-free drafter's lookup for B sequences), interpolated the same way;
  draft_s(γ) = γ · t_step for model drafters and t_step for model-free ones, 0 at γ = 0.
* overhead_s: a constant per round (default 0): the profile prices the forwards only; a serving
  engine's scheduling and sampling add their own.

γ per batch size from these costs and a sweep's acceptance: `specbench.analysis.recommendation.profiled`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specbench.analysis.acceptance_model import expected_tokens
from specbench.analysis.cost import coverage
from specbench.analysis.cost.round_cost import VerifyFit, fit_verify, round_s
from specbench.analysis.options import MAX_GAMMA
from specbench.catalogue.drafters import is_model_free
from specbench.errors import SpecbenchError
from specbench.records.profile_file import Profile, summary_frame

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
    lv = np.log(np.maximum(values[i : i + 2], TINY))
    return np.exp((1 - w) * lv[0] + w * lv[1])


@dataclass
class GridTable:
    """Times on a batch × context grid, interpolated as the module docstring says.

    ``interpolate`` takes [nb, nc, m] values: the query columns first, then the reference
    columns that set the extrapolation slopes (the measured verify_tokens), so an answer never
    depends on which others were asked with it. ``notes`` says how far queries left the grid.
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

    def timed(self) -> dict[str, np.ndarray]:
        """The values each axis was profiled at."""
        return {"batch": self.batches, "context": self.contexts}

    @property
    def notes(self) -> set:
        """The furthest query on each side of each axis, in `specbench.analysis.cost.coverage`'s words."""
        out = set(self.fixed_notes)
        for (axis, _), x in self.outside.items():
            words = coverage.outside(axis, x, self.timed()[axis], "profiled")
            grid = self.timed()[axis]
            power_law = " along the last segment's power law" if x > grid[-1] and len(grid) >= 2 else ""
            out.add(f"{self.name}: {words}{power_law}")
        return out

    def interpolate(self, table: np.ndarray, n_query: int, batch: float, context: float) -> np.ndarray:
        """table [nb, nc, n_query + n_ref] → [n_query] at (batch, context)."""
        self._track(batch, context)
        table = isotonic(isotonic(table, axis=0), axis=1)  # non-decreasing in B, then in c
        table = np.maximum.accumulate(np.maximum.accumulate(table, axis=0), axis=1)  # guard against rounding
        ref = table[:, :, n_query:] if table.shape[2] > n_query else table
        # one extrapolation slope per axis, over every measured row and reference column: then
        # extrapolated values keep the order in verify_tokens, batch and context that the grid has
        batch_slope = max(_slope(ref[:, j], self.batches) for j in range(len(self.contexts)))
        context_slope = max(_slope(ref[i], self.contexts) for i in range(len(self.batches)))
        by_context = np.stack(
            [_interp(table[:, j], self.batches, batch, batch_slope) for j in range(len(self.contexts))]
        )  # [nc, m]
        return _interp(by_context, self.contexts, context, context_slope)[:n_query]


def _complete_grid(cells: Mapping[tuple[int, int], object], what: str, notes: set) -> tuple[np.ndarray, np.ndarray]:
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
    """A `specbench.analysis.cost.round_cost.CostModel` from a profile: verify per (verify_tokens, batch, context), the drafter's
    step per (batch, context), a constant overhead (see the module docstring)."""

    verify_grid: GridTable
    verify_fits: list[list[VerifyFit]]  # [nb][nc]
    measured_verify_tokens: np.ndarray  # the verify_tokens the profile timed (extrapolation slopes)
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

    def extrapolation(self, batch: int = 1, context: int | None = None) -> str | None:
        """Where a prediction at (batch, context) leaves the profiled grid, in words (None: inside it)."""
        query = {"batch": float(batch), "context": self._context(context)}
        return coverage.describe(query, self.verify_grid.timed(), "profiled")

    def verify_s(self, verify_tokens, batch: int = 1, context: int | None = None):
        n = np.asarray(verify_tokens, dtype=float)
        columns = np.concatenate([n.ravel(), self.measured_verify_tokens])
        table = np.array([[fit(columns) for fit in row] for row in self.verify_fits])  # [nb, nc, m]
        values = self.verify_grid.interpolate(table, n.size, float(batch), self._context(context))
        return values.reshape(n.shape)

    def step_s(self, batch: int = 1, context: int | None = None) -> float:
        """One drafter step (model drafter) or one proposal for the batch (model-free)."""
        if self.draft_table is None or self.draft_grid is None:
            raise SpecbenchError("the cost profile holds no drafter timings: profile with --drafter NAME (or ngram)")
        return float(
            self.draft_grid.interpolate(self.draft_table[:, :, None], 1, float(batch), self._context(context))[0]
        )

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
                rows.append(
                    {
                        "batch": int(batch),
                        "context": int(context),
                        "model": fit.kind,
                        "a_ms": 1e3 * fit.a,
                        "slope_ms": 1e3 * fit.b,
                        "knee": fit.knee if knee else None,
                        "slope2_ms": 1e3 * fit.b2 if knee else None,
                        "t1_ms": 1e3 * float(fit(1)),
                        "t_max_ms": 1e3 * float(fit(max(fit.sizes or (1,)))),
                        "draft_ms": None if self.draft_table is None else 1e3 * self.step_s(batch, context),
                    }
                )
        return pd.DataFrame(rows)


def robust_totals(cell: pd.DataFrame) -> np.ndarray:
    """Per verify_tokens, the (r, Σy, Σy²) of a pseudo-sample of the r timed calls with the cell's median as
    its mean and (IQR / 1.349)² as its variance: least squares then runs through the medians,
    weighted by the calls, and the residual sum of squares carries the calls' own spread, while
    a call stalled by another process moves neither (as it would a mean and a variance)."""
    r = cell["repeats"].to_numpy(dtype=float) if "repeats" in cell else np.ones(len(cell))
    median = cell["median_s"].to_numpy(dtype=float)
    sigma = cell["iqr_s"].to_numpy(dtype=float) / 1.349 if "iqr_s" in cell else np.zeros(len(cell))
    return np.stack([r, r * median, r * median**2 + np.maximum(r - 1, 0) * sigma**2], axis=-1)


def fit_cells(rows: pd.DataFrame) -> dict[tuple[int, int], VerifyFit]:
    """t_Bc(n) per (batch, context): `specbench.analysis.cost.round_cost.fit_verify` on `robust_totals` over the
    verify_tokens n (the profile file's ``tokens`` column)."""
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


def fit_profile(
    profile: Profile, drafter: str | None = None, *, overhead_s: float = 0.0, context: int | None = None
) -> ProfiledCost:
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
    model_free = name is not None and is_model_free(name)
    if name is not None:
        rows = profile.rows(role="drafter", model=name)
        medians = {
            (int(b), int(c)): float(cell["median_s"].median())
            for (b, c), cell in rows.groupby(["batch", "context"], sort=True)
        }
        if medians:
            draft_notes: set = set()
            d_batches, d_contexts = _complete_grid(medians, f"drafter {name}", draft_notes)
            draft_grid = GridTable(d_batches, d_contexts, f"draft ({name})", fixed_notes=draft_notes)
            draft_table = np.array([[medians[(int(b), int(c))] for c in d_contexts] for b in d_batches])
    measured = np.asarray(sorted(verify_rows["tokens"].unique()), dtype=float)
    return ProfiledCost(
        verify_grid=verify_grid,
        verify_fits=verify_fits,
        measured_verify_tokens=measured,
        draft_grid=draft_grid,
        draft_table=draft_table,
        model_free=model_free,
        drafter=name,
        target=profile.target,
        round_overhead_s=overhead_s,
        default_context=context,
    )


def what_if(
    cost: ProfiledCost, alphas, batches, *, context: int | None = None, max_gamma: int = MAX_GAMMA
) -> pd.DataFrame:
    """Best γ and its speedup per (α, batch) for a constant acceptance α — what a profile says
    before any sweep: speedup(γ) = E[tokens](α, γ) · round_s(0) ÷ round_s(γ), every round drafting."""
    gammas = np.arange(max_gamma + 1)
    rows = []
    for batch in batches:
        seconds = np.asarray(round_s(cost, gammas, batch=int(batch), context=context), dtype=float)
        for alpha in alphas:
            speedup = expected_tokens(float(alpha), gammas) * seconds[0] / seconds
            best = int(np.argmax(speedup))
            rows.append(
                {
                    "alpha": float(alpha),
                    "batch": int(batch),
                    "gamma": best,
                    "speedup": float(speedup[best]),
                    "speedup_gamma_1": float(speedup[1]) if max_gamma >= 1 else float("nan"),
                    "speedup_gamma_4": float(speedup[4]) if max_gamma >= 4 else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def markdown_summary(profile: Profile) -> str:
    """A profile as Markdown: what ran where, the per-cell times and bandwidth, the fitted verify model."""
    info = profile.info
    bandwidth = info.get("bandwidth", {})
    target = info["target"]
    grid = info.get("grid", {})
    peak = (
        f"{bandwidth['peak_gb_s']:.0f} GB/s ({bandwidth.get('peak_source', '?')})"
        if bandwidth.get("peak_gb_s")
        else "unknown"
    )
    lines = [
        f"### {target['name']} on {info['device']['device_name']} ({info['dtype']})",
        "",
        f"- target: {target.get('layers')} layers, hidden {target.get('hidden_size')}, "
        f"{target.get('parameters', 0) / 1e9:.3f} B parameters, random weights from {target.get('source')}; "
        f"{target.get('weight_bytes', 0) / 1e9:.3f} GB streamed per forward, "
        f"{target.get('kv_bytes_per_position', 0) / 1024:.1f} KiB of KV cache per position and sequence",
        f"- drafters: {', '.join(d['name'] for d in info.get('drafters', [])) or 'none'}",
        f"- grid: batch {grid.get('batches')}, context {grid.get('contexts')}, "
        f"verify tokens {grid.get('tokens')}; "
        f"{grid.get('repeats')} timed calls after {grid.get('warmup')} warm-up per cell",
        f"- peak bandwidth: {peak}; measured read: {bandwidth.get('measured_read_gb_s', float('nan')):.1f} GB/s",
        f"- {info.get('seconds', float('nan')):.0f} s; load average {info.get('load_average_start', ['?'])[0]} at "
        f"start; torch threads {info.get('torch_threads')}; torch {info.get('versions', {}).get('torch')}",
        "",
    ]
    lines += [
        "| model | what | B | c | ms (fewest tokens) [IQR] | ms (most tokens) | most ÷ fewest | GB/s | % peak | "
        "memory MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for _, r in summary_frame(profile).iterrows():
        most = f"{r['ms_tokens_max']:.3f} ({r['tokens_max']} tokens)" if r["tokens_max"] > r["tokens_min"] else "-"
        ratio = f"{r['ratio']:.2f}" if r["tokens_max"] > r["tokens_min"] else "-"
        gb_s = "-" if r["gb_s"] != r["gb_s"] else f"{r['gb_s']:.1f}"
        share = "-" if r["peak_fraction"] != r["peak_fraction"] else f"{100 * r['peak_fraction']:.0f}"
        lines.append(
            f"| {r['model']} | {r['measure']} | {r['batch']} | {r['context']} | "
            f"{r['ms_tokens_min']:.3f} [{r['iqr_ms_tokens_min']:.3f}] | {most} | {ratio} | {gb_s} | {share} | "
            f"{r['memory_bytes'] / 2**20:.0f} |"
        )
    if info.get("skipped"):
        lines += [""] + [f"- skipped: {s}" for s in info["skipped"]]
    model_drafters = [d["name"] for d in info.get("drafters", []) if not d.get("model_free")]
    drafter = (model_drafters or profile.drafters or [None])[0]  # the step column: a model drafter's if any
    fits = fit_profile(profile, drafter).summary()
    if not fits.empty:
        lines += [
            "",
            "Fitted verify model t(n) = a + s·n (+ s₂·max(0, n − n₀) where a knee shows), n the verify "
            "tokens per sequence:",
            "",
            f"| B | c | model | a ms | s ms/token | knee n₀ | s₂ ms/token | t(1) ms | {drafter or 'no'} drafter ms |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        for _, f in fits.iterrows():
            knee = "-" if f["knee"] is None or f["knee"] != f["knee"] else f"{f['knee']:g}"
            slope2 = "-" if f["slope2_ms"] is None or f["slope2_ms"] != f["slope2_ms"] else f"{f['slope2_ms']:.4f}"
            draft = "-" if f["draft_ms"] is None or f["draft_ms"] != f["draft_ms"] else f"{f['draft_ms']:.3f}"
            lines.append(
                f"| {f['batch']} | {f['context']} | {f['model']} | {f['a_ms']:.3f} | {f['slope_ms']:.4f} | "
                f"{knee} | {slope2} | {f['t1_ms']:.3f} | {draft} |"
            )
    return "\n".join(lines) + "\n"
