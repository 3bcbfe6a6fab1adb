"""Near-zero acceptance is flagged at an adaptive sweep's first look: the configuration leaves the race there,
with the reason, instead of spending the budget (`specbench.analysis.verdicts.stopping.near_zero_acceptance`)."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.analysis.verdicts.stopping import NEAR_ZERO_ALPHA, near_zero_acceptance
from specbench.measure.run.adaptive import AdaptiveLooks, WorkloadLooks
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame

BROKEN = SyntheticDrafter(params={"model": "smollm2-135m@Q2_K"}, alpha=0.002, gammas=(3,))
FINE = SyntheticDrafter(params={"model": "smollm2-135m@Q8_0"}, alpha=0.7, gammas=(3,))
BROKEN_KEY = ("draft-model(model=smollm2-135m@Q2_K)", "chain", 3, "fixed")


def _first_look(drafters, n_prompts=8, seed=0):
    frame = records_frame(make_records(drafters, n_prompts=n_prompts, seed=seed, workload="mt-bench"))
    return frame.assign(stage=1)


def test_the_first_look_drops_a_drafter_that_accepts_almost_nothing_and_says_why():
    rule = AdaptiveLooks.__new__(AdaptiveLooks)  # the rule's judgement alone: no sweep folder, no runner
    rule.spec = SimpleNamespace(tolerance=TOLERANCE)
    state = WorkloadLooks("mt-bench", (8, 16, 24))
    rule.judge(state, _first_look([BROKEN, FINE]), elapsed_s=1.0)
    assert BROKEN_KEY in state.out_of_race
    (line,) = [d for d in state.looks[0].dropped if "Q2_K" in d]
    assert "near-zero acceptance: α 0.0" in line and f"below {NEAR_ZERO_ALPHA:g}" in line
    assert not any("Q8_0" in d for d in state.dropped)


def test_only_the_first_look_applies_the_rule():
    rule = AdaptiveLooks.__new__(AdaptiveLooks)
    rule.spec = SimpleNamespace(tolerance=TOLERANCE)
    state = WorkloadLooks("mt-bench", (8, 16, 24))
    state.looks.append(SimpleNamespace())  # one look already judged: this is look 2
    frame = _first_look([BROKEN, FINE]).assign(stage=2)
    rule.judge(state, frame, elapsed_s=1.0)
    assert BROKEN_KEY not in state.why


@settings(max_examples=25, deadline=None, derandomize=True)
@given(alpha=st.floats(0.0, 1.0), n_prompts=st.integers(1, 10), seed=st.integers(0, 10_000))
def test_flagged_exactly_when_the_exact_upper_end_is_below_the_line(alpha, n_prompts, seed):
    frame = _first_look([SyntheticDrafter(alpha=alpha, gammas=(3,))], n_prompts=n_prompts, seed=seed)
    live = frame[frame["gamma"] > 0]
    found = near_zero_acceptance(frame)
    observed = live["accepted"].sum() / live["drafted"].sum()
    if found:
        assert observed < NEAR_ZERO_ALPHA  # an upper end below the line has its point below it too
    if observed >= NEAR_ZERO_ALPHA:
        assert not found
    if live["accepted"].sum() == 0 and live["drafted"].sum() >= 40:  # 0 of 40: exact upper end 0.088
        assert len(found) == 1


def test_a_workload_whose_every_drafter_accepts_almost_nothing_stops_at_its_first_look(monkeypatch):
    """Its verdict still open (here: forced open), nothing is left to race: the workload stops there."""
    monkeypatch.setattr("specbench.measure.run.adaptive.look_outcome", lambda verdicts, look, planned: ("open", set()))
    rule = AdaptiveLooks.__new__(AdaptiveLooks)
    rule.spec = SimpleNamespace(tolerance=TOLERANCE)
    state = WorkloadLooks("mt-bench", (8, 16, 24))
    rule.judge(state, _first_look([BROKEN]), elapsed_s=1.0)
    assert state.status == "futile" and BROKEN_KEY in state.out_of_race
    mixed = WorkloadLooks("mt-bench", (8, 16, 24))
    rule.judge(mixed, _first_look([BROKEN, FINE]), elapsed_s=1.0)
    assert mixed.status == "open"  # the Q8_0 drafter still races
