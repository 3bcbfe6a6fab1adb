"""Resamples big enough to carry a verdict, and estimates inside their intervals.

The rule (`specbench.analysis.statistics.intervals.replicates_needed`): a two-sided percentile interval at level
1 − a needs B ≥ 2/a − 1 replicates (an order statistic beyond each end); below it there is no interval ("cannot
tell", with the reason), and ``--bootstrap`` refuses 1 … 38 at the bounds check. Before, `compare --bootstrap 2`
printed "2.313× [1.947, 1.947] improved" — the estimate outside its own interval — and exited 0.

* a planted regression: found at the default and at the smallest allowed count, "cannot tell" below it, and
  refused (exit 2, never 0) on the command line below it;
* the property: every interval specbench computes (the bootstrap interval itself, the exact binomial, the paired
  speedup's t-interval; fit's α, τ, compare's ratios, the operating table) holds its estimate, or is absent.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from specbench.analysis.compare import INCONCLUSIVE, REGRESSED, compare, side
from specbench.analysis.fit import fit_acceptance, fits_frame, tau_intervals
from specbench.analysis.load.operating import operating
from specbench.analysis.statistics.intervals import (
    LEVEL,
    bootstrap_interval,
    clopper_pearson,
    replicates_needed,
)
from specbench.analysis.statistics.speedup_interval import speedup_interval
from specbench.bounds import BOUNDS
from specbench.cli.shell.exit_codes import BAD_INPUT, OK, REGRESSED_CODE
from specbench.records.store import ResultsStore
from tests.cli_helpers import invoke
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame
from tests.test_fuzz import fuzz

OLD = SyntheticDrafter(alpha=0.7, gammas=(3,), draft_step_s=0.002)
WEAKER = replace(OLD, alpha=0.45)  # the planted regression
INFO = {"sweep": {"name": "synthetic"}, "device_name": "cpu", "models": {"t": "a" * 64}}


def test_the_rule_and_the_bounds_row_state_one_count():
    assert replicates_needed(0.95) == 39 and replicates_needed(0.90) == 19
    assert BOUNDS["bootstrap"].zero_or_from == replicates_needed(LEVEL)  # the flag's row is the rule at 95 %
    for level in (0.5, 0.8, 0.9, 0.95, 0.99):
        b = replicates_needed(level)
        assert (b + 1) * (1 - level) / 2 >= 1 - 1e-9 > b * (1 - level) / 2 - 1e-9


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("rule")
    folders = {}
    for name, drafter, seed in (("old", OLD, 1), ("weaker", WEAKER, 2)):
        store = ResultsStore(root / name)
        store.write_run_info(INFO)
        store.replace_records(records_frame(make_records([drafter], n_prompts=40, seed=seed, max_new_tokens=48)))
        folders[name] = root / name
    return folders


def _sides(planted):
    from specbench.analysis.fit import load_results
    from specbench.records.store import load_run_info

    return [side(planted[n], load_results(planted[n]), load_run_info(planted[n]), {"version": n}) for n in planted]


def test_a_planted_regression_needs_enough_replicates(planted):
    old, new = _sides(planted)  # another "engine" on each side: τ and α get intervals, not the identity check
    for n_boot in (replicates_needed(0.90), 1000):
        result = compare(old, new, n_boot=n_boot)
        assert result.verdict == REGRESSED, n_boot
    for n_boot in (1, 2, 5, replicates_needed(0.90) - 1):
        result = compare(old, new, n_boot=n_boot)
        assert result.verdict == INCONCLUSIVE, n_boot
        for q in result.rows[0]["quantities"].values():
            assert q["lo"] is None and q["state"] == INCONCLUSIVE and "cannot give a 90% interval" in q["why"], q


def test_compare_on_the_command_line_never_passes_below_the_rule(planted):
    for n_boot in (1, 2, 5, 38):
        result = invoke("compare", planted["old"], planted["old"], "--bootstrap", n_boot)
        assert result.exit_code == BAD_INPUT and result.exit_code != OK, result.output
        assert "from 39 to 10000" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert invoke("compare", planted["old"], planted["weaker"], "--bootstrap", 39).exit_code == REGRESSED_CODE


# ----------------------------------------------------------------------------- the estimate lies inside


def _inside(point, lo, hi) -> bool:
    """``point`` within [lo, hi], or the interval absent (an end not finite or None)."""
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)) or not np.isfinite(point):
        return True
    return lo - 1e-9 * abs(point) <= point <= hi + 1e-9 * abs(point)


_floats = st.floats(-1e6, 1e6) | st.sampled_from([math.nan, math.inf, -math.inf])


@settings(max_examples=60, deadline=None)
@given(
    point=st.floats(-1e3, 1e3),
    replicates=hnp.arrays(np.float64, st.integers(0, 120), elements=_floats),
    clusters=st.integers(0, 50),
    level=st.sampled_from([0.5, 0.9, 0.95, 0.99]),
    positive=st.booleans(),
)
def test_the_bootstrap_interval_holds_its_estimate(point, replicates, clusters, level, positive):
    lo, hi = bootstrap_interval(point, replicates, clusters, level, positive=positive)
    assert _inside(point, float(lo), float(hi))
    if np.isfinite(replicates).sum() < replicates_needed(level):
        assert math.isnan(lo) and math.isnan(hi)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 500), st.integers(0, 500), st.sampled_from([0.9, 0.95]))
def test_the_exact_binomial_interval_holds_its_estimate(s, extra, level):
    lo, hi = clopper_pearson(s, s + extra, level)
    assert _inside(s / max(s + extra, 1), float(lo), float(hi))


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 12), st.just(4)), elements=st.floats(0.01, 1e3)))
def test_the_paired_speedup_interval_holds_its_estimate(sums):
    iv = speedup_interval(sums[:, 0], sums[:, 1], sums[:, 2], sums[:, 3])
    assert _inside(iv.point, iv.lo, iv.hi)


_TMP = Path(tempfile.mkdtemp(prefix="specbench-rule-"))


@fuzz(
    st.tuples(
        st.integers(0, 2**16),
        st.integers(1, 8),
        st.sampled_from([0, 1, 2, 5, 19, 39, 120]),
        st.floats(0.2, 0.9),
        st.sampled_from([0.0, 0.1, 0.3]),
    ),
    short=6,
    long=120,
)
def _pipelines(case):
    seed, prompts, n_boot, alpha, spread = case
    drafter = replace(OLD, alpha=alpha, alpha_spread=spread)
    records = records_frame(make_records([drafter], n_prompts=prompts, seed=seed, max_new_tokens=24))
    for row in fits_frame(fit_acceptance(records, n_boot=n_boot, seed=seed)).itertuples():
        assert _inside(row.alpha, row.alpha_lo, row.alpha_hi), row
    for row in tau_intervals(records, n_boot=n_boot, seed=seed).itertuples():
        assert _inside(row.tau, row.tau_lo, row.tau_hi), row
    other = records_frame(make_records([drafter], n_prompts=prompts, seed=seed + 1, max_new_tokens=24))
    a, b = (side(f"f{k}", r, INFO, {"version": str(k)}) for k, r in enumerate((records, other)))
    for row in compare(a, b, n_boot=n_boot, seed=seed).rows:
        for q in row["quantities"].values():
            assert _inside(q["ratio"], q["lo"], q["hi"]), q
    table = operating(records, n_boot=n_boot, seed=seed).table
    for column in [c for c in table.columns if f"{c}_lo" in table.columns and f"{c}_hi" in table.columns]:
        for point, lo, hi in zip(table[column], table[f"{column}_lo"], table[f"{column}_hi"]):
            assert _inside(float(point), lo, hi), (column, point, lo, hi)


test_every_interval_of_a_results_folder_holds_its_estimate, test_intervals_hold_estimates_long = _pipelines
