"""Real llama.cpp servers (marker ``llamacpp``; `make test-llamacpp` builds llama-server first): SmolLM2-135M as
its Q4_1 GGUF ships, CPU.

* the counters: llama.cpp's ``llamacpp:spec_decode_*`` deltas over each batch equal an independent count — each
  request's own final ``timings`` (draft_n, draft_n_accepted) and the rounds rebuilt from its per-token running
  totals (verification steps, per-position acceptance) — on 8 prompts × 2 γ, for a draft model and llama.cpp's
  n-gram lookup;
* greedy identity: every speculative configuration's output against the same engine's target-only output, token
  for token (the rate is asserted and printed: docs/backends-llamacpp.md says what was measured and why a
  batched verify can differ);
* the SmolLM2 + n-gram sweep until decided, then ``recommend --engine llamacpp``: a verdict per workload and
  paste-ready llama-server flags;
* ``url:``: the same backend measuring a server it did not start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.backends.llamacpp_env import server_binary
from specbench.errors import SpecbenchError

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.llamacpp


def _binary() -> Path:
    try:
        return server_binary()
    except SpecbenchError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def binary() -> Path:
    return _binary()


def _drafted_config(drafter: str, gamma: int, **params):
    from specbench.measure.spec.sweep import DrafterConfig, RunConfig

    d = DrafterConfig(drafter, tuple(sorted(params.items()))) if drafter else None
    return RunConfig(d, gamma if d else 0, "chain", 0.0, 1.0, 0)


def _prompts(n: int) -> list[list[int]]:
    from specbench.models.gguf_files import load_gguf_tokenizer
    from specbench.workloads.catalog import load_workload

    tokenizer = load_gguf_tokenizer("smollm2-135m")
    prompts = load_workload("humaneval").prompts[: n // 2] + load_workload("mt-bench").prompts[: n - n // 2]
    return [tokenizer.encode(p.turns[0]) for p in prompts]


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    return _prompts(8)


def _backend(tmp_path: Path, **options):
    from specbench.backends.llamacpp_server import LlamaCppServerBackend

    backend = LlamaCppServerBackend(
        {"log_dir": str(tmp_path), "engines_kept": 2, "threads": 1, **options},
        target="smollm2-135m",
        device="cpu",
        dtype="fp32",
        seed=0,
    )
    backend.start(lambda message: print(message, flush=True))
    return backend


@pytest.mark.parametrize(
    "drafter, params",
    [
        ("ngram-simple", {"size_n": 2}),
        ("draft-model", {"model": "smollm2-135m"}),
    ],
)
def test_counters_equal_the_per_request_count_and_greedy_output_is_the_targets(
    binary, prompts, tmp_path, drafter, params
):
    from specbench.backends.base import Request

    backend = _backend(tmp_path)
    requests = [Request(ids, 48, 0, False) for ids in prompts]
    try:
        baseline = [r.tokens for r in backend.generate_batch(_drafted_config(None, 0), requests, 1)]
        same, total = 0, 0
        for gamma in (2, 4):
            config = _drafted_config(drafter, gamma, **params)
            results = backend.generate_batch(config, requests, 1)
            entry = backend.describe()["aggregates"][-1]
            window, count = entry["window"], entry["per_request_count"]
            print(drafter, gamma, json.dumps(window), json.dumps(count))
            assert window["draft_tokens"] == count["draft_tokens"] and window["accepted"] == count["accepted"]
            assert count["rounds_exact"], "a token was held back: the rebuilt rounds are not exact"
            assert window["drafts"] == count["drafts"] > 0
            assert window["per_position"] == count["per_position"][: len(window["per_position"])]
            assert sum(count["per_position"][len(window["per_position"]) :]) == 0
            for result, expected in zip(results, baseline):
                assert len(result.tokens) == 48 and sum(result.rounds.emitted) == 47
                total += 1
                same += result.tokens == expected
        assert backend.counter_problems == []
        print(f"greedy identity {drafter}: {same}/{total} requests equal the target-only output")
        assert same == total, f"greedy identity {same}/{total} (docs/backends-llamacpp.md: batched verify)"
    finally:
        backend.close()


def test_attach_to_a_running_server_with_url(binary, prompts, tmp_path):
    from specbench.backends.base import Request
    from specbench.backends.llamacpp_server import LlamaCppServerBackend
    from specbench.backends.server_process import ServerProcess, free_port
    from specbench.models.gguf_files import gguf_file

    port = free_port()
    server = ServerProcess(
        [
            str(binary),
            "-m",
            str(gguf_file("smollm2-135m")),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics",
            "-np",
            "2",
            "-t",
            "1",
            "--spec-type",
            "ngram-simple",
            "--spec-ngram-simple-size-n",
            "2",
            "--spec-ngram-simple-size-m",
            "3",
        ],
        port=port,
        log_dir=str(tmp_path),
        name="user's llama-server",
    )
    server.start()
    try:
        server.wait_healthy(300)
        backend = LlamaCppServerBackend({"url": server.url}, target="smollm2-135m", device="cpu", dtype="fp32", seed=0)
        backend.start(lambda message: None)
        results = backend.generate_batch(
            _drafted_config("ngram-simple", 3, size_n=2), [Request(ids, 32, 0, False) for ids in prompts[:4]], 2
        )
        assert all(len(r.tokens) == 32 for r in results) and backend.counter_problems == []
        described = backend.describe()
        assert described["engine"]["build_info"].endswith("0c1e57098") and described["engine"]["total_slots"] == 2
        assert described["aggregates"][-1]["window"]["draft_tokens"] > 0  # the server speculates as it was started
        backend.close()
    finally:
        server.stop()


def test_the_smollm2_ngram_sweep_until_decided_ends_with_verdicts_and_flags(binary, tmp_path):
    out = tmp_path / "llamacpp-smollm2"
    env = {**os.environ, "SPECBENCH_NO_ENGINE_CHECK": ""}
    cli = [sys.executable, "-m", "specbench"]
    done = subprocess.run(
        [
            *cli,
            "sweep",
            str(ROOT / "sweeps/llamacpp-smollm2.yaml"),
            "--until-decided",
            "--batch",
            "4",
            "--max-prompts",
            "12",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=3000,
    )
    print(done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0
    run = json.loads((out / "run.json").read_text())
    assert run["engine"]["engine"] == "llama.cpp" and run["engine"].get("llama_cpp_commit")
    answer = subprocess.run(
        [*cli, "recommend", str(out), "--engine", "llamacpp", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert answer.returncode == 0, answer.stderr
    recs = json.loads(answer.stdout)
    assert {r["workload"] for r in recs} == {"humaneval", "mt-bench"}
    for rec in recs:
        decision = rec["decision"]
        assert decision is not None and decision["answer"] in ("confident yes", "confident no", "cannot tell")
        setting = rec["engine_settings"]["llamacpp"]
        if rec["recommended"] is not None:
            assert setting["supported"] and setting["snippet"].startswith("llama-server -m ")
            assert "--spec-type ngram-simple" in setting["snippet"] and "parsed by llama-server" in setting["checked"]
        print(rec["workload"], decision["answer"], setting.get("snippet"))


def test_greedy_identity_with_batched_slots(binary, prompts, tmp_path):
    """Four requests on four slots: llama-server decodes the busy slots' tokens in one batch, each draft verified
    beside the other slots' tokens. Every output is compared with the target alone at concurrency 1; the rates
    are printed (docs/backends-llamacpp.md, "Greedy identity")."""
    from specbench.backends.base import Request

    backend = _backend(tmp_path, parallel=4, engines_kept=1)
    requests = [Request(ids, 48, 0, False) for ids in prompts]
    try:
        alone = [r.tokens for r in backend.generate_batch(_drafted_config(None, 0), requests, 1)]
        rates = {}
        for label, config in (
            ("target only", _drafted_config(None, 0)),
            ("ngram-simple γ=4", _drafted_config("ngram-simple", 4, size_n=2)),
            ("draft-model γ=4", _drafted_config("draft-model", 4, model="smollm2-135m")),
        ):
            batched = backend.generate_batch(config, requests, 4)
            rates[label] = sum(r.tokens == a for r, a in zip(batched, alone))
        print(f"greedy identity at concurrency 4 (of {len(requests)}): {rates}")
        assert backend.counter_problems == []
        assert all(same == len(requests) for same in rates.values()), rates
    finally:
        backend.close()
