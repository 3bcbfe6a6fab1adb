"""`specbench run` end to end, and its handling of bad input (exit 2, one line, no traceback)."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import assert_user_error, invoke


def test_run_json_reports_consistent_metrics():
    result = invoke(
        "run",
        "--target",
        "tiny-random-llama",
        "--drafter-model",
        "tiny-random-llama-draft",
        "--gamma",
        "3",
        "--prompt",
        "hello there",
        "-n",
        "40",
        "--ignore-eos",
        "--baseline",
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    m = report["metrics"]
    assert report["drafter"] == "draft-model" and report["gamma"] == 3
    assert m["new_tokens"] == 40
    assert m["accepted"] <= m["drafted"]
    assert m["tau"] == pytest.approx((m["new_tokens"] - 1) / m["target_forwards"])
    assert report["identical_to_baseline"] is True  # greedy is lossless
    assert report["speedup"] > 0
    assert len(m["position_acceptance"]) == 3


def test_run_table_output_on_the_real_model():
    result = invoke("run", "--prompt", "Name three colors.", "--drafter", "ngram", "--gamma", "2", "-n", "16")
    assert result.exit_code == 0, result.output
    for label in ("tokens/s", "α", "τ", "acceptance by position", "time split"):
        assert label in result.stdout


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--gamma", "-1"], ["--gamma", "from 0 to 128"]),
        (["--drafter", "ngramm"], ["unknown drafter 'ngramm'", "did you mean 'ngram'"]),
        (["--drafter", "none", "--gamma", "2", "--target", "no/such-model-folder-here"], ["no/such-model-folder-here"]),
        (["--target", "./missing-model-dir"], ["./missing-model-dir"]),
        (["--prompt", "   "], ["empty prompt"]),
        (["--drafter", "ngram", "--drafter-param", "n_max"], ["KEY=VALUE"]),
        (["--drafter", "ngram", "--drafter-param", "nmax=3"], ["no parameter 'nmax'", "n_max"]),
        (["--temperature", "0.5", "--top-p", "1.5"], ["top-p"]),
        (["--no-such-flag"], ["--no-such-flag"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needles):
    base = ["run", "--target", "tiny-random-llama", "--prompt", "hi", "-n", "4"]
    if "--prompt" in args:
        base = ["run", "--target", "tiny-random-llama", "-n", "4"]
    assert_user_error(invoke(*base, *args), *needles)


def test_mismatched_tokenizers_name_both_models():
    result = invoke(
        "run", "--target", "tiny-random-llama", "--drafter-model", "smollm2-135m", "--prompt", "hi", "-n", "4"
    )
    assert_user_error(result, "smollm2-135m", "tiny-random-llama", "vocabulary")


def test_models_list_shows_aliases():
    result = invoke("models", "list", "--json")
    assert result.exit_code == 0
    names = {row["name"] for row in json.loads(result.stdout)}
    assert {"smollm2-135m", "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "tiny-random-llama"} <= names


def test_models_pull_unknown_alias():
    assert_user_error(invoke("models", "pull", "qwen-nope"), "unknown model alias")
