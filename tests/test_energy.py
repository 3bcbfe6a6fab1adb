"""Energy counters (`specbench.measure.timing.energy`): RAPL wraparound and refusals, NVML through a stand-in module,
idle subtraction, and the record columns a sweep writes with a fake counter (and without one: null, one line)."""

from __future__ import annotations

import sys
import time
import types

import pandas as pd
import pytest

from specbench.measure.timing import energy
from specbench.measure.timing.energy import EnergyMeter, energy_columns, find_nvml, find_rapl
from specbench.records.store import load_records, load_run_info
from tests.cli_helpers import invoke, one_prompt_sweep, write_sweep_yaml


class FakeCounter:
    """A counter drawing ``watts`` all the time (on a real clock)."""

    name = "fake: 30 W"

    def __init__(self, watts: float = 30.0):
        self.watts, self.t0 = watts, time.perf_counter()

    def joules(self) -> float:
        return self.watts * (time.perf_counter() - self.t0)


@pytest.fixture
def fake_meter():
    """A meter whose counter draws 30 W and whose idle power is 10 W: every interval gets 20 W × its length."""
    old = energy.use_meter(EnergyMeter(FakeCounter(30.0), idle_w=10.0))
    yield energy.meter()
    energy.use_meter(old)


@pytest.fixture
def no_counter():
    old = energy.use_meter(EnergyMeter(None, "no energy counter: a test machine without one"))
    yield energy.meter()
    energy.use_meter(old)


def _domain(root, name: str, value: int, limit: int, label: str):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "energy_uj").write_text(f"{value}\n")
    (folder / "max_energy_range_uj").write_text(f"{limit}\n")
    (folder / "name").write_text(label)
    return folder


# ----------------------------------------------------------------------------- RAPL


def test_rapl_reads_package_domains_only_and_survives_a_wraparound(tmp_path):
    pkg0 = _domain(tmp_path, "intel-rapl:0", 900_000, 1_000_000, "package-0")
    _domain(tmp_path, "intel-rapl:0:0", 5, 1_000_000, "core")  # inside package-0: never added again
    pkg1 = _domain(tmp_path, "intel-rapl:1", 100, 1_000_000, "package-1")
    counter, reason = find_rapl(tmp_path)
    assert reason == "" and counter.name == "rapl: package-0, package-1"
    assert counter.joules() == 0.0
    (pkg0 / "energy_uj").write_text("50000\n")  # wrapped: 900,000 → 1,000,000 → 50,000 is 150,000 µJ
    (pkg1 / "energy_uj").write_text("2100\n")  # 2,000 µJ
    assert counter.joules() == pytest.approx(0.152)
    (pkg0 / "energy_uj").write_text("60000\n")
    assert counter.joules() == pytest.approx(0.162)  # cumulative, wraps included


def test_rapl_absent_or_unreadable_says_why(tmp_path, monkeypatch):
    assert find_rapl(tmp_path / "none") == (None, f"no RAPL powercap interface ({tmp_path / 'none'} does not exist)")
    _domain(tmp_path, "intel-rapl:0", 1, 10, "package-0")

    def refuse(path):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(energy, "_read_uj", refuse)
    counter, reason = find_rapl(tmp_path)
    assert counter is None and "readable by root only (intel-rapl:0" in reason


# ----------------------------------------------------------------------------- NVML (a stand-in pynvml)


def _fake_pynvml(millijoules: list[list[int]], fail: str | None = None):
    """A pynvml module with len(millijoules[0]) GPUs whose counters step through the given readings."""
    module = types.ModuleType("pynvml")
    reads = {i: iter(column) for i, column in enumerate(zip(*millijoules))}

    class NVMLError(Exception):
        pass

    def init():
        if fail:
            raise NVMLError(fail)

    module.NVMLError = NVMLError
    module.nvmlInit = init
    module.nvmlDeviceGetCount = lambda: len(millijoules[0])
    module.nvmlDeviceGetHandleByIndex = lambda i: i
    module.nvmlDeviceGetUUID = lambda h: f"GPU-{h}aaaa"
    module.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    module.nvmlDeviceGetTotalEnergyConsumption = lambda h: next(reads[h])
    return module


def test_nvml_sums_the_visible_gpus(monkeypatch):
    # the check call reads each chosen GPU once, then joules() reads them again
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([[0, 0, 0], [1000, 5000, 9000], [3000, 6000, 19000]]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,GPU-2")
    counter, reason = find_nvml()
    assert reason == "" and counter.name == "nvml: NVIDIA H200 (GPU 0), NVIDIA H200 (GPU 2)"
    assert counter.joules() == pytest.approx(1.0 + 9.0)  # GPU 1 is not visible: never read
    assert counter.joules() == pytest.approx(3.0 + 19.0)


def test_nvml_missing_or_failing_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert "nvidia-ml-py is not installed" in find_nvml()[1]
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([[0]], fail="Driver Not Loaded"))
    counter, reason = find_nvml()
    assert counter is None and reason == "NVML gives no energy counter (Driver Not Loaded)"


# ----------------------------------------------------------------------------- the meter


def test_meter_measures_idle_and_subtracts_it():
    clock = iter([0.0, 2.0, 10.0, 14.0]).__next__
    readings = iter([100.0, 120.0, 500.0, 600.0]).__next__  # idle: 20 J in 2 s = 10 W
    counter = types.SimpleNamespace(name="x", joules=readings)
    m = EnergyMeter(counter, idle_s=2.0, sleep=lambda s: None, clock=clock)
    assert m.idle_w == pytest.approx(10.0)
    start = m.start()
    assert m.joules_since(start) == pytest.approx(100.0 - 10.0 * 4.0)  # 100 J drawn in 4 s, 40 J of it idle
    assert m.describe() == {"source": "x", "idle_w": 10.0, "idle_s": 2.0, "reason": None}


def test_energy_columns_are_null_without_a_counter(no_counter):
    assert energy_columns(float("nan"), 10, 4, no_counter) == dict.fromkeys(
        ("energy_j", "idle_w", "energy_counter", "joules_per_token", "joules_per_accepted")
    )
    m = EnergyMeter(FakeCounter(), idle_w=1.0)
    columns = energy_columns(6.0, 12, 0, m)
    assert columns["joules_per_token"] == 0.5 and columns["joules_per_accepted"] is None  # nothing accepted


# ----------------------------------------------------------------------------- a sweep's records


def test_a_sweep_records_energy_from_the_counter(tmp_path, prompts_file, fake_meter):
    out = tmp_path / "res"
    result = invoke("sweep", write_sweep_yaml(tmp_path, one_prompt_sweep(prompts_file, 0)), "--out", out)
    assert result.exit_code == 0, result.output
    frame = load_records(out)
    assert frame["energy_j"].notna().all() and (frame["energy_counter"] == "fake: 30 W").all()
    assert (frame["idle_w"] == 10.0).all()
    # 20 W above idle over the whole timed call: at least prefill + decode, at most a little more
    busy = frame["prefill_s"] + frame["decode_s"]
    assert (frame["energy_j"] >= 20.0 * busy * 0.95).all() and (frame["energy_j"] <= 20.0 * busy + 0.5).all()
    assert (frame["joules_per_token"] == frame["energy_j"] / frame["new_tokens"]).all()
    spec = frame[frame["gamma"] > 0]
    expected = (spec["energy_j"] / spec["accepted"]).where(spec["accepted"] > 0)
    pd.testing.assert_series_equal(spec["joules_per_accepted"], expected, check_names=False)
    assert frame[frame["gamma"] == 0]["joules_per_accepted"].isna().all()  # the baseline accepts nothing
    assert load_run_info(out)["energy"] == {"source": "fake: 30 W", "idle_w": 10.0, "idle_s": 0.0, "reason": None}


def test_without_a_counter_the_columns_are_null_and_one_line_says_why(tmp_path, prompts_file, no_counter):
    out = tmp_path / "res"
    result = invoke("sweep", write_sweep_yaml(tmp_path, one_prompt_sweep(prompts_file, 0)), "--out", out)
    assert result.exit_code == 0, result.output
    frame = load_records(out)
    for column in ("energy_j", "idle_w", "energy_counter", "joules_per_token", "joules_per_accepted"):
        assert frame[column].isna().all(), column
    lines = [line for line in result.output.splitlines() if "energy columns left null" in line]
    assert len(lines) == 1 and "a test machine without one" in lines[0]
    assert load_run_info(out)["energy"]["reason"] == "no energy counter: a test machine without one"


def test_this_machine_reports_why_it_has_no_counter():
    """Whatever machine runs the suite, the meter it finds either has a counter or a reason (never neither)."""
    counter, reason = energy.find_counter()
    assert (counter is None) == bool(reason)
