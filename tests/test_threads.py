"""Measured CPU threads (`specbench.engine.cpu.threads`): the probe, the engine running its target and
its drafter at their own counts, and ``threads`` in a sweep (parsed, hashed only when set,
recorded in run.json). Tiny random models; the probe is cut to one repeat over counts 1..2."""

from __future__ import annotations

import json

import pytest
import torch

from specbench.engine.cpu.threads import RoleThreads, ThreadProbe, probe_threads, using_threads
from specbench.engine.decoder import NativeDecoder
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.measure.grid.sweep import build_spec
from tests.cli_helpers import TINY_SWEEP, assert_user_error, invoke, jsonl_workload, one_prompt_sweep, write_sweep_yaml

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    from specbench.models.resolve import load_model

    return load_model("tiny-random-llama")


def test_best_count_is_the_fastest_and_the_smaller_on_a_tie():
    probe = ThreadProbe(5, decode_s={1: 0.30, 2: 0.20, 3: 0.25}, verify_s={1: 0.4, 2: 0.4, 3: 0.5})
    assert probe.best(1) == 2 and probe.best(5) == 1
    assert probe.to_dict()["decode_ms"] == {"1": 300.0, "2": 200.0, "3": 250.0}


def test_probe_times_every_count_and_restores_the_threads(tiny):
    decoder = NativeDecoder(tiny.model)
    probe = probe_threads(decoder, verify_tokens=4, max_threads=2, repeats=1, context=16)
    assert set(probe.decode_s) == set(probe.verify_s) == {1, 2}
    assert all(s > 0 for s in [*probe.decode_s.values(), *probe.verify_s.values()])
    assert probe.best(1) in (1, 2) and torch.get_num_threads() == 1
    assert decoder.length == 16  # the probed steps leave the cache as they found it


@pytest.mark.parametrize("two_threads_decode,dropped", [(0.012, False), (0.05, True)])
def test_probe_drops_a_hopeless_count_and_keeps_to_its_budget(tiny, monkeypatch, two_threads_decode, dropped):
    """Synthetic step times per count: 1 thread decode 10 ms / verify 30 ms, 2 threads verify 20 ms and
    decode ``two_threads_decode``; more than 2x the fastest decode drops 2 threads before its verify."""
    calls = []

    def fake_timed(decoder, ids):
        n, tokens = torch.get_num_threads(), ids.shape[1]
        calls.append((n, tokens))
        if tokens == 1:
            return 0.010 if n == 1 else two_threads_decode
        return 0.030 if n == 1 else 0.020

    monkeypatch.setattr("specbench.engine.cpu.threads._timed", fake_timed)
    probe = probe_threads(NativeDecoder(tiny.model), verify_tokens=3, max_threads=2, repeats=3, context=8)
    assert probe.best(1) == 1
    if dropped:
        assert probe.best(3) == 1 and probe.to_dict()["verify_ms"]["2"] is None
        assert (2, 3) not in calls and calls.count((2, 1)) == 1
    else:
        assert probe.best(3) == 2 and calls.count((2, 3)) == 4  # the untimed round and 3 timed ones
    budgeted = probe_threads(
        NativeDecoder(tiny.model), verify_tokens=3, max_threads=1, repeats=3, context=8, budget_s=0.0
    )
    assert budgeted.decode_s == {1: 0.010} and calls[-4:] == [(1, 1), (1, 3), (1, 1), (1, 3)]  # one timed round


def test_using_threads_sets_and_restores():
    with using_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 1
    with using_threads(None):
        assert torch.get_num_threads() == 1


def test_engine_runs_target_and_drafter_at_their_counts(tiny):
    """Draft forwards at the drafter's count, verify forwards at the target's; same greedy output."""
    drafter = make_drafter("draft-model", tiny, {"model": "tiny-random-llama-draft"})
    seen = {"draft": set(), "verify": set()}
    propose, head = drafter.propose, None

    def spy_propose(*args, **kwargs):
        seen["draft"].add(torch.get_num_threads())
        return propose(*args, **kwargs)

    drafter.propose = spy_propose
    ids = tiny.tokenizer("Threads for each model")["input_ids"]
    plain = SpeculativeEngine(tiny, drafter, gamma=3).generate(ids, 12, stop_at_eos=False)
    engine = SpeculativeEngine(tiny, drafter, gamma=3, threads=RoleThreads(target=2, drafter=1))
    head = engine.decoder.head

    def spy_head(hidden):
        seen["verify"].add(torch.get_num_threads())
        return head(hidden)

    engine.decoder.head = spy_head
    seen["draft"].clear()
    result = engine.generate(ids, 12, stop_at_eos=False)
    assert seen == {"draft": {1}, "verify": {2}}
    assert result.tokens == plain.tokens and torch.get_num_threads() == 1


def test_threads_in_a_sweep_spec_is_checked_and_hashed_only_when_set(tmp_path, prompts_file):
    raw = {**TINY_SWEEP, "workloads": [jsonl_workload(prompts_file, 1)]}
    plain = build_spec(raw)
    assert "threads" not in plain.to_dict() and "threads" not in plain.run_options
    auto = build_spec({**raw, "threads": "auto"})
    assert auto.threads == "auto" and auto.run_options["threads"] == "auto" and auto.spec_hash != plain.spec_hash
    assert build_spec({**raw, "threads": "2"}).threads == 2
    for bad, needle in [(0, "from 1 to 1024"), ("many", "count >= 1 or auto"), (True, "count >= 1 or auto")]:
        assert_user_error(invoke("sweep", write_sweep_yaml(tmp_path, {**raw, "threads": bad}), "--dry-run"), needle)
    assert_user_error(
        invoke("sweep", write_sweep_yaml(tmp_path, {**raw, "backend": "vllm", "threads": "auto"}), "--dry-run"),
        "own engine",
    )
    own = {**raw, "backend": {"name": "own", "threads": "many"}}  # the backend option is checked alike
    assert_user_error(invoke("sweep", write_sweep_yaml(tmp_path, own), "--out", tmp_path / "own"), "count >= 1 or auto")


def test_sweep_with_threads_auto_records_the_counts_in_run_json(tmp_path, prompts_file):
    raw = one_prompt_sweep(prompts_file, 1)
    out = tmp_path / "res"
    result = invoke("sweep", write_sweep_yaml(tmp_path, raw), "--out", out, "--threads", "auto")
    assert result.exit_code == 0, result.output
    threads = json.loads((out / "run.json").read_text())["threads"]
    assert threads["setting"] == "auto"
    assert set(threads["target"]) == {"1", "3"}  # the baseline's decode and verify(γ + 1)
    assert list(threads["drafters"]) == ["draft-model(model=tiny-random-llama-draft)"]
    assert all(
        1 <= n <= len(threads["probes"]["target 3"]["decode_ms"])
        for n in [*threads["target"].values(), *threads["drafters"].values()]
    )
    assert set(threads["probes"]) == {"target 1", "target 3", "draft-model(model=tiny-random-llama-draft)"}

    default = tmp_path / "default"
    assert invoke("sweep", write_sweep_yaml(tmp_path, raw), "--out", default).exit_code == 0
    threads = json.loads((default / "run.json").read_text())["threads"]
    assert threads["setting"] == "default" and "probes" not in threads
    assert set(threads["target"].values()) == {torch.get_num_threads()}
