"""The numbers an operator pays by: goodput, cost per million output tokens and energy per token, per
(scenario, backend, load, configuration), with and without speculation, with 95 % intervals.

From the live records (`specbench.analysis.load.table.normalised`; units timed under interference left out as in
the load table, `specbench.analysis.load.table.undisturbed`), at each load:

* **system output tokens/s**  R = Σ new_tokens ÷ W, where W is the wall time the requests took: Σ
  ``batch_wall_s`` over the distinct batches (serving backends), or Σ ``latency_s`` where requests ran one
  at a time (the own engine: the machine served nothing else meanwhile);
* **goodput**  G = Σ good ÷ W: requests per second that met the latency targets (``--slo``,
  ``--itl-p90``, ``--ttft-p90``, ``--latency-p90``: `specbench.analysis.load.slo`). A request is *good* when
  each of its TTFT, ITL and request latency is within the limit of every target on that metric (a value
  the backend did not report, such as the ITL of a one-token request, breaks no limit). A target's
  percentile says how many requests must be good for the promise to hold: ``targets_kept`` tells whether
  at this load every target's percentile is within its limit; ``attainment`` = Σ good ÷ requests;
* **cost per million output tokens**  C = price_per_hour ÷ 3600 ÷ R × 10⁶ (the machine's price per hour,
  ``--price-per-hour`` or the sweep key ``price_per_hour``; in whatever currency it was given);
* **energy**: joules per output token Σ ``energy_j`` ÷ Σ ``new_tokens`` and per accepted draft token
  Σ ``energy_j`` ÷ Σ ``accepted`` (`specbench.measure.timing.energy`; null where the machine had no counter).

Intervals: a prompt bootstrap (`specbench.analysis.statistics.intervals`: replicates draw prompts with replacement,
small-sample stretched). R and G are c̄ · Σ x ÷ Σ latency, where c̄ = Σ latency ÷ W is the mean number
of requests in flight; a replicate keeps c̄ at its measured value (as the load table's system speedup
does: the spread of one batch's makespan from run to run is not observed) and re-weights the sums,
R* = c̄ · Σ w·tokens ÷ Σ w·latency, G* = c̄ · Σ w·good ÷ Σ w·latency; C's interval is R's inverted;
energy per token is Σ w·E ÷ Σ w·tokens (a serving record's ``energy_j`` is its batch's share by time in
flight, so it varies with the prompts as R does). Against target only, at the same load, every ratio —
goodput G ÷ G₀, cost C ÷ C₀ = R₀ ÷ R, energy per token — is taken within each replicate, with the same
prompt weights on both sides (paired).

**The energy-optimal γ** per drafter (and tree) and load is the γ — 0, no speculation, among the
candidates — with the fewest joules per output token; beside it the **throughput-optimal γ**, the one
with the most system output tokens/s. Each comes with its interval: the 2.5–97.5 % range of the γ that
the bootstrap replicates choose, and the share of replicates that chose the point estimate's γ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specbench.analysis.load.slo import Slo
from specbench.analysis.load.table import CONFIG, LATENCY_METRICS, LEVEL_KEYS, load_label, normalised
from specbench.analysis.statistics.intervals import LEVEL, N_BOOT, bootstrap_interval, bootstrap_weights
from specbench.records.rounds import cluster_codes, prompt_clusters
from specbench.records.summary import BASELINE_KEYS, is_baseline
from specbench.records.timing import paired_timing

SUMS = ("good", "latency_s", "new_tokens", "energy_j", "accepted")  # per-prompt sums a replicate re-weights
GOOD, LATENCY, TOKENS, ENERGY, ACCEPTED = range(len(SUMS))
SECONDS_PER_HOUR = 3600.0
PER_MILLION = 1e6
KEYS = [*BASELINE_KEYS, *LEVEL_KEYS]


@dataclass
class Operating:
    """`operating`'s answer: the table (one row per scenario, backend, load and configuration), the optimal γ
    per drafter and load, and what they rest on."""

    table: pd.DataFrame
    optimal: list[dict]
    price_per_hour: float | None
    slos: list[Slo]
    energy_counter: str | None  # the counters the records name; None: no energy measured
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "table": self.table.replace({np.nan: None}).to_dict("records") if len(self.table) else [],
            "optimal": self.optimal,
            "price_per_hour": self.price_per_hour,
            "slos": [s.as_dict() for s in self.slos],
            "energy_counter": self.energy_counter,
            "notes": list(self.notes),
        }


@dataclass
class _Side:
    """One configuration at one load: point estimates and their bootstrap replicates ([B] each)."""

    row: dict
    tokens_per_s: np.ndarray
    goodput: np.ndarray
    joules_per_token: np.ndarray


def good_requests(frame: pd.DataFrame, slos: Sequence[Slo]) -> np.ndarray:
    """[n] 1.0 where a request meets the limit of every target (a missing value breaks none), else 0.0."""
    good = np.ones(len(frame), dtype=bool)
    for slo in slos:
        values = pd.to_numeric(frame[LATENCY_METRICS[slo.metric]], errors="coerce").to_numpy(float)
        good &= ~(values > slo.limit_s)  # NaN compares False: kept
    return good.astype(float)


def targets_kept(frame: pd.DataFrame, slos: Sequence[Slo]) -> bool | None:
    """Whether every target's percentile over these requests is within its limit (None: no target)."""
    if not slos:
        return None
    for slo in slos:
        values = pd.to_numeric(frame[LATENCY_METRICS[slo.metric]], errors="coerce").to_numpy(float)
        values = values[np.isfinite(values)]
        if len(values) and np.percentile(values, slo.percentile) > slo.limit_s:
            return False
    return True


def wall_time(frame: pd.DataFrame) -> float:
    """W: Σ wall time of the distinct batches, or Σ latency where the requests ran one at a time."""
    batched = frame.dropna(subset=["batch_id"])
    if len(batched) == len(frame) and len(frame):
        return float(batched.groupby("batch_id")["batch_wall_s"].first().sum())
    return float(pd.to_numeric(frame["latency_s"], errors="coerce").sum())


def _interval(point: float, reps: np.ndarray, n_clusters: int, level: float, positive: bool) -> tuple[float, float]:
    if not len(reps) or n_clusters < 2 or not np.isfinite(point):
        return math.nan, math.nan
    with np.errstate(all="ignore"):
        lo, hi = bootstrap_interval(point, reps, n_clusters, level, positive=positive and point > 0)
    return max(float(lo), 0.0), float(hi)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and np.isfinite(a) and np.isfinite(b) else math.nan


def _side(
    keys: dict,
    config: pd.DataFrame,
    disturbed: bool,
    codes: np.ndarray,
    weights: np.ndarray,
    n_clusters: int,
    slos: Sequence[Slo],
    price: float | None,
    level: float,
) -> _Side:
    """One configuration's row at one load and its replicates (module docstring)."""
    energy = pd.to_numeric(config["energy_j"], errors="coerce") if "energy_j" in config else None
    has_energy = energy is not None and len(config) > 0 and bool(energy.notna().all())
    columns = np.column_stack(
        [
            good_requests(config, slos),
            pd.to_numeric(config["latency_s"], errors="coerce").fillna(0.0).to_numpy(float),
            config["new_tokens"].to_numpy(float),
            energy.to_numpy(float) if has_energy and energy is not None else np.zeros(len(config)),
            pd.to_numeric(config["accepted"], errors="coerce").fillna(0).to_numpy(float),
        ]
    )  # [n, len(SUMS)]
    sums = np.zeros((n_clusters, len(SUMS)))
    np.add.at(sums, codes, columns)
    total = sums.sum(axis=0)
    wall = wall_time(config)
    in_flight = total[LATENCY] / wall if wall > 0 else math.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        tokens_per_s = total[TOKENS] / wall if wall > 0 else math.nan
        goodput = total[GOOD] / wall if wall > 0 else math.nan
        per_token = total[ENERGY] / total[TOKENS] if has_energy and total[TOKENS] > 0 else math.nan
        per_accepted = total[ENERGY] / total[ACCEPTED] if has_energy and total[ACCEPTED] > 0 else math.nan
        reps = weights @ sums  # [B, len(SUMS)]
        reps_tokens = in_flight * reps[:, TOKENS] / reps[:, LATENCY]
        reps_good = in_flight * reps[:, GOOD] / reps[:, LATENCY]
        reps_energy = reps[:, ENERGY] / reps[:, TOKENS] if has_energy else np.full(len(reps), np.nan)
        reps_accepted = reps[:, ENERGY] / reps[:, ACCEPTED] if has_energy else np.full(len(reps), np.nan)
    row = {
        **keys,
        "requests": len(config),
        "prompts": int(config["prompt_id"].nunique()),
        "in_flight": in_flight,
        "timing_disturbed": disturbed,
    }
    for name, point, replicates, positive in (
        ("system_tokens_per_s", tokens_per_s, reps_tokens, True),
        ("goodput", goodput if slos else math.nan, reps_good, False),
        ("joules_per_token", per_token, reps_energy, True),
        ("joules_per_accepted", per_accepted, reps_accepted, True),
    ):
        lo, hi = _interval(point, replicates, n_clusters, level, positive)
        row.update({name: point, f"{name}_lo": lo, f"{name}_hi": hi})
    row["attainment"] = total[GOOD] / len(config) if slos and len(config) else math.nan
    row["targets_kept"] = targets_kept(config, slos)
    scale = price / SECONDS_PER_HOUR * PER_MILLION if price is not None else math.nan
    row.update(
        cost_per_mtok=_ratio(scale, tokens_per_s),
        cost_per_mtok_lo=_ratio(scale, row["system_tokens_per_s_hi"]),
        cost_per_mtok_hi=_ratio(scale, row["system_tokens_per_s_lo"]),
    )
    return _Side(row, reps_tokens, reps_good, reps_energy)


def _paired(side: _Side, base: _Side, n_clusters: int, level: float) -> dict:
    """Against target only at the same load, each ratio within every replicate (same prompt weights)."""
    out = {}
    for name, mine, theirs, point in (
        ("goodput_ratio", side.goodput, base.goodput, _ratio(side.row["goodput"], base.row["goodput"])),
        (
            "cost_ratio",
            base.tokens_per_s,
            side.tokens_per_s,
            _ratio(base.row["system_tokens_per_s"], side.row["system_tokens_per_s"]),
        ),
        (
            "energy_ratio",
            side.joules_per_token,
            base.joules_per_token,
            _ratio(side.row["joules_per_token"], base.row["joules_per_token"]),
        ),
    ):
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = _interval(point, mine / theirs, n_clusters, level, positive=True)
        out.update({name: point, f"{name}_lo": lo, f"{name}_hi": hi})
    return out


def _choice(gammas: np.ndarray, points: np.ndarray, reps: np.ndarray, best) -> dict | None:
    """The γ ``best`` (np.nanargmin / np.nanargmax) picks from ``points`` [G], its range over ``reps`` [B, G]."""
    if not np.isfinite(points).all():
        return None
    chosen = gammas[best(points)]
    ok = np.isfinite(reps).all(axis=1)
    picks = gammas[best(reps[ok], axis=1)] if ok.any() else np.zeros(0, dtype=int)
    if not len(picks):
        return {"gamma": int(chosen), "gamma_lo": None, "gamma_hi": None, "share": None}
    return {
        "gamma": int(chosen),
        "gamma_lo": int(np.quantile(picks, 0.025, method="lower")),
        "gamma_hi": int(np.quantile(picks, 0.975, method="higher")),
        "share": float(np.mean(picks == chosen)),
    }


def _optimal(keys: dict, sides: dict[tuple, _Side], base_key: tuple, axis: str) -> list[dict]:
    """Per drafter (and tree) at one load: the energy- and the throughput-optimal γ, target only a candidate."""
    label_i, tree_i, gamma_i = CONFIG.index("drafter_label"), CONFIG.index("tree"), CONFIG.index("gamma")
    drafters = sorted({(k[label_i], k[tree_i]) for k in sides if k != base_key})
    out = []
    for label, tree in drafters:
        candidates = [base_key] + sorted(
            (k for k in sides if (k[label_i], k[tree_i]) == (label, tree)), key=lambda k: k[gamma_i]
        )
        gammas = np.array([int(k[gamma_i]) for k in candidates])
        rows = [sides[k] for k in candidates]
        energy = _choice(
            gammas,
            np.array([s.row["joules_per_token"] for s in rows], dtype=float),
            np.column_stack([s.joules_per_token for s in rows]),
            np.nanargmin,
        )
        speed = _choice(
            gammas,
            np.array([s.row["system_tokens_per_s"] for s in rows], dtype=float),
            np.column_stack([s.tokens_per_s for s in rows]),
            np.nanargmax,
        )
        if speed is None:
            continue
        at = {int(g): s.row for g, s in zip(gammas, rows)}
        entry = {
            **keys,
            "drafter_label": label,
            "tree": tree,
            "load": keys[axis],
            "energy": energy,
            "throughput": speed,
        }
        entry["text"] = _optimal_text(entry, at, axis)
        out.append(entry)
    return out


def _gamma_text(choice: dict) -> str:
    name = "no speculation (γ=0)" if choice["gamma"] == 0 else f"γ={choice['gamma']}"
    if choice["gamma_lo"] is None:
        return f"{name} (no interval)"
    return (
        f"{name} (γ range [{choice['gamma_lo']}, {choice['gamma_hi']}]; chosen in {choice['share']:.0%} of replicates)"
    )


def _optimal_text(entry: dict, at: dict, axis: str) -> str:
    speed = entry["throughput"]
    fast = at[speed["gamma"]]
    text = (
        f"{entry['drafter_label']} at {load_label(axis, entry['load'])}: most tokens/s at "
        f"{_gamma_text(speed)}, {fast['system_tokens_per_s']:.1f} tok/s"
    )
    energy = entry["energy"]
    if energy is None:
        return text + "; energy not measured"
    lean = at[energy["gamma"]]
    text += (
        f"; fewest joules per token at {_gamma_text(energy)}, {lean['joules_per_token']:.3g} J/token "
        f"[{lean['joules_per_token_lo']:.3g}, {lean['joules_per_token_hi']:.3g}]"
    )
    if energy["gamma"] != speed["gamma"]:
        text += f" against {fast['joules_per_token']:.3g} J/token at γ={speed['gamma']}"
    return text


def operating(
    records: pd.DataFrame,
    *,
    slos: Sequence[Slo] = (),
    price_per_hour: float | None = None,
    level: float = LEVEL,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Operating:
    """Goodput, cost and energy per (scenario, backend, load, configuration) (module docstring)."""
    frame = normalised(records)
    for column in ("energy_j", "energy_counter"):
        if column not in frame:
            frame[column] = None
    axis = "request_rate" if (frame["request_rate"] > 0).any() else "concurrency"
    rng = np.random.default_rng(seed)
    rows, optimal = [], []
    for key, at_level in frame.groupby(KEYS, dropna=False, sort=True):
        keys = dict(zip(KEYS, key))
        base = at_level[is_baseline(at_level)]
        clusters = prompt_clusters(at_level)
        weights = bootstrap_weights(len(clusters), n_boot if len(clusters) >= 2 else 0, rng)  # [B, P]
        sides: dict[tuple, _Side] = {}
        for config_key, config in at_level.groupby(CONFIG, dropna=False, sort=True):
            # the one rule every panel reads a comparison by (records.timing, docs/results-schema.md rule 6)
            pairs = paired_timing(config, base if len(base) else config)
            used, disturbed = pairs.config, pairs.disturbed
            sides[config_key] = _side(
                {**keys, **dict(zip(CONFIG, config_key))},
                used,
                disturbed,
                cluster_codes(used, clusters),
                weights,
                len(clusters),
                slos,
                price_per_hour,
                level,
            )
        base_key = next((k for k in sides if k[CONFIG.index("gamma")] == 0), None)
        for config_key, side in sides.items():
            if base_key is not None and config_key != base_key:
                side.row.update(_paired(side, sides[base_key], len(clusters), level))
            rows.append(side.row)
        if base_key is not None:
            optimal += _optimal(keys, sides, base_key, axis)
    table = pd.DataFrame(rows)
    counters = sorted({str(c) for c in frame["energy_counter"].dropna().unique()})
    notes = []
    if price_per_hour is None:
        notes.append(
            "cost per million output tokens: give the machine's price per hour (--price-per-hour 2.50, or "
            "the sweep key price_per_hour)"
        )
    if not counters:
        notes.append(
            "energy: the records hold no energy reading (the machine had no energy counter: run.json's "
            "energy.reason says why)"
        )
    return Operating(
        table=table,
        optimal=optimal,
        price_per_hour=price_per_hour,
        slos=list(slos),
        energy_counter="; ".join(counters) or None,
        notes=notes,
    )


def price_of(flag: float | None, run_info: dict) -> float | None:
    """The machine's price per hour: ``--price-per-hour``, else the sweep's ``price_per_hour`` key, else None."""
    if flag is not None:
        return float(flag)
    sweep = run_info.get("sweep")
    value = sweep.get("price_per_hour") if isinstance(sweep, dict) else None
    return None if value is None else float(value)


def for_scenario(data: dict, keys: dict) -> dict:
    """The part of `Operating.as_dict` that concerns one scenario (a recommendation's keys): the rows whose
    shared keys all match."""

    def same(a, b) -> bool:
        missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
        return all(missing) or (not any(missing) and a == b)

    def matches(row: dict) -> bool:
        return all(same(row[k], v) for k, v in keys.items() if k in row)

    return {
        **data,
        "table": [r for r in data["table"] if matches(r)],
        "optimal": [r for r in data["optimal"] if matches(r)],
    }
