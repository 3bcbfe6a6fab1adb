"""Quantization on llama.cpp: GGUF types as sweep values, the per-type table and the drop detector.

The drop detector is checked on planted records (a draft model's Q4_K_M copy with a much lower true α than its
Q8_0): `recommend` must name the drop with its interval, and say nothing where the types' intervals overlap
(identical acceptance: a property over generated records)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.recommendation.quantization import drops, type_table
from specbench.catalogue import gguf_types
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep import build_spec
from tests.cli_helpers import invoke
from tests.synthetic_results import (
    SyntheticDrafter,
    make_records,
    records_frame,
    write_results,
    write_synthetic_results,
)

TARGET = "smollm2-135m@F16"


def _typed(kind: str, alpha: float) -> SyntheticDrafter:
    return SyntheticDrafter(params={"model": f"smollm2-135m@{kind}"}, alpha=alpha, gammas=(3,))


def test_recommend_names_a_planted_drop_with_its_interval(tmp_path):
    folder = write_synthetic_results(
        tmp_path / "run", [_typed("Q8_0", 0.8), _typed("Q4_K_M", 0.2)], n_prompts=12, target=TARGET
    )
    result = invoke("recommend", folder)
    assert result.exit_code == 0, result.output
    assert "Quantization: per (target type, drafter type)" in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("drop:")]
    assert len(lines) == 1, result.output
    line = " ".join(result.output.split("drop:")[1].split())
    assert line.startswith("the Q4_K_M drafter accepts"), line
    assert "fewer tokens than its Q8_0 [" in line and "α ratio" in line and "12 prompts" in line
    assert "speculation pays with the Q8_0 drafter only" in line
    (rec,) = json.loads(invoke("recommend", folder, "--json").stdout)
    (drop,) = rec["quantization"]["drops"]
    assert (drop["lower"], drop["higher"], drop["pays"]) == ("Q4_K_M", "Q8_0", ["Q8_0"]) and drop["hi"] < 1
    assert [row["quant"] for row in rec["quantization"]["table"]] == ["Q8_0", "Q4_K_M"]


def test_a_target_set_prints_one_table_and_each_drop_names_its_target(tmp_path):
    """Two target types (a merged target set): one recommendation per type, but one table of all four pairs, and
    each drop says on which target it was measured."""
    drafters = [_typed("Q8_0", 0.8), _typed("Q4_K_M", 0.2)]
    records = [
        r
        for kind, seed in (("F16", 0), ("Q8_0", 1))
        for r in make_records(drafters, n_prompts=12, target=f"smollm2-135m@{kind}", seed=seed)
    ]
    result = invoke("recommend", write_results(tmp_path / "set", records))
    assert result.exit_code == 0, result.output
    assert result.output.count("Quantization: per (target type, drafter type)") == 1
    drop_lines = [" ".join(part.split()) for part in result.output.split("drop:")[1:]]
    assert len(drop_lines) == 2
    assert any("F16 target)" in line for line in drop_lines) and any("Q8_0 target)" in line for line in drop_lines)


def test_detector_gives_the_ratio_and_an_interval_below_one():
    records = records_frame(make_records([_typed("Q8_0", 0.8), _typed("Q4_K_M", 0.4)], n_prompts=10, target=TARGET))
    (drop,) = drops(records)
    assert (drop.lower, drop.higher, drop.gamma, drop.n_prompts) == ("Q4_K_M", "Q8_0", 3, 10)
    assert drop.lo <= drop.ratio <= drop.hi < 1
    assert 0.3 < drop.ratio < 0.7  # the true α ratio is 0.5
    table = type_table(records)
    assert list(table["quant"]) == ["Q8_0", "Q4_K_M"]  # widest first
    assert table["alpha"].iloc[0] > table["alpha"].iloc[1]


def test_recommend_says_nothing_when_intervals_overlap(tmp_path):
    folder = write_synthetic_results(
        tmp_path / "run", [_typed("Q8_0", 0.7), _typed("Q6_K", 0.7)], n_prompts=6, target=TARGET, seed=3
    )
    result = invoke("recommend", folder)
    assert result.exit_code == 0, result.output
    assert "drop: no drafter type accepts confidently fewer tokens than another" in result.output
    assert "fewer tokens than its" not in result.output


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    alpha=st.floats(0.2, 0.95),
    n_prompts=st.integers(2, 12),
    seed=st.integers(0, 10_000),
    kinds=st.lists(st.sampled_from(gguf_types.TYPES), min_size=2, max_size=3, unique=True),
)
def test_identical_acceptance_is_never_a_drop(alpha, n_prompts, seed, kinds):
    """The same rounds under two or three type names: every α ratio is 1, its interval holds 1, no drop."""
    base = make_records([_typed(kinds[0], alpha)], n_prompts=n_prompts, seed=seed, target=TARGET, baseline=False)
    copies = [
        {**r, "drafter_params": json.dumps({"model": f"smollm2-135m@{k}"}), "drafter_label": f"draft-model@{k}"}
        for k in kinds
        for r in base
    ]
    assert drops(records_frame(copies)) == []


@settings(max_examples=15, deadline=None, derandomize=True)
@given(alpha=st.floats(0.6, 0.95), factor=st.floats(0.2, 0.5), seed=st.integers(0, 10_000))
def test_a_halved_acceptance_is_always_found(alpha, factor, seed):
    records = records_frame(
        make_records([_typed("Q8_0", alpha), _typed("Q2_K", alpha * factor)], n_prompts=12, seed=seed, target=TARGET)
    )
    assert [(d.lower, d.higher) for d in drops(records)] == [("Q2_K", "Q8_0")]


# ----------------------------------------------------------------------------- sweep values

SWEEP = {
    "name": "quant",
    "target": "smollm2-135m",
    "backend": {"name": "llamacpp-server"},
    "drafters": [
        {"type": "draft-model", "params": {"model": "smollm2-135m"}},
        {"type": "ngram-simple", "params": {"size_n": 2}},
    ],
    "gammas": [3],
    "workloads": ["humaneval"],
}


def test_quantization_puts_the_target_at_a_type_and_each_draft_model_at_every_type():
    spec = build_spec({**SWEEP, "quantization": {"target": "q8_0", "drafters": ["Q8_0", "Q4_K_M", "Q2_K"]}})
    assert spec.target == "smollm2-135m@Q8_0"
    models = [d.params_dict.get("model") for d in spec.drafters]
    assert models == ["smollm2-135m@Q8_0", "smollm2-135m@Q4_K_M", "smollm2-135m@Q2_K", None]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"quantization": {"target": "Q9_K"}}, "unknown GGUF type 'Q9_K'"),
        (
            {"quantization": {"drafters": ["Q8_0"]}, "drafters": ["ngram-simple:size_n=2"]},
            "needs a drafter with a draft model",
        ),
        ({"quantization": {"target": "Q8_0"}, "backend": None, "drafters": ["ngram"]}, "does not run GGUF files"),
        ({"quantization": {"tagret": "Q8_0"}}, "unknown key 'tagret'"),
    ],
)
def test_quantization_refusals_are_one_line(change, needle):
    with pytest.raises(SpecbenchError, match=needle):
        build_spec({**SWEEP, **change})


def test_the_report_shows_the_quantization_table_and_the_drop(tmp_path):
    from specbench.figures.plot_data import load_plot_data
    from specbench.figures.report_sections.recommendation import recommendation_section

    folder = write_synthetic_results(
        tmp_path / "run", [_typed("Q8_0", 0.8), _typed("Q4_K_M", 0.2)], n_prompts=12, target=TARGET
    )
    html = recommendation_section(load_plot_data(folder, n_boot=50))
    assert "Quantization: per (target type, drafter type)" in html
    assert "draft-model(model=smollm2-135m) at Q4_K_M" in html and "<td>F16</td>" in html
    assert "drop: the Q4_K_M drafter accepts" in html and "than its Q8_0" in html


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) | st.sampled_from(gguf_types.TYPES),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(value=_ANY | st.fixed_dictionaries({}, optional={"target": _ANY, "drafters": _ANY}))
def test_any_quantization_value_is_a_spec_or_one_line(value):
    try:
        spec = build_spec({**SWEEP, "quantization": value})
    except SpecbenchError as exc:
        assert "\n" not in str(exc)
        return
    assert spec.target.startswith("smollm2-135m")
