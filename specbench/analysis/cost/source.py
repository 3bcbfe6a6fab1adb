"""Where the recommender's round costs come from: the sweep's own timings, or a hardware profile.

`specbench.analysis.recommendation.recommend.recommend` takes one `CostSource`:

* `MeasuredCosts` — costs fitted from the sweep's own per-round timings
  (`specbench.analysis.cost.round_cost.fit_costs`: verify t(n) = a + b·n (+ a hinge), draft fixed + step·forwards,
  a per-round overhead), valid where the sweep ran: batch 1, its own contexts. The answer is the
  best (drafter, tree, γ) per scenario, measured and predicted (`specbench.analysis.recommendation.measured`).
* `ProfiledCosts` — costs read from a profile taken by `specbench profile`
  (`specbench.analysis.cost.profile.ProfiledCost`: verify t(n, B, c), the drafter's step per (B, c)),
  valid at any batch size B and context c; the acceptance still comes from the sweep. The answer is
  γ per batch size (`specbench.analysis.recommendation.profiled`).

Here n is the number of tokens one target forward verifies per sequence (γ + 1 for a chain,
tree_nodes + 1 for a tree).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar, Protocol

import pandas as pd

from specbench.analysis.cost.profile import ProfiledCost, fit_profile
from specbench.analysis.cost.round_cost import CostFit, CostStats, cost_stats, fit_costs
from specbench.catalogue.drafters import is_model_free
from specbench.errors import SpecbenchError
from specbench.records.profile_file import Profile


class CostSource(Protocol):
    """What every cost source says about itself; the prices come from its own methods."""

    kind: ClassVar[str]  # 'measured' or 'profile'

    def describe(self) -> str:
        """One line for the printer: where the costs come from."""

    def check(self, objective: str) -> None:
        """Refuse (SpecbenchError) what this source cannot answer."""


@dataclass(frozen=True)
class MeasuredCosts:
    """Costs fitted from the sweep's own timings: batch 1, the sweep's contexts."""

    kind: ClassVar[str] = "measured"

    def describe(self) -> str:
        return "the sweep's own timings (batch 1)"

    def check(self, objective: str) -> None:
        return None

    def fit(self, live: pd.DataFrame, baseline: pd.DataFrame, clusters: pd.Index) -> tuple[CostStats, CostFit]:
        """Per-prompt cost statistics of a group's live records with its baseline, and their fit."""
        stats = cost_stats(live, baseline, clusters)
        return stats, fit_costs(stats)

    def refit(self, stats: CostStats, weights, *, like: CostFit) -> CostFit:
        """The same fit on prompts re-weighted by ``weights`` (a bootstrap replicate), forms fixed by ``like``."""
        return fit_costs(stats, weights, like=like)


@dataclass
class ProfiledCosts:
    """Costs from a hardware profile, at the batch sizes ``batches`` (default: the profile's) and the
    context ``context`` (default: each workload's mean prompt + half its output)."""

    profile: Profile
    batches: list[int] | None = None
    context: int | None = None
    overhead_s: float = 0.0  # per round, on top of the profiled forwards
    kind: ClassVar[str] = "profile"

    def describe(self) -> str:
        device = self.profile.info.get("device", {}).get("device_name", "?")
        return f"{self.profile.target} on {device} ({self.profile.info.get('dtype', '?')})"

    def check(self, objective: str) -> None:
        if objective != "throughput":
            raise SpecbenchError(
                "with --cost-profile the answer is the decode speedup at each batch size (per-token "
                "latency and throughput alike); --objective latency needs the sweep's own timings"
            )
        batches = self.batch_sizes()
        if not batches or min(batches) < 1:
            raise SpecbenchError(f"--batch: every batch size must be >= 1, got {batches}")
        if self.context is not None and self.context < 1:
            raise SpecbenchError(f"--context must be >= 1, got {self.context}")

    def batch_sizes(self) -> list[int]:
        """The batch sizes asked, ascending (default: the profile's target batch sizes)."""
        return sorted({int(b) for b in (self.batches or self.profile.rows(role="target")["batch"].unique())})

    def drafter_for(self, drafter: str, params: str) -> tuple[str | None, str | None]:
        """(the profile drafter that prices this sweep drafter, a note) — or (None, why not)."""
        return match_drafter(drafter, params, self.profile)

    def fit(self, profile_drafter: str) -> ProfiledCost:
        """The profile's `ProfiledCost` of its target with ``profile_drafter``."""
        return fit_profile(self.profile, profile_drafter, overhead_s=self.overhead_s)


def match_drafter(drafter: str, params: str, profile: Profile) -> tuple[str | None, str | None]:
    """(profile drafter whose costs price this sweep drafter, a note) — or (None, why not)."""
    names = profile.drafters
    models = [n for n in names if not is_model_free(n)]
    if is_model_free(drafter):
        if drafter in names:
            return drafter, None
        return None, f"the profile has no '{drafter}' proposal timings (profile with --drafter {drafter})"
    wanted = json.loads(params or "{}").get("model")
    if wanted and wanted in models:
        return wanted, None
    if len(models) == 1:
        return models[0], (
            f"{drafter}({wanted or '?'}) priced with the profiled drafter '{models[0]}'"
            if wanted != models[0]
            else None
        )
    if not models:
        return None, f"the profile has no model drafter timings for '{drafter}' (profile with --drafter ARCH)"
    return None, f"no profiled drafter matches '{wanted}' (profiled: {', '.join(models)})"
