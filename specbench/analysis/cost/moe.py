"""The expert-aware cost model: what verifying n tokens costs on a mixture-of-experts target.

On a dense target one forward streams every weight once, whatever the n tokens it verifies (up to
the knee where arithmetic takes over). On an MoE target each token selects k_top of the E experts
of every layer, and the forward must stream the *union* of the experts its n tokens chose. With
uniform, independent routing one expert is missed by one token with probability 1 − k_top/E, so

    D(n) = E · (1 − (1 − k_top/E)^n)                                       (expected distinct experts)

per layer: D(1) = k_top, growing almost linearly for small n and saturating at E. Trained routers
are not uniform — tokens of one text share experts — so specbench fits an *effective* expert
count E_eff ∈ [k_top, E] to the distinct experts the records measured (`round_experts` against
n = `round_drafted` + 1) by least squares, and uses D_eff(n) = E_eff · (1 − (1 − k_top/E_eff)^n).

Verify cost. The sweep's own verify fit t(n) (`specbench.analysis.cost.round_cost`) measures a forward that
computed every MLP once per token (the upcycled testbed's dense computation). A real MoE's forward
also streams D(n) experts per layer. Relative to a target-only step, which streams k_top of them,
a verification of n tokens reads (D(n) − k_top) more experts in each of the L layers, at the
bandwidth the baseline's step achieved (its weight bytes ÷ its measured time):

    t_MoE(n) = t(n) + (D(n) − k_top) · L·b ÷ (W_step ÷ t_step)

with b one expert's bytes, L·b = expert_bytes_per_verify ÷ experts_per_verify (from the records)
and W_step = `moe_step_bytes`. At n = 1 the extra term is 0, so the baseline is unchanged and
only speculation pays for scattering: the best γ is shorter than on a dense model, the article's
point (one DeepSeek-V3.1 FP8 expert is ~44 MB of HBM reads). `ExpertAwareCosts` is the
recommender's cost source for records of an MoE target (`specbench.analysis.recommendation.recommend`).

Profiles. `specbench profile --dense-twin` times an MoE shape (random weights: near-uniform routing)
and the dense shape of equal active parameters side by side; `moe_verify_table` checks the model
against them: with t tokens in a forward (B sequences × n verify tokens),

    t_MoE(n) ≈ t_dense(n) + Δ₀ + s · (D(B·n) − D(B)),      Δ₀ = t_MoE(1) − t_dense(1)

(Δ₀ the router and dispatch cost of a one-token step, s the seconds of one more distinct expert in
every layer, fitted per (B, c) by least squares through the origin).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from specbench.analysis.cost.round_cost import CostFit, MeasuredCost
from specbench.analysis.cost.source import MeasuredCosts
from specbench.errors import SpecbenchError
from specbench.records.profile_file import Profile


def expected_distinct_experts(verify_tokens, experts: float, top_k: int):
    """D(n) = E · (1 − (1 − k_top/E)^n): expected distinct experts n uniformly routed tokens touch per layer."""
    n = np.asarray(verify_tokens, dtype=float)
    return experts * (1.0 - (1.0 - top_k / experts) ** n)


def fit_effective_experts(verify_tokens, distinct, experts: int, top_k: int) -> float:
    """E_eff ∈ [k_top, E] whose D(n) is closest, in least squares, to the measured distinct experts."""
    n, d = np.asarray(verify_tokens, dtype=float), np.asarray(distinct, dtype=float)
    if n.size == 0 or experts <= top_k:
        return float(experts)
    candidates = np.linspace(top_k, experts, 400)
    errors = [float(np.sum((expected_distinct_experts(n, e, top_k) - d) ** 2)) for e in candidates]
    return float(candidates[int(np.argmin(errors))])


def is_moe(records: pd.DataFrame) -> bool:
    """Whether the records come from an MoE target whose routing was measured."""
    return "moe_experts" in records and bool(records["moe_experts"].notna().any())


@dataclass(frozen=True)
class MoeTraffic:
    """What an MoE target's records say about its experts (see the module docstring)."""

    experts: int  # E per layer
    top_k: int
    effective_experts: float  # E_eff fitted to the measured distinct experts
    layer_expert_bytes: float  # L·b: one expert in every layer
    step_bytes: float  # W_step: weight bytes of a target-only step as measured

    def distinct(self, verify_tokens):
        """D_eff(n), distinct experts per layer for n verify tokens."""
        return expected_distinct_experts(verify_tokens, self.effective_experts, self.top_k)

    def extra_bytes(self, verify_tokens):
        """Expert bytes a verification of n tokens reads beyond a target-only step: (D(n) − D(1)) · L·b
        (D(1) = k_top; subtracting the computed D(1) keeps a target-only step's extra exactly 0)."""
        return (self.distinct(verify_tokens) - self.distinct(1)) * self.layer_expert_bytes


def moe_traffic(records: pd.DataFrame) -> MoeTraffic:
    """`MoeTraffic` of live MoE records (every round of every record: n = drafted + 1 against its experts)."""
    moe = records[records["moe_experts"].notna()]
    if moe.empty:
        raise SpecbenchError("no records of an MoE target")
    experts, top_k = int(moe["moe_experts"].iloc[0]), int(moe["moe_top_k"].iloc[0])
    if moe["moe_experts"].nunique() > 1 or moe["moe_top_k"].nunique() > 1:
        raise SpecbenchError("records mix MoE targets of different expert counts: recommend them apart")
    n = np.concatenate([np.asarray(d, dtype=float) + 1 for d in moe["round_drafted"]])
    d = np.concatenate([np.asarray(e, dtype=float) for e in moe["round_experts"]])
    per_layer = moe["expert_bytes_per_verify"] / moe["experts_per_verify"]
    return MoeTraffic(
        experts=experts,
        top_k=top_k,
        effective_experts=fit_effective_experts(n, d, experts, top_k),
        layer_expert_bytes=float(per_layer.median()),
        step_bytes=float(moe["moe_step_bytes"].median()),
    )


@dataclass(frozen=True)
class ExpertAwareCost:
    """A measured `MeasuredCost` plus expert streaming: verify_s(n) = t(n) + extra_bytes(n) ÷ bandwidth."""

    base: MeasuredCost
    traffic: MoeTraffic
    bytes_per_s: float  # W_step ÷ t_step: the bandwidth a target-only step achieved

    # the fit's parts, as `MeasuredCost` has them (summaries and refits read them)
    @property
    def verify(self):
        return self.base.verify

    @property
    def draft(self):
        return self.base.draft

    @property
    def round_overhead_s(self) -> float:
        return self.base.round_overhead_s

    @property
    def baseline_overhead_s(self) -> float:
        return self.base.baseline_overhead_s

    def expert_s(self, verify_tokens):
        """Seconds of the extra expert reads of a verification of n tokens."""
        return self.traffic.extra_bytes(verify_tokens) / self.bytes_per_s

    def verify_s(self, verify_tokens, batch: int = 1, context: int | None = None):
        return self.base.verify_s(verify_tokens, batch, context) + self.expert_s(verify_tokens)

    def draft_s(self, gamma, batch: int = 1, context: int | None = None):
        return self.base.draft_s(gamma, batch, context)

    def overhead_s(self, gamma, batch: int = 1, context: int | None = None):
        return self.base.overhead_s(gamma, batch, context)

    def extrapolation(self, batch: int = 1, context: int | None = None) -> str | None:
        return self.base.extrapolation(batch, context)


@dataclass(frozen=True)
class ExpertAwareCosts(MeasuredCosts):
    """The sweep's own timings with expert streaming added (`ExpertAwareCost`): the cost source for an MoE target."""

    kind: ClassVar[str] = "measured"

    def describe(self) -> str:
        return "the sweep's own timings (batch 1) + the MoE target's expert reads (expert-aware)"

    @staticmethod
    def _with_traffic(fit: CostFit, traffic: MoeTraffic, note: bool = False) -> CostFit:
        """``fit`` with its cost made expert-aware: bandwidth = W_step ÷ the fit's target step time."""
        bandwidth = traffic.step_bytes / fit.target_step_s if fit.target_step_s > 0 else float("inf")
        notes = fit.notes
        if note:
            text = (
                f"expert-aware verify cost: E={traffic.experts}, top-{traffic.top_k}, effective E "
                f"{traffic.effective_experts:.1f}; one expert in every layer "
                f"{traffic.layer_expert_bytes / 1e6:.1f} MB read at {bandwidth / 1e9:.1f} GB/s (the baseline step's)"
            )
            notes += (text,)
        assert isinstance(fit.cost, MeasuredCost)  # the plain measured source's fit, made expert-aware once
        return replace(fit, cost=ExpertAwareCost(fit.cost, traffic, bandwidth), notes=notes)

    def fit(self, live: pd.DataFrame, baseline: pd.DataFrame, clusters: pd.Index):
        stats, fit = super().fit(live, baseline, clusters)
        return stats, self._with_traffic(fit, moe_traffic(live), note=True)

    def refit(self, stats, weights, *, like: CostFit) -> CostFit:
        """A bootstrap replicate: the timings re-weighted, the routing traffic as fitted on all prompts."""
        assert isinstance(like.cost, ExpertAwareCost)  # `like` is one of this source's fits
        return self._with_traffic(super().refit(stats, weights, like=like), like.cost.traffic)


def moe_verify_table(profile: Profile) -> pd.DataFrame:
    """Per (batch, context, verify tokens n): the MoE target's and its dense twin's median verify times (ms),
    their ratio, D(B·n) (uniform routing), the fitted seconds per extra distinct expert s and the model's
    time (module docstring). Empty when the profile has no dense twin."""
    shape = profile.info.get("target", {}).get("moe")
    moe, dense = profile.rows(role="target", measure="verify"), profile.rows(role="dense_twin", measure="verify")
    if not shape or dense.empty:
        return pd.DataFrame(
            columns=[
                "batch",
                "context",
                "verify_tokens",
                "moe_ms",
                "dense_ms",
                "ratio",
                "distinct_experts",
                "expert_ms",
                "model_ms",
            ]
        )
    keys = ["batch", "context", "tokens"]
    both = moe[keys + ["median_s"]].merge(dense[keys + ["median_s"]], on=keys, suffixes=("_moe", "_dense"))
    rows = []
    for (batch, context), cell in both.groupby(["batch", "context"], sort=True):
        cell = cell.sort_values("tokens")
        n = cell["tokens"].to_numpy(dtype=float)
        t_moe, t_dense = cell["median_s_moe"].to_numpy(), cell["median_s_dense"].to_numpy()
        distinct = expected_distinct_experts(batch * n, shape["experts"], shape["top_k"])
        x = distinct - float(expected_distinct_experts(batch, shape["experts"], shape["top_k"]))
        offset = float(t_moe[0] - t_dense[0])  # the smallest n measured stands for the one-token step
        y = t_moe - t_dense - offset
        slope = max(float(x @ y) / float(x @ x), 0.0) if float(x @ x) > 0 else 0.0
        model = t_dense + offset + slope * x
        for i in range(len(cell)):
            rows.append(
                {
                    "batch": int(batch),
                    "context": int(context),
                    "verify_tokens": int(n[i]),
                    "moe_ms": 1e3 * t_moe[i],
                    "dense_ms": 1e3 * t_dense[i],
                    "ratio": t_moe[i] / t_dense[i],
                    "distinct_experts": float(distinct[i]),
                    "expert_ms": 1e3 * slope,
                    "model_ms": 1e3 * model[i],
                }
            )
    return pd.DataFrame(rows)


def expert_aware_table(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (drafter, tree, γ) of an MoE target's live records: τ, distinct experts per layer and
    expert MB per verify and per emitted token, the measured decode tokens/s, and the tokens/s the
    expert-aware model predicts once every verify pays for its experts (each round's measured distinct
    experts, (D_r − k_top) · L·b ÷ the baseline step's bandwidth, added to its time), with its speedup over
    the target-only baseline (whose steps read k_top experts: no extra)."""
    live = records[(records["mode"] == "live") & records["moe_experts"].notna()]
    base = live[live["gamma"] == 0]
    if live.empty or base.empty:
        raise SpecbenchError("expert-aware table: needs live records of an MoE target with a target-only baseline")
    traffic = moe_traffic(live)
    step_s = float(base["verify_s"].sum() / base["rounds"].sum())
    bandwidth = traffic.step_bytes / step_s
    base_tps = float(base["decode_tokens"].sum() / base["decode_s"].sum())
    rows = []
    for (label, tree, gamma), group in live.groupby(["drafter_label", "tree", "gamma"], sort=True):
        experts = np.concatenate([np.asarray(e, dtype=float) for e in group["round_experts"]])
        extra_s = float(np.sum(experts - traffic.top_k)) * traffic.layer_expert_bytes / bandwidth
        tokens, rounds = float(group["decode_tokens"].sum()), float(group["rounds"].sum())
        seconds = float(group["decode_s"].sum())
        predicted = tokens / (seconds + extra_s)
        rows.append(
            {
                "drafter": label,
                "tree": tree,
                "gamma": int(gamma),
                "tau": tokens / rounds,
                "experts_per_verify": float(experts.mean()),
                "expert_mb_per_verify": float(
                    (group["expert_bytes_per_verify"] * group["rounds"]).sum() / rounds / 1e6
                ),
                "expert_mb_per_token": float(
                    (group["expert_bytes_per_token"] * group["decode_tokens"]).sum() / tokens / 1e6
                ),
                "tokens_per_s": tokens / seconds,
                "predicted_tokens_per_s": predicted,
                "predicted_speedup": predicted / base_tps,
            }
        )
    return pd.DataFrame(rows)
