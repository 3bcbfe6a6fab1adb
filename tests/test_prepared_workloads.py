"""SPEED-Bench and speculator_benchmarks as workloads: read from small folders written here in the layouts
those projects' scripts write (NVIDIA's prepare.py, the speculators project's prepare_speedbench.py, the
hub dataset's files), from the hub where it is reachable (a stand-in answers), and refused in one line,
saying how to get the data, where there is none. Categories and SPEED-Bench's length bins reach the
records, so per-category α (`fit --by category`) and per-category recommendations work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.records.store import load_records
from specbench.workloads.catalog import load_workload
from specbench.workloads.readers import prepared_rows
from tests.cli_helpers import assert_user_error, invoke

QUALITATIVE = {"coding": 3, "writing": 2, "math": 2}
TIERS = ("low_entropy", "mixed", "high_entropy")
SUBSETS = (
    "HumanEval",
    "math_reasoning",
    "qa",
    "question",
    "rag",
    "summarization",
    "tool_call",
    "translation",
    "writing",
)


@pytest.fixture(autouse=True)
def no_data_here(monkeypatch, tmp_path):
    """No data folder from the environment or the cache, and no hub, unless a test says otherwise."""
    monkeypatch.delenv("SPECBENCH_SPEED_BENCH", raising=False)
    monkeypatch.delenv("SPECBENCH_SPECULATOR_BENCHMARKS", raising=False)
    monkeypatch.setenv("SPECBENCH_OFFLINE", "1")
    monkeypatch.setattr("specbench.workloads.readers.prepared_spec.cache_root", lambda: tmp_path / "cache")


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _question(config: str, i: int, category: str, turns: list[str], sub: str = "general") -> dict:
    """A record as NVIDIA's prepare.py writes it: the user turns as chat messages."""
    return {
        "question_id": f"{config}-{i:03d}",
        "category": category,
        "sub_category": sub,
        "source": "test",
        "src_id": str(i),
        "difficulty": "easy",
        "multiturn": len(turns) > 1,
        "messages": [{"role": "user", "content": t} for t in turns],
    }


@pytest.fixture
def speed_bench_flat(tmp_path) -> Path:
    """NVIDIA's prepare.py output: <config>.jsonl for qualitative and two throughput splits."""
    folder = tmp_path / "speedbench"
    folder.mkdir()
    rows, i = [], 0
    for category, n in QUALITATIVE.items():
        for _ in range(n):
            turns = [f"{category} question {i}"] + ([f"follow-up {i}"] if i == 0 else [])
            rows.append(_question("qualitative", i, category, turns))
            i += 1
    _jsonl(folder / "qualitative.jsonl", rows)
    for config in ("throughput_1k", "throughput_8k"):
        _jsonl(
            folder / f"{config}.jsonl",
            [
                _question(config, i, tier, [f"{config} {tier} document {i} " * 20], sub="code_completion")
                for i, tier in enumerate(TIERS * 2)
            ],
        )
    return folder


@pytest.fixture
def speed_bench_split(tmp_path) -> Path:
    """The speculators project's prepare_speedbench.py output: one file per category, first turns only."""
    folder = tmp_path / "speedbench-split"
    folder.mkdir()
    for category, n in QUALITATIVE.items():
        _jsonl(folder / f"qualitative_{category}.jsonl", [{"turns": f"{category} prompt {i}"} for i in range(n)])
    _jsonl(folder / "throughput_2k_high_entropy__code_completion.jsonl", [{"turns": "long code " * 50}] * 2)
    _jsonl(folder / "throughput_2k_low_entropy__summarization.jsonl", [{"turns": "long text " * 50}])
    return folder


@pytest.fixture
def speculator_benchmarks(tmp_path) -> Path:
    """A local copy of RedHatAI/speculator_benchmarks: one <subset>.jsonl per subset, a `prompt` column."""
    folder = tmp_path / "speculator_benchmarks"
    folder.mkdir()
    for subset in SUBSETS:
        _jsonl(folder / f"{subset}.jsonl", [{"prompt": f"{subset} prompt {i}"} for i in range(2)])
    (folder / "README.md").write_text("dataset card\n")
    return folder


# ----------------------------------------------------------------------------- SPEED-Bench


def test_speed_bench_qualitative_from_nvidias_prepared_folder(speed_bench_flat):
    w = load_workload(f"speed-bench:data={speed_bench_flat}")
    assert w.name == "speed-bench" and len(w.prompts) == sum(QUALITATIVE.values())
    assert w.categories == sorted(QUALITATIVE)
    first = w.prompts[0]
    assert first.prompt_id == "speed-bench/qualitative/qualitative-000" and first.turns == (
        "coding question 0",
        "follow-up 0",
    )
    assert all(p.context_bin is None for p in w.prompts) and w.chat
    assert w.source == str(speed_bench_flat / "qualitative.jsonl")


def test_speed_bench_categories_and_throughput_splits_are_chosen_by_name(speed_bench_flat, monkeypatch):
    monkeypatch.setenv("SPECBENCH_SPEED_BENCH", str(speed_bench_flat))
    coding = load_workload("speed-bench:category=coding,writing")
    assert coding.name == "speed-bench:category=coding,writing" and coding.categories == ["coding", "writing"]
    assert {p.prompt_id for p in coding.prompts} <= {p.prompt_id for p in load_workload("speed-bench").prompts}
    splits = load_workload("speed-bench:config=throughput_1k,throughput_8k:category=high_entropy")
    assert splits.name == "speed-bench:config=throughput_1k,throughput_8k:category=high_entropy"
    assert splits.categories == ["high_entropy"] and len(splits.prompts) == 4
    assert {p.context_bin for p in splits.prompts} == {"1k", "8k"}
    assert all(
        p.prompt_id.startswith(("speed-bench/throughput_1k/", "speed-bench/throughput_8k/")) for p in splits.prompts
    )
    assert (
        load_workload("speed-bench:config=throughput_8k", count=2, seed=1).prompts[0].prompt_id
        == load_workload("speed-bench:config=throughput_8k", count=4, seed=1).prompts[0].prompt_id
    )  # nested samples


def test_speed_bench_from_the_speculators_split_files(speed_bench_split):
    w = load_workload(f"speed-bench:data={speed_bench_split}")
    assert w.categories == sorted(QUALITATIVE) and len(w.prompts) == sum(QUALITATIVE.values())
    assert "speed-bench/qualitative/coding/0" in {p.prompt_id for p in w.prompts}
    tiers = load_workload(f"speed-bench:config=throughput_2k:data={speed_bench_split}")
    assert tiers.categories == ["high_entropy", "low_entropy"] and {p.context_bin for p in tiers.prompts} == {"2k"}
    assert "speed-bench/throughput_2k/high_entropy__code_completion/1" in {p.prompt_id for p in tiers.prompts}


def test_a_folder_holding_both_layouts_reads_the_flat_files(speed_bench_flat, speed_bench_split):
    for path in speed_bench_split.iterdir():
        path.rename(speed_bench_flat / path.name)
    w = load_workload(f"speed-bench:data={speed_bench_flat}")
    assert w.prompts[0].prompt_id == "speed-bench/qualitative/qualitative-000"


@pytest.mark.parametrize(
    "name, needle",
    [
        ("speed-bench", "prepare.py"),
        ("speed-bench:data=/nonexistent/speedbench", "/nonexistent/speedbench (from data=) does not exist"),
        ("speed-bench:config=throughput_4k", "no config 'throughput_4k'"),
        ("speed-bench:category=cooking", "no category 'cooking'"),
        ("speed-bench:bins=1k", "unknown option 'bins'"),
        ("speculator-benchmarks", "huggingface-cli download RedHatAI/speculator_benchmarks"),
        ("speculator-benchmarks:config=x", "has no configs to choose"),
    ],
)
def test_missing_data_and_bad_names_are_one_line(name, needle):
    with pytest.raises(SpecbenchError) as err:
        load_workload(name)
    assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_folder_not_materialised_is_refused(speed_bench_flat):
    rows = [json.loads(line) for line in (speed_bench_flat / "qualitative.jsonl").read_text().splitlines()]
    rows[1]["messages"][0]["content"] = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
    _jsonl(speed_bench_flat / "qualitative.jsonl", rows)
    with pytest.raises(SpecbenchError, match="1 prompts still held back .*prepare.py"):
        load_workload(f"speed-bench:data={speed_bench_flat}")
    (speed_bench_flat / "qualitative.jsonl").unlink()
    with pytest.raises(SpecbenchError, match="neither qualitative.jsonl nor qualitative_"):
        load_workload(f"speed-bench:data={speed_bench_flat}")


def test_online_the_hub_gives_the_prompts_it_holds_in_full(monkeypatch):
    """Without a folder, where the hub is reachable: the dataset's config, placeholder rows left out."""
    asked = []

    def hub(dataset, split, *, config=None, data_files=None):
        asked.append((dataset, split, config, data_files))
        if dataset == "nvidia/SPEED-Bench":
            return [
                {"question_id": "q1", "category": "coding", "turns": ["write code"]},
                {
                    "question_id": "q2",
                    "category": "rag",
                    "turns": ["FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH\n\n{article}"],
                },
            ]
        return [{"prompt": f"{data_files} prompt"}]

    monkeypatch.setattr(prepared_rows, "hub_reachable", lambda: True)
    monkeypatch.setattr(prepared_rows, "read_hf", hub)
    w = load_workload("speed-bench")
    assert [p.prompt_id for p in w.prompts] == ["speed-bench/qualitative/q1"] and "1 held-back" in w.source
    assert asked == [("nvidia/SPEED-Bench", "test", "qualitative", None)]
    s = load_workload("speculator-benchmarks:category=qa,HumanEval")
    assert [p.turns[0] for p in s.prompts] == ["HumanEval.jsonl prompt", "qa.jsonl prompt"]
    assert asked[1:] == [("RedHatAI/speculator_benchmarks", "train", None, f"{n}.jsonl") for n in ("HumanEval", "qa")]


# ----------------------------------------------------------------------------- speculator_benchmarks


def test_speculator_benchmarks_from_a_local_copy(speculator_benchmarks, monkeypatch):
    monkeypatch.setenv("SPECBENCH_SPECULATOR_BENCHMARKS", str(speculator_benchmarks))
    w = load_workload("speculator-benchmarks")
    assert w.categories == sorted(SUBSETS) and len(w.prompts) == 18
    assert w.prompts[0].prompt_id == "speculator-benchmarks/HumanEval/0" and w.prompts[0].turns == (
        "HumanEval prompt 0",
    )
    some = load_workload("speculator-benchmarks:category=writing,qa")
    assert some.name == "speculator-benchmarks:category=writing,qa" and some.categories == ["qa", "writing"]
    (speculator_benchmarks / "rag.jsonl").unlink()
    with pytest.raises(SpecbenchError, match="has no rag.jsonl; download it"):
        load_workload("speculator-benchmarks")
    assert len(load_workload("speculator-benchmarks:category=qa").prompts) == 2  # the others need no rag
    _jsonl(speculator_benchmarks / "qa.jsonl", [{"text": "no prompt field"}])
    with pytest.raises(SpecbenchError, match="has no 'prompt' field"):
        load_workload("speculator-benchmarks:category=qa")


# ----------------------------------------------------------------------------- the CLI and the records


def test_workloads_show_works_on_the_files_and_fails_in_one_line_without(speed_bench_flat, speculator_benchmarks):
    result = invoke("workloads", "show", f"speed-bench:config=throughput_1k:data={speed_bench_flat}", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["prompts"] == 6 and info["categories"] == {t: 2 for t in sorted(TIERS)}
    assert info["context_bins"] == {"1k": 6} and info["name"] == "speed-bench:config=throughput_1k"
    table = invoke("workloads", "show", f"speculator-benchmarks:data={speculator_benchmarks}")
    assert table.exit_code == 0 and "tool_call" in table.stdout and "HumanEval prompt 0" in table.stdout
    assert_user_error(invoke("workloads", "show", "speed-bench"), "SPECBENCH_SPEED_BENCH", "prepare.py")
    assert_user_error(
        invoke("workloads", "show", "speculator-benchmarks:category=qa"),
        "SPECBENCH_SPECULATOR_BENCHMARKS",
        "huggingface-cli download",
    )
    listed = invoke("workloads", "list", "--json")
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert not rows["speed-bench"]["available"] and "prepare.py" in rows["speed-bench"]["missing"]


def test_categories_and_bins_reach_the_records(tmp_path, speed_bench_flat, monkeypatch):
    """A sweep over two SPEED-Bench categories as two workloads, and a throughput split: the records keep
    the category and the bin, `fit --by category` splits by it, `recommend` answers per category."""
    monkeypatch.setenv("SPECBENCH_SPEED_BENCH", str(speed_bench_flat))
    out = tmp_path / "run"
    result = invoke(
        "sweep",
        "--name",
        "sb",
        "--target",
        "tiny-random-llama",
        "--drafter",
        "ngram",
        "--gamma",
        "2",
        "--workload",
        "speed-bench:category=coding",
        "--workload",
        "speed-bench:category=writing",
        "--workload",
        "speed-bench:config=throughput_1k",
        "--prompts",
        "3",
        "-n",
        "6",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    records = load_records(out)
    assert set(records["workload"]) == {
        "speed-bench:category=coding",
        "speed-bench:category=writing",
        "speed-bench:config=throughput_1k",
    }
    by_workload = records.groupby("workload")["category"].agg(lambda c: sorted(set(c))).to_dict()
    assert by_workload["speed-bench:category=coding"] == ["coding"]
    assert set(by_workload["speed-bench:config=throughput_1k"]) <= set(TIERS)
    assert set(records.loc[records["workload"] == "speed-bench:config=throughput_1k", "context_bin"]) == {"1k"}
    fit = invoke("fit", out, "--by", "category", "--json", "--bootstrap", "40")
    assert fit.exit_code == 0, fit.output
    recommend = invoke("recommend", out, "--json")
    assert recommend.exit_code == 0, recommend.output
    assert {"speed-bench:category=coding", "speed-bench:category=writing"} <= set(recommend.stdout.split('"'))
