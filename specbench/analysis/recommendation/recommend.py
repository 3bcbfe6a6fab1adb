"""The recommender: the best speculative configuration per workload — or "no speculation" — from a
sweep's records and one cost source.

    recommend(records, costs=MeasuredCosts()) -> list[Recommendation]    # one per scenario

A scenario is one (target, workload, sampling). Everything the answer rests on is

    speedup(γ) = [tokens(γ) ÷ round_s(γ)] ÷ target-only tokens/s,
    tokens(γ)  = ρ · E[tokens](γ) + (1 − ρ),     E[tokens](γ) = Σ_{j=0}^{γ} Π_{i<j} α_i

with the acceptance α_i always fitted to the sweep's rounds (`specbench.analysis.fit`; ρ the share
of rounds that drafted) and round_s — draft + verify + overhead — taken from the cost source
(`specbench.analysis.cost.source`), which also sets the target-only rate:

* `MeasuredCosts` (default): the sweep's own timings, batch 1, against its measured baseline. Measured configurations and the
  model's predictions for γ = 1..max_gamma, each with a prompt-bootstrap interval, and a
  decision; the objective may be throughput or latency (`specbench.analysis.recommendation.measured`).
  Records of an MoE target (`moe_experts` set) are priced by `ExpertAwareCosts` instead: the same
  timings plus the expert reads a verification adds (`specbench.analysis.cost.moe`).
* `ProfiledCosts`: a hardware profile's costs at any batch size B and context (target-only:
  B ÷ round_s(0)); γ per batch size and
  vLLM's per-batch-size schedule; throughput only (`specbench.analysis.recommendation.profiled`).

Either way the result is a `specbench.analysis.recommendation.result.Recommendation` with one JSON form
(`to_json`), and an option is recommended only when its speedup interval lies above 1.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from specbench.analysis.cost.moe import ExpertAwareCosts, is_moe
from specbench.analysis.cost.source import CostSource, MeasuredCosts, ProfiledCosts
from specbench.analysis.options import MAX_GAMMA
from specbench.analysis.recommendation.measured import recommend_measured
from specbench.analysis.recommendation.profiled import recommend_profiled
from specbench.analysis.recommendation.result import Recommendation, recommendation_dict, to_json
from specbench.analysis.statistics.intervals import LEVEL, N_BOOT
from specbench.analysis.statistics.sequential import LookPlan
from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.errors import SpecbenchError

OBJECTIVES = ("throughput", "latency")

__all__ = [
    "OBJECTIVES",
    "CostSource",
    "MeasuredCosts",
    "ProfiledCosts",
    "Recommendation",
    "recommend",
    "recommendation_dict",
    "to_json",
]


def recommend(
    records: pd.DataFrame,
    costs: CostSource | None = None,
    *,
    objective: str = "throughput",
    max_gamma: int = MAX_GAMMA,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    engines=None,
    hub_ids: Mapping[str, str] | None = None,
    plans: Mapping[str, LookPlan] | None = None,
    tolerance: float = TOLERANCE,
    by_context: bool = False,
) -> list[Recommendation]:
    """One `Recommendation` per scenario, its round costs from ``costs`` (default: the sweep's own).

    ``max_gamma``: the largest γ the model predicts; ``n_boot`` / ``level`` / ``seed``: the prompt
    bootstrap; ``engines``: the engine settings to export (measured costs; None: every engine of the catalogue); ``hub_ids`` (model spec →
    Hugging Face id) names the models in the settings; ``plans`` (workload → `LookPlan`): the looks an
    adaptive sweep planned, so that its verdicts stay honest (`specbench.analysis.statistics.sequential`);
    ``tolerance`` (ε): the chosen option is within ε of the best option's speedup with probability ≥ 1 − δ
    (`specbench.analysis.verdicts.choice`); ``by_context``: one scenario per context-length bin when the records
    span two or more (measured costs; `specbench.analysis.context`), else the bins pooled.
    """
    costs = MeasuredCosts() if costs is None else costs
    if objective not in OBJECTIVES:
        raise SpecbenchError(f"unknown objective '{objective}' (choose from: {', '.join(OBJECTIVES)})")
    if max_gamma < 1:
        raise SpecbenchError(f"--max-gamma must be >= 1, got {max_gamma}")
    costs.check(objective)
    if records.empty:
        raise SpecbenchError("the results folder holds no records")
    if isinstance(costs, ProfiledCosts):
        return recommend_profiled(
            records, costs, max_gamma=max_gamma, n_boot=n_boot, level=level, seed=seed, hub_ids=hub_ids
        )
    if type(costs) is MeasuredCosts and is_moe(records):  # an MoE target: verification pays for its experts
        costs = ExpertAwareCosts()
    if isinstance(costs, MeasuredCosts):
        return recommend_measured(
            records,
            costs,
            objective=objective,
            max_gamma=max_gamma,
            n_boot=n_boot,
            level=level,
            seed=seed,
            engines=engines,
            hub_ids=hub_ids,
            plans=plans,
            tolerance=tolerance,
            by_context=by_context,
        )
    raise TypeError(f"unknown cost source {costs!r}")
