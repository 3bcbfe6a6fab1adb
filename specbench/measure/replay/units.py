"""Replay inside a sweep: replayed records with modelled timings, their moments, and the
predictions and live-vs-replay agreement computed from them.

Records. A replayed unit is written like a measured one (`specbench.measure.grid.units.make_record`) with
``mode = 'replay'``: its per-round lists hold the replayed rounds (for greedy decoding and for
prompt lookup: the rounds a live run makes; for a draft model at temperature > 0: one draw of
the coupled coins, distributed exactly as a live run — see `specbench.measure.replay.replayer`). Its timings
are predictions of the cost model fitted on the live units of the same (drafter, tree,
workload, sampling) (`specbench.analysis.cost.round_cost`, used through `CostModel`):

    round_draft_s  = draft_s(γ_req)            (the proposal asked for γ_req tokens; 0 when γ_req = 0)
    round_verify_s = verify_s(drafted + 1)     (verify_tokens: one target forward over the root and the drafts)
    round_s        = round_draft_s + round_verify_s + overhead_s(γ)

and prefill_s is the live units' mean prefill. Without live units for the group the timings are
NaN. Code that measures speed (`specbench.records.summary`, `specbench.analysis.recommendation.recommend`) keeps replayed rows
apart: they are a separate ``mode`` in every table and never enter a measured speedup.

Moments. Next to each replayed record, ``replay/unit-<id>.json`` keeps what the record cannot:
the expected rounds, accepted and drafted tokens given the trajectory, their covariance, and
batch-means statistics (`specbench.measure.replay.replayer.GammaReplay`). It is written before the record, so a
record never lacks its moments.

Prediction intervals. For a configuration over units u with decode tokens T_u and expected
(rounds, accepted, drafted) m_u, the replayed point estimates are τ̂ = Σ T_u / Σ m_u,R and
α̂ = Σ m_u,Y / Σ m_u,Z (accepted ÷ drafted, the records' α). A live run on the same prompts
differs from them through (i) its own coin flips, covariance Σ_u C_u (exact, from the backward
recursion), and (ii) its own trajectory, and the replay's trajectory adds (ii) once more:
Var(live − replay) = Σ_u C_u + 2 V_traj. V_traj = σ² Σ_u T_u, where σ² is the per-position
long-run covariance of the expected (rounds, accepted, drafted), estimated by batch means
pooled over units: σ² = Σ_u S_u / b_u ÷ Σ_u (blocks_u − 1) with S_u the centred cross-products
of block sums of b_u positions (centring within a unit keeps the fixed difference between
prompts out). The delta method turns this into standard errors,

    se(τ) = τ̂ √V_RR / Σ m_R,     se(α) = √(V_YY − 2α̂ V_YZ + α̂² V_ZZ) / Σ m_Z,

and the interval is the estimate ± z·se (z for `specbench.analysis.statistics.intervals.LEVEL`). Greedy replay is
exact: its interval is the point and agreement means equality.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from specbench.analysis.cost.round_cost import CostFit, cost_stats, fit_costs
from specbench.analysis.statistics.intervals import LEVEL
from specbench.backends.base import OwnDrafterBackend
from specbench.engine.sampling import SamplingParams
from specbench.engine.stats import GenerationResult, RoundLog
from specbench.errors import SpecbenchError
from specbench.measure.grid.timing import untimed_columns
from specbench.measure.grid.units import UnitOutput, make_record
from specbench.measure.replay.replayer import Replayer, replay_chain
from specbench.measure.work_context import WorkContext
from specbench.records.rounds import prompt_clusters
from specbench.records.store import atomic_write_bytes, load_records
from specbench.records.summary import BASELINE_KEYS, CONFIG_KEYS, UNIT_KEYS, is_baseline
from specbench.records.timing import timing_usable
from specbench.safe_files import read_json, write_json

MOMENTS_DIR = "replay"
SUMMARY_FILE = "replay-summary.csv"
GROUP_KEYS = ["target", "drafter", "drafter_label", "tree", "workload", "temperature", "top_p", "top_k"]
CONFIG = [k for k in CONFIG_KEYS if k != "mode"] + ["workload"]


# ----------------------------------------------------------------------------- moments store


class MomentsStore:
    """``<results>/replay/unit-<id>.json``: the moments of each replayed unit."""

    def __init__(self, folder: str | Path):
        self.dir = Path(folder) / MOMENTS_DIR

    def remove_stale_temporaries(self) -> None:
        for path in self.dir.glob(".*.json.*") if self.dir.exists() else []:
            path.unlink(missing_ok=True)

    def write(self, moments: dict) -> None:
        """Store one unit's moments (`moments_of`)."""
        write_json(self.dir / f"unit-{moments['unit_id']}.json", moments)

    def load(self) -> pd.DataFrame:
        """One row per unit; empty when the folder holds no replay."""
        rows = []
        for path in sorted(self.dir.glob("unit-*.json")) if self.dir.exists() else []:
            try:
                rows.append(read_json(path, "replay moments file"))
            except SpecbenchError as exc:
                raise SpecbenchError(f"broken {exc}") from None
        return pd.DataFrame(rows)


def moments_of(unit_id: str, replay, expected_acceptance: float | None) -> dict:
    """The moments file's contents for one replayed unit (plain data: a worker returns it to the writer)."""
    return {
        "unit_id": unit_id,
        "gamma": replay.gamma,
        "tokens": replay.tokens,
        "exact": replay.exact,
        "mean": replay.mean.tolist(),
        "coin_cov": replay.coin_cov.tolist(),
        "block_ss": replay.block_ss.tolist(),
        "block_dof": replay.block_dof,
        "block_size": replay.block_size,
        "hist": replay.hist.tolist(),
        "attempts": replay.attempts.tolist(),
        "accepts": replay.accepts.tolist(),
        "expected_acceptance": expected_acceptance,
    }


# ----------------------------------------------------------------------------- timings


@dataclass
class GroupCosts:
    """The cost fit of one (drafter, tree, workload, sampling) group and its live memory peak."""

    fit: CostFit | None
    peak_memory_bytes: int


def group_costs(records: pd.DataFrame) -> dict[tuple, GroupCosts]:
    """Cost fits per group from the live records (speculative units + the matching baseline)."""

    live, _ = timing_usable(records[records["mode"] == "live"])
    base_all = live[is_baseline(live)]
    out = {}
    for key, group in live[~is_baseline(live) & (live["gamma"] > 0)].groupby(GROUP_KEYS, dropna=False, sort=True):
        keys = dict(zip(GROUP_KEYS, key))
        base = base_all
        for k in BASELINE_KEYS:
            base = base[base[k] == keys[k]]
        fit = None
        if not base.empty:
            clusters = prompt_clusters(pd.concat([group[["prompt_id"]], base[["prompt_id"]]]))
            fit = fit_costs(cost_stats(group, base, clusters))
        out[key] = GroupCosts(fit, int(group["peak_memory_bytes"].max()))
    return out


def modelled_result(replay, trajectory, costs: GroupCosts | None, stop_reason: str):
    """A `GenerationResult` of the replayed rounds, with timings from the cost model."""

    fit = costs.fit if costs is not None else None
    log = RoundLog()
    r = replay.rounds
    for gamma_req, drafted, accepted, emitted, steps in zip(
        r.requested, r.drafted, r.accepted, r.emitted, r.draft_steps
    ):
        if fit is None:
            draft = verify = overhead = float("nan")
        else:
            draft = float(fit.cost.draft_s(gamma_req))
            verify = float(fit.cost.verify_s(drafted + 1))
            overhead = float(fit.cost.overhead_s(replay.gamma))
        log.add(
            drafted=drafted,
            depth=drafted,
            accepted=accepted,
            emitted=emitted,
            draft_steps=steps,
            draft_s=draft,
            verify_s=verify,
            round_s=draft + verify + overhead,
        )
    result = GenerationResult(
        prompt_tokens=len(trajectory.prompt),
        tokens=list(trajectory.tokens[: trajectory.n_stop]),
        rounds=log,
        prefill_s=fit.prefill_s if fit is not None else float("nan"),
        decode_s=float(sum(log.round_s)),
        stop_reason=stop_reason,
        peak_memory_bytes=costs.peak_memory_bytes if costs is not None else 0,
    )
    return result


# ----------------------------------------------------------------------------- the sweep phase


def trajectories(records: pd.DataFrame) -> dict[tuple, tuple[list[int], str]]:
    """Baseline (output_ids, stop_reason) per (workload, prompt, repeat, sampling, turn)."""
    base = records[is_baseline(records) & (records["mode"] == "live")]
    return {
        (r.workload, r.prompt_id, r.repeat, r.temperature, r.top_p, r.top_k, r.turn): (
            list(r.output_ids),
            r.stop_reason,
        )
        for r in base.itertuples()
    }


def cost_key(spec, unit) -> tuple:
    """The (target, drafter, tree, workload, sampling) group whose cost fit times ``unit``'s replay."""
    c = unit.config
    return (spec.target, c.drafter.type, c.drafter.label, c.tree, unit.workload.name, c.temperature, c.top_p, c.top_k)


def replay_inputs(folder) -> tuple[dict, dict]:
    """What replayed units need from the live records of a folder: the baselines' trajectories and the cost
    fits (read by the writer, shipped to the workers with each piece)."""
    records = load_records(folder)
    MomentsStore(folder).remove_stale_temporaries()
    return trajectories(records), group_costs(records)


def replay_outputs(context: WorkContext, piece):
    """Replay one prompt turn's units (a `specbench.measure.executors.pieces.Piece` of kind replay) with a worker's
    context whose backend runs specbench's own drafters; yields each unit's record with its moments.

    The prompt turn's drafters share one trajectory (and its continuation past a stop); every γ of the
    sweep is walked at once per (drafter, tree).
    """
    spec = context.spec
    first = piece.units[0]
    if piece.trajectory is None:
        raise SpecbenchError(
            f"{first.prompt.prompt_id} turn {first.turn}: replay needs the baseline's "
            "trajectory, which is missing from the results"
        )
    backend: OwnDrafterBackend = context.backend  # the spec allows replay only with such a backend
    replayer: Replayer = context.replayer()
    gammas = sorted(g for g in spec.gammas if g > 0)
    output, stop_reason = piece.trajectory
    c = first.config
    sampling = SamplingParams(c.temperature, c.top_k, c.top_p)
    batches: dict[tuple, list] = {}
    for unit in piece.units:
        batches.setdefault((unit.config.drafter, unit.config.tree), []).append(unit)
        context.observer.unit_started(unit)
    trajectory = replayer.trajectory(
        context.prompt_ids(first, piece.answers),
        list(output),
        stop_reason=stop_reason,
        max_new_tokens=first.max_new_tokens,
        max_gamma=max(gammas),
        sampling=sampling,
        seed=first.seed,
    )
    for (drafter, _), batch in batches.items():
        trace = replayer.trace(backend.drafter(drafter), trajectory, max(gammas), sampling, drafter.type)
        by_gamma = {r.gamma: r for r in replay_chain(trace, trajectory, gammas, seed=first.seed)}
        expected = None if trace.expected is None or not len(trace.expected) else float(np.mean(trace.expected))
        for unit in batch:
            replay = by_gamma[unit.config.gamma]
            result = modelled_result(replay, trajectory, piece.costs.get(cost_key(spec, unit)), stop_reason)
            record = {**make_record(unit, result, spec, context.device_name), **untimed_columns()}
            yield UnitOutput(unit, record, moments_of(unit.unit_id, replay, expected))


# ----------------------------------------------------------------------------- predictions


def _z(level: float) -> float:
    return float(stats.norm.ppf((1 + level) / 2))


def predict(moments: pd.DataFrame, greedy: bool, level: float = LEVEL) -> dict:
    """τ and α with prediction intervals from the moments of a configuration's units (module docstring)."""
    tokens = float(moments["tokens"].sum())
    mean = np.stack(moments["mean"].map(np.asarray).to_list()).sum(0)  # (rounds, accepted, drafted)
    tau = tokens / mean[0] if mean[0] > 0 else float("nan")
    alpha = mean[1] / mean[2] if mean[2] > 0 else float("nan")
    out = {
        "tau": tau,
        "alpha": alpha,
        "tau_lo": tau,
        "tau_hi": tau,
        "alpha_lo": alpha,
        "alpha_hi": alpha,
        "interval": "exact (greedy)" if greedy else "",
    }
    if greedy:
        return out
    coin = np.stack(moments["coin_cov"].map(np.asarray).to_list()).sum(0)
    dof = float(moments["block_dof"].sum())
    if dof > 0:
        ss = np.stack(moments["block_ss"].map(np.asarray).to_list())  # [U, 3, 3]
        sigma2 = (ss / moments["block_size"].to_numpy(dtype=float)[:, None, None]).sum(0) / dof
        traj = sigma2 * tokens
        out["interval"] = f"delta method, coins + 2 × batch-means trajectory variance ({int(dof)} block dof)"
    else:
        traj = np.zeros((3, 3))
        out["interval"] = "delta method, coin variance only (trajectories too short for batch means)"
    var = coin + 2 * traj
    z = _z(level)
    if mean[0] > 0:
        se = tau * np.sqrt(max(var[0, 0], 0.0)) / mean[0]
        out["tau_lo"], out["tau_hi"] = tau - z * se, tau + z * se
    if mean[2] > 0:
        se = np.sqrt(max(var[1, 1] - 2 * alpha * var[1, 2] + alpha**2 * var[2, 2], 0.0)) / mean[2]
        out["alpha_lo"], out["alpha_hi"] = max(alpha - z * se, 0.0), min(alpha + z * se, 1.0)
    return out


def _joined(records: pd.DataFrame, moments: pd.DataFrame) -> pd.DataFrame:
    replay = records[records["mode"] == "replay"]
    if replay.empty or moments.empty:
        return pd.DataFrame()
    return replay.drop(columns=["gamma"]).merge(moments, on="unit_id", how="inner")


def replay_summary(records: pd.DataFrame, moments: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """Per replayed configuration × workload: predicted τ and α with intervals over all its units,
    and, where live units of the same configuration exist, live-vs-replay agreement on exactly
    those units (τ live, τ replay on the same units, their difference, and whether live τ lies in
    the replay's interval — for greedy decoding: whether they are equal)."""
    joined = _joined(records, moments)
    if joined.empty:
        return pd.DataFrame()
    live = records[(records["mode"] == "live") & ~is_baseline(records)]
    rows = []
    for key, group in joined.groupby(CONFIG, dropna=False, sort=True):
        row = dict(zip(CONFIG, key))
        greedy = row["temperature"] == 0
        pred = predict(group, greedy, level)
        row.update(
            n_prompts=group["prompt_id"].nunique(),
            n_units=len(group),
            exact=bool(group["exact"].all()),
            **{k: pred[k] for k in ("tau", "tau_lo", "tau_hi", "alpha", "alpha_lo", "alpha_hi", "interval")},
        )
        beta = group["expected_acceptance"].dropna() if "expected_acceptance" in group else pd.Series(dtype=float)
        row["expected_acceptance"] = float(beta.mean()) if len(beta) else float("nan")
        match = live
        for k in CONFIG:
            match = match[match[k] == row[k]]
        paired = group.merge(
            match[UNIT_KEYS + ["decode_tokens", "rounds", "accepted", "drafted"]], on=UNIT_KEYS, suffixes=("", "_live")
        )
        row["n_live"] = len(paired)
        if len(paired):
            same = predict(paired, greedy, level)
            tau_live = paired["decode_tokens_live"].sum() / paired["rounds_live"].sum()
            row.update(
                tau_live=tau_live,
                tau_replay_paired=same["tau"],
                tau_diff=same["tau"] - tau_live,
                tau_paired_lo=same["tau_lo"],
                tau_paired_hi=same["tau_hi"],
                alpha_live=paired["accepted_live"].sum() / max(paired["drafted_live"].sum(), 1),
            )
            if greedy:
                expected_rounds = float(np.stack(paired["mean"].map(np.asarray).to_list())[:, 0].sum())
                row["agrees"] = bool(
                    np.isclose(expected_rounds, paired["rounds_live"].sum())
                    and paired["decode_tokens"].sum() == paired["decode_tokens_live"].sum()
                )
            else:
                row["agrees"] = bool(same["tau_lo"] <= tau_live <= same["tau_hi"])
        rows.append(row)
    return pd.DataFrame(rows)


def agreement_fraction(summary: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """{'greedy' | 'sampling': (configurations that agree, configurations compared)}."""
    out: dict[str, tuple[int, int]] = {}
    if summary.empty or "agrees" not in summary:
        return out
    compared = summary[summary["n_live"] > 0]
    for name, part in (
        ("greedy", compared[compared["temperature"] == 0]),
        ("sampling", compared[compared["temperature"] > 0]),
    ):
        if len(part):
            out[name] = (int(part["agrees"].astype(bool).sum()), len(part))
    return out


def folder_summary(folder: str | Path, level: float = LEVEL) -> pd.DataFrame:
    """`replay_summary` of a results folder (empty when it holds no replay)."""
    return replay_summary(load_records(folder), MomentsStore(folder).load(), level)


def write_summary(folder: str | Path) -> pd.DataFrame:
    """Compute the folder's replay summary and store it as ``replay-summary.csv``."""

    summary = folder_summary(folder)
    if not summary.empty:
        atomic_write_bytes(Path(folder) / SUMMARY_FILE, summary.to_csv(index=False).encode())
    return summary
