"""A candidate configuration of a recommendation: measured, or predicted by the models."""

from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def group(self) -> tuple[str, str]:
        return self.drafter_label, self.tree

    def describe(self) -> str:
        tree = "" if self.tree == "chain" else f" tree {self.tree}"
        return f"{self.drafter_label}{tree} γ={self.gamma}"
