"""The cost model's check (`specbench.analysis.cost.predicted_speedup.model_misses`): where the model misprices a
measured configuration confidently by more than the choice's tolerance, the verdict rests on the measured
speedups, and says so. Planted: a verification cost the model's forms (linear, or linear with a knee) cannot
follow — verifying 3 tokens (γ 2) costs 40 % more than its neighbours, as the long-context sweep's 4k bin showed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from specbench.analysis.cost.predicted_speedup import model_misses, predicted_table
from specbench.analysis.recommendation.recommend import recommend
from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.records.summary import with_config_defaults
from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records

DRAFTER = SyntheticDrafter(name="draft-model", alpha=0.75, gammas=(1, 2, 4), draft_step_s=0.002)


@dataclass
class BumpAtThree(SyntheticCosts):
    """Verification of exactly ``tokens`` = 3 costs ``bump`` × the smooth cost."""

    bump: float = 1.4

    def verify(self, tokens: int) -> float:
        smooth = super().verify(tokens)
        return smooth * self.bump if tokens == 3 else smooth


def _frame(costs: SyntheticCosts) -> pd.DataFrame:
    return with_config_defaults(pd.DataFrame(make_records([DRAFTER], costs=costs, n_prompts=16, seed=3)))


def test_a_mispriced_configuration_fails_the_check_and_a_smooth_one_passes():
    table, _ = predicted_table(_frame(BumpAtThree()))
    missed = model_misses(table, 0.95, TOLERANCE)
    # the bump pulls the fitted line, so its neighbours are mispriced too, but γ 2 the most
    worst = missed.loc[np.abs(np.log(missed["realized_over_predicted"])).idxmax()]
    assert 2 in set(missed["gamma"]) and worst["gamma"] == 2
    row = table.set_index("gamma").loc[2]
    assert row["realized_hi"] < 1 / (1 + TOLERANCE) and row["realized_lo"] < row["realized_over_predicted"]
    assert row["realized_over_predicted"] == pytest.approx(row["measured"] / row["predicted_same_prompts"])
    smooth, _ = predicted_table(_frame(BumpAtThree(bump=1.0)))
    assert model_misses(smooth, 0.95, TOLERANCE).empty  # the same sweep with a cost the model can follow
    assert (smooth["realized_lo"] < 1).all() and (smooth["realized_hi"] > 1).all()


def test_the_verdict_falls_back_to_the_measured_speedups_and_says_why():
    (rec,) = recommend(_frame(BumpAtThree()), n_boot=40)
    assert rec.decision.evidence == "measured"
    assert any("the cost model failed its check" in n and "γ=2" in n for n in rec.notes)
    assert rec.decision.option is not None and rec.decision.option.gamma != 2  # the bump makes γ 2 slow
    (smooth,) = recommend(_frame(BumpAtThree(bump=1.0)), n_boot=40)
    assert smooth.decision.evidence == "predicted" and not any("failed its check" in n for n in smooth.notes)
