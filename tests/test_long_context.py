"""The long-context workload: documents, bins, fitting a document to a bin, records, fit and figure by bin."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from specbench.analysis.context_bins import fit_by_context_bin
from specbench.analysis.fit import fit_acceptance, fits_frame
from specbench.errors import SpecbenchError
from specbench.figures.plot import FIGURES, render_figure
from specbench.figures.plot_data import load_plot_data
from specbench.models.byte_tokenizer import byte_tokenizer
from specbench.records.store import load_records
from specbench.workloads import long_context
from specbench.workloads.catalog import encode_turn, load_workload, resolve_spec
from specbench.workloads.long_context_documents import (
    select_conversations,
    sharegpt_documents,
    stdlib_documents,
    stdlib_files,
    transcript,
)
from specbench.workloads.long_context_spec import DocumentSource
from specbench.workloads.prompt import ContextDocument, Prompt
from specbench.workloads.spec import builtin_spec
from tests.cli_helpers import assert_user_error, invoke, write_sweep_yaml
from tests.synthetic_results import (
    SyntheticDrafter,
    make_context_bin_records,
    make_records,
    write_results,
)

STDLIB_ONE = DocumentSource(
    "python-stdlib", count=1, seed=0, min_chars=48000, exclude=builtin_spec("long-context").documents[0].exclude
)


def _yaml(tmp_path: Path, bins: str = "{a: 200, b: 400}", documents: str | None = None) -> Path:
    documents = documents or "[{source: python-stdlib, count: 2, seed: 0, min_chars: 3000, exclude: ['test/*']}]"
    path = tmp_path / "lc.yaml"
    path.write_text(
        f"name: lc\nchat: true\nmax_new_tokens: 8\nlong_context:\n  tolerance: 0.1\n  bins: {bins}\n"
        '  tasks: {summarise: "{document}\\n\\nSummarise it.", answer: "{document}\\n\\nWhat is it?"}\n'
        f"  documents: {documents}\n"
    )
    return path


# ----------------------------------------------------------------------------- the shipped workload


def test_shipped_bins_hold_prompts_within_tolerance_with_smollm2s_tokenizer(smollm2):
    """Every bin of workloads/long-context.yaml, every task, one real stdlib file: prompts in [0.9·bin, bin]."""
    spec = replace(builtin_spec("long-context"), documents=(STDLIB_ONE,))
    assert [label for label, _ in spec.bins] == ["1k", "2k", "4k", "7k"]
    pairs, source = long_context.pair_prompts(spec)
    assert "stdlib" in source and len(pairs) == len(spec.tasks) == 3
    workload = load_workload("mt-bench")  # any chat workload: encode_turn reads only .chat
    window = smollm2.model.config.max_position_embeddings
    for prompt in long_context.in_bins(pairs[:1], spec):  # 'continue' of one document in all four bins
        ids = encode_turn(smollm2.tokenizer, workload, prompt, 0, [], token_limit=window - 256)
        target = prompt.context.target_tokens
        assert 0.9 * target <= len(ids) <= target, (prompt.prompt_id, len(ids))
        text = smollm2.tokenizer.decode(ids)
        assert "Continue it from exactly where it stops" in text and "{document}" not in text
        cut = prompt.context.text[:200]
        assert cut in text  # the document starts at its beginning
    assert len(ids) + 256 <= window


def test_bin_and_task_selection_by_name():
    whole = resolve_spec("long-context")
    one = resolve_spec("long-context:bin=4k")
    assert one.name == "long-context:bin=4k" and one.bins == (("4k", 4096),) and one.tasks == whole.tasks
    two = resolve_spec("long-context:task=answer:bin=7k,1k")
    assert two.name == "long-context:bin=1k,7k:task=answer"
    assert [b for b, _ in two.bins] == ["1k", "7k"] and [t for t, _ in two.tasks] == ["answer"]
    assert one.id_prefix == whole.id_prefix == "long-context"  # a bin's prompt ids do not depend on the selection
    with pytest.raises(SpecbenchError, match="did you mean '4k'"):
        resolve_spec("long-context:bin=4kk")
    with pytest.raises(SpecbenchError, match="unknown option 'bins'"):
        resolve_spec("long-context:bins=4k")
    with pytest.raises(SpecbenchError, match="takes no options"):
        resolve_spec("mt-bench:bin=4k")


def test_workload_yaml_loads_deterministically_with_the_same_pairs_in_every_bin(tmp_path):
    path = _yaml(tmp_path)
    whole = load_workload(str(path))
    again = load_workload(str(path))
    assert [p.prompt_id for p in whole.prompts] == [p.prompt_id for p in again.prompts]
    assert len(whole.prompts) == 2 * 2 * 2  # documents × tasks × bins
    assert {p.context_bin for p in whole.prompts} == {"a", "b"}
    assert {p.category for p in whole.prompts} == {"stdlib/summarise", "stdlib/answer"}
    version = whole.prompts[0].prompt_id.split("/")[3]
    assert version.startswith("stdlib-3.") and "python 3." in whole.source  # the Python version shows
    sampled = load_workload(f"{path}:bin=b", count=3, seed=1)
    assert sampled.name == "lc:bin=b" and len(sampled.prompts) == 3
    assert {p.context_bin for p in sampled.prompts} == {"b"}
    both = load_workload(str(path), count=3, seed=1)  # count is (document, task) pairs, asked in every bin
    pairs = {b: {p.prompt_id.split("/", 2)[2] for p in both.prompts if p.context_bin == b} for b in ("a", "b")}
    assert pairs["a"] == pairs["b"] and len(pairs["a"]) == 3
    assert {p.prompt_id for p in sampled.prompts} <= {p.prompt_id for p in both.prompts}


def test_bad_long_context_definitions(tmp_path):
    with pytest.raises(SpecbenchError, match="exactly once"):
        path = tmp_path / "bad.yaml"
        path.write_text("name: x\nlong_context: {bins: {a: 100}, tasks: {t: no placeholder}, documents: []}\n")
        load_workload(str(path))
    with pytest.raises(SpecbenchError, match="unknown source 'stdlib'"):
        load_workload(str(_yaml(tmp_path, documents="[{source: stdlib, count: 1}]")))
    with pytest.raises(SpecbenchError, match="asks for 1000"):
        load_workload(str(_yaml(tmp_path, documents="[{source: python-stdlib, count: 1000, min_chars: 90000}]")))


# ----------------------------------------------------------------------------- documents


def test_stdlib_selection_is_a_seeded_ranking_of_a_sorted_list(tmp_path):
    root = tmp_path / "lib"
    for rel in ("a.py", "pkg/b.py", "pkg/c.py", "test/t.py", "site-packages/x/y.py", "short.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n" * (2 if rel == "short.py" else 50))
    assert stdlib_files(root, ("test/*",)) == ["a.py", "pkg/b.py", "pkg/c.py", "short.py"]  # no site-packages
    source = DocumentSource("python-stdlib", count=3, seed=0, min_chars=100, exclude=("test/*",))
    docs, _ = stdlib_documents(source, root)
    assert sorted(d.doc_id.split("/", 1)[1] for d in docs) == ["a.py", "pkg/b.py", "pkg/c.py"]  # short.py too short
    assert [d.doc_id for d in stdlib_documents(source, root)[0]] == [d.doc_id for d in docs]
    ranked = [[d.doc_id for d in stdlib_documents(replace(source, seed=s, count=1), root)[0]] for s in range(8)]
    assert len({r[0] for r in ranked}) > 1  # the seed chooses
    first_two = [d.doc_id for d in stdlib_documents(replace(source, count=2), root)[0]]
    assert first_two == [d.doc_id for d in docs][:2]  # nested


def _sharegpt_file(path: Path) -> Path:
    def turns(tag: str, n: int, text: str) -> list[dict]:
        return [{"from": "human" if i % 2 == 0 else "gpt", "value": f"{tag} message {i} {text}"} for i in range(n)]

    records = [
        {"id": "long_0", "conversations": turns("first", 4, "words " * 40)},
        {"id": "other_0", "conversations": turns("other", 2, "short")},
        {"id": "long_4", "conversations": turns("second", 4, "words " * 40)},
        {"id": "wide_0", "conversations": turns("wide", 6, "文字 " * 60)},
    ]
    path.write_text(json.dumps(records)[:-1] + ', {"id": "cut_0", "conversations": [{"from": "hu')  # cut mid-record
    return path


def test_sharegpt_conversations_are_rejoined_filtered_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    path = _sharegpt_file(tmp_path / "sg.json")
    source = DocumentSource("sharegpt", count=1, seed=0, min_chars=1000, path=str(path), min_ascii=0.9)
    docs, _ = sharegpt_documents(source)
    assert [d.doc_id for d in docs] == ["sharegpt/long"]  # 'other' too short, 'wide' not ASCII enough
    text = docs[0].text
    assert text.startswith("User: first message 0") and "Assistant: first message 1" in text
    assert text.index("first message 3") < text.index("second message 0")  # parts in order
    assert list((tmp_path / "cache" / "workloads").glob("sharegpt-long-*.json"))
    with pytest.raises(SpecbenchError, match="has 0 sharegpt"):
        sharegpt_documents(replace(source, min_chars=10**6))
    path.write_text("not json at all")  # a changed file is a new cache key: parsed again, and refused
    with pytest.raises(SpecbenchError, match="as ShareGPT conversations"):
        sharegpt_documents(source)
    assert select_conversations([], source) == []
    assert transcript([{"from": "system", "value": " be brief "}]) == "System: be brief"


# ----------------------------------------------------------------------------- fitting a document to a bin


def _prompt(text: str, tokens: int, template: str = "{document}") -> Prompt:
    return Prompt("w", "w/x", "c", (template,), ContextDocument(text, "test document", "b", tokens, 0.1))


def test_the_cut_is_the_last_line_end_that_fits_else_a_word_end():
    tok = byte_tokenizer()  # one token per byte: lengths are exact
    lines = "".join(f"line {i:03d} ....\n" for i in range(100))  # 15 bytes per line
    ids = long_context.encode_long_context(tok, _prompt(lines, 100), chat=False)
    assert 90 <= len(ids) <= 100
    assert tok.decode(ids).endswith("....") and tok.decode(ids) in lines  # cut at a line end
    words = "word " * 400  # one line of 2000 bytes: no line end fits
    ids = long_context.encode_long_context(tok, _prompt(words, 100), chat=False)
    assert 90 <= len(ids) <= 100 and tok.decode(ids).endswith("word")
    limited = long_context.encode_long_context(tok, _prompt(lines, 100), chat=False, token_limit=95)
    assert len(limited) <= 95
    with pytest.raises(SpecbenchError, match="context window leaves 50"):
        long_context.encode_long_context(tok, _prompt(lines, 100), chat=False, token_limit=50)
    with pytest.raises(SpecbenchError, match="too short"):
        long_context.encode_long_context(tok, _prompt("short\ntext\n", 100), chat=False)


# ----------------------------------------------------------------------------- records, fit and figure by bin

BINS = {"1k": 1000, "4k": 4000, "7k": 7000}


def _binned_records(alphas=(0.8, 0.6, 0.35), n_prompts=10):
    drafter = SyntheticDrafter(name="ngram", params={}, gammas=(3,))
    bins = {label: (tokens, [replace(drafter, alpha=a)]) for (label, tokens), a in zip(BINS.items(), alphas)}
    return make_context_bin_records(bins, n_prompts=n_prompts, max_new_tokens=48)


def test_fit_reports_alpha_and_tau_by_context_bin(tmp_path):
    table = fit_by_context_bin(pd.DataFrame(_binned_records()), n_boot=200)
    assert list(table["context_bin"]) == ["1k", "4k", "7k"]  # shortest first
    assert (table["n_prompts"] == 10).all() and list(table["prompt_tokens"].round(-3)) == [1000, 4000, 7000]
    assert table["alpha"].is_monotonic_decreasing
    records = pd.DataFrame(_binned_records())
    for truth, (_, row) in zip((0.8, 0.6, 0.35), table.iterrows()):
        assert abs(row["alpha"] - truth) < 0.1
        assert row["alpha_lo"] < row["alpha"] < row["alpha_hi"] and row["tau_lo"] < row["tau"] < row["tau_hi"]
        alone = fits_frame(fit_acceptance(records[records["context_bin"] == row["context_bin"]], n_boot=200))
        assert alone["alpha"].iloc[0] == pytest.approx(row["alpha"])  # the workload fit, on the bin's records
    one_bin = [r for r in _binned_records() if r["context_bin"] == "4k"]
    assert fit_by_context_bin(pd.DataFrame(one_bin), n_boot=0).empty
    folder = write_results(tmp_path / "run", _binned_records())
    result = invoke("fit", folder, "--json", "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["acceptance_by_context_bin"]
    assert [r["context_bin"] for r in rows] == ["1k", "4k", "7k"] and rows[0]["alpha_lo"] is not None
    text = invoke("fit", folder, "--bootstrap", "50").stdout
    assert "Acceptance by context length" in text and "7k" in text


def test_old_folders_read_back_without_context_bins(tmp_path):
    records = make_records([SyntheticDrafter(gammas=(2,))], n_prompts=3, max_new_tokens=16)
    assert "context_bin" not in records[0]
    frame = load_records(write_results(tmp_path / "old", records))
    assert frame["context_bin"].isna().all()
    assert fit_by_context_bin(frame, n_boot=0).empty


def test_alpha_vs_context_figure_is_drawn_for_several_bins_and_skipped_for_one(tmp_path):
    spec = next(f for f in FIGURES if f.name == "alpha_vs_context")
    many = load_plot_data(write_results(tmp_path / "many", _binned_records(n_prompts=4)), n_boot=50)
    drawn = render_figure(spec, many, tmp_path, ("png",))
    assert drawn.skipped is None and drawn.files["png"].stat().st_size > 10_000
    one = [r for r in _binned_records(n_prompts=4) if r["context_bin"] == "1k"]
    skipped = render_figure(spec, load_plot_data(write_results(tmp_path / "one", one), n_boot=50), tmp_path, ("png",))
    assert skipped.skipped and "fewer than two context-length bins" in skipped.skipped


# ----------------------------------------------------------------------------- end to end


def test_tiny_sweep_records_prompt_tokens_and_context_bins(tmp_path):
    """Tiny random target (byte tokenizer, 4,096-token window): bins of 200 and 400 tokens."""
    workload = _yaml(tmp_path)
    spec = {
        "name": "lc",
        "target": "tiny-random-llama",
        "max_new_tokens": 4,
        "ignore_eos": True,
        "drafters": [{"type": "ngram"}],
        "gammas": [3],
        "timing": {"warmup_s": 0},
        "workloads": [{"name": f"{workload}:task=answer", "count": 1}],
    }
    out = tmp_path / "res"
    result = invoke("sweep", write_sweep_yaml(tmp_path, spec), "--out", out)
    assert result.exit_code == 0, result.output
    frame = load_records(out)
    assert len(frame) == 2 * 2  # (baseline + ngram) × two bins
    assert set(frame["context_bin"]) == {"a", "b"} and set(frame["workload"]) == {"lc:task=answer"}
    for label, tokens in (("a", 200), ("b", 400)):
        lengths = frame.loc[frame["context_bin"] == label, "prompt_tokens"]
        assert ((lengths >= 0.9 * tokens) & (lengths <= tokens)).all()
    too_long = _yaml(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path, bins="{huge: 5000}")
    result = invoke(
        "sweep",
        write_sweep_yaml(tmp_path, spec, workloads=[{"name": str(too_long), "count": 1}]),
        "--out",
        tmp_path / "res2",
    )
    assert_user_error(result, "bin huge", "context window")
    assert not (tmp_path / "res2" / "run.json").exists()
