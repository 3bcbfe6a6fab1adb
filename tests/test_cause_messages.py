"""Messages name the real cause (issue 47, items 8 and 9): each case is refused, or reported, for what is really
wrong — with the limit that applies stated — and nothing else reaches the user's terminal."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.compare import compare, side
from specbench.analysis.recommendation.confirm_report import load_report
from specbench.backends.servers import prometheus
from specbench.errors import SpecbenchError
from specbench.measure.run.confirm import ConfirmPolicy, ConfirmSettings, plan_confirmation
from specbench.measure.run.runner import SweepRunner
from tests.cli_helpers import assert_user_error, invoke
from tests.confirm_helpers import decided_results
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame

# ----------------------------------------------------------------------------- /metrics counters


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    series=st.sampled_from(prometheus.SPEC_SERIES),
    value=st.sampled_from([1e30, 2.0**53 + 2, -1.0, float("inf"), float("-inf"), float("nan")])
    | st.floats(min_value=2.0**53 * 1.0001, allow_infinity=False)
    | st.floats(max_value=-1e-9, allow_infinity=False),
)
def test_a_counter_beyond_what_a_float_counts_is_refused_with_the_limit(series, value):
    """1e30 is finite and ≥ 0: the limit it breaks is 2^53 (above it a float skips whole counts), and the message
    says so — for every series specbench reads, whatever the value."""
    page = f"# TYPE {series} counter\n{series} {value!r}\n".replace("inf", "Inf").replace("nan", "NaN")
    try:
        prometheus.parse(page, server="http://127.0.0.1:1")
    except SpecbenchError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"{series} {value!r} was accepted")
    assert f"{series} must be a count from 0 to 2^53" in message and "\n" not in message, message


@settings(max_examples=20, deadline=None, derandomize=True)
@given(series=st.sampled_from(prometheus.SPEC_SERIES), value=st.integers(0, 2**53))
def test_every_count_up_to_the_limit_is_read(series, value):
    scrape = prometheus.parse(f"# TYPE {series} counter\n{series} {value}\n")
    assert scrape.samples[(series, ())] == float(value)


# ----------------------------------------------------------------------------- compare --margin


@pytest.mark.parametrize("margin", ["1", "0", "1.5", "-0.1", "nan"])
def test_a_margin_outside_its_row_is_refused_by_the_row_with_one_stated_range(tmp_path, margin):
    """--margin 1 passed the row (0, 1] and was then refused as 'between 0 and 1': the row is now the range compare
    takes, (0, 1), and the one place it is stated — on the command line and in `compare` itself."""
    result = invoke("compare", "--margin", margin, tmp_path / "old", tmp_path / "new")
    assert_user_error(result, "--margin", "must be a number > 0 and < 1")
    with pytest.raises(SpecbenchError, match=r"^--margin must be a number > 0 and < 1"):
        compare(None, None, margin=float(margin))


# ----------------------------------------------------------------------------- compare: no numpy warning


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    alphas=st.tuples(st.sampled_from([0.0, 0.4, 1.0]), st.sampled_from([0.0, 0.4, 1.0])),
    n_prompts=st.integers(1, 4),
    n_boot=st.sampled_from([0, 1, 2, 5, 50]),
    seed=st.integers(0, 3),
)
def test_compare_computes_degenerate_ratios_without_a_floating_point_warning(alphas, n_prompts, n_boot, seed):
    """α 0 on a side (0 ÷ 0 in every replicate), one prompt, a handful of replicates: each ratio that is not
    defined is NaN, computed without a RuntimeWarning (numpy printed them with source lines and install paths)."""
    sides = []
    for i, alpha in enumerate(alphas):
        drafter = replace(SyntheticDrafter(alpha=0.7, gammas=(3,)), alpha=alpha)
        records = make_records([drafter], n_prompts=n_prompts, seed=seed + i, max_new_tokens=16)
        sides.append(side(f"side{i}", records_frame(records), {"sweep": {"name": "s"}}, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the property
        result = compare(*sides, n_boot=n_boot, seed=seed)
    assert result.rows and result.verdict in ("equivalent", "inconclusive", "regressed")


# ----------------------------------------------------------------------------- an interrupted confirmation


class _InterruptedRunner:
    """What `SweepRunner.drive` uses of its runner, with a step that Ctrl-C cuts short after ``seconds``."""

    def __init__(self, folder, seconds: float):
        self.store = SimpleNamespace(folder=folder, has_records=lambda: False)
        self.observer = SimpleNamespace(status=lambda message: None)
        self.seconds = seconds
        self._cut_short = False

    def _notify(self, event, *args):
        pass

    def _run_units(self, units, deadline=None):
        time.sleep(self.seconds)
        raise KeyboardInterrupt


def test_an_interrupted_look_counts_against_the_budget_on_resume(tmp_path):
    """The look Ctrl-C cut short took wall time: the runner hands it to the policy (its look engine's `interrupted`), the
    confirmation saves it (it saved 0.0), and the resumed run's --budget counts it."""
    results = decided_results(tmp_path / "sweep")
    settings_ = ConfirmSettings(first=2, batch=2, max_prompts=6, budget_s=0.2)
    plan = plan_confirmation(results, settings_)
    plan.folder.mkdir(parents=True, exist_ok=True)
    policy = ConfirmPolicy(plan, plan.folder)
    with pytest.raises(KeyboardInterrupt):
        SweepRunner.drive(_InterruptedRunner(plan.folder, 0.3), policy, set())
    saved = load_report(results).elapsed_s
    assert saved >= 0.3
    resumed = ConfirmPolicy(plan, plan.folder)
    assert resumed.elapsed_s == saved
    assert resumed.propose(set()) is None and resumed.budget_stopped  # the 0.2 s budget is spent already


# ----------------------------------------------------------------------------- confirm's plan and folder


def test_confirm_dry_run_json_prints_the_plan_on_stdout(tmp_path):
    results = decided_results(tmp_path / "sweep")
    result = invoke("confirm", results, "--dry-run", "--json", "--first", "2", "--batch", "2", "--max-prompts", "6")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)  # stdout holds the JSON alone (the table went to stderr)
    assert plan["dry_run"] and plan["plan_hash"] and plan["results"] == str(results)
    (target,) = plan["targets"]
    assert target["fresh_prompts"] == 6 and target["looks"] == [2, 4, 6]
    assert target["prediction"]["answer"] == "confident yes"
    assert {arm["role"] for arm in target["arms"]} >= {"baseline", "recommended"}
    assert not (results / "confirm").exists()  # a dry run writes nothing


def _hold_lock(folder: Path):
    """Another process holding ``folder``'s writer lock (as a running confirmation would)."""
    code = (
        "import sys, time\n"
        "from specbench.records.lock import FolderLock\n"
        f"with FolderLock({str(folder)!r}):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_confirms_in_use_and_read_only_lines_do_not_suggest_out(tmp_path):
    """confirm writes RESULTS/confirm and has no --out: its folder lines name the folder and nothing to choose."""
    results = decided_results(tmp_path / "sweep", max_new_tokens=4)
    args = ("confirm", results, "--first", "2", "--batch", "2", "--max-prompts", "4")
    holder = _hold_lock(results / "confirm")
    try:
        busy = invoke(*args)
    finally:
        holder.kill()
        holder.wait()
    assert_user_error(busy, f"{results / 'confirm'} is in use by PID {holder.pid}")
    assert "--out" not in busy.stderr
    shutil.rmtree(results / "confirm")
    results.chmod(0o555)
    try:
        read_only = invoke(*args)
    finally:
        results.chmod(0o755)
    assert_user_error(read_only, "is read-only")
    assert "--out" not in read_only.stderr
