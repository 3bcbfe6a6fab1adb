"""What a recommendation chooses between: its scenarios, its groups, its candidate configurations.

A *scenario* is one (target, workload, sampling) — `SCENARIO_KEYS`; a *group* within it one
(drafter, tree) — `GROUP_KEYS`; an `Option` one (drafter, tree, γ) of a group, measured or
predicted, with γ = 1..`MAX_GAMMA` by default. A measured option also has a verify-length
schedule (``fixed`` unless the sweep had ``schedules``); the model predicts fixed-γ options only.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.records.summary import BASELINE_KEYS

SCENARIO_KEYS = BASELINE_KEYS  # target, temperature, top_p, top_k, workload
GROUP_KEYS = ["drafter", "drafter_label", "tree"]
MAX_GAMMA = 16  # the default largest γ the acceptance and cost models predict (the one place it is set)


@dataclass
class Option:
    """One candidate: a measured configuration or a (drafter, tree, γ) the model predicts."""

    drafter: str
    drafter_label: str
    drafter_params: str
    tree: str
    gamma: int
    speedup: float  # objective speedup (point estimate)
    lo: float
    hi: float
    tokens_per_s: float
    measured: bool  # the sweep ran this γ for this drafter and tree
    schedule: str = "fixed"  # verify-length schedule (specbench.engine.strategies.schedule); γ is its cap
    log_se: float = float("nan")  # standard error of log speedup (t-interval), when the option has one
    dof: float = float("nan")  # its degrees of freedom
    timing_disturbed: bool = False  # measured: no (configuration, baseline) pair ran undisturbed (records.timing)

    @property
    def group(self) -> tuple[str, str, str]:
        return self.drafter_label, self.tree, self.schedule

    def describe(self) -> str:
        tree = "" if self.tree == "chain" else f" tree {self.tree}"
        schedule = "" if self.schedule == "fixed" else f" schedule {self.schedule}"
        return f"{self.drafter_label}{tree} γ={self.gamma}{schedule}"
