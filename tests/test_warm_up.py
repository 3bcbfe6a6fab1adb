"""Warm-up before timing: every shape a timed unit meets was run, untimed, before the first one
(`specbench.engine.warm_up`), and run.json says which."""

from __future__ import annotations

import gc
import json

import pytest

from specbench.backends.own_engine import OwnEngineBackend
from specbench.engine.warm_up import ShapeLog, verify_sizes
from specbench.measure.grid.sweep import DrafterConfig, RunConfig
from tests.cli_helpers import TINY_SWEEP, invoke, jsonl_workload, write_sweep_yaml

NEW_TOKENS = 32


def _config(drafter: DrafterConfig | None, gamma: int, temperature: float = 0.0) -> RunConfig:
    return RunConfig(drafter, gamma, "chain", temperature, 1.0, 0)


@pytest.fixture(scope="module")
def backend():
    started = OwnEngineBackend(target="tiny-random-llama", device="cpu", dtype="fp32")
    started.start(lambda message: None)
    yield started
    started.close()


def test_warm_up_runs_every_shape_the_timed_units_meet(backend):
    """The shapes the target's decoder meets while a block's units are timed (forwards after a cached prefix:
    batch, tokens, logits; LM-head rows; KV-cache allocations) all ran during the block's warm-up: prompt lookup
    (drafts of 0 … γ tokens), a draft model, a sampled configuration and the baseline, on the warm-up's prompt
    and a shorter one."""
    ngram, draft = DrafterConfig("ngram"), DrafterConfig("draft-model", (("model", "tiny-random-llama-draft"),))
    configs = [
        _config(None, 0),
        _config(ngram, 1),
        _config(ngram, 4),
        _config(draft, 3),
        _config(ngram, 2, temperature=0.8),
    ]
    block_prompt = [5, 6, 7, 8, 9] * 6 + [11, 12, 5, 6, 7]  # repeats: prompt lookup finds matches of every length
    other_prompt = block_prompt[:17]
    decoder = backend.decoder
    decoder.shape_log = warmed = ShapeLog()
    backend.warm_shapes(configs, block_prompt, len(block_prompt) + NEW_TOKENS)
    decoder.shape_log = timed = ShapeLog()
    try:
        for prompt in (block_prompt, other_prompt):
            for seed, config in enumerate(configs):
                backend.generate(config, prompt, NEW_TOKENS, seed=seed, stop_at_eos=False)
    finally:
        decoder.shape_log = None
    met = {shape for shape in timed if shape[0] != "prefill"}  # a prefill's length is the prompt's: not decode time
    assert met <= warmed, f"shapes first met while timing: {sorted(met - warmed)}"
    steps = {shape[2] for shape in met if shape[0] == "step"}
    assert steps >= {1, 2}, steps  # the timed units did draft (the check above is not empty)


def test_verify_sizes_cover_every_draft_length(backend):
    engine = backend._engine(_config(DrafterConfig("ngram"), 6), [1, 2, 3], 16)
    assert verify_sizes(engine) == (1, 2, 3, 4, 5, 6, 7)


def test_a_sweep_records_its_warm_up_in_run_json(tmp_path, prompts_file):
    """run.json's ``warm_up``: each configuration's verify sizes (γ + 1 tokens and every shorter draft) and the
    context its warm-up reached."""
    spec = {
        **TINY_SWEEP,
        "workloads": [jsonl_workload(prompts_file, 1)],
        "drafters": [TINY_SWEEP["drafters"][0]],
        "gammas": [1, 3],
        "max_new_tokens": 8,
        "timing": {"warmup_s": 0.01, "order": "once", "retries": 0},
    }
    out = tmp_path / "out"
    result = invoke("sweep", write_sweep_yaml(tmp_path, spec), "--out", out)
    assert result.exit_code == 0, result.output
    warm = json.loads((out / "run.json").read_text())["warm_up"]["configurations"]
    sizes = {label.split(" T=")[0]: entry["verify_tokens"] for label, entry in warm.items()}
    assert sizes == {"target only": [1], "ngram γ=1": [1, 2], "ngram γ=3": [1, 2, 3, 4]}, warm
    assert all(entry["context"] >= 8 for entry in warm.values())


class _RecordingBackend:
    """A backend that notes what it is asked, in order."""

    threads = 1
    context_window = None

    def __init__(self):
        self.calls: list[tuple] = []

    def warm_shapes(self, configs, prompt_ids, context):
        self.calls.append(("warm_shapes", tuple(configs), context))

    def generate(self, config, prompt_ids, max_new_tokens, **kwargs):
        self.calls.append(("generate", config))
        if "on_round" in kwargs:
            self.frozen_when_timed = gc.get_freeze_count()
            raise _Stop  # the first timed generation: enough seen


class _Stop(Exception):
    pass


def test_the_worker_warms_every_configuration_of_the_block_before_timing(monkeypatch):
    """Before the first timed unit the worker asks its backend to warm every configuration of the block (not
    only the baseline) up to the longest context the block reaches, and freezes what is alive out of the
    garbage collector's reach."""
    from types import SimpleNamespace

    from specbench.measure.executors import worker as worker_module
    from specbench.measure.executors.pieces import BLOCK, Piece
    from specbench.measure.grid.timing import TimingProtocol

    ngram = DrafterConfig("ngram")
    configs = [_config(None, 0), _config(ngram, 1), _config(ngram, 4)]
    units = [
        SimpleNamespace(
            config=c,
            turn=1,
            max_new_tokens=20 + c.gamma,
            unit_id=str(i),
            seed=0,
            workload=SimpleNamespace(name="w"),
            prompt=SimpleNamespace(prompt_id="p"),
        )
        for i, c in enumerate(configs)
    ]
    backend = _RecordingBackend()
    spec = SimpleNamespace(timing=TimingProtocol(warmup_s=0.001), target="tiny", ignore_eos=True)
    worker = worker_module.PieceWorker(spec, backend, worker_module.SilentObserver())
    monkeypatch.setattr(worker, "prompt_ids", lambda unit, answers: [1, 2, 3])
    gc.unfreeze()
    try:
        with pytest.raises(_Stop):
            list(worker.run(Piece(BLOCK, units)))
        assert backend.calls[0] == ("warm_shapes", tuple(configs), 3 + 24)
        assert backend.calls[1] == ("generate", configs[0])  # then the baseline's untimed decoding
        assert backend.frozen_when_timed > 0
    finally:
        gc.unfreeze()
