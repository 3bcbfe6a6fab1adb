"""Every panel of one output reads the same records by the same rule.

A synthetic vLLM concurrency sweep (MT-Bench, 8 prompts × 2 turns, γ 2 and 4, 1–8 requests in flight) whose
timed batches (one per configuration, load and turn: 24) were 16 times disturbed, in the patterns that made
the panels disagree before: a configuration disturbed at one load and clean at another, a baseline
disturbed at a whole load, pairs whose clean units fall on different turns. For every load, the main verdict,
the per-load table, the per-load verdict, the crossover line, the stopping history's last line, `results show`,
the JSON and the figures must name the same configuration with the same answer; every speedup the table and
`results show` print for a configuration is the one the verdict judged. The last test replaces the one selection
(`specbench.records.timing.paired_timing`) in one panel by a selection of its own, and checks that the
agreement check then fails.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from specbench.analysis.load.verdicts import for_scenario, summary
from specbench.analysis.recommendation.recommend import recommend, to_json
from specbench.analysis.verdicts.decision import describe_best
from specbench.analysis.verdicts.stopping_history import WorkloadHistory
from specbench.analysis.verdicts.stopping_report import interval_text, workload_line
from tests.synthetic_results import SyntheticDrafter
from tests.synthetic_serving import as_dicts, serving_records

LOADS = (1, 2, 4, 8)
NGRAM = SyntheticDrafter(
    name="ngram", params={"n_max": 3, "n_min": 1}, alpha=0.7, gammas=(2, 4), model_free=True, draft_fixed_s=0.0005
)
# (load, γ, turn) batches timed beside a busy process: 16 of the 24
DISTURBED = {
    (1, 0, 2),
    (1, 4, 1),
    (1, 4, 2),  # γ 4 never clean at 1; γ 2 clean on turn 1 only
    (2, 0, 1),
    (2, 0, 2),
    (2, 2, 1),
    (2, 2, 2),  # the baseline disturbed at the whole load
    (4, 0, 2),
    (4, 2, 1),
    (4, 4, 2),  # γ 2's clean turn meets a disturbed baseline turn
    *((8, g, t) for g in (0, 2, 4) for t in (1, 2)),
}  # everything at 8


def truth(load, gamma):
    return {2: 1.35, 4: 1.25}[gamma] * load**-0.2


def disturbed_sweep(seed: int = 3) -> pd.DataFrame:
    frame = serving_records(LOADS, truth, drafters=(NGRAM,), n_prompts=8, turns=2, seed=seed, noise=0.08)
    hit = [
        (int(c), int(g), int(t)) in DISTURBED for c, g, t in zip(frame["concurrency"], frame["gamma"], frame["turn"])
    ]
    frame.loc[hit, "timing_ok"] = False
    assert frame.groupby("batch_id")["timing_ok"].first().value_counts().to_dict() == {False: 16, True: 8}
    return frame


def named(rec) -> tuple:
    best = rec.decision.best
    return (None, None, None) if best is None else (best.drafter_label, best.tree, best.gamma)


def check_agreement(frame: pd.DataFrame) -> dict:
    """Assert that every panel agrees, load by load; returns what it built (for further checks)."""
    recs = sorted(recommend(frame, n_boot=0), key=lambda r: r.keys["concurrency"])
    load = summary(frame, recs, n_boot=0)
    table = pd.DataFrame(load["table"])
    verdicts = {v.load: v.as_dict() for v in load["verdicts"]}
    assert sorted(verdicts) == list(LOADS)
    for rec in recs:
        level, decision = rec.keys["concurrency"], rec.decision
        rows = table[(table["concurrency"] == level) & (table["gamma"] > 0)]
        # the table shows each configuration with the numbers the verdict judged (same pairs, same rule)
        candidates = {(c.drafter_label, c.tree, c.gamma): c for c in decision.candidates}
        for _, row in rows.iterrows():
            key = (row["drafter_label"], row["tree"], row["gamma"])
            assert key in candidates, f"{level} in flight: the table shows {key}, the verdict never judged it"
            c = candidates[key]
            assert bool(row["timing_disturbed"]) == bool(c.timing_disturbed), (level, key)
            np.testing.assert_allclose(
                [row["speedup"], row["speedup_lo"], row["speedup_hi"]],
                [c.speedup, c.lo, c.hi],
                rtol=1e-9,
                err_msg=f"{level} {key}",
            )
        assert len(candidates) == len(rows), f"{level} in flight: the verdict judged what the table does not show"
        # one configuration named per load, the same in every panel, with the same answer
        marked = rows[rows["verdict_named"]]
        assert [tuple(r) for r in marked[["drafter_label", "tree", "gamma"]].itertuples(index=False)] == [named(rec)]
        v = verdicts[level]
        assert v["answer"] == decision.answer and v["confident"] == decision.confident
        assert (v["named"]["drafter_label"], v["named"]["tree"], v["named"]["gamma"]) == named(rec)
        assert v["headline"] == rec.headline() == decision.headline()
        assert describe_best(decision.best) in rec.verdict and describe_best(decision.best) in v["short"]
        assert "nothing to compare" not in rec.verdict
    # `results show` (its speedup column and its ★) reads the same pairs and names the same configuration
    from specbench.cli.results_cmd import mark_recommended, show_rows, summary_table
    from specbench.records.summary import with_config_defaults

    shown = show_rows(*summary_table(with_config_defaults(frame)))  # as load_records gives them
    mark_recommended(shown, recs)
    for row in (r for r in shown if r["gamma"] > 0):
        rec = next(r for r in recs if r.keys["concurrency"] == row["concurrency"])
        c = next(c for c in rec.decision.candidates if c.gamma == row["gamma"])
        assert row["speedup"] == pytest.approx(c.speedup, rel=1e-9), (row["concurrency"], row["gamma"])
        assert row["recommended"] == (rec.final is not None and rec.final.gamma == row["gamma"])
    # the crossover line follows the configuration the verdict at the lowest load names
    (line,) = load["lines"]
    assert (line["drafter_label"], line["tree"], line["gamma"]) == named(recs[0])
    assert f"at {LOADS[0]} in flight" in line["text"]
    # ... and its words follow the intervals
    crossing = next(c for c in load["crossovers"] if (c["drafter_label"], c["tree"], c["gamma"]) == named(recs[0]))
    lows = crossing["per_request"]["lows"]
    if "pays at every load measured" in line["text"]:
        assert all(lo > 1 for lo in lows)
    if not any(lo > 1 for lo in lows if lo is not None):
        assert line["text"].split(" per request")[0].count("cannot tell") == 1
    # the stopping history's last line: each load's answer beside its own interval, the load named
    scenarios = [{"keys": {k: v for k, v in r.keys.items() if k != "workload"}, **r.decision.as_dict()} for r in recs]
    entry = {
        "status": "budget",
        "planned": [8],
        "looks": [
            {
                "look": 1,
                "prompts": 8,
                "answer": "mixed",
                "best": scenarios[0]["best"],
                "scenarios": scenarios,
                "prompts_needed": None,
            }
        ],
    }
    last = workload_line("mt-bench", WorkloadHistory.from_dict("mt-bench", entry))
    body = last.split(" — ", 1)[1].rsplit("; ", 1)[0]  # after the status, before what would settle it
    parts = dict(re.match(r"at (\d+) in flight: (.*)", p).groups() for p in re.split(r"; (?=at \d+ in flight: )", body))
    assert sorted(map(int, parts)) == list(LOADS), last
    for rec in recs:
        phrase = parts[str(rec.keys["concurrency"])]
        assert describe_best(rec.decision.best) in phrase
        assert interval_text(rec.decision.best, rec.decision.answer) in phrase
    # the JSON: one recommended configuration per load, the verdict's
    data = json.loads(to_json(recs, [for_scenario(load, r.keys) for r in recs]))
    for d, rec in zip(data, recs):
        assert d["headline"] == rec.headline() and d["load"]["verdicts"][0]["headline"] == rec.headline()
        if d["recommended"] is not None:
            assert (d["recommended"]["drafter_label"], d["recommended"]["tree"], d["recommended"]["gamma"]) == named(
                rec
            )
    return {"recs": recs, "load": load}


@pytest.fixture(scope="module")
def agreed():
    frame = disturbed_sweep()
    return frame, check_agreement(frame)


def test_every_panel_names_the_same_configuration_with_the_same_answer(agreed):
    _, built = agreed
    recs = built["recs"]
    by_level = {r.keys["concurrency"]: r for r in recs}
    assert not by_level[8].decision.confident and by_level[8].final is None  # all disturbed: never confident
    assert not by_level[2].decision.confident  # its baseline ran beside a busy process throughout
    # γ 4 was never timed clean at 1 in flight: it is listed, left out of the answer, and the verdict says so
    one = by_level[1].decision
    assert any(c.gamma == 4 and c.timing_disturbed for c in one.candidates) and named(by_level[1])[2] == 2
    assert "left out" in one.text


def test_figures_read_the_same_verdicts(agreed, tmp_path):
    from specbench.figures.families.gamma import recommendation_caption
    from specbench.figures.load_figures import _configurations, _named, figure_speedup_vs_load
    from specbench.figures.plot_data import find_recommendation, load_plot_data
    from tests.synthetic_results import write_results

    frame, built = agreed
    folder = write_results(tmp_path / "served", as_dicts(frame), {"sweep": {"name": "served", "target": "t"}})
    data = load_plot_data(folder, n_boot=40)
    headlines = {r.keys["concurrency"]: r.headline() for r in built["recs"]}
    assert {r.keys["concurrency"]: r.headline() for r in data.recommendations} == headlines
    fig = figure_speedup_vs_load(data)
    title = " ".join(ax.get_title() for ax in fig.axes).replace("\n", " ")
    for level, headline in headlines.items():
        assert f"{level}: {headline}".replace("\n", " ") in title, (level, headline, title)
    part = pd.DataFrame(data.load["table"])
    scenario = {"workload": "mt-bench"}
    first = _configurations(part, "concurrency", _named(data, scenario))[0]
    assert first == named(built["recs"][0])
    for rec in data.recommendations:  # the γ figure's panel titles
        assert recommendation_caption(find_recommendation(data, rec.keys)).startswith(rec.headline())


def test_the_check_fails_when_one_panel_selects_its_own_records(monkeypatch):
    """Give the per-load table (then the verdict, then `results show`'s table) a selection of its own — each side's
    undisturbed units, as the panels had before — and the agreement check must fail."""
    import specbench.analysis.load.table as load_module
    import specbench.analysis.recommendation.measured as measured_module
    import specbench.records.summary as summary_module  # `results show`'s table
    from specbench.records.timing import PairedUnits, paired_timing

    def own_selection(config, base):
        ok_c, ok_b = config["timing_ok"].astype(bool), base["timing_ok"].astype(bool)
        if ok_c.any() and ok_b.any():
            config, base = config[ok_c], base[ok_b]
        return paired_timing(config.assign(timing_ok=True), base.assign(timing_ok=True))

    frame = disturbed_sweep()
    for module in (load_module, measured_module, summary_module):
        with monkeypatch.context() as patch:
            patch.setattr(module, "paired_timing", own_selection)
            with pytest.raises(AssertionError):
                check_agreement(frame)
    assert isinstance(paired_timing(frame.iloc[:2], frame.iloc[:2]), PairedUnits)
