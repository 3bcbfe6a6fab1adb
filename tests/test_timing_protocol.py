"""Timing on a shared machine (timing protocol, machine state) and speedup intervals at small P."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from scripts.interval_coverage import coverage, t_method, z_method
from specbench.analysis.statistics.speedup_interval import prompts_to_settle, speedup_interval
from specbench.analysis.verdicts.verdict import NO, TOO_FEW, UNSURE, YES, decide
from specbench.errors import SpecbenchError
from specbench.measure.grid.timing import TimingProtocol, parse_timing
from specbench.measure.timing.machine_state import MachineProbe, MachineState
from specbench.measure.timing.timing_protocol import combine, disturbed, run_block, schedule
from specbench.records.timing import timing_usable

# ----------------------------------------------------------------------------- protocol, no model


def test_schedules():
    assert schedule(4, True, "once") == [0, 1, 2, 3]
    assert schedule(4, True, "bracket") == [0, 1, 2, 3, 0]
    assert schedule(3, True, "abba") == [0, 1, 2, 2, 1, 0]
    assert schedule(1, True, "bracket") == [0]  # a lone baseline is timed once
    assert schedule(2, False, "bracket") == [0, 1]  # no baseline in the block (resumed): nothing to bracket


def _state(other_cores: float, n_cpus: int = 2, wall: float = 1.0) -> MachineState:
    return MachineState(
        wall_s=wall, load_1m=1.0, other_cpu_s=other_cores * wall, own_cpu_s=wall, cpu_mhz=float("nan"), n_cpus=n_cpus
    )


def test_interference_rule_counts_idle_cores():
    protocol = TimingProtocol(max_other_cores=0.25)
    assert not disturbed(_state(0.2), threads=2, protocol=protocol)
    assert disturbed(_state(0.5), threads=2, protocol=protocol)
    assert not disturbed(_state(0.9), threads=1, protocol=protocol)  # one core left idle: others may use it
    assert disturbed(_state(1.5), threads=1, protocol=protocol)
    assert not disturbed(_state(float("nan")), threads=2, protocol=protocol)  # unknown: not flagged


class FakeUnit:
    def __init__(self, name, baseline=False):
        self.name = name
        self.config = type("C", (), {"is_baseline": baseline})()


def _record(decode_s: float, rounds=(1, 2)) -> dict:
    return {
        "decode_s": decode_s,
        "decode_tokens": 10,
        "round_drafted": list(rounds),
        "prefill_s": 0.1,
        "draft_s": 0.0,
        "verify_s": decode_s,
        "overhead_s": 0.0,
        "round_draft_s": [0.0, 0.0],
        "round_verify_s": [decode_s / 2, decode_s / 2],
        "tokens_per_s": 10 / decode_s,
    }


def test_run_block_retimes_a_disturbed_unit_and_averages_clean_attempts():
    units = [FakeUnit("base", True), FakeUnit("a"), FakeUnit("b")]
    loads = iter([0.0, 1.8, 0.0, 0.0, 0.0])  # 'a' is disturbed on its first attempt, then re-timed
    times = iter([1.0, 3.0, 0.5, 1.1, 0.6])
    order = []

    def measure(unit):
        order.append(unit.name)
        return _record(next(times)), _state(next(loads))

    out = run_block(units, measure, TimingProtocol(order="bracket", retries=1), threads=2)
    assert order == ["base", "a", "b", "base", "a"]
    records = {u.name: combine(attempts) for u, attempts in out}
    assert records["base"]["decode_s"] == pytest.approx(1.05) and records["base"]["timing_kept"] == 2
    assert records["a"]["decode_s"] == pytest.approx(0.6)  # the disturbed 3.0 s attempt is left out
    assert (
        records["a"]["timing_ok"] and records["a"]["timing_attempts"] == 2 and "re-timed" in records["a"]["timing_flag"]
    )
    assert records["b"]["timing_flag"] == ""


def test_sustained_load_is_flagged_not_retimed():
    units = [FakeUnit("base", True), FakeUnit("a")]
    calls = []

    def measure(unit):
        calls.append(unit.name)
        return _record(1.0), _state(1.9)

    out = run_block(units, measure, TimingProtocol(order="bracket", retries=3), threads=2)
    assert calls == ["base", "a", "base"]  # every attempt disturbed: no re-timing
    records = [combine(a) for _, a in out]
    assert not any(r["timing_ok"] for r in records) and all("disturbed" in r["timing_flag"] for r in records)


def test_timing_usable_and_parse():
    import pandas as pd

    frame = pd.DataFrame({"timing_ok": [True, False, True]})
    kept, note = timing_usable(frame)
    assert len(kept) == 2 and "left out" in note
    kept, note = timing_usable(pd.DataFrame({"timing_ok": [False, False]}))
    assert len(kept) == 2 and "disturbed" in note
    assert parse_timing({"order": "abba"}, "x").order == "abba"
    with pytest.raises(SpecbenchError, match="order"):
        parse_timing({"order": "sometimes"}, "x")
    with pytest.raises(SpecbenchError, match="not"):
        parse_timing({"warmup": 1}, "x")


def test_probe_sees_another_process_burn_cpu():
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat")
    busy = "import time\nt=time.time()\nwhile time.time()-t<1.0: pass"
    probe = MachineProbe()
    # the busy loop runs in a grandchild that outlives its parent: never reaped by this process, so
    # its CPU time is another process's (a reaped child's time is counted as this process's own)
    launcher = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {busy!r}])"]
    )
    launcher.wait(timeout=30)
    time.sleep(1.6)
    state = probe.stop()
    assert state.other_cpu_s > 0.5  # the grandchild ran ~1 s of CPU
    assert state.wall_s >= 1.0 and state.load_1m == state.load_1m


# ----------------------------------------------------------------------------- intervals


def test_t_interval_covers_at_small_p_and_the_check_rejects_a_wrong_method():
    def covers(method, p):
        return coverage(method, p, sims=600, seed=p)["coverage"]

    for p in (3, 5, 10):
        assert covers(t_method, p) >= 0.90, p
    # the same check fails a deliberately wrong interval (normal quantile, no small-sample factor)
    assert covers(z_method, 3) < 0.85


def test_two_prompts_give_no_interval_and_decisions():
    iv = speedup_interval([10, 10], [5, 4], [10, 10], [8, 8])
    assert not iv.has_interval and "too few prompts to tell (P = 2)" in iv.text()
    assert decide(iv)[0] == TOO_FEW
    rng = np.random.default_rng(0)
    t = np.full(12, 64.0)
    base = 3.0 * np.exp(0.1 * rng.standard_normal(12))
    fast = speedup_interval(t, base / 1.6 * np.exp(0.1 * rng.standard_normal(12)), t, base)
    slow = speedup_interval(t, base / 0.7 * np.exp(0.1 * rng.standard_normal(12)), t, base)
    signs = np.tile([1.0, -1.0], 6)
    flat = speedup_interval(t, base / 1.02 * np.exp(0.3 * signs), t, base)
    assert decide(fast)[0] == YES and fast.lo > 1 and fast.hi < 10 * fast.point
    assert decide(slow)[0] == NO
    answer, needed = decide(flat)
    assert answer == UNSURE and (needed is None or needed > 12)
    wider = speedup_interval(t, base / 1.15 * np.exp(0.4 * signs), t, base)
    assert decide(wider)[0] == UNSURE
    needed = prompts_to_settle(wider)
    assert needed is not None and 12 < needed < 200
    more = speedup_interval(
        np.full(needed, 64.0),
        np.resize(base / 1.15 * np.exp(0.4 * signs), needed),
        np.full(needed, 64.0),
        np.resize(base, needed),
    )
    assert more.lo > 1.0  # at the advised size, the same spread settles it


# ----------------------------------------------------------------------------- under interference


def _hog(n: int, seconds: float) -> list[subprocess.Popen]:
    code = f"import time\nt=time.time()\nwhile time.time()-t<{seconds}: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def test_units_timed_beside_a_cpu_hog_are_flagged(tmp_path):
    """A bounded busy loop (one process per core, twice over) runs through a small sweep: every
    unit timed while it ran is flagged and left out of timing fits; acceptance is unaffected."""
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat: interference cannot be observed")
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner
    from specbench.records.store import load_records

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(["one two three", "tea time"]))
    )
    raw = {
        "name": "hog",
        "target": "tiny-random-llama",
        "max_new_tokens": 12,
        "ignore_eos": True,
        "drafters": [{"type": "ngram"}],
        "gammas": [2],
        "workloads": [{"name": f"jsonl:{prompts}:field=text:id=id", "count": 2}],
        # max_other_cores 0: any busy core beyond the idle ones is interference, so the hog is caught on 2 cores
        # too (there the other pytest worker and the hog share what this sweep leaves, near the default's 0.25)
        # and no re-timing: a retry that lands in a lull of the hog would keep one unit's timing
        "timing": {"order": "bracket", "warmup_s": 0.2, "max_other_cores": 0, "retries": 0},
    }
    spec = build_spec(raw)
    runner = SweepRunner(spec, tmp_path / "res")
    runner.backend.start(lambda message: None)  # load before the hog starts: it overlaps the timed units only
    runner.backend.start = lambda status: None
    hogs = _hog(2 * (os.cpu_count() or 1), 60.0)  # bounded: killed as soon as the sweep ends
    try:
        time.sleep(0.3)
        started = time.perf_counter()
        runner.run()
        assert time.perf_counter() - started < 55, "the sweep outlasted the hog"
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    df = load_records(tmp_path / "res")
    live = df[df["mode"] == "live"]
    assert (live["other_cores"] > 0.5).all(), live["other_cores"].tolist()
    assert (~live["timing_ok"]).all(), live[["timing_flag", "other_cores"]]
    assert (live[live["gamma"] == 0]["timing_attempts"] == 2).all()  # bracketed baseline
    kept, note = timing_usable(live)
    assert "disturbed" in note
    assert (live["accepted"] <= live["drafted"]).all() and live["tau"].notna().all()
    from specbench.analysis.verdicts.decision import decide_scenario

    decision, _ = decide_scenario(df, [], n_prompts=2)  # the headline itself says so, not only a note
    assert decision.timing_disturbed and "timing was disturbed" in decision.text
