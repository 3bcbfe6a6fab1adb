"""sweeps/online-adaptation.yaml cut down: static vs online drafters over the shifting stream, every greedy output
the target's, the stream and drafter-version columns filled, and fit / recommend / plot show the stream;
a killed online sweep resumes with its drafters caught up; mistakes in the strategy are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench.measure.grid.sweep import build_spec
from specbench.measure.run.runner import SilentObserver, SweepRunner
from specbench.records.store import load_records
from tests.cli_helpers import assert_user_error, invoke, write_sweep_yaml

SWEEP = Path(__file__).resolve().parents[1] / "sweeps" / "online-adaptation.yaml"
QUICK = {"every_prompts": 1, "steps": 1, "batch_tokens": 128}  # an update after every generation, cheap


def quick(strategies: list) -> list:
    return [s if isinstance(s, str) else {**s, **QUICK} for s in strategies]


def test_the_online_sweep_runs_cut_down_and_every_output_is_the_targets(tmp_path):
    raw = yaml.safe_load(SWEEP.read_text())
    raw.update(
        max_new_tokens=6,
        ignore_eos=True,
        strategy=quick(raw["strategy"]),
        workloads=[{"name": "stream-code-chat-mtbench", "count": 3}],
    )
    out = tmp_path / "res"
    result = invoke("sweep", write_sweep_yaml(tmp_path, raw), "--out", out)
    assert result.exit_code == 0, result.output
    df = load_records(out)
    assert len(df) == 4 * 5  # HumanEval, ShareGPT, MT-Bench's two turns × baseline, static and three online
    assert (df.groupby(["prompt_id", "turn"])["output_sha1"].nunique() == 1).all(), "greedy: the target's tokens"
    assert sorted(df["stream_position"].unique()) == [0, 1, 2]
    assert list(df.sort_values("stream_position").drop_duplicates("stream_position")["stream_segment"]) == [
        "humaneval",
        "sharegpt",
        "mt-bench",
    ]
    online = df[df["strategy"] == "online"]
    assert set(online["drafter_label"].str.extract(r"online\((\w+)")[0]) == {"checkpoint", "scratch"}
    for _, part in online.groupby("drafter_label"):
        part = part.sort_values(["stream_position", "turn"])
        assert list(part["drafter_version"]) == [0, 1, 2, 3]  # one update after every generation
        assert all(len(u) == 1 for u in part["update_s"]) and (part["online_train_tokens"] > 0).all()
    static = df[(df["strategy"] == "sequential") & (df["gamma"] > 0)]
    assert static["drafter_version"].isna().all() and static["online_train_s"].isna().all()

    fit = json.loads(invoke("fit", out, "--json", "--bootstrap", "0").stdout)
    assert {w["stream_segment"] for w in fit["online_windows"]} == {"humaneval", "sharegpt", "mt-bench"}
    assert {r["shift_at"] for r in fit["online_recovery"]} == {1, 2}
    recs = json.loads(invoke("recommend", out, "--json", "--bootstrap", "0").stdout)
    online_verdict = recs[0]["online"]
    assert [d["deployment"] for d in online_verdict["deployments"]] == ["separate", "shared"]
    separate, shared = online_verdict["deployments"]
    answers = {"confident yes", "confident no", "cannot tell"}  # P = 3 prompts: intervals exist
    assert {separate["answer"], shared["answer"]} <= answers
    for mine, with_training in zip(separate["candidates"], shared["candidates"]):
        assert mine["configuration"] == with_training["configuration"]
        assert with_training["ratio"] < mine["ratio"], "the training seconds count against the shared machine"
    assert {t["configuration"] for t in online_verdict["tau_ratio"]} == set(online["drafter_label"])
    text = invoke("recommend", out, "--bootstrap", "0").stdout
    assert "online adaptation (training on the serving machine)" in text
    report = invoke("plot", out, "--out", tmp_path / "report", "--format", "png")
    assert report.exit_code == 0, report.output
    assert (tmp_path / "report" / "online_adaptation.png").exists()


# ----------------------------------------------------------------------------- resume (tiny models)


def tiny_online_sweep(tmp_path) -> dict:
    stream = tmp_path / "stream.yaml"
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": i, "prompt": f"say {w} and more"}) + "\n"
            for i, w in enumerate(["alpha", "beta", "gamma", "delta"])
        )
    )
    other = tmp_path / "q.jsonl"
    other.write_text("".join(json.dumps({"id": i, "prompt": f"count {i} {i + 1}"}) + "\n" for i in range(4)))
    stream.write_text(
        f"name: tiny-stream\nstream:\n  - {{workload: 'jsonl:{prompts}', count: 2}}\n"
        f"  - {{workload: 'jsonl:{other}', count: 2}}\n"
    )
    return {
        "name": "tiny-online",
        "target": "tiny-random-llama",
        "max_new_tokens": 10,
        "ignore_eos": True,
        "drafters": [{"type": "eagle3", "params": {"checkpoint": "random"}}],
        "gammas": [2],
        "strategy": ["sequential", {"name": "online", "every_prompts": 1, "steps": 1, "batch_tokens": 64}],
        "workloads": [str(stream)],
        "timing": {"warmup_s": 0},
    }


class StopAfter(SilentObserver):
    def __init__(self, units: int):
        self.left = units

    def unit_done(self, unit, record):
        self.left -= 1
        if self.left == 0:
            raise KeyboardInterrupt


def test_a_killed_online_sweep_resumes_with_its_drafter_caught_up(tmp_path):
    raw = tiny_online_sweep(tmp_path)
    SweepRunner(build_spec(raw), tmp_path / "whole").run()
    with pytest.raises(KeyboardInterrupt):
        SweepRunner(build_spec(raw), tmp_path / "cut", observer=StopAfter(7)).run()
    assert len(load_records(tmp_path / "cut")) == 7
    assert SweepRunner(build_spec(raw), tmp_path / "cut").run() == 12 - 7
    columns = ["unit_id", "output_sha1", "drafter_version", "accepted", "online_train_tokens"]
    whole = load_records(tmp_path / "whole")[columns].sort_values("unit_id").reset_index(drop=True)
    resumed = load_records(tmp_path / "cut")[columns].sort_values("unit_id").reset_index(drop=True)
    assert whole.equals(resumed), "the resumed units ran on the drafter the uninterrupted run had"
    assert whole["drafter_version"].max() == 3


# ----------------------------------------------------------------------------- mistakes

BASE = {
    "name": "s",
    "target": "smollm2-135m",
    "drafters": [{"type": "eagle3"}],
    "gammas": [3],
    "workloads": [{"name": "stream-code-chat-mtbench", "count": 3}],
}


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"strategy": [{"name": "onlin"}]}, "did you mean 'online'"),
        ({"strategy": [{"name": "online", "every": 2}]}, "unknown key 'every'"),
        ({"strategy": [{"name": "online", "every_prompts": 2, "every_tokens": 64}]}, "not both"),
        ({"strategy": [{"name": "online", "loss": "acepted"}]}, "did you mean 'accepted'"),
        ({"strategy": [{"name": "online", "start": "shipped"}]}, "unknown start 'shipped'"),
        ({"strategy": [{"name": "online", "steps": 0}]}, "'steps' must be an integer from 1 to 1000"),
        ({"strategy": [{"name": "online", "steps": 10**9}]}, "'steps' must be an integer from 1 to 1000"),
        ({"strategy": [{"name": "online", "seed": 10**23}]}, "'seed' must be an integer from 0"),
        ({"strategy": [{"name": "online", "lr": -1}]}, "'lr' must be a number > 0 and <= 10"),
        ({"strategy": [{"name": "online", "lr": 1e30}]}, "'lr' must be a number > 0 and <= 10"),
        ({"strategy": [{"name": "online", "loss": "accepted", "reject_weight": 1}]}, "loss 'accepted' does not have"),
        ({"strategy": [{"name": "online"}], "drafters": [{"type": "ngram"}]}, "'ngram' is not a trained drafter"),
        ({"strategy": [{"name": "online"}], "mode": "replay"}, "cannot be replayed"),
        ({"strategy": [{"name": "online"}], "adaptive": True}, "use a fixed grid"),
    ],
)
def test_online_strategy_mistakes_are_one_line_errors(tmp_path, changes, needle):
    assert_user_error(invoke("sweep", write_sweep_yaml(tmp_path, {**BASE, **changes}), "--dry-run"), needle)


def test_an_online_sweep_cannot_be_sharded(tmp_path):
    raw = {**BASE, "strategy": [{"name": "online"}]}
    assert_user_error(
        invoke("sweep", write_sweep_yaml(tmp_path, raw), "--shard", "0/2", "--out", tmp_path / "o"),
        "cannot be split into shards",
    )


def test_an_online_sweep_cannot_be_spread_over_ray_workers(tmp_path):
    """Refused before any worker starts (Ray need not be installed): each worker would learn from part of the stream."""
    raw = {**BASE, "strategy": [{"name": "online"}]}
    assert_user_error(
        invoke("sweep", write_sweep_yaml(tmp_path, raw), "--workers", "2", "--out", tmp_path / "o"),
        "cannot be spread over Ray workers",
    )
