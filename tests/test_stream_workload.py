"""Stream workloads (specbench.workloads.stream): other workloads' prompts in a fixed order, with positions and
segments, each prompt encoded with its own workload's chat setting."""

from __future__ import annotations

import json

import pytest

from specbench.errors import SpecbenchError
from specbench.models.byte_tokenizer import byte_tokenizer
from specbench.workloads.catalog import encode_turn, load_workload
from specbench.workloads.spec import builtin_spec
from specbench.workloads.stream import segment_counts
from tests.cli_helpers import assert_user_error, invoke

STREAM = "stream-code-chat-mtbench"


def test_the_shipped_stream_shifts_from_code_to_chat_to_mt_bench():
    workload = load_workload(STREAM)
    assert len(workload.prompts) == 60 and workload.n_turns == 72
    assert [p.stream_position for p in workload.prompts] == list(range(60))
    segments = [p.segment for p in workload.prompts]
    assert segments == ["humaneval"] * 24 + ["sharegpt"] * 24 + ["mt-bench"] * 12
    assert {p.chat for p in workload.prompts[:24]} == {False} and {p.chat for p in workload.prompts[24:]} == {True}
    # each segment is its workload's own sample, in the sweep's split (ShareGPT's eval half)
    assert [p.prompt_id for p in workload.prompts[:24]] == [
        p.prompt_id for p in load_workload("humaneval", count=24).prompts
    ]
    sharegpt = {p.prompt_id for p in load_workload("sharegpt", split="eval").prompts}
    assert {p.prompt_id for p in workload.prompts[24:48]} <= sharegpt


def test_a_count_keeps_every_segment_in_proportion_and_in_order():
    spec = builtin_spec(STREAM)
    assert segment_counts(spec, None) == [24, 24, 12]
    assert segment_counts(spec, 6) == [3, 2, 1]
    assert segment_counts(spec, 3) == [1, 1, 1]
    with pytest.raises(SpecbenchError, match="cannot keep its 3 segments"):
        segment_counts(spec, 2)
    workload = load_workload(STREAM, count=6)
    assert [p.segment for p in workload.prompts] == ["humaneval"] * 3 + ["sharegpt"] * 2 + ["mt-bench"]
    assert [p.stream_position for p in workload.prompts] == list(range(6))


def _questions(tmp_path, name: str, n: int):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": f"{name} question {i}"}) + "\n" for i in range(n)))
    return f"jsonl:{path}"


def test_a_workload_that_comes_back_brings_fresh_prompts(tmp_path):
    a, b = _questions(tmp_path, "a", 5), _questions(tmp_path, "b", 5)
    (tmp_path / "s.yaml").write_text(
        f"name: s\nstream:\n  - {{workload: '{a}', count: 2, label: first}}\n"
        f"  - {{workload: '{b}', count: 2}}\n  - {{workload: '{a}', count: 3, label: again}}\n"
    )
    workload = load_workload(str(tmp_path / "s.yaml"))
    ids = [p.prompt_id for p in workload.prompts]
    assert len(set(ids)) == 7 and [p.segment for p in workload.prompts][-3:] == ["again"] * 3
    assert set(ids[:2]).isdisjoint(ids[4:])
    (tmp_path / "t.yaml").write_text(
        f"name: t\nstream:\n  - {{workload: '{a}', count: 4}}\n  - {{workload: '{a}', count: 2}}\n"
    )
    with pytest.raises(SpecbenchError, match="asks for 2 prompts .* after 4 taken"):
        load_workload(str(tmp_path / "t.yaml"))


def test_each_prompt_keeps_its_workloads_chat_setting():
    workload = load_workload(STREAM, count=3)
    tokenizer = byte_tokenizer()
    code, chat = workload.prompts[0], workload.prompts[1]
    plain = lambda text: list(tokenizer(text)["input_ids"])  # noqa: E731
    assert encode_turn(tokenizer, workload, code, 0, []) == plain(code.turns[0])  # HumanEval: no chat template
    assert encode_turn(tokenizer, workload, chat, 0, []) == plain(f"user: {chat.turns[0]}\nassistant: ")


@pytest.mark.parametrize(
    "body, needle",
    [
        ("stream: []", "'stream' is empty"),
        ("stream:\n  - {workload: humaneval}", "missing key 'count'"),
        ("stream:\n  - {workload: humaneval, count: 0}", "'count' must be at least 1"),
        ("stream:\n  - {workload: humaneval, count: 2, weight: 1}", "unknown key 'weight'"),
        ("stream:\n  - humaneval", "must be a mapping"),
        ("stream:\n  - {workload: humaneval, count: 2}\nsources: []", "unknown key 'sources'"),
        ("stream:\n  - {workload: humaneval, count: 2}\nchat: false", "unknown key 'chat'"),
        ("stream:\n  - {workload: humaneval, count: 2}\nsampling: {count: 1}", "a stream takes no 'count'"),
    ],
)
def test_malformed_streams_are_one_line_errors(tmp_path, body, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\n{body}\n")
    assert_user_error(invoke("workloads", "show", path), needle)


def test_a_stream_of_streams_is_refused(tmp_path):
    (tmp_path / "inner.yaml").write_text("name: inner\nstream:\n  - {workload: humaneval, count: 2}\n")
    (tmp_path / "outer.yaml").write_text("name: outer\nstream:\n  - {workload: inner.yaml, count: 1}\n")
    assert_user_error(invoke("workloads", "show", tmp_path / "outer.yaml"), "is a stream itself")


@pytest.mark.parametrize("count", [None, 1, 2, 3, 5])
@pytest.mark.parametrize("where", [0, 1, 2])
@pytest.mark.parametrize("inner", ["stream-code-chat-mtbench", "inner.yaml"])
def test_a_segment_that_is_a_stream_is_named_whatever_the_count(tmp_path, count, where, inner):
    """The cause is the segment, at every count: a count below the segment count once said "a count of 2 cannot
    keep its 3 segments", and a count of 3 blamed the inner stream's count."""
    (tmp_path / "inner.yaml").write_text("name: inner\nstream:\n  - {workload: humaneval, count: 2}\n")
    segments = ["{workload: humaneval, count: 2}", "{workload: mt-bench, count: 2}"]
    segments.insert(where, f"{{workload: {inner}, count: 2, label: nested}}")
    outer = tmp_path / "outer.yaml"
    outer.write_text("name: outer\nstream:\n" + "".join(f"  - {s}\n" for s in segments))
    with pytest.raises(SpecbenchError) as refused:
        load_workload(str(outer), count=count)
    assert str(refused.value).startswith("workload outer: segment 'nested' is a stream itself"), str(refused.value)
