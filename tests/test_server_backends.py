"""Serving-engine backends without vLLM: Prometheus parsing and the counter mapping, the
OpenAI client against a fake server (concurrency, unreachable URL, no speculative metrics),
the vLLM-server launcher's clean shutdown with a fake server process, and the hostile-server
fixture (tests/fake_openai_server.py: raw bytes, wrong JSON, no streaming, drip-feed, endless
body, hang, reset) against the hardened client: one error line within the deadline, and
Ctrl-C / SIGTERM with hung requests out within 5 s, no process left."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.backends.base import Request
from specbench.backends.servers import openai_server, prometheus
from specbench.backends.servers.openai_server import OpenAIServerBackend, rounds_from_steps
from specbench.backends.servers.server_process import free_port, group_alive
from specbench.backends.vllm.server import VLLMServerBackend, speculative_config
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig
from tests.fake_openai_server import FakeServer, steps_for

FAKE_SCRIPT = Path(__file__).with_name("fake_openai_server.py")

VLLM_BEFORE = textwrap.dedent("""\
    # HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
    # TYPE vllm:spec_decode_num_drafts counter
    vllm:spec_decode_num_drafts_total{engine="0",model_name="/tmp/vllmwork/smollm2"} 10.0
    vllm:spec_decode_num_drafts_created{engine="0",model_name="/tmp/vllmwork/smollm2"} 1.7645e+09
    # TYPE vllm:spec_decode_num_draft_tokens counter
    vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="/tmp/vllmwork/smollm2"} 40.0
    # TYPE vllm:spec_decode_num_accepted_tokens counter
    vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="/tmp/vllmwork/smollm2"} 12.0
    # TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/tmp/vllmwork/smollm2",position="0"} 6.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/tmp/vllmwork/smollm2",position="1"} 3.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/tmp/vllmwork/smollm2",position="2"} 2.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/tmp/vllmwork/smollm2",position="3"} 1.0
    # TYPE vllm:num_requests_running gauge
    vllm:num_requests_running{engine="0",model_name="/tmp/vllmwork/smollm2"} 0.0
    """)
VLLM_AFTER = (
    VLLM_BEFORE.replace("} 10.0", "} 46.0")
    .replace("} 40.0", "} 184.0")
    .replace("} 12.0", "} 53.0")
    .replace('"0"} 6.0', '"0"} 27.0')
    .replace('"1"} 3.0', '"1"} 12.0')
    .replace('"2"} 2.0', '"2"} 8.0')
    .replace('"3"} 1.0', '"3"} 6.0')
    .replace(
        'running{engine="0",model_name="/tmp/vllmwork/smollm2"} 0.0',
        'running{engine="0",model_name="/tmp/vllmwork/smollm2"} 2.0',
    )
)
SGLANG = textwrap.dedent("""\
    # TYPE sglang:spec_accept_length gauge
    sglang:spec_accept_length{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"} 2.75
    # TYPE sglang:spec_accept_rate gauge
    sglang:spec_accept_rate{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"} 0.4375
    """)


def chain(drafter: str | None, gamma: int, temperature: float = 0.0) -> RunConfig:
    d = DrafterConfig(drafter, ()) if drafter else None
    return RunConfig(d, gamma if d else 0, "chain", temperature, 1.0, 0)


@pytest.fixture(autouse=True)
def no_models(monkeypatch):
    """The backends' tokenizer and model resolution without loading anything."""
    monkeypatch.setattr(openai_server, "load_tokenizer", lambda location: f"tokenizer:{location}")
    monkeypatch.setattr(openai_server, "resolve_model_location", lambda spec: f"/models/{spec}")
    import specbench.backends.vllm.server as vs

    monkeypatch.setattr(vs, "load_tokenizer", lambda location: f"tokenizer:{location}")
    monkeypatch.setattr(vs, "resolve_model_location", lambda spec: f"/models/{spec}")


# ----------------------------------------------------------------------------- Prometheus


def test_parse_labels_types_and_created():
    scrape = prometheus.parse(VLLM_BEFORE + 'odd{a="x\\"y,z",b="\\\\n"} 1.5 1700000000000\nplain 3\nnan_one NaN\n')
    assert not any(name.endswith("_created") for name in scrape.names())
    assert scrape.total(prometheus.VLLM_DRAFTS) == 10.0
    assert scrape.is_counter(prometheus.VLLM_DRAFTS) and not scrape.is_counter("vllm:num_requests_running")
    assert scrape.series("odd") == {(("a", 'x"y,z'), ("b", "\\n")): 1.5}
    assert scrape.total("plain") == 3.0 and math.isnan(scrape.total("nan_one"))
    positions = {dict(labels)["position"]: v for labels, v in scrape.series(prometheus.VLLM_PER_POS).items()}
    assert positions == {"0": 6.0, "1": 3.0, "2": 2.0, "3": 1.0}
    with pytest.raises(SpecbenchError, match="malformed"):
        prometheus.parse('broken{a="1" 2\n')


def test_diff_and_vllm_counter_mapping():
    before, after = prometheus.parse(VLLM_BEFORE), prometheus.parse(VLLM_AFTER)
    delta = prometheus.diff(before, after)
    assert delta.total("vllm:num_requests_running") == 2.0  # a gauge is read, not differenced
    counts = prometheus.vllm_counts(delta)
    assert (counts.drafts, counts.draft_tokens, counts.accepted) == (36, 144, 41)
    assert counts.per_position == [21, 9, 6, 5]  # the figures of the real server in the notes
    assert counts.alpha == pytest.approx(41 / 144)
    assert counts.mean_acceptance_length == pytest.approx(1 + 41 / 36)
    assert counts.position_acceptance() == pytest.approx([21 / 36, 9 / 21, 6 / 9, 5 / 6])
    assert prometheus.window_counts(before, after).as_dict()["per_position"] == [21, 9, 6, 5]
    with pytest.raises(SpecbenchError, match="restarted"):
        prometheus.diff(after, before)


def test_multiple_engines_are_summed_and_no_spec_is_none():
    two = VLLM_AFTER + VLLM_AFTER.replace('engine="0"', 'engine="1"')
    counts = prometheus.vllm_counts(prometheus.diff(prometheus.parse(""), prometheus.parse(two)))
    assert counts.drafts == 92 and counts.per_position == [54, 24, 16, 12]
    plain = prometheus.parse("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n")
    assert not prometheus.has_spec_metrics(plain) and prometheus.window_counts(plain, plain) is None


def test_sglang_gauges_and_request_meta():
    counts = prometheus.window_counts(prometheus.parse(""), prometheus.parse(SGLANG))
    assert counts.source == "sglang-gauges"
    assert counts.mean_acceptance_length == pytest.approx(2.75) and counts.alpha == pytest.approx(0.4375)
    assert prometheus.sglang_gauges(prometheus.parse(SGLANG.replace("2.75", "0"))) is None  # no spec step yet
    meta = prometheus.sglang_request_counts(
        {"spec_verify_ct": 10, "spec_accept_token_num": 14, "spec_draft_token_num": 30}, 25
    )
    assert meta.alpha == pytest.approx(14 / 30) and meta.mean_acceptance_length == pytest.approx(2.4)
    old = prometheus.sglang_request_counts({"spec_verify_ct": 10}, 25)
    assert old.mean_acceptance_length == pytest.approx(2.5) and math.isnan(old.alpha)
    assert prometheus.sglang_request_counts({}, 3) is None


@given(verify=st.integers(1, 10_000), drafted=st.integers(1, 10_000), tokens=st.integers(1, 10_000))
@settings(max_examples=25, deadline=None)
def test_request_meta_with_draft_tokens_but_no_accept_count_has_no_alpha(verify, drafted, tokens):
    """A draft-token count without its accepted count (found by mypy): α is unknown (NaN), not a TypeError."""
    meta = prometheus.sglang_request_counts({"spec_verify_ct": verify, "spec_draft_token_num": drafted}, tokens)
    assert math.isnan(meta.alpha)
    assert meta.mean_acceptance_length == pytest.approx(tokens / verify)


def test_rounds_from_steps_cut_at_the_end_and_draftless_steps():
    log = rounds_from_steps([2, 2, 1], [2, 2, 2], n_tokens=7, drafter_type="draft-model")
    assert log.accepted == [2, 2]
    assert sum(log.emitted) == 6 and log.emitted == [3, 3] and len(log) == 2  # third step cut: nothing left
    log = rounds_from_steps([1], [3], n_tokens=6, drafter_type="ngram")
    assert log.emitted == [2, 1, 1, 1] and log.drafted == [3, 0, 0, 0] and log.draft_steps == [0, 0, 0, 0]
    assert all(math.isnan(x) for x in log.draft_s + log.verify_s + log.round_s)


# ----------------------------------------------------------------------------- the OpenAI client


def backend_for(url: str, **options) -> OpenAIServerBackend:
    backend = OpenAIServerBackend({"url": url, **options}, target="smollm2-135m", device="cpu", dtype="fp32", seed=0)
    backend.start(lambda message: None)
    return backend


def requests_of(n: int, max_new: int = 12) -> list[Request]:
    return [Request([1, 2, 3, i], max_new, seed=i, stop_at_eos=False) for i in range(n)]


def test_results_from_per_request_metrics_and_concurrency():
    with FakeServer(k=2, hold=4) as fake:
        backend = backend_for(fake.url)
        results = backend.generate_batch(chain("ngram", 2), requests_of(8), concurrency=4)
        assert fake.state.max_in_flight == 4  # warm-up ran alone, then exactly 4 in flight
        assert len(results) == 8
        for i, result in enumerate(results):
            assert result.tokens == [(6 + i + j) % 200 + 10 for j in range(12)]
            assert result.rounds.accepted == steps_for(12, 2)
            assert result.rounds.drafted == [2] * len(result.rounds)
            assert result.decode_tokens == 11 and result.tau == pytest.approx(11 / len(result.rounds))
            assert result.prefill_s == pytest.approx(0.005) and result.decode_s == pytest.approx(0.020)
            assert result.ttft_s == pytest.approx(0.006) and result.itl_s == pytest.approx(0.001)  # queue included
            assert result.spec_source == "per-request" and result.timing_source == "server"
            assert math.isnan(result.draft_s) and math.isnan(result.verify_s)
        body = fake.state.bodies[-1]
        assert body["ignore_eos"] is True and body["return_token_ids"] and body["stream"]
        assert body["model"] == "fake-model" and isinstance(body["prompt"], list)
        described = backend.describe()
        assert described["backend"] == "openai" and list(described["configs"]) == [chain("ngram", 2).label]
        window = described["aggregates"][-1]
        assert window["concurrency"] == 4 and window["requests"] == 8 and window["per_request_rounds"]
        assert window["window"]["accepted"] == sum(sum(r.rounds.accepted) for r in results)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_in_flight_never_exceeds_concurrency(concurrency):
    with FakeServer(k=2, hold=concurrency) as fake:
        backend_for(fake.url, warmup=False).generate_batch(chain("ngram", 2), requests_of(6, 6), concurrency)
        assert fake.state.max_in_flight == concurrency


def test_aggregates_only_when_no_per_request_metrics():
    with FakeServer(k=2, per_request=False, token_ids=True) as fake:
        backend = backend_for(fake.url)
        results = backend.generate_batch(chain("ngram", 2), requests_of(3), concurrency=2)
        assert all(len(r.rounds) == 0 for r in results)  # never split the aggregate evenly
        assert all(math.isnan(r.alpha) and math.isnan(r.tau) for r in results)
        assert all(r.decode_tokens == 11 and r.timing_source == "client" for r in results)
        assert all(r.ttft_s > 0 and r.itl_s == pytest.approx(r.decode_s / 11) for r in results)
        window = backend.run_info()["aggregates"][-1]
        assert not window["per_request_rounds"]
        assert window["window"]["drafts"] == 3 * len(steps_for(12, 2))
        assert window["window"]["accepted"] == 3 * sum(steps_for(12, 2))


def test_unreachable_url_is_one_line():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SpecbenchError) as err:
        backend_for(f"http://127.0.0.1:{port}")
    assert "cannot reach" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(SpecbenchError, match="needs the option url"):
        OpenAIServerBackend({}, target="t", device="cpu", dtype="fp32", seed=0)


def test_server_without_spec_metrics_is_one_line():
    with FakeServer(spec=False) as fake:
        backend = backend_for(fake.url)
        baseline = backend.generate_batch(chain(None, 0), requests_of(1), 1)  # fine: no speculation asked
        assert len(baseline[0].tokens) == 12
        with pytest.raises(SpecbenchError) as err:
            backend.generate_batch(chain("ngram", 2), requests_of(1), 1)
        assert "no speculative-decoding metrics" in str(err.value) and "\n" not in str(err.value)
        assert fake.state.requests == 2  # warm-up + the baseline: nothing sent for the failing batch


def test_gamma_mismatch_with_a_running_server():
    with FakeServer(k=3) as fake:
        with pytest.raises(SpecbenchError, match="drafts 3 tokens per step but the sweep asks γ = 2"):
            backend_for(fake.url).generate(chain("ngram", 2), [1, 2], 8, seed=0, stop_at_eos=True)


# ----------------------------------------------------------------------------- the launcher


def fake_launcher(tmp_path: Path, **options) -> VLLMServerBackend:
    opts = {
        "server_command": [sys.executable, str(FAKE_SCRIPT)],
        "log_dir": str(tmp_path),
        "stop_grace_s": 1.0,
        "startup_timeout_s": 30,
        **options,
    }
    backend = VLLMServerBackend(opts, target="smollm2-135m", device="cpu", dtype="fp32", seed=0)
    backend.start(lambda message: None)
    return backend


def fake_env(monkeypatch, tmp_path: Path, **env) -> Path:
    pid_file = tmp_path / "pids.json"
    monkeypatch.setenv("FAKE_PID_FILE", str(pid_file))
    monkeypatch.setenv("FAKE_SPAWN_CHILD", "1")
    monkeypatch.setenv("FAKE_IGNORE_TERM_S", "0.5")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return pid_file


def test_launcher_command_and_clean_close(monkeypatch, tmp_path):
    pid_file = fake_env(monkeypatch, tmp_path)
    backend = fake_launcher(tmp_path)
    result = backend.generate(chain("ngram", 2), [1, 2, 3], 10, seed=0, stop_at_eos=True)
    assert result.rounds.accepted == steps_for(10, 2)
    server = backend.server
    command = server.command
    assert "--speculative-config" in command and "--enforce-eager" in command
    spec = json.loads(command[command.index("--speculative-config") + 1])
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] == 2
    assert command[command.index("--host") + 1] == "127.0.0.1"
    pids = json.loads(pid_file.read_text())
    first_group = server.pgid
    assert backend.describe()["configs"][chain("ngram", 2).label]["method"] == "ngram"
    # a new configuration → the previous server is stopped first, group included
    backend.generate(chain(None, 0), [1, 2, 3], 4, seed=0, stop_at_eos=True)
    assert not group_alive(first_group)
    assert "--speculative-config" not in backend.server.command
    second_group = backend.server.pgid
    backend.close()
    backend.close()  # twice is fine
    assert not group_alive(second_group)
    assert pids["child"] is not None


def test_launcher_keeps_servers_between_configurations(monkeypatch, tmp_path):
    """engines_kept: 2 — a configuration measured again (a later look) finds its server running; a third one
    stops the least recently used server other than the target-only one; close stops every kept server."""
    fake_env(monkeypatch, tmp_path)
    backend = fake_launcher(tmp_path, engines_kept=2)
    try:
        ngram2, baseline, ngram3 = chain("ngram", 2), chain(None, 0), chain("ngram", 3)
        backend.generate(ngram2, [1, 2, 3], 4, seed=0, stop_at_eos=True)
        first = backend.server.pgid
        backend.generate(baseline, [1, 2, 3], 4, seed=0, stop_at_eos=True)
        target_only = backend.server.pgid
        assert backend.is_warm(ngram2) and backend.is_warm(baseline) and group_alive(first)
        backend.generate(ngram2, [1, 2, 3], 4, seed=0, stop_at_eos=True)  # reused, not started again
        assert backend.server.pgid == first and backend.engine_starts == 2
        backend.generate(ngram3, [1, 2, 3], 4, seed=0, stop_at_eos=True)  # room: ngram2 goes, target-only stays
        assert not group_alive(first) and group_alive(target_only) and not backend.is_warm(ngram2)
        assert backend.engine_starts == 3 and backend.describe()["engines_kept"] == 2
        groups = [server.pgid for server, _ in backend._servers.values()]
    finally:
        backend.close()
    assert groups and not any(group_alive(g) for g in groups)


def test_a_fixed_port_holds_one_server(tmp_path):
    with pytest.raises(SpecbenchError, match="engines_kept must be 1 with port"):
        VLLMServerBackend(
            {"port": free_port(), "engines_kept": 2, "server_command": ["true"]},
            target="t",
            device="cpu",
            dtype="fp32",
            seed=0,
        )


def test_launcher_stops_the_group_after_an_exception(monkeypatch, tmp_path):
    fake_env(monkeypatch, tmp_path)
    backend = fake_launcher(tmp_path)
    try:
        with pytest.raises(RuntimeError):
            try:
                backend.generate(chain("ngram", 2), [1, 2, 3], 6, seed=0, stop_at_eos=True)
                raise RuntimeError("boom")
            finally:
                group = backend.server.pgid
                backend.close()
    finally:
        backend.close()
    assert not group_alive(group)


def test_launcher_server_that_dies_is_one_line(monkeypatch, tmp_path):
    fake_env(monkeypatch, tmp_path, FAKE_EXIT_AFTER_S="0.2", FAKE_IGNORE_TERM_S="0")
    backend = fake_launcher(tmp_path)
    try:
        with pytest.raises(SpecbenchError) as err:
            for _ in range(50):
                backend.generate(chain("ngram", 2), [1, 2, 3], 6, seed=0, stop_at_eos=True)
                time.sleep(0.05)
        assert "exited (code 3)" in str(err.value) and "\n" not in str(err.value)
    finally:
        backend.close()


def test_port_in_use_is_one_line(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(SpecbenchError) as err:
            VLLMServerBackend(
                {"port": port, "server_command": ["true"]}, target="t", device="cpu", dtype="fp32", seed=0
            )
    assert f"port {port}" in str(err.value) and "in use" in str(err.value) and "\n" not in str(err.value)


def test_missing_venv_is_one_line(tmp_path):
    backend = VLLMServerBackend({"venv": str(tmp_path / "nowhere")}, target="t", device="cpu", dtype="fp32", seed=0)
    with pytest.raises(SpecbenchError, match="vLLM is not installed"):
        backend.start(lambda message: None)


def test_speculative_config_of_a_tree_is_refused():
    config = RunConfig(DrafterConfig("eagle", ()), 2, "2x2", 0.0, 1.0, 0)
    with pytest.raises(SpecbenchError, match="tree '2x2' cannot run on vLLM"):  # the in-process backend's check
        speculative_config(config)
    assert speculative_config(chain(None, 0)) is None


LAUNCH_AND_WAIT = textwrap.dedent("""\
    import sys, time
    sys.path.insert(0, {root!r})
    from specbench.backends.servers import openai_server
    from specbench.backends.vllm import server as vllm_server
    openai_server.load_tokenizer = vllm_server.load_tokenizer = lambda location: None
    openai_server.resolve_model_location = vllm_server.resolve_model_location = lambda spec: spec
    from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig
    backend = vllm_server.VLLMServerBackend(
        {{"server_command": [sys.executable, {script!r}], "log_dir": {logs!r}, "stop_grace_s": 1.0}},
        target="t", device="cpu", dtype="fp32", seed=0)
    backend.start(print)
    try:
        backend.generate(RunConfig(DrafterConfig("ngram", ()), 2, "chain", 0.0, 1.0, 0), [1, 2], 4, seed=0,
                         stop_at_eos=True)
        print("GROUP", backend.server.pgid, flush=True)
        time.sleep(600)
    finally:
        backend.close()
    """)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_a_launcher_process_leaves_no_server(monkeypatch, tmp_path, signum):
    fake_env(monkeypatch, tmp_path)
    script = tmp_path / "launch.py"
    root = str(Path(__file__).resolve().parents[1])
    script.write_text(LAUNCH_AND_WAIT.format(root=root, script=str(FAKE_SCRIPT), logs=str(tmp_path)))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
    )
    group = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("GROUP"):
                group = int(line.split()[1])
                break
        assert group is not None, "the launcher never reported its server"
        assert group_alive(group)
        proc.send_signal(signum)
        proc.wait(timeout=60)
        assert not group_alive(group)
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
        if group is not None and group_alive(group):
            os.killpg(group, signal.SIGKILL)


# ----------------------------------------------------------------------------- hostile servers

HOSTILE_EXPECTED = {  # behaviour -> what the one error line says (per path where it differs)
    "raw-bytes": "did not answer valid HTTP",
    "no-stream": "did not stream",
    "drip": "within 2 s",
    "hang": "within 2 s",
    "reset": "connection broke",
    "wrong-json": {"/v1/completions": "is not JSON", "/v1/models": "not valid JSON", "/metrics": "malformed"},
    "bad-chunk": {
        "/v1/completions": "choices[0] must be an object",
        "/v1/models": "data[0] must be an object",
        "/metrics": "malformed",
    },
    "endless": {
        "/v1/completions": "more than max_tokens",
        "/v1/models": "more than 1,048,576 bytes",
        "/metrics": "more than 16,777,216 bytes",
    },
}


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/models", "/metrics"])
@pytest.mark.parametrize("behaviour", list(HOSTILE_EXPECTED))
def test_a_hostile_server_is_one_line_within_the_deadline(path, behaviour):
    """Every hostile behaviour of the fake server, on every path the client reads: one error line
    naming the server, within the deadline (timeout_s 2: a request's, and the probes' at most), and
    no records."""
    if path != "/v1/completions" and behaviour == "no-stream":
        pytest.skip("only completions stream")
    with FakeServer(hostile={path: behaviour}, drip_s=0.3, max_s=15) as fake:
        started = time.monotonic()
        with pytest.raises(SpecbenchError) as err:
            backend = backend_for(fake.url, timeout_s=2, warmup=False)
            backend.generate_batch(chain("ngram", 2), requests_of(2, 8), concurrency=2)
        elapsed = time.monotonic() - started
    message, expected = str(err.value), HOSTILE_EXPECTED[behaviour]
    assert "\n" not in message and fake.url in message, message
    assert (expected if isinstance(expected, str) else expected[path]) in message, message
    assert elapsed < 2 + 5, f"{elapsed:.1f} s"


def test_a_server_that_ignores_stream_true_yields_no_records():
    """A plain JSON answer (0 tokens) used to become records with 0 tokens, 'greedy identical 100 %'."""
    with FakeServer(hostile={"/v1/completions": "no-stream"}) as fake:
        with pytest.raises(SpecbenchError, match="did not stream.*ignored stream=true"):
            backend_for(fake.url, warmup=False).generate(chain("ngram", 2), [1, 2], 8, seed=0, stop_at_eos=True)


def test_an_endless_models_body_is_cut_at_its_cap():
    import resource

    with FakeServer(hostile={"/v1/models": "endless"}) as fake:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.monotonic()
        with pytest.raises(SpecbenchError, match="more than 1,048,576 bytes"):
            backend_for(fake.url)
        assert time.monotonic() - started < 5
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000, "KiB: read into memory"


def test_a_drip_feed_hits_the_total_deadline_not_a_socket_timeout():
    with FakeServer(hostile={"/v1/completions": "drip"}, drip_s=0.1) as fake:  # a byte every 0.1 s: never idle
        backend = backend_for(fake.url, timeout_s=1.5, warmup=False)
        started = time.monotonic()
        with pytest.raises(SpecbenchError, match="within 1.5 s"):
            backend.generate(chain("ngram", 2), [1, 2], 8, seed=0, stop_at_eos=True)
        assert 1.4 < time.monotonic() - started < 5


@pytest.mark.parametrize(
    "chunk,field",
    [
        ({"choices": [1]}, "choices[0] must be an object"),
        ({"choices": [{"text": 5}]}, "choices[0].text must be a string"),
        ({"choices": [{"token_ids": [1, -4]}]}, "choices[0].token_ids[1]"),
        ({"choices": [], "usage": {"completion_tokens": "many"}}, "usage.completion_tokens"),
        ({"choices": [], "metrics": {"time_to_first_token_ms": -1}}, "metrics.time_to_first_token_ms"),
        (
            {"choices": [], "metrics": {"speculative_decoding": {"per_step_accepted": [3], "per_step_drafted": [2]}}},
            "accepts 3 of 2",
        ),
        ({"error": {"message": "model overloaded"}}, "model overloaded"),
    ],
)
def test_every_chunk_is_checked_and_the_error_names_the_field(chunk, field):
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + body
    with FakeServer(script={"/v1/completions": answer}) as fake:
        with pytest.raises(SpecbenchError) as err:
            backend_for(fake.url, warmup=False).generate(chain("ngram", 2), [1, 2], 8, seed=0, stop_at_eos=True)
    assert field in str(err.value) and fake.url in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "options,needle",
    [
        ({"timeout_s": "abc"}, "timeout_s"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"api_key": "a\r\nb"}, "line breaks"),
        ({"warmup": "false"}, "true or false"),
        ({"url": "http://127.0.0.1:99999"}, "port"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_backend_options_are_checked_before_anything_connects(options, needle):
    with pytest.raises(SpecbenchError, match=needle):
        OpenAIServerBackend({"url": "http://127.0.0.1:9", **options}, target="t", device="cpu", dtype="fp32", seed=0)


# ----------------------------------------------------------------------------- cancellation with hung requests


def _hung_sweep(tmp_path: Path, prompts_file: Path, backend: dict) -> Path:
    spec = tmp_path / "hung.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "hung",
                "target": "smollm2-135m",
                "drafters": ["ngram"],
                "gammas": [2],
                "max_new_tokens": 8,
                "concurrency": [2],
                "workloads": [{"name": f"jsonl:{prompts_file}:field=text:id=id", "count": 2}],
                "backend": backend,
            }
        )
    )
    return spec


def _interrupt_when(proc, ready, signum: int) -> float:
    """Wait (≤ 180 s) until ``ready()``, send ``signum``; seconds until the process ended."""
    deadline = time.monotonic() + 180
    while not ready():
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "no request reached the server"
        time.sleep(0.1)
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signum)
    proc.wait(timeout=60)
    return time.monotonic() - sent


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_interrupt_with_hung_requests_exits_within_5_s(tmp_path, prompts_file, smollm2, signum, code):
    """`sweep` against a server that accepts and never answers (timeout_s 600): Ctrl-C / SIGTERM
    cancels the requests in flight and exits 130 / 143 within 5 s, leaving no process."""
    with FakeServer(hostile={"/v1/completions": "hang"}, max_s=120) as fake:
        spec = _hung_sweep(tmp_path, prompts_file, {"name": "openai", "url": fake.url, "warmup": False})
        proc = subprocess.Popen(
            [sys.executable, "-m", "specbench", "sweep", str(spec), "--out", str(tmp_path / "o")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            elapsed = _interrupt_when(proc, lambda: fake.state.hostile_seen >= 2, signum)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = proc.stderr.read()
    assert proc.returncode == code, err[-2000:]
    assert elapsed < 5, f"{elapsed:.1f} s"
    assert "Traceback" not in err and ("interrupted" in err or "terminated" in err)
    assert not group_alive(proc.pid), "a process of the sweep's group is still running"


def test_interrupt_with_hung_requests_stops_a_launched_server_that_ignores_sigterm(
    tmp_path, prompts_file, smollm2, monkeypatch
):
    """vllm-server: the server hangs on every request and ignores SIGTERM for 30 s (stop_grace_s 15):
    Ctrl-C still exits within 5 s (the interrupt's grace is 2 s, then SIGKILL) and the server's whole
    group is gone."""
    pid_file, seen = tmp_path / "pids.json", tmp_path / "seen.txt"
    env = {
        **os.environ,
        "FAKE_PID_FILE": str(pid_file),
        "FAKE_SPAWN_CHILD": "1",
        "FAKE_IGNORE_TERM_S": "30",
        "FAKE_HOSTILE": "hang",
        "FAKE_SEEN_FILE": str(seen),
    }
    spec = _hung_sweep(
        tmp_path,
        prompts_file,
        {
            "name": "vllm-server",
            "log_dir": str(tmp_path / "logs"),
            "server_command": [sys.executable, str(FAKE_SCRIPT)],
            "warmup": False,
        },
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "specbench", "sweep", str(spec), "--out", str(tmp_path / "o")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )

    try:
        elapsed = _interrupt_when(proc, lambda: seen.exists() and len(seen.read_text().split()) >= 2, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    pids = json.loads(pid_file.read_text())
    err = proc.stderr.read()
    assert proc.returncode == 130, err[-2000:]
    assert elapsed < 5, f"{elapsed:.1f} s"
    time.sleep(0.2)
    for pid in (pids["pid"], pids["child"]):
        assert not _alive(pid), f"process {pid} of the launched server is still running"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"
