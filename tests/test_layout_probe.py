"""The CPU layout / dtype probe (`specbench.engine.cpu.layout_probe`): every candidate it may choose keeps greedy
output identical to target-only decoding; it picks the fastest lossless candidate, never a 16-bit one whose
verify rows differ from decode rows; it caches per machine and model; a forced layout works; sweeps and
`specbench run` record and state the choice. Tiny random models (and SmolLM2-135M for the exact-rows check)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
import torch

from specbench.engine.cpu import layout_probe
from specbench.engine.cpu.layout_probe import (
    Candidate,
    LayoutChoice,
    auto_dtypes,
    choose_layout,
    probe_key,
    probe_layouts,
)
from specbench.engine.cpu.weight_layout import DTYPE_NAMES, LAYOUTS, candidate_layouts
from specbench.engine.decoder import NativeDecoder
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.models.resolve import load_model, torch_dtype
from tests.cli_helpers import TINY_SWEEP, assert_user_error, invoke, jsonl_workload, one_prompt_sweep, write_sweep_yaml

pytestmark = pytest.mark.usefixtures("one_torch_thread")
PROMPTS = [
    "Speculative decoding keeps the output distribution.",
    "def merge_sort(xs):\n    if len(xs) <= 1:",
    "One two three, one two three, one two",
]
# every (dtype, layout, lazy head) the probe can choose on this CPU
CHOOSABLE = [
    (name, layout.name, lazy)
    for name in auto_dtypes()
    for layout in candidate_layouts(torch_dtype(name))
    for lazy in (True, False)
]


@pytest.fixture(scope="module")
def tiny_models():
    fp32 = load_model("tiny-random-llama")
    return {name: fp32 if name == "fp32" else load_model("tiny-random-llama", dtype=name) for name in auto_dtypes()}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Probe results go to a cache of the test's own (the tiny models need no model cache), and the machine
    counts as quiet (a busy one is not cached: tested below)."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(layout_probe, "load_average", lambda: 0.0)


def _exact_here(decoder, verify_tokens: int = 4) -> bool:
    shapes = layout_probe._Shapes(decoder, verify_tokens, 16, seed=3)
    shapes.prefill()
    return shapes.rows_exact()[0]


@pytest.mark.parametrize("dtype_name,layout_name,lazy", CHOOSABLE)
def test_every_choosable_candidate_is_lossless(tiny_models, dtype_name, layout_name, lazy):
    """Speculative greedy output (draft model chain, prompt lookup chain, prompt-lookup tree) equals target-only
    output in the same layout. A 16-bit layout whose verify rows differ from decode rows here is one the probe
    drops (test below); it is skipped, after showing that the check sees the difference."""
    target = tiny_models[dtype_name]
    layout = replace(LAYOUTS[layout_name], lazy_head=lazy)
    decoder = NativeDecoder(target.model)
    decoder.use_layout(layout)
    if dtype_name != "fp32" and not _exact_here(decoder):
        pytest.skip(f"{dtype_name} {layout_name}: verify rows differ from decode rows on this CPU (never chosen)")
    base = SpeculativeEngine(target, None, gamma=0, decoder=decoder)
    drafted = 0
    for drafter, tree, gamma in [("draft-model", "chain", 3), ("ngram", "chain", 4), ("ngram", "3x2x1", 3)]:
        params = {"model": "tiny-random-llama-draft"} if drafter == "draft-model" else {}
        spec = SpeculativeEngine(
            target, make_drafter(drafter, target, params, dtype=dtype_name), gamma=gamma, tree=tree, decoder=decoder
        )
        for text in PROMPTS:
            ids = target.tokenizer(text)["input_ids"]
            result = spec.generate(ids, 32, stop_at_eos=False)
            assert result.tokens == base.generate(ids, 32, stop_at_eos=False).tokens, (drafter, tree, text)
            drafted += result.drafted
    assert drafted > 0 and decoder.cpu_layout == layout


FLOAT32_LAYOUTS = [layout.name for layout in candidate_layouts(torch.float32)]


@pytest.mark.parametrize("layout_name", FLOAT32_LAYOUTS)
def test_every_float32_candidate_is_lossless_on_smollm2(smollm2, smollm2_prompt_ids, layout_name):
    """The real model, prompt lookup γ = 4, each float32 layout: the same tokens as target-only decoding in that
    layout (float32 keeps greedy identity up to rounding, which on real prompts means identical tokens; the bf16
    layouts are checked in tests/test_bf16.py). The LM head alternates between lazy and batched from one layout
    to the next, so both heads meet the real model; every (layout, head) pair is checked on the tiny models
    above (`test_every_choosable_candidate_is_lossless`)."""
    decoder = NativeDecoder(smollm2.model)
    try:
        lazy = FLOAT32_LAYOUTS.index(layout_name) % 2 == 0
        decoder.use_layout(replace(LAYOUTS[layout_name], lazy_head=lazy))
        base = SpeculativeEngine(smollm2, None, gamma=0, decoder=decoder)
        spec = SpeculativeEngine(smollm2, make_drafter("ngram", smollm2), gamma=4, decoder=decoder)
        ids = smollm2_prompt_ids[0]
        result = spec.generate(ids, 40, stop_at_eos=False)
        assert result.tokens == base.generate(ids, 40, stop_at_eos=False).tokens, (layout_name, lazy)
        assert result.accepted > 0
    finally:
        NativeDecoder(smollm2.model)  # the session's shared model back in its default layout


def _fake_seconds(times: dict):
    """A `_seconds` that returns made-up step times per (dtype, layout, step), read from the decoder's state."""

    def fake(fn):
        shapes = fn.__self__
        decoder = shapes.decoder
        step = fn.__name__
        if step == "prefill":
            step = "prefill_upcast" if decoder.upcast_prefill else "prefill"
        fn()
        return times.get((DTYPE_NAMES[decoder.dtype], decoder.cpu_layout.name, step), 0.010)

    return fake


def test_probe_picks_the_fastest_lossless_candidate_and_leaves_it_in_place(tiny_models, monkeypatch):
    """Made-up times: bf16 row-major is the fastest of all but its rows are declared inexact (as on an AVX-512
    EPYC); bf16 two-row is next, with a k-row head cheaper than 2 one-row heads; it wins, with a batched head."""
    times = {
        ("bf16", "row-major", "decode"): 0.001,
        ("bf16", "row-major two-row", "decode"): 0.004,
        ("bf16", "row-major two-row", "verify"): 0.004,
        ("bf16", "row-major two-row", "head_row"): 0.003,
        ("bf16", "row-major two-row", "head_rows"): 0.004,
        ("bf16", "row-major two-row", "prefill"): 0.02,
        ("bf16", "row-major two-row", "prefill_upcast"): 0.01,
    }
    monkeypatch.setattr(layout_probe, "_seconds", _fake_seconds(times))
    real_check = layout_probe._Shapes.rows_exact

    def check(shapes):
        exact = real_check(shapes)
        return (False, False) if shapes.decoder.cpu_layout.name == "row-major" else exact

    monkeypatch.setattr(layout_probe._Shapes, "rows_exact", check)
    decoders = {
        "fp32": NativeDecoder(tiny_models["fp32"].model),
        "bf16": NativeDecoder(copy.deepcopy(tiny_models["fp32"].model).to(torch.bfloat16)),
    }
    layouts = {"fp32": candidate_layouts(torch.float32), "bf16": [LAYOUTS["row-major"], LAYOUTS["row-major two-row"]]}
    choice = probe_layouts(decoders, 4, repeats=2, context=8, layouts=layouts)
    assert (choice.dtype, choice.layout.name) == ("bf16", "row-major two-row"), choice.summary()
    assert not choice.layout.lazy_head and choice.layout.upcast_prefill  # k-row head 4 ms < 2 × 3 ms; prefill
    assert decoders["bf16"].cpu_layout == choice.layout and decoders["bf16"].upcast_prefill
    inexact = next(c for c in choice.candidates if c.layout == "row-major")
    assert inexact.dropped and "not lossless" in inexact.dropped and inexact.decode_s == pytest.approx(0.001)
    assert all(c.exact_rows is None for c in choice.candidates if c.dtype == "fp32")  # fp32: not required
    assert len(choice.candidates) == len(layouts["fp32"]) + 2 and "bf16" in choice.summary()
    assert "not lossless" in choice.reason
    assert LayoutChoice.from_dict(json.loads(json.dumps(choice.to_dict()))).to_dict() == choice.to_dict()


def test_probe_drops_a_hopeless_candidate_after_one_decode(tiny_models, monkeypatch):
    times = {("fp32", "column-major", "decode"): 0.1}
    monkeypatch.setattr(layout_probe, "_seconds", _fake_seconds(times))
    choice = probe_layouts({"fp32": NativeDecoder(tiny_models["fp32"].model)}, 1, repeats=2, context=8)
    slow = next(c for c in choice.candidates if c.layout == "column-major")
    assert slow.dropped.startswith("decode 100.0 ms") and slow.verify_s is None
    assert choice.layout.name != "column-major" and choice.verify_tokens == 1


def test_choice_is_cached_per_machine_and_model(tiny_models, monkeypatch):
    calls = []
    real = layout_probe.probe_layouts

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, repeats=1, context=8, **{k: v for k, v in kwargs.items() if k != "repeats"})

    monkeypatch.setattr(layout_probe, "probe_layouts", counting)
    model = tiny_models["fp32"].model
    first = choose_layout({"fp32": NativeDecoder(model)}, 3, "tiny")
    again_decoder = NativeDecoder(model)
    again = choose_layout({"fp32": again_decoder}, 3, "tiny")
    assert len(calls) == 1 and not first.cached and again.cached
    assert again.layout == first.layout and again_decoder.cpu_layout == first.layout
    assert again.candidates[0].decode_s == pytest.approx(first.candidates[0].decode_s, abs=1e-6)  # stored in µs
    choose_layout({"fp32": NativeDecoder(model)}, 5, "tiny")  # another verify size: another key
    choose_layout({"fp32": NativeDecoder(model)}, 3, "other-weights")  # another model
    assert len(calls) == 3
    assert probe_key("tiny", ["fp32"], 3, None) != probe_key("tiny", ["fp32", "bf16"], 3, None)
    choose_layout({"fp32": NativeDecoder(model)}, 3, "tiny", use_cache=False)  # a fresh measurement on request
    assert len(calls) == 4
    monkeypatch.setattr(layout_probe, "load_average", lambda: 99.0)  # a busy machine: used, not cached
    busy = choose_layout({"fp32": NativeDecoder(model)}, 7, "tiny")
    assert "busy machine (load average 99.0" in busy.reason and "not cached" in busy.summary()
    assert not choose_layout({"fp32": NativeDecoder(model)}, 7, "tiny").cached and len(calls) == 6


def test_lazy_head_and_upcast_follow_the_measurements():
    fast_batch = Candidate(
        "bf16",
        "row-major two-row",
        decode_s=1,
        verify_s=1,
        head_row_s=3,
        head_rows_s=4,
        prefill_s=2,
        prefill_upcast_s=3,
        exact_rows=True,
        exact_head=True,
    )
    assert not fast_batch.lazy_head and not fast_batch.upcast_prefill and fast_batch.score(5) == 6
    assert fast_batch.score(1) == 1
    inexact_head = replace(fast_batch, exact_head=False)
    assert inexact_head.lazy_head and inexact_head.score(5) == 1 + 1 + 6  # 2 one-row heads
    assert Candidate("fp32", "mixed", decode_s=1, verify_s=1, head_row_s=1, head_rows_s=4).lazy_head


def test_a_forced_layout_is_used_and_recorded(tmp_path, prompts_file):
    raw = one_prompt_sweep(prompts_file, 0)
    out = tmp_path / "forced"
    result = invoke("sweep", write_sweep_yaml(tmp_path, raw), "--out", out, "--layout", "column-major")
    assert result.exit_code == 0, result.output
    info = json.loads((out / "run.json").read_text())
    assert info["cpu_layout"]["setting"] == "column-major" and info["cpu_layout"]["layout"]["column_major"] == "all"
    assert info["cpu_layout"]["reason"].startswith("forced") and info["sweep"]["layout"] == "column-major"

    auto = tmp_path / "auto"
    result = invoke("sweep", write_sweep_yaml(tmp_path, {**raw, "dtype": "auto"}), "--out", auto)
    assert result.exit_code == 0, result.output
    info = json.loads((auto / "run.json").read_text())
    layout = info["cpu_layout"]
    assert layout["setting"] == "auto" and layout["dtype"] in auto_dtypes() and info["dtype"] == layout["dtype"]
    assert layout["verify_tokens"] == 3 and len(layout["candidates"]) >= 6 and not layout["cached"]
    from specbench.records.store import load_records

    assert set(load_records(auto)["dtype"]) == {layout["dtype"]}  # records carry the dtype the weights ran in


def test_run_dtype_auto_states_dtype_layout_and_why_in_one_line():
    result = invoke(
        "run",
        "--target",
        "tiny-random-llama",
        "--no-chat",
        "--prompt",
        "one two one two one two",
        "-n",
        "12",
        "--dtype",
        "auto",
        "--baseline",
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("CPU: ")]
    assert len(lines) == 1, result.stdout
    assert any(f"CPU: {name}, layout " in lines[0] for name in auto_dtypes())
    assert "fastest lossless of" in lines[0] and "identical" in result.stdout
    report = json.loads(
        invoke(
            "run",
            "--target",
            "tiny-random-llama",
            "--no-chat",
            "--prompt",
            "a b a b a b",
            "-n",
            "6",
            "--dtype",
            "auto",
            "--json",
        ).stdout
    )
    assert report["cpu_layout"]["cached"] and report["dtype"] == report["cpu_layout"]["dtype"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--layout", "diagonal"], "'layout' must be auto or one of"),
        (["--dtype", "auto", "--layout", "mixed"], "measured too"),
        (["--dtype", "auto", "--device", "cuda"], "CPU only"),
        (["--dtype", "fp8"], "unknown dtype"),
    ],
)
def test_bad_layout_settings_are_one_line_errors(args, needle):
    assert_user_error(invoke("run", "--target", "tiny-random-llama", "--prompt", "hi", *args), needle)


def test_bad_layout_settings_in_a_sweep(tmp_path, prompts_file):
    raw = {**TINY_SWEEP, "workloads": [jsonl_workload(prompts_file, 1)]}
    for extra, needle in [
        ({"layout": "diagonal"}, "'layout' must be"),
        ({"dtype": "auto", "layout": "mixed"}, "measured too"),
        ({"layout": "auto", "backend": "vllm"}, "own engine"),
    ]:
        assert_user_error(invoke("sweep", write_sweep_yaml(tmp_path, {**raw, **extra}), "--dry-run"), needle)
