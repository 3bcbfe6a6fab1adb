"""Real llama.cpp servers (marker ``llamacpp``; `make test-llamacpp` builds llama-server first): SmolLM2-135M as
its Q4_1 GGUF ships, CPU.

* the counters: llama.cpp's ``llamacpp:spec_decode_*`` deltas over each batch equal an independent count — each
  request's own final ``timings`` (draft_n, draft_n_accepted) and the rounds rebuilt from its per-token running
  totals (verification steps, per-position acceptance) — on 8 prompts × 2 γ, for a draft model and llama.cpp's
  n-gram lookup;
* greedy identity: every speculative configuration's output against the same engine's target-only output, token
  for token; where one differs, the first differing position must be a near-tie of the target's own logits
  (top-2 log-probabilities within ``NEAR_TIE`` nats, asked of the target-only server): a verify batch sums in
  another order than one-token decoding, enough to flip a near-tie on some CPUs, never a clear choice
  (docs/backends-llamacpp.md, "Greedy identity", says what was measured);
* the SmolLM2 + n-gram sweep until decided, then ``recommend --engine llamacpp``: a verdict per workload and
  paste-ready llama-server flags;
* ``url:``: the same backend measuring a server it did not start, and docs/backends-llamacpp.md's attach example,
  read from the page, run by ``specbench sweep`` against a llama-server the test started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.backends.llamacpp.env import server_binary
from specbench.errors import SpecbenchError
from tests.attach_example import attach_sweep
from tests.cli_helpers import jsonl_workload

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
    from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig

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
    from specbench.backends.llamacpp.server import LlamaCppServerBackend

    backend = LlamaCppServerBackend(
        {"log_dir": str(tmp_path), "engines_kept": 2, "threads": 1, **options},
        target="smollm2-135m",
        device="cpu",
        dtype="fp32",
        seed=0,
    )
    backend.start(lambda message: print(message, flush=True))
    return backend


# Two logits this close are a coin toss for kernels that sum in another order (a verify batch of γ + 1 tokens, or
# four slots' tokens, against one-token decoding); a lossy verifier diverges where the target is sure.
NEAR_TIE = 0.25


def _top_two_gap(client, ids: list[int]) -> float:
    """The target's top-2 log-probability gap for the token after ``ids`` (greedy, llama-server's pre-sampling
    probabilities of ``/completion`` with ``n_probs``)."""
    import urllib.request

    body = {"prompt": ids, "n_predict": 1, "n_probs": 2, "temperature": 0.0, "cache_prompt": False}
    request = urllib.request.Request(
        f"{client.url}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        top = json.loads(answer.read())["completion_probabilities"][0]["top_logprobs"]
    return float(top[0]["logprob"] - top[1]["logprob"])


def _identity(backend, requests, outputs: list[list[int]], alone: list[list[int]]) -> tuple[int, list[float]]:
    """How many outputs equal the target-only output, and the target's top-2 gap where each other one first
    differs (asked of the target-only server after the outputs are in)."""
    differing = []
    for request, out, ref in zip(requests, outputs, alone):
        if out != ref:
            first = next((i for i, (a, b) in enumerate(zip(out, ref)) if a != b), min(len(out), len(ref)))
            differing.append(list(request.prompt_ids) + ref[:first])
    target = backend.client_for(_drafted_config(None, 0)) if differing else None
    return len(outputs) - len(differing), [_top_two_gap(target, ids) for ids in differing]


def _assert_greedy_identity(label: str, same: int, total: int, gaps: list[float]) -> None:
    print(f"greedy identity {label}: {same}/{total} equal the target-only output; top-2 gaps where not: {gaps}")
    assert all(gap < NEAR_TIE for gap in gaps), (
        f"{label}: an output left the target's greedy path where the target was sure (top-2 gaps {gaps} nats, "
        f"a near-tie is < {NEAR_TIE}): the verifier is not lossless"
    )


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
        same, total, gaps = 0, 0, []
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
            for result in results:
                assert len(result.tokens) == 48 and sum(result.rounds.emitted) == 47
            equal, where = _identity(backend, requests, [r.tokens for r in results], baseline)
            same, total, gaps = same + equal, total + len(results), gaps + where
        assert backend.counter_problems == []
        _assert_greedy_identity(drafter, same, total, gaps)
    finally:
        backend.close()


def _users_server(binary: Path, tmp_path: Path, *spec_flags: str):
    """A llama-server started as a user starts one (SmolLM2's GGUF, 2 slots, --metrics), not by the backend."""
    from specbench.backends.servers.server_process import ServerProcess, free_port
    from specbench.models.gguf_files import gguf_file

    port = free_port()
    command = [str(binary), "-m", str(gguf_file("smollm2-135m")), "--host", "127.0.0.1", "--port", str(port)]
    server = ServerProcess(
        [*command, "--metrics", "-np", "2", "-t", "1", *spec_flags],
        port=port,
        log_dir=str(tmp_path),
        name="user's llama-server",
    )
    server.start()
    return server


def test_attach_to_a_running_server_with_url(binary, prompts, tmp_path):
    from specbench.backends.base import Request
    from specbench.backends.llamacpp.server import LlamaCppServerBackend

    server = _users_server(
        binary,
        tmp_path,
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "2",
        "--spec-ngram-simple-size-m",
        "3",
    )
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


def test_the_documented_attach_example_runs_against_a_running_server(binary, tmp_path, prompts_file):
    """docs/backends-llamacpp.md's ``url:`` example, read from the page with its address replaced, through
    `specbench sweep` (dry run first) against a llama-server the test started with n-gram speculation."""
    import yaml

    from specbench.records.store import load_records

    server = _users_server(
        binary,
        tmp_path,
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "2",
        "--spec-ngram-simple-size-m",
        "2",
    )
    try:
        server.wait_healthy(300)
        spec = tmp_path / "attach.yaml"
        spec.write_text(yaml.safe_dump(attach_sweep(server.url, jsonl_workload(prompts_file, 2), max_new_tokens=16)))
        env = {**os.environ, "SPECBENCH_NO_ENGINE_CHECK": ""}
        cli = [sys.executable, "-m", "specbench", "sweep", str(spec)]
        for extra in (["--dry-run"], ["--out", str(tmp_path / "out")]):
            done = subprocess.run([*cli, *extra], capture_output=True, text=True, env=env, timeout=1200)
            print(done.stdout[-3000:], done.stderr[-3000:])
            assert done.returncode == 0, done.stderr[-2000:]
    finally:
        server.stop()
    records = load_records(tmp_path / "out")
    assert len(records) == 4 and set(records["gamma"]) == {0, 2} and (records["new_tokens"] == 16).all()
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["engine"]["attached"] == server.url and run["engine"]["total_slots"] == 2


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
            # the file's grid cut to γ 2 and 4 and 32 new tokens (a server's first request costs ~12 s here, so
            # each γ dropped saves a server start): the looks, verdicts and flags are the point, not the grid
            "--gamma",
            "2,4",
            "--max-new-tokens",
            "32",
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
        # the settings say what the verdict says: flags for the configuration a confident yes deploys, the target
        # alone's command line (no --spec-type) for a confident no, nothing to paste while it cannot tell
        settings = rec["engine_settings"]
        if decision["answer"] == "confident no":
            assert rec["recommended"] is None and settings["llamacpp"]["target_only"], settings
            assert "--spec-type" not in settings["llamacpp"]["snippet"]
            continue
        assert (rec["recommended"] is not None) == ("llamacpp" in settings), (rec["recommended"], settings)
        if rec["recommended"] is not None:
            setting = settings["llamacpp"]
            assert setting["supported"] and setting["snippet"].startswith("llama-server -m ")
            assert "--spec-type ngram-simple" in setting["snippet"] and "parsed by llama-server" in setting["checked"]
        print(rec["workload"], decision["answer"], settings.get("llamacpp", {}).get("snippet"))


def test_greedy_identity_with_batched_slots(binary, prompts, tmp_path):
    """Four requests on four slots: llama-server decodes the busy slots' tokens in one batch, each draft verified
    beside the other slots' tokens. Every output is compared with the target alone at concurrency 1: equal, or
    leaving it first at a near-tie; the rates and gaps are printed (docs/backends-llamacpp.md, "Greedy identity")."""
    from specbench.backends.base import Request

    backend = _backend(tmp_path, parallel=4, engines_kept=1)
    requests = [Request(ids, 48, 0, False) for ids in prompts]
    try:
        alone = [r.tokens for r in backend.generate_batch(_drafted_config(None, 0), requests, 1)]
        batched = {}
        for label, config in (
            ("target only", _drafted_config(None, 0)),
            ("ngram-simple γ=4", _drafted_config("ngram-simple", 4, size_n=2)),
            ("draft-model γ=4", _drafted_config("draft-model", 4, model="smollm2-135m")),
        ):
            batched[label] = [r.tokens for r in backend.generate_batch(config, requests, 4)]
        assert backend.counter_problems == []
        for label, outputs in batched.items():
            same, gaps = _identity(backend, requests, outputs, alone)
            _assert_greedy_identity(f"{label} at concurrency 4", same, len(requests), gaps)
        # the near-tie allowance is narrow: along the target's own path, halfway through each output, the top-2 gap
        # is far wider, so a verifier that left the path at an arbitrary position would fail the check above
        target = backend.client_for(_drafted_config(None, 0))
        typical = sorted(_top_two_gap(target, list(r.prompt_ids) + a[: len(a) // 2]) for r, a in zip(requests, alone))
        print(f"top-2 gaps halfway along the target's own outputs: {typical}")
        assert typical[len(typical) // 2] > 2 * NEAR_TIE, typical
    finally:
        backend.close()
