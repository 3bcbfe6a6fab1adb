"""Context length as a decision axis (docs/context-length.md): the verdict per bin, the crossover length and its
words, the length-aware setting and its engine lines, the figure's data, on synthetic records with planted bin
effects."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.context.setting import ranges_of
from specbench.analysis.context.summary import context_summary
from specbench.analysis.context_bins import fit_by_context_bin
from specbench.analysis.load.crossover import crossover, describe
from specbench.analysis.recommendation.recommend import recommend
from specbench.figures.families.context import context_series, crossover_mark
from specbench.figures.plot import figures_for, render_figure
from specbench.figures.plot_data import load_plot_data
from specbench.records.summary import with_config_defaults
from tests.cli_helpers import invoke
from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_context_bin_records, write_results

DRAFTER = SyntheticDrafter(name="draft-model", gammas=(1, 2, 4), draft_step_s=0.004)
# planted: acceptance falls with the prompt's length, and verification costs a little more per bin
FALLING = {"1k": (1000, 0.85), "2k": (2000, 0.7), "4k": (4000, 0.35), "7k": (7000, 0.05)}
N_BOOT = 100


def _records(bins: dict = FALLING, n_prompts: int = 10, drafter: SyntheticDrafter = DRAFTER) -> list[dict]:
    """One long-context sweep over ``bins`` (label: (prompt tokens, true α)), each bin with its own costs."""
    records = []
    for i, (label, (tokens, alpha)) in enumerate(bins.items()):
        costs = SyntheticCosts(verify_a_s=0.020 * (1 + tokens / 20000))
        records += make_context_bin_records(
            {label: (tokens, [replace(drafter, alpha=alpha)])},
            n_prompts=n_prompts,
            max_new_tokens=48,
            costs=costs,
            seed=10 * i,
        )
    return records


def _summary(records: list[dict]) -> list[dict]:
    frame = with_config_defaults(pd.DataFrame(records))
    by_bin = recommend(frame, n_boot=N_BOOT, by_context=True)
    pooled = recommend(frame, n_boot=N_BOOT)
    return context_summary(frame, by_bin, pooled, n_boot=N_BOOT)


@cache
def _falling() -> dict:
    """The planted sweep's summary (one scenario), computed once for the tests that read it."""
    (entry,) = _summary(_records())
    return entry


def test_each_bin_gets_its_own_verdict_by_the_sweeps_rule():
    frame = with_config_defaults(pd.DataFrame(_records()))
    by_bin = recommend(frame, n_boot=N_BOOT, by_context=True)
    assert sorted(r.keys["context_bin"] for r in by_bin) == ["1k", "2k", "4k", "7k"]  # pooled: one verdict
    answers = {r.keys["context_bin"]: r.decision for r in by_bin}
    assert answers["1k"].confident and answers["1k"].says_yes and answers["1k"].option.gamma == 4
    assert answers["7k"].confident and answers["7k"].says_no  # α 0.05: a draft model's round never pays
    bins = _falling()["bins"]
    assert [b["context_bin"] for b in bins] == ["1k", "2k", "4k", "7k"]  # shortest first
    assert [round(b["prompt_tokens"], -3) for b in bins] == [1000, 2000, 4000, 7000]
    assert bins[0]["alpha_lo"] < 0.85 < bins[0]["alpha_hi"] and bins[0]["tau_lo"] < bins[0]["tau"] < bins[0]["tau_hi"]
    assert bins[0]["alpha"] > bins[2]["alpha"]
    assert bins[0]["round_s"] > bins[0]["baseline_round_s"] > 0 and bins[0]["cost_source"] == "measured"
    assert bins[3]["baseline_round_s"] > bins[0]["baseline_round_s"]  # the planted cost growth, measured


def test_the_crossover_length_lies_where_the_planted_speedup_crosses_one():
    line = _falling()["crossover"]
    assert (line["drafter_label"], line["gamma"]) == (DRAFTER.label, 4)  # the verdict's at the shortest bin
    c = line["crossover"]
    ratios = c["ratios"]
    first_below = next(i for i, r in enumerate(ratios) if r < 1)
    assert c["loads"][first_below - 1] < c["point"] < c["loads"][first_below]
    assert c["lo"] <= c["point"] <= c["hi"]
    assert "pays up to about" in line["text"] and "prompt tokens [95 %:" in line["text"]


def test_beyond_the_crossover_the_shorter_gamma_or_none_is_named():
    line = _falling()["crossover"]
    shorter = line["shorter"]
    assert shorter["gamma"] < line["gamma"] and shorter["crossover"]["point"] > line["crossover"]["point"]
    assert line["none_beyond"] == shorter["none_beyond"] == shorter["crossover"]["point"]
    (alone,) = _summary(_records(n_prompts=6, drafter=replace(DRAFTER, gammas=(4,))))
    line = alone["crossover"]
    assert line["shorter"] is None and line["none_beyond"] == line["crossover"]["point"] is not None


def test_the_crossover_words_speak_of_lengths():
    lengths = [1000, 2000, 4000]
    every = crossover(lengths, [2.0, 1.8, 1.5], [1.7, 1.5, 1.2], [2.3, 2.1, 1.8])
    assert describe(every, "prompt tokens", level="length") == (
        "pays at every length measured (up to 4,000 prompt tokens; with confidence at every one)"
    )
    none = crossover(lengths, [0.8, 0.7, 0.6], [0.7, 0.6, 0.5], [0.9, 0.8, 0.7])
    assert describe(none, "prompt tokens", level="length").startswith(
        "pays at no length measured (below 1 already at 1,000 prompt tokens; with confidence)"
    )
    assert describe(every, "requests in flight").startswith("pays at every load measured")  # the load axis' words


def test_the_length_aware_setting_turns_speculation_off_only_where_a_bin_says_no():
    setting = _falling()["setting"]
    levels = {e["context_bin"]: e for e in setting["levels"]}
    assert levels["1k"]["K"] == 4 and not levels["1k"]["predicted"]
    assert levels["7k"]["K"] == 0 and not levels["7k"]["predicted"]  # a confident no, not a guess
    ranges = setting["ranges"]
    assert ranges[0][0] == 0 and ranges[-1][1] is None and ranges[-1][2] == 0
    cut = ranges[-1][0]
    assert 4000 < cut < 7000  # between the 4k bin's longest prompt and the 7k bin's shortest
    own, *engines = setting["lines"]
    assert own.startswith("specbench's own engine") and "--gamma 4" in own and "--gamma 0 (no speculation)" in own
    vllm = next(line for line in engines if line.startswith("vLLM:"))
    llamacpp = next(line for line in engines if line.startswith("llama.cpp:"))
    for line in (vllm, llamacpp):
        assert "cannot take γ per context length" in line
        assert f"send prompts of {cut:,} tokens or more to a pool without speculation" in line


def test_no_setting_and_no_crossover_claims_where_nothing_is_confident():
    (entry,) = _summary(_records({"1k": (1000, 0.05), "4k": (4000, 0.05)}))
    lines = entry["setting"]["lines"]
    assert entry["setting"]["ranges"] == [] and "confident no in every bin" in lines[0]
    assert any(line.startswith("vLLM: cannot take γ per context length; nearest: the verdict") for line in lines)
    assert "at no length measured" in entry["crossover"]["text"]
    own = [line for line in lines if line.startswith("specbench's own engine")]
    assert len(own) == 1 and "every length: --gamma 0 (no speculation)" in own[0], lines


def test_without_a_confident_bin_the_own_engine_still_gets_the_pooled_gamma():
    """Few prompts per bin leave every bin open while the bins pooled are a confident yes: no γ per range, but the
    own engine's line names the pooled verdict's γ for every length (as the other engines' lines do)."""
    (entry,) = _summary(_records({"1k": (1000, 0.85), "2k": (2000, 0.85), "4k": (4000, 0.85)}, n_prompts=2))
    assert all(not b["confident"] for b in entry["bins"]), entry["bins"]
    lines = entry["setting"]["lines"]
    assert "no bin has a confident yes" in lines[0]
    own = [line for line in lines if line.startswith("specbench's own engine")]
    assert len(own) == 1 and "every length: --drafter draft-model --gamma " in own[0], lines


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=8),
    st.lists(st.integers(1, 500), min_size=8, max_size=8),
)
def test_ranges_cover_every_length_once_and_keep_each_bins_gamma(ks, steps):
    cuts = list(pd.Series(steps[: len(ks) - 1]).cumsum() + 100)
    ranges = ranges_of(cuts, ks)
    assert ranges[0][0] == 0 and ranges[-1][1] is None
    for before, after in zip(ranges, ranges[1:]):
        assert after[0] == before[1] + 1 and before[2] != after[2]  # contiguous; equal neighbours merged
    for i, k in enumerate(ks):  # every bin's first length falls in a range with its K
        start = 0 if i == 0 else cuts[i - 1]
        (holder,) = [r for r in ranges if r[0] <= start and (r[1] is None or start <= r[1])]
        assert holder[2] == k


def test_recommend_prints_a_verdict_per_bin_and_the_context_section(tmp_path):
    folder = write_results(tmp_path / "run", _records(n_prompts=6))
    result = invoke("recommend", folder, "--bootstrap", "40", "--engine", "all")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "context bin 1k" in text and "context bin 7k" in text  # one panel per bin, not one pooled verdict
    assert "verdict per context-length bin" in text and "crossover length" in text
    assert "length-aware setting" in text and "vLLM: cannot take γ per context length" in text
    data = json.loads(invoke("recommend", folder, "--bootstrap", "40", "--json").stdout)
    assert sorted(d["context_bin"] for d in data) == ["1k", "2k", "4k", "7k"]
    assert all(d["context"]["setting"]["ranges"] for d in data)


def test_the_figure_data_hold_every_gamma_per_bin_and_mark_the_crossover():
    entry = _falling()
    frame = with_config_defaults(pd.DataFrame(_records()))
    lines = context_series(entry, fit_by_context_bin(frame, n_boot=0))
    assert sorted(s["gamma"] for s in lines) == [1, 2, 4]
    for s in lines:
        assert s["bins"] == ["1k", "2k", "4k", "7k"] and s["x"] == sorted(s["x"])
        assert all(lo <= v <= hi for v, lo, hi in zip(s["speedup"], s["lo"], s["hi"]))
        assert s["alpha"][0] > s["alpha"][-1]  # the planted fall, per γ
    mark = crossover_mark(entry)
    assert mark["gamma"] == 4 and mark["lo"] <= mark["point"] <= mark["hi"]
    four = next(s for s in lines if s["gamma"] == 4)
    assert four["x"][0] < mark["point"] < four["x"][-1]


def test_the_report_draws_the_context_figure_only_for_several_bins(tmp_path):
    many = load_plot_data(write_results(tmp_path / "many", _records(n_prompts=4)), n_boot=40)
    assert "speedup_vs_context" in [f.name for f in figures_for(many)]
    spec = next(f for f in figures_for(many) if f.name == "speedup_vs_context")
    drawn = render_figure(spec, many, tmp_path, ("png",))
    assert drawn.skipped is None and drawn.files["png"].stat().st_size > 10_000
    one = [r for r in _records(n_prompts=4) if r["context_bin"] == "1k"]
    assert "speedup_vs_context" not in [
        f.name for f in figures_for(load_plot_data(write_results(tmp_path / "one", one), n_boot=40))
    ]


def test_a_panel_without_a_crossing_says_which_side_its_speedup_stays_on():
    from specbench.figures.families.context import no_crossing_title

    def entry(**crossing) -> dict:
        base = {"point": None, "lo": None, "below_all": False, "lo_at_first": False}
        return {"crossover": {"drafter_label": "ngram", "gamma": 4, "crossover": {**base, **crossing}}}

    assert (
        no_crossing_title(entry(lo=2643.5))
        == "ngram γ=4 pays at every length measured; confidently up to about 2,644 tokens"
    )
    assert no_crossing_title(entry()) == "ngram γ=4 pays at every length measured"
    assert no_crossing_title(entry(below_all=True)) == "ngram γ=4 pays at no length measured"
