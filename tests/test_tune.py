"""`specbench tune`: the whole loop in one budget — sweep until decided, confirm on fresh prompts, say what to
deploy — run for real on the tiny random models, and its refusals."""

from __future__ import annotations

import json

import yaml

from tests.cli_helpers import assert_user_error, invoke
from tests.confirm_helpers import prompt_file


def _spec(folder):
    raw = {
        "name": "tiny-tune",
        "target": "tiny-random-llama",
        "max_new_tokens": 12,
        "ignore_eos": True,
        "drafters": [{"type": "ngram"}],
        "gammas": [1, 2],
        "temperatures": [0.0],
        "timing": {"order": "once", "warmup_s": 0, "retries": 0},
        "adaptive": {"first": 4, "batch": 4, "max_prompts": 8},
        "workloads": [{"name": f"jsonl:{prompt_file(folder)}:field=text:id=id"}],
    }
    path = folder / "tune.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_tune_sweeps_confirms_and_says_what_to_deploy(tmp_path):
    out = tmp_path / "results"
    result = invoke("tune", _spec(tmp_path), "--budget", "4m", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (out / "run.json").exists() and (out / "adaptive.json").exists()
    # every workload ends with a deployment line (confirmed, beaten, missed, not settled) or says why it is not
    # confirmed: the sweep's verdict was not confident
    assert data["deploy"] or data["unconfirmed"]
    for item in data["deploy"]:
        assert item["status"] in ("confirmed", "beaten", "missed", "not settled", "not run") and item["text"]
    for line in data["unconfirmed"]:
        assert "not confirmed" in line


def test_tune_refuses_bad_input_in_one_line(tmp_path):
    spec = _spec(tmp_path)
    assert_user_error(invoke("tune", spec, "--engine", "vllmm"), "unknown engine 'vllmm'", "did you mean")
    assert_user_error(invoke("tune", spec, "--budget", "soon"), "budget")
    result = invoke("tune", spec, "--tolerance", "0.9")
    assert result.exit_code == 2 and "tolerance" in result.output
