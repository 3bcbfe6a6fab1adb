"""The llamacpp-server backend without llama.cpp: the flag mapping and its refusals, rounds rebuilt from the
running totals a llama-server stream carries (a property test against simulated streams, held-back tokens
included), the GGUF header reader on small files written here, and the backend against the llama.cpp dialect of
the fake server (tests/fake_openai_server.py): attached with ``url`` and launched per configuration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.settings.engine_settings import engine_settings
from specbench.analysis.settings.llamacpp_flags import spec_flags
from specbench.backends.base import Request
from specbench.backends.llamacpp import server as llamacpp_server
from specbench.backends.llamacpp.rounds import Mark, rebuild
from specbench.backends.llamacpp.server import LlamaCppServerBackend, check_sweep
from specbench.backends.servers import prometheus
from specbench.backends.servers.server_process import group_alive
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig
from specbench.models import gguf_files
from tests.fake_openai_server import FakeServer

FAKE_SCRIPT = Path(__file__).with_name("fake_openai_server.py")


def config(drafter: str | None, gamma: int, tree: str = "chain", **params) -> RunConfig:
    d = DrafterConfig(drafter, tuple(sorted(params.items()))) if drafter else None
    return RunConfig(d, gamma if d else 0, tree, 0.0, 1.0, 0)


@pytest.fixture(autouse=True)
def no_models(monkeypatch):
    """The backend's tokenizer and GGUF lookups without loading anything."""
    monkeypatch.setattr(llamacpp_server, "load_gguf_tokenizer", lambda spec: f"tokenizer:{spec}")
    monkeypatch.setattr(llamacpp_server, "gguf_file", lambda spec: Path(f"/models/{spec}.gguf"))
    monkeypatch.setattr(llamacpp_server, "gguf_facts", lambda path: {"file_type": "Q4_1", "nextn_layers": False})
    monkeypatch.setattr(llamacpp_server, "check_same_gguf_vocabulary", lambda *args: None)


# ----------------------------------------------------------------------------- the flag mapping


def test_each_kind_maps_to_llama_servers_flags():
    assert spec_flags("draft-model", {"model": "d.gguf"}, 4) == [
        "--spec-type",
        "draft-simple",
        "--model-draft",
        "d.gguf",
        "--spec-draft-n-max",
        "4",
        "--spec-draft-n-min",
        "0",
        "--spec-draft-p-min",
        "0",
    ]
    assert spec_flags(
        "draft-simple", {"model": "d", "p_min": 0.75, "n_min": 2}, 8, model_file=lambda s: f"/g/{s}.gguf"
    )[2:] == [
        "--model-draft",
        "/g/d.gguf",
        "--spec-draft-n-max",
        "8",
        "--spec-draft-n-min",
        "2",
        "--spec-draft-p-min",
        "0.75",
    ]
    assert spec_flags("ngram-simple", {"size_n": 3}, 5) == [
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-m",
        "5",
        "--spec-ngram-simple-size-n",
        "3",
    ]
    assert spec_flags("ngram-map-k4v", {}, 2)[-4:] == [
        "--spec-ngram-map-k4v-size-n",
        "12",
        "--spec-ngram-map-k4v-min-hits",
        "1",
    ]
    assert spec_flags("ngram-mod", {"n_match": 8}, 16) == [
        "--spec-type",
        "ngram-mod",
        "--spec-ngram-mod-n-max",
        "16",
        "--spec-ngram-mod-n-match",
        "8",
        "--spec-ngram-mod-n-min",
        "0",
    ]
    assert "--model-draft" not in spec_flags("mtp", {}, 2)
    assert spec_flags(None, {}, 0) == [] and spec_flags("draft-model", {"model": "d"}, 0) == []


def test_what_llama_cpp_cannot_run_is_one_line():
    with pytest.raises(SpecbenchError, match="no speculation type for drafter 'ngram'; its closest is ngram-simple"):
        spec_flags("ngram", {}, 3)
    with pytest.raises(SpecbenchError, match="no speculation type for drafter 'medusa'"):
        spec_flags("medusa", {"checkpoint": "x"}, 3)
    with pytest.raises(SpecbenchError, match=r"without its GGUF \(params: model=NAME\)"):
        spec_flags("draft-model", {}, 3)
    with pytest.raises(SpecbenchError, match="tree '2x2' cannot run on llama.cpp"):
        check_sweep({}, [config("ngram-simple", 2, tree="2x2")], "spec.yaml")
    with pytest.raises(SpecbenchError, match="spec.yaml: backend llamacpp-server: llama.cpp has no speculation"):
        check_sweep({}, [config("ngram", 2)], "spec.yaml")
    # llama.cpp's ngram-simple keeps a draft only when it is at least size_n long: below that γ it never drafts
    with pytest.raises(SpecbenchError, match=r"spec.yaml: .*ngram-simple at γ 2 with size_n 3 would never draft"):
        check_sweep({}, [config("ngram-simple", 2, size_n=3)], "spec.yaml")
    with pytest.raises(SpecbenchError, match="with size_n 12 would never draft"):  # llama.cpp's default n-gram
        spec_flags("ngram-simple", {}, 4)
    assert spec_flags("ngram-simple", {"size_n": 2}, 2)[-1] == "2"


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"url": "http://127.0.0.1:9", "port": 5}, "option(s) port are for a server specbench launches"),
        ({"baseline_url": "http://127.0.0.1:9"}, "option(s) baseline_url are for a server you run"),
        ({"parallel": 0}, "'parallel' must be"),
        ({"ctx_size": 4}, "'ctx_size' must be"),
        ({"cache_prompt": "no"}, "'cache_prompt' must be true or false"),
        ({"slots": 2}, "unknown option 'slots'"),
    ],
)
def test_options_are_checked_before_anything_starts(options, needle):
    with pytest.raises(SpecbenchError) as err:
        check_sweep(options, [], "spec.yaml")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_served_kinds_are_refused_by_the_other_engines():
    from specbench.backends.options import check_own_sweep
    from specbench.backends.vllm.config import check_runnable

    with pytest.raises(SpecbenchError, match="drafter ngram-mod runs on llama.cpp only, not on specbench's own"):
        check_own_sweep({}, [config("ngram-mod", 4)], "spec.yaml")
    with pytest.raises(SpecbenchError, match="drafter draft-simple cannot run on vLLM"):
        check_runnable(config("draft-simple", 4, model="m"))


def test_a_drafter_parameter_out_of_range_is_refused_when_parsed():
    from specbench.engine.drafters.param_values import check_param_values

    with pytest.raises(SpecbenchError, match=r"'p_min' must be in \[0, 1\], got 1.5"):
        check_param_values("draft-simple", {"model": "m", "p_min": 1.5})
    assert check_param_values("draft-simple", {"model": "m", "p_min": 1})["p_min"] == 1.0


def test_recommend_prints_paste_ready_llama_server_flags():
    hubs = {"gguf:big": "/g/big.gguf", "gguf:small": "/g/small.gguf"}
    setting = engine_settings(
        "draft-model", {"model": "small"}, "chain", 5, target="big", engines=("llamacpp",), hub_ids=hubs
    )["llamacpp"]
    assert setting.supported and setting.snippet.startswith(
        "llama-server -m /g/big.gguf --metrics --spec-type draft-simple --model-draft /g/small.gguf"
    )
    assert setting.config["flags"][setting.config["flags"].index("--spec-draft-n-max") + 1] == "5"
    refused = engine_settings("ngram", {}, "chain", 3, engines=("llamacpp",))["llamacpp"]
    assert not refused.supported and "ngram-simple" in refused.notes[0]
    tree = engine_settings("draft-model", {"model": "small"}, "2x2", 3, engines=("llamacpp",))["llamacpp"]
    assert not tree.supported and "chain of depth 3" in tree.notes[-1]


# ----------------------------------------------------------------------------- rounds from running totals


def stream_of(rounds: list[tuple[int, int, int]], held_back: set[int] = frozenset()):
    """What llama-server streams for a request with these decode steps (drafted, accepted, emitted): the first
    token's mark, then each step's tokens all carrying the totals after that step's verification; held-back
    positions send no chunk."""
    marks, n, drafted, accepted = [Mark(1, 0, 0)], 1, 0, 0
    for d, a, e in rounds:
        drafted, accepted = drafted + d, accepted + a
        for _ in range(e):
            n += 1
            if n not in held_back:
                marks.append(Mark(n, drafted, accepted))
    return [m for m in marks if m.n not in held_back], Mark(n, drafted, accepted)


step = st.one_of(
    st.just((0, 0, 1)),  # a decode step without a draft
    st.integers(1, 8).flatmap(lambda d: st.integers(0, d).map(lambda a: (d, a, a + 1))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=40))
def test_rebuilt_rounds_equal_the_rounds_that_ran(rounds):
    marks, final = stream_of(rounds)
    steps = rebuild(marks, final)
    assert steps.rounds == [list(r) for r in rounds] and steps.exact
    assert steps.drafted == final.drafted and steps.accepted == final.accepted
    assert steps.verify_steps == sum(1 for d, _, _ in rounds if d)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, min_size=1, max_size=30), st.data())
def test_held_back_tokens_keep_the_totals_and_say_not_exact(rounds, data):
    marks, final = stream_of(rounds)
    n = final.n
    held = set(data.draw(st.lists(st.integers(2, max(n, 2)), max_size=3))) if n > 1 else set()
    marks, final = stream_of(rounds, held)
    steps = rebuild(marks, final)
    assert steps.emitted == n - 1 and steps.drafted == final.drafted and steps.accepted == final.accepted
    assert steps.exact == (not held)


def test_a_round_cut_at_a_stop_and_bad_totals():
    marks, final = stream_of([(4, 3, 2)])  # end of sequence after 2 of its 4 tokens
    assert rebuild(marks, final).rounds == [[4, 3, 2]]
    with pytest.raises(SpecbenchError, match="went down"):
        rebuild([Mark(2, 3, 1), Mark(3, 2, 1)], Mark(3, 3, 1))
    with pytest.raises(SpecbenchError, match="drafts before the first token"):
        rebuild([Mark(1, 2, 0)], Mark(1, 2, 0))
    assert rebuild([], Mark(0, 0, 0)).rounds == []


# ----------------------------------------------------------------------------- GGUF headers


def write_gguf(
    path: Path, tokens: list[str], *, arch: str = "llama", blocks: int = 2, mtp: bool = False, file_type: int = 3
) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(blocks)
    writer.add_file_type(file_type)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_tensor("token_embd.weight", np.zeros((2, 4), dtype=np.float32))
    if mtp:
        writer.add_tensor(f"blk.{blocks - 1}.nextn.eh_proj.weight", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gguf_header_facts_and_the_vocabulary_check(tmp_path):
    a = write_gguf(tmp_path / "a.gguf", ["<s>", "a", "b"], mtp=True)
    b = write_gguf(tmp_path / "b.gguf", ["<s>", "a", "b"], file_type=0)
    c = write_gguf(tmp_path / "c.gguf", ["<s>", "a", "c"])
    facts = gguf_files.gguf_facts(a)
    assert (
        facts["tokens"] == 3
        and facts["nextn_layers"]
        and facts["file_type"] == "Q4_1"
        and facts["architecture"] == "llama"
    )
    assert not gguf_files.gguf_facts(b)["nextn_layers"] and gguf_files.gguf_facts(b)["file_type"] == "F32"
    gguf_files.check_same_gguf_vocabulary(a, b, "a", "b")
    with pytest.raises(
        SpecbenchError,
        match="draft model 'c' and target 'a' do not share a vocabulary "
        r"\(the same size, different tokens\)",
    ):
        gguf_files.check_same_gguf_vocabulary(a, c, "a", "c")
    (tmp_path / "bad.gguf").write_bytes(b"GGML" + b"\0" * 64)
    with pytest.raises(SpecbenchError, match="could not read GGUF file .*no GGUF magic"):
        gguf_files.gguf_facts(tmp_path / "bad.gguf")
    with pytest.raises(SpecbenchError, match="is not a GGUF file nor an alias with one"):
        gguf_files.gguf_file("some/folder")


# ----------------------------------------------------------------------------- against the fake server


def attached(url: str, **options) -> LlamaCppServerBackend:
    backend = LlamaCppServerBackend({"url": url, **options}, target="smollm2-135m", device="cpu", dtype="fp32", seed=0)
    backend.start(lambda message: None)
    return backend


def requests_of(n: int, max_new: int = 12) -> list[Request]:
    return [Request([1, 2, i], max_new, 0, False) for i in range(n)]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_attached_results_rounds_and_counters_agree(concurrency):
    with FakeServer(k=3, dialect="llamacpp", hold=concurrency) as fake:
        backend = attached(fake.url)
        results = backend.generate_batch(config("draft-model", 3, model="m"), requests_of(6), concurrency)
        assert fake.state.max_in_flight == concurrency
        for result in results:
            assert len(result.tokens) == 12 and sum(result.rounds.drafted) > 0
            assert sum(result.rounds.emitted) == 11 and result.spec_source == "per-request"
            assert result.timing_source == "server" and result.prefill_s == pytest.approx(0.004)
        entry = backend.describe()["aggregates"][-1]
        assert entry["window"]["source"] == prometheus.LLAMACPP.source
        count = entry["per_request_count"]
        assert count["drafts"] == entry["window"]["drafts"] > 0  # the window leaves the warm-up out
        assert count["per_position"] == entry["window"]["per_position"] and count["rounds_exact"]
        assert backend.counter_problems == [] and backend.describe()["engine"]["build_info"] == "b0-fake"
        body = fake.state.bodies[-1]
        assert body["return_tokens"] and body["timings_per_token"] and body["min_p"] == 0.0 and body["top_k"] == 0
        backend.close()


def test_counters_that_disagree_with_the_requests_are_a_warning():
    with FakeServer(k=2, dialect="llamacpp", miscount=5) as fake:
        backend = attached(fake.url)
        seen = []
        backend._status = seen.append
        backend.generate_batch(config("ngram-simple", 2), requests_of(2), 1)
        assert backend.counter_problems and "draft_tokens: counters" in backend.counter_problems[0]
        assert any(line.startswith("warning: llama.cpp's counters disagree") for line in seen)


def test_held_back_tokens_are_filled_from_an_unstreamed_repeat():
    """A token llama-server sends no chunk for (mid UTF-8 character) comes from one untimed repeat."""
    with FakeServer(k=2, dialect="llamacpp", held_back=(3, 7)) as fake:
        backend = attached(fake.url, warmup=False)
        result = backend.generate_batch(config("draft-model", 2, model="m"), requests_of(1, 10), 1)[0]
        assert len(result.tokens) == 10 and result.tokens == [(1 + 2 + 0 + i) % 200 + 10 for i in range(10)]
        assert backend.repaired == 1 and not result.server_spec["rounds_exact"]
        assert [b["stream"] for b in fake.state.bodies] == [True, False]


def fake_launcher(tmp_path: Path, **options) -> LlamaCppServerBackend:
    opts = {
        "server_command": [sys.executable, str(FAKE_SCRIPT)],
        "log_dir": str(tmp_path),
        "stop_grace_s": 1.0,
        "startup_timeout_s": 30,
        "parallel": 2,
        **options,
    }
    backend = LlamaCppServerBackend(opts, target="smollm2-135m", device="cpu", dtype="fp32", seed=7)
    backend.start(lambda message: None)
    return backend


def test_launched_servers_command_kept_engines_and_clean_close(tmp_path):
    backend = fake_launcher(tmp_path, engines_kept=2, threads=2)
    try:
        draft, baseline = config("draft-simple", 3, model="small", p_min=0.5), config(None, 0)
        result = backend.generate(draft, [1, 2, 3], 10, seed=0, stop_at_eos=False)
        command = backend.server.command
        assert command[command.index("-m") + 1] == "/models/smollm2-135m.gguf" and "--metrics" in command
        assert command[command.index("-np") + 1] == "2" and command[command.index("-c") + 1] == "8192"
        assert command[command.index("--seed") + 1] == "7" and command[command.index("-t") + 1] == "2"
        assert command[command.index("--model-draft") + 1] == "/models/small.gguf"
        assert command[command.index("--spec-draft-p-min") + 1] == "0.5"
        assert max(result.rounds.drafted) == 3 and len(result.tokens) == 10
        first = backend.server.pgid
        backend.generate(baseline, [1, 2, 3], 6, seed=0, stop_at_eos=False)
        assert "--spec-type" not in backend.server.command and group_alive(first) and backend.is_warm(draft)
        backend.generate(draft, [1, 2, 3], 6, seed=0, stop_at_eos=False)
        assert backend.engine_starts == 2 and backend.server.pgid == first
        described = backend.describe()
        assert described["launched"][0]["spec_flags"][:2] == ["--spec-type", "draft-simple"]
        assert described["configs"][draft.label][:2] == ["--spec-type", "draft-simple"]
        groups = [server.pgid for server, _ in backend._servers.values()]
    finally:
        backend.close()
    assert not any(group_alive(g) for g in groups)
    assert json.loads(json.dumps(backend.engine_report()))["weights"] == "Q4_1"


def test_a_missing_binary_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_LLAMACPP", str(tmp_path / "nowhere"))
    backend = LlamaCppServerBackend({}, target="t", device="cpu", dtype="fp32", seed=0)
    with pytest.raises(SpecbenchError, match="llama.cpp's llama-server is not installed .*make install-llamacpp"):
        backend.start(lambda message: None)
