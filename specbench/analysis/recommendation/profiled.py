"""Recommend with a hardware profile's costs (`ProfiledCosts`): γ (or none) per scenario and batch size.

For a sweep's (target, workload, sampling) scenario and each chain drafter in it, the acceptance
model is fitted to the sweep's rounds (`specbench.analysis.fit`, as with the sweep's own costs) and,
with ρ the share of rounds that drafted,

    tokens(γ)     = ρ · E[tokens](γ) + (1 − ρ)                 per sequence and round
    speedup(γ, B) = tokens(γ) · round_s(0, B, c) ÷ round_s(γ, B, c)

with `specbench.analysis.cost.round_cost.round_s` (draft + ρ·verify(γ + 1) + (1 − ρ)·verify(1) + overhead,
verify taking the tokens one target forward verifies per sequence; for a batch whose forward
carries every sequence's tokens, ρ·t(γ + 1) + (1 − ρ)·t(1) = t(1 + ργ) when t is linear in them)
and the profile's `specbench.analysis.cost.profile.ProfiledCost`. c is the scenario's mean context
(prompt + half the output) unless given. Intervals resample prompts (acceptance only; the
profile's times are taken as exact). At each batch size the chosen γ is the best point estimate
among those whose interval lies above 1, else 0 (no speculation). The choice over every integer
batch size up to the largest asked becomes vLLM's ``num_speculative_tokens_per_batch_size``
(see `vllm_schedule`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from specbench.analysis.acceptance_model import position_counts, replicate_models
from specbench.analysis.cost.profile import ProfiledCost
from specbench.analysis.cost.round_cost import round_s
from specbench.analysis.cost.source import ProfiledCosts
from specbench.analysis.fit import estimate_acceptance
from specbench.analysis.options import GROUP_KEYS, SCENARIO_KEYS
from specbench.analysis.recommendation.result import BatchPlan, DrafterPlan, Recommendation, ranges
from specbench.analysis.settings.engine_settings import schedule_setting
from specbench.analysis.statistics.intervals import bootstrap_interval, bootstrap_weights, few_prompts_note
from specbench.errors import SpecbenchError
from specbench.records.rounds import flatten_rounds, prompt_clusters
from specbench.records.summary import is_baseline, prefer_live


def recommend_profiled(
    records: pd.DataFrame,
    costs: ProfiledCosts,
    *,
    max_gamma: int,
    n_boot: int,
    level: float,
    seed: int,
    hub_ids: Mapping[str, str] | None,
) -> list[Recommendation]:
    """γ (or no speculation) per scenario and batch size: the sweep's acceptance × the profile's costs
    (arguments checked by `specbench.analysis.recommendation.recommend.recommend`)."""
    profile = costs.profile
    batches = costs.batch_sizes()
    spec_all = prefer_live(records[~is_baseline(records) & (records["gamma"] > 0)])
    if spec_all.empty:
        raise SpecbenchError("no speculative records (γ ≥ 1): the acceptance to combine with the profile is missing")
    fits: dict[str, ProfiledCost] = {}  # one fit per profile drafter, shared by the scenarios
    out = []
    for i, (key, scenario) in enumerate(spec_all.groupby(SCENARIO_KEYS, dropna=False, sort=True)):
        keys = dict(zip(SCENARIO_KEYS, key))
        notes: list[str] = []
        if str(keys["target"]) != profile.target:
            notes.append(
                f"acceptance measured with target '{keys['target']}', costs profiled for "
                f"'{profile.target}': the acceptance is assumed to carry over"
            )
        chains = scenario[scenario["tree"] == "chain"]
        if len(chains) < len(scenario):
            notes.append(
                "tree configurations left out: the profile prices chains (vLLM's per-batch γ is a chain length)"
            )
        clusters = prompt_clusters(chains) if not chains.empty else pd.Index([])
        rng = np.random.default_rng(seed + i)
        weights = bootstrap_weights(len(clusters), n_boot if len(clusters) >= 2 else 0, rng)
        if len(clusters) < 2:
            notes.append("one prompt: no interval; γ chosen where the point estimate exceeds 1")
        elif note := few_prompts_note(len(clusters)):
            notes.append(note)
        context = costs.context or workload_context(chains if not chains.empty else scenario)
        plans = []
        for gkey, group in chains.groupby(GROUP_KEYS, dropna=False, sort=True):
            row = dict(zip(GROUP_KEYS, gkey))
            name, why = costs.drafter_for(row["drafter"], str(group["drafter_params"].iloc[0]))
            if why:
                notes.append(f"{row['drafter_label']}: {why}")
            if name is None:
                continue
            if name not in fits:
                fits[name] = costs.fit(name)
            plans.append(_plan(group, clusters, weights, fits[name], context, max(batches), max_gamma, level, notes))
        table = _batch_table(plans, batches)
        if plans:
            cost = fits[plans[0].profile_drafter]  # one target: the verify grid every drafter's fit shares
            table["extrapolated"] = [cost.extrapolation(int(b), context) for b in table["batch"]]
        vllm = None
        if plans:
            lead = _lead_plan(plans, batches)
            vllm = vllm_schedule(lead, str(keys["target"]), hub_ids)
        for name in {p.profile_drafter for p in plans}:
            notes.extend(fits[name].notes)
        per_batch = BatchPlan(context=context, batches=batches, plans=plans, table=table, vllm=vllm)
        out.append(
            Recommendation(
                keys=keys,
                cost_source=costs.describe(),
                objective="throughput",
                n_prompts=len(clusters),
                max_new_tokens=int(scenario["new_tokens"].max()),
                verdict=batch_verdict(table),
                notes=list(dict.fromkeys(notes)),
                per_batch=per_batch,
            )
        )
    return out


def batch_verdict(table: pd.DataFrame) -> str:
    """The verdict line: the choice at each asked batch size ("none" where no γ's interval lies above 1), each
    saying where its prediction leaves the profiled grid (`specbench.analysis.cost.coverage`)."""
    if table.empty:
        return "no speculation — no drafter of the sweep could be priced with the profile"
    parts = []
    for _, r in table.iterrows():
        if r["gamma"] > 0:
            part = (
                f"batch {r['batch']}: {r['drafter_label']} γ={int(r['gamma'])} at {r['speedup']:.2f}× "
                f"[{r['lo']:.2f}, {r['hi']:.2f}]"
            )
        else:
            part = f"batch {r['batch']}: none"
        extrapolated = r.get("extrapolated")
        parts.append(part + (f" ({extrapolated})" if isinstance(extrapolated, str) and extrapolated else ""))
    head = "speculate" if (table["gamma"] > 0).any() else "no speculation at any batch size asked"
    return f"{head} — " + "; ".join(parts)


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
            best = {
                "drafter_label": "none",
                "batch": b,
                "gamma": 0,
                "speedup": 1.0,
                "lo": 1.0,
                "hi": 1.0,
                "best_gamma": max(options, key=lambda o: o["speedup"])["best_gamma"] if options else 0,
                "tokens_per_s": base["baseline_tokens_per_s"],
                "baseline_tokens_per_s": base["baseline_tokens_per_s"],
            }
            if options:  # say what the best speculative option would have given
                top = max(plans, key=lambda p: p.speedup[b - 1, 1:].max())
                g = int(np.argmax(top.speedup[b - 1, 1:])) + 1
                best.update(
                    best_drafter=top.drafter_label,
                    best_gamma=g,
                    best_speedup=float(top.speedup[b - 1, g]),
                    best_lo=float(top.lo[b - 1, g]),
                    best_hi=float(top.hi[b - 1, g]),
                )
        rows.append(best)
    return pd.DataFrame(rows)


def _lead_plan(plans: list[DrafterPlan], batches: list[int]) -> DrafterPlan:
    """The drafter to export: chosen at the most asked batch sizes, then the best at the smallest."""

    def score(plan: DrafterPlan):
        wins = sum(1 for b in batches if plan.chosen[b - 1] > 0)
        return wins, float(plan.speedup[batches[0] - 1, plan.chosen[batches[0] - 1]])

    return max(plans, key=score)


def _plan(
    group: pd.DataFrame,
    clusters: pd.Index,
    weights: np.ndarray,
    cost: ProfiledCost,
    context: int,
    max_batch: int,
    max_gamma: int,
    level: float,
    notes: list[str],
) -> DrafterPlan:

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
    seconds = np.stack(
        [
            np.asarray(round_s(cost, gammas, propose_rate=rho, batch=int(b), context=context), dtype=float)
            for b in batches
        ]
    )  # [nB, G]
    relative = seconds[:, :1] / seconds  # baseline round ÷ round
    point = tokens[None, :] * relative
    if len(weights):
        reps = np.stack([tokens_of(m) for m in replicate_models(acceptance.model, counts, weights)])  # [R, G]
        lo, hi = bootstrap_interval(point, reps[:, None, :] * relative[None], len(clusters), level, positive=True)
    else:
        lo = hi = point
    label = str(group["drafter_label"].iloc[0])
    notes.extend(f"{label}: {n}" for n in acceptance.notes)
    return DrafterPlan(
        drafter=str(group["drafter"].iloc[0]),
        drafter_label=label,
        drafter_params=str(group["drafter_params"].iloc[0]),
        profile_drafter=str(cost.drafter),
        alpha=float(acceptance.alpha),
        acceptance_model=acceptance.model.name,
        propose_rate=rho,
        batches=batches,
        gammas=gammas,
        speedup=point,
        lo=np.asarray(lo),
        hi=np.asarray(hi),
        round_s=seconds,
        tokens=tokens,
        chosen=_choose(point, np.asarray(lo), len(clusters)),
    )


def workload_context(records: pd.DataFrame) -> int:
    """Mean context while decoding: prompt tokens + half the generated tokens."""
    return max(1, int(round(float((records["prompt_tokens"] + records["new_tokens"] / 2).mean()))))


def _choose(point: np.ndarray, lo: np.ndarray, n_prompts: int) -> np.ndarray:
    """γ per batch: the best point estimate among γ ≥ 1 whose lower bound is above 1, else 0."""
    gate = lo if n_prompts >= 2 else point
    candidates = np.where((gate > 1.0) & (np.arange(point.shape[1]) > 0)[None, :], point, -np.inf)
    best = np.argmax(candidates, axis=1)
    return np.where(np.isfinite(candidates[np.arange(len(best)), best]), best, 0)


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
    setting = schedule_setting(plan.drafter, plan.drafter_params, schedule, target, hub_ids)
    notes = list(setting.notes)
    if not setting.supported or not setting.config:
        return {
            "drafter_label": plan.drafter_label,
            "config": {},
            "snippet": "",
            "supported": False,
            "notes": notes or [f"vLLM has no method for drafter '{plan.drafter}'"],
        }
    last = schedule[-1][2]
    notes.append(
        f"vLLM applies the last range's K ({last}) to every batch size above {len(plan.chosen)} (and fills "
        f"gaps with the previous range's K); batch sizes above {len(plan.chosen)} were not evaluated: "
        f"add a final range [{len(plan.chosen) + 1}, <max_num_seqs>, K] (K = 0 turns speculation off) "
        "if the largest profiled batch is not representative"
    )
    notes.append(
        "num_speculative_tokens_per_batch_size is vLLM's Dynamic Speculative Decoding (documented from "
        "v0.25): check that your version has it"
    )
    return {
        "drafter_label": plan.drafter_label,
        "config": setting.config,
        "snippet": setting.snippet,
        "supported": True,
        "notes": notes,
    }
