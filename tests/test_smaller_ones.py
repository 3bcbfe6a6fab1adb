"""The smaller defects of the fourth reliability round (issue 42, "Smaller ones"), each with its case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError, take_notes
from tests.cli_helpers import assert_user_error, invoke, write_sweep_yaml
from tests.synthetic_results import SyntheticDrafter, write_synthetic_results

BASE = {"name": "small", "target": "tiny-random-llama", "drafters": ["ngram"], "gammas": [2], "workloads": ["mt-bench"]}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return write_synthetic_results(
        tmp_path_factory.mktemp("small") / "r", [SyntheticDrafter(gammas=(1, 2))], n_prompts=6
    )


def test_a_chat_message_without_text_is_no_turn_and_empty_rows_are_counted(tmp_path):
    """SPEED-Bench: ``content: null`` was the prompt "None", and rows left without text vanished unannounced."""
    from specbench.workloads.catalog import load_workload
    from specbench.workloads.readers.prepared_rows import turns_of

    assert turns_of([{"role": "user", "content": None}, {"role": "user", "content": "hi"}], "w") == ("hi",)
    assert turns_of([{"role": "user", "content": None}], "w") == ()
    folder = tmp_path / "speedbench"
    folder.mkdir()
    rows = [
        {"question_id": f"q{i}", "category": "coding", "messages": [{"role": "user", "content": c}]}
        for i, c in enumerate(["write a sort", None, "", "explain it"])
    ]
    (folder / "qualitative.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    take_notes()
    workload = load_workload(f"speed-bench:data={folder}")
    assert [p.turns for p in workload.prompts] == [("write a sort",), ("explain it",)]
    assert not any("None" in t for p in workload.prompts for t in p.turns)
    assert any("2 prompt(s) without any text" in n for n in take_notes())


def test_fit_by_a_list_column_is_one_line(results):
    assert_user_error(invoke("fit", results, "--by", "output_ids"), "--by: column 'output_ids' holds a list")


@pytest.mark.parametrize("command", ["fit", "recommend", "plot"])
def test_a_negative_seed_is_refused_by_its_row_not_by_numpy(results, command):
    result = invoke(command, results, "--seed", "-1")
    assert_user_error(result, "--seed", "must be an integer from 0")
    assert "expected non-negative" not in result.stderr and "ValueError" not in result.stderr  # numpy's own words


@pytest.mark.parametrize("address", ["http://[::1:8000/v1", "http://[zz]:80/v1", "http://[::1]:99999"])
def test_a_malformed_server_address_is_one_line(address):
    from specbench.backends.options import url

    with pytest.raises(SpecbenchError) as refused:
        url(address, "backend openai: 'url'")
    assert "\n" not in str(refused.value) and "'url'" in str(refused.value)


def test_a_malformed_ipv6_address_in_a_sweep_is_one_line(tmp_path):
    sweep = write_sweep_yaml(tmp_path, BASE, backend={"name": "openai", "url": "http://[::1:8000/v1", "model": "m"})
    assert_user_error(invoke("sweep", sweep, "--dry-run"), "not a valid URL", "IPv6")


def test_dtype_names_are_case_blind_and_auto_is_listed(tmp_path):
    from specbench.models.resolve import dtype_setting

    assert (
        dtype_setting("AUTO") == "auto" and dtype_setting("BF16") == "bf16" and dtype_setting(" Float32 ") == "float32"
    )
    sweep = write_sweep_yaml(tmp_path, BASE, dtype="fp8")
    assert_user_error(invoke("sweep", sweep, "--dry-run"), "unknown dtype 'fp8'", "choose auto, fp32, bf16 or fp16")
    assert invoke("sweep", write_sweep_yaml(tmp_path, BASE, dtype="AUTO"), "--dry-run").exit_code == 0


def test_nested_speculation_over_trees_alone_names_the_trees(tmp_path):
    sweep = write_sweep_yaml(
        tmp_path,
        BASE,
        trees=["3x2"],
        strategy=["nested"],
        drafters=[{"type": "draft-model", "params": {"model": "tiny-random-llama-draft"}}],
    )
    assert_user_error(invoke("sweep", sweep, "--dry-run"), "strategy nested speculates on chains", "'chain'")


def test_a_stream_naming_itself_is_refused_before_it_loads_itself(tmp_path):
    stream = tmp_path / "stream.yaml"
    stream.write_text("name: selfref\nstream:\n  - {workload: stream.yaml, count: 2}\n")
    sweep = write_sweep_yaml(tmp_path, BASE, workloads=[str(stream)])
    result = invoke("sweep", sweep, "--dry-run")
    assert_user_error(result, "is this stream itself")
    assert "RecursionError" not in result.stderr


def test_repeated_gammas_count_once(tmp_path):
    sweep = tmp_path / "dup.yaml"
    sweep.write_text(
        "name: dup\ntarget: tiny-random-llama\ndrafters: [ngram]\nworkloads: [{name: mt-bench, count: 2}]"
        "\ngammas: [" + ",".join(["2"] * 400_000) + "]\n"
    )
    result = invoke("sweep", sweep, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "configurations, over the limit" not in result.output


def test_an_adaptive_workload_that_ends_disturbed_names_the_disturbed_timing():
    from specbench.analysis.verdicts.stopping_history import WorkloadHistory
    from specbench.analysis.verdicts.stopping_report import workload_line

    entry = {
        "status": "prompts exhausted",
        "planned": [2, 4],
        "seconds": 30.0,
        "looks": [
            {
                "look": 2,
                "prompts": 4,
                "answer": "cannot tell",
                "prompts_needed": None,
                "best": {"drafter_label": "ngram", "gamma": 2, "speedup": 1.0, "lo": 0.9, "hi": 1.1},
                "scenarios": [{"answer": "cannot tell", "timing_disturbed": True}],
            }
        ],
    }
    line = workload_line("mt-bench", WorkloadHistory.from_dict("mt-bench", entry))  # adaptive.json, read typed
    assert "timing was disturbed" in line and "sits at 1" not in line


def test_the_online_keys_have_upper_bounds(tmp_path):
    for key, value in (("seed", 10**23), ("steps", 10**9), ("lr", 1e30)):
        sweep = write_sweep_yaml(
            tmp_path, BASE, strategy=[{"name": "online", key: value}], drafters=[{"type": "eagle3"}]
        )
        assert_user_error(invoke("sweep", sweep, "--dry-run"), f"'{key}' must be")


def test_the_dry_run_counts_arrival_waits(tmp_path):
    sweep = write_sweep_yaml(
        tmp_path,
        BASE,
        workloads=[{"name": "mt-bench", "count": 2}],
        request_rates=[0.001],
        backend={"name": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"},
    )
    result = invoke("sweep", sweep, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "waiting for open-loop arrivals" in result.stdout and "about 0 s" not in result.stdout


def test_checkpoint_sizes_and_the_memory_they_imply_are_checked_before_allocation(tmp_path, monkeypatch):
    from specbench.models.limits import check_config_sizes

    for config, needle in (
        ({"hidden_size": 10**7}, "'hidden_size' must be"),
        (
            {"speculators_config": {"x": 1}, "transformer_layer_config": {"intermediate_size": 10**7}},
            "'intermediate_size' must be",
        ),
        ({"medusa_num_heads": 10**6}, "'medusa_num_heads' must be"),
        ({"hidden_size": 65536, "intermediate_size": 262144, "num_hidden_layers": 8}, "GiB, over the limit"),
    ):
        with pytest.raises(SpecbenchError, match=needle):
            check_config_sizes(config, "config.json")
    monkeypatch.setenv("SPECBENCH_MAX_MEMORY_GIB", "0.001")
    with pytest.raises(SpecbenchError, match="over the limit of 0.0 GiB"):
        check_config_sizes({"hidden_size": 576, "intermediate_size": 1536, "vocab_size": 49152}, "config.json")
    monkeypatch.setenv("SPECBENCH_MAX_MEMORY_GIB", "1e9")
    with pytest.raises(SpecbenchError, match="SPECBENCH_MAX_MEMORY_GIB"):
        check_config_sizes({"hidden_size": 8}, "config.json")


def test_a_drafter_checkpoint_with_a_huge_size_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"format": "specbench-drafter", "format_version": 1, "type": "mtp", "hidden_size": 10**7})
    )
    (folder / "model.safetensors").write_bytes(b"")
    from specbench.engine.drafters.checkpoints.checkpoint import read_checkpoint

    with pytest.raises(SpecbenchError, match="'hidden_size' must be an integer from 1 to 2\\^16"):
        read_checkpoint(folder)


def test_profile_refuses_a_grid_whose_cache_would_not_fit(tmp_path):
    result = invoke(
        "profile",
        "--target",
        "smollm2-135m",
        "--batch",
        "4096",
        "--context",
        "3900",
        "--verify-tokens",
        "129",
        "--out",
        tmp_path / "p",
    )
    assert_user_error(result, "profile --batch 4096 --context 3900 --verify-tokens 129", "GiB, over the limit")
    assert not (tmp_path / "p" / "run.json").exists()


def test_text_a_server_streams_is_cut_to_the_tokens_asked_for():
    from specbench.backends.servers.openai_server import OpenAIServerBackend
    from specbench.models.byte_tokenizer import byte_tokenizer

    backend = OpenAIServerBackend.__new__(OpenAIServerBackend)
    backend.tokenizer, backend.notes = byte_tokenizer(), []
    import threading

    backend._lock = threading.Lock()
    ids = backend._tokens({"has_token_ids": False, "text": "x" * 200_001}, 8)
    assert len(ids) == 8 and any("more than the 8 tokens" in n for n in backend.notes)


def test_the_dry_run_counts_online_training_steps(tmp_path):
    sweep = write_sweep_yaml(
        tmp_path,
        {
            **BASE,
            "target": "smollm2-135m",
            "drafters": [{"type": "eagle3"}],
            "workloads": [{"name": "mt-bench", "count": 8}],
            "max_new_tokens": 32,
            "strategy": ["sequential", {"name": "online", "steps": 4, "every_prompts": 2}],
        },
    )
    result = invoke("sweep", sweep, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "32 online training steps" in result.stdout, result.stdout
