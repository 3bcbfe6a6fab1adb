"""`specbench confirm` across context-length thresholds (docs/context-length.md): on records whose length-aware
setting changes γ between two bins, the confirmation targets each bin on either side, each with that bin's verdict
as its prediction and fresh prompts of that bin only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from specbench.analysis.context.setting import threshold_bins
from specbench.measure.grid.sweep import build_spec
from specbench.measure.run.confirm import ConfirmSettings, plan_confirmation
from specbench.measure.run.runner import run_info
from specbench.workloads.catalog import load_workload
from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_context_bin_records, write_results

PAIRS = 8  # (document, task) pairs the sweep asks, in both bins


def _workload(folder: Path) -> Path:
    """A long-context workload of 12 (document, task) pairs cut to two short bins (the tiny model's window)."""
    path = folder / "lc.yaml"
    path.write_text(
        "name: lc\nchat: true\nmax_new_tokens: 8\nlong_context:\n  tolerance: 0.1\n  bins: {a: 200, b: 400}\n"
        '  tasks: {summarise: "{document}\\n\\nSummarise it.", answer: "{document}\\n\\nWhat is it?"}\n'
        "  documents: [{source: python-stdlib, count: 6, seed: 0, min_chars: 3000, exclude: ['test/*']}]\n"
    )
    return path


def _results(folder: Path, alphas: dict[str, float]) -> Path:
    """RESULTS of a sweep (a draft-free ngram at γ 1 and 4 on the tiny target) whose records plant α per bin."""
    workload = _workload(folder)
    raw = {
        "name": "lengths",
        "target": "tiny-random-llama",
        "ignore_eos": True,
        "max_new_tokens": 12,
        "drafters": [{"type": "ngram"}],
        "gammas": [1, 4],
        "temperatures": [0.0],
        "timing": {"order": "bracket", "warmup_s": 0, "retries": 0},
        "workloads": [{"name": str(workload), "count": PAIRS}],
    }
    (folder / "sweep.yaml").write_text(yaml.safe_dump(raw))
    spec = build_spec(raw)
    pool = load_workload(str(workload), count=PAIRS, seed=spec.seed)
    drafter = SyntheticDrafter(name="ngram", params={}, model_free=True, gammas=(1, 4), draft_step_s=0.0)
    drafter = replace(drafter, draft_fixed_s=0.004)  # an expensive lookup: low acceptance loses
    records = make_context_bin_records(
        {b: (200 * (i + 1), [replace(drafter, alpha=a)]) for i, (b, a) in enumerate(alphas.items())},
        n_prompts=PAIRS,
        workload=pool.name,
        target="tiny-random-llama",
        costs=SyntheticCosts(noise=0.02),
        max_new_tokens=12,
    )
    ids = {b: [p.prompt_id for p in pool.prompts if p.context_bin == b] for b in alphas}
    for record in records:
        label = record["context_bin"]
        record["prompt_id"] = ids[label][int(record["prompt_id"].rsplit("/q", 1)[1])]
    results = folder / "results"
    write_results(results, records, run_info(spec, None, (0, 1)))
    return results


def test_threshold_bins_are_the_bins_around_each_change_of_gamma_or_the_two_ends():
    def setting(*ks):
        return {"levels": [{"context_bin": f"b{i}", "K": k} for i, k in enumerate(ks)]}

    assert threshold_bins(setting(4, 4, 2, 0)) == ["b1", "b2", "b3"]
    assert threshold_bins(setting(3, 3, 3)) == ["b0", "b2"]  # one K at every length: both ends of that claim
    assert threshold_bins(setting(3)) == []
    assert threshold_bins({"levels": []}) == []


def test_confirm_targets_both_sides_of_a_length_threshold_with_fresh_prompts_of_each_bin(tmp_path):
    results = _results(tmp_path, {"a": 0.9, "b": 0.02})
    plan = plan_confirmation(results, ConfirmSettings(first=2, batch=2, max_prompts=4))
    names = sorted(t.workload for t in plan.targets)
    assert names == ["lc:bin=a", "lc:bin=b"], (names, plan.notes)
    sides = {t.workload: t for t in plan.targets}
    yes, no = sides["lc:bin=a"], sides["lc:bin=b"]
    assert yes.prediction is not None and yes.prediction.answer.value == "confident yes" and yes.chosen.gamma == 4
    assert no.prediction is not None and no.prediction.answer.value == "confident no"
    swept = {p.prompt_id for p in load_workload(str(tmp_path / "lc.yaml"), count=PAIRS, seed=0).prompts}
    for name, label in (("lc:bin=a", "a"), ("lc:bin=b", "b")):
        fresh = plan.workloads[name].prompts
        assert fresh and {p.context_bin for p in fresh} == {label}  # the bin's own lengths
        assert not {p.prompt_id for p in fresh} & swept  # never a prompt the sweep used
    report = plan.report()  # recommend --json attaches both sides to the pooled workload, one side to its bin
    assert sorted(t.target.workload for t in report.for_workload("lc")) == ["lc:bin=a", "lc:bin=b"]
    assert [t.target.workload for t in report.for_workload("lc:bin=a")] == ["lc:bin=a"]
    assert report.for_workload("lc2") == []


def test_one_gamma_at_every_length_is_confirmed_at_the_shortest_and_the_longest_bin(tmp_path):
    """ "γ pays at every length measured" is a claim about both ends of the range: each end bin is a target with
    that bin's verdict and its own fresh prompts, in place of the pooled workload."""
    results = _results(tmp_path, {"a": 0.9, "b": 0.9})
    plan = plan_confirmation(results, ConfirmSettings(first=2, batch=2, max_prompts=4))
    assert sorted(t.workload for t in plan.targets) == ["lc:bin=a", "lc:bin=b"], plan.notes
    assert {t.chosen.gamma for t in plan.targets} == {4}
    assert all(t.prediction is not None and t.prediction.answer.value == "confident yes" for t in plan.targets)
