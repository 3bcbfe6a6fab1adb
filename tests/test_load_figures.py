"""Figures of a serving sweep with a load axis: nothing is pooled across load levels, speedup and latency
against load are drawn (and in the report), and no quantity the backend did not measure — a NaN draft or
verify time, a cost ratio c — is drawn as a number."""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest

from specbench.figures.families.costs import figure_heatmap, figure_time_split
from specbench.figures.families.gamma import figure_throughput
from specbench.figures.load_figures import figure_speedup_vs_load
from specbench.figures.plot import STYLE, FigureSkipped, figures_for
from specbench.figures.plot_data import load_plot_data
from specbench.figures.report_page import build_report
from tests.synthetic_results import SyntheticDrafter, write_results
from tests.synthetic_serving import as_dicts, serving_records

LEVELS = (1, 4)
N_BOOT = 20
NGRAM_TWO = SyntheticDrafter(
    name="ngram", params={"n_max": 3, "n_min": 1}, alpha=0.7, gammas=(1, 3), model_free=True, draft_fixed_s=0.0005
)


def different_speed(load, gamma):
    return {1: 1.5, 4: 0.8}[load] * (1 + 0.05 * gamma)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    frame = serving_records(LEVELS, different_speed, drafters=(NGRAM_TWO,), slowdown=1.0, n_prompts=6)
    folder = write_results(
        tmp_path_factory.mktemp("served") / "run",
        as_dicts(frame),
        {"sweep": {"name": "served", "target": "synthetic-target"}},
    )
    return frame, folder, load_plot_data(folder, n_boot=N_BOOT)


def _text(fig) -> str:
    return " ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


def test_gamma_figures_draw_one_panel_per_load_level_never_pooled(served):
    frame, _, data = served
    fig = figure_throughput(data)
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    titles = [ax.get_title() for ax in axes]
    assert len(titles) == len(LEVELS) and all(any(f"{c} in flight" in t for t in titles) for c in LEVELS)
    for ax in axes:
        level = next(c for c in LEVELS if f"{c} in flight" in ax.get_title())
        at = frame[frame["concurrency"] == level]
        base = at[at["gamma"] == 0]
        drawn_base = [line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == "--"]
        assert drawn_base[0] == pytest.approx(base["decode_tokens"].sum() / base["decode_s"].sum())
        for gamma in (1, 3):
            conf = at[at["gamma"] == gamma]
            own = conf["decode_tokens"].sum() / conf["decode_s"].sum()
            points = np.concatenate([c.lines[0].get_ydata() for c in ax.containers])
            assert np.isclose(points, own).any(), (level, gamma)  # this level's tokens/s, not the pooled mean
            pooled = frame[frame["gamma"] == gamma]
            assert not np.isclose(points, pooled["decode_tokens"].sum() / pooled["decode_s"].sum()).any()


def test_load_figures_are_drawn_and_in_the_report(served, tmp_path):
    _, folder, _ = served
    report = build_report(folder, tmp_path / "report", n_boot=N_BOOT, formats=("png",))
    by_name = {f.spec.name: f for f in report.figures}
    assert by_name["speedup_vs_load"].files and by_name["latency_vs_load"].files
    page = report.index.read_text()
    for needle in (
        "speedup_vs_load.png",
        "latency_vs_load.png",
        "Speculation against load",
        "The verdict at each load",
        "pays",
    ):
        assert needle in page, needle


def test_costs_a_serving_backend_did_not_measure_are_not_drawn(served):
    """round_time_split and the heat map used to draw vLLM's whole round as 'overhead' and c = 0.00."""
    _, _, data = served
    for build, needle in (
        (figure_time_split, "no per-round draft and verify times: backend vllm"),
        (figure_heatmap, "backend vllm reports no per-round draft and verify times"),
    ):
        with pytest.raises(FigureSkipped, match=needle):
            build(data)
    assert data.costs["cost_notes"].str.contains("costs not fitted, never invented").all()


def test_no_nan_is_drawn_as_a_number(served):
    _, _, data = served
    drawn = 0
    for spec in figures_for(data):
        try:
            with matplotlib.rc_context(STYLE):
                fig = spec.build(data)
        except FigureSkipped:
            continue
        drawn += 1
        text = _text(fig).lower()
        assert not re.search(r"\bnan\b|\binf\b", text), spec.name
        assert "c = 0.00" not in text, spec.name
    assert drawn >= 4


def test_speedup_vs_load_marks_the_crossover(served):
    _, _, data = served
    fig = figure_speedup_vs_load(data)
    markers = [line for ax in fig.axes for line in ax.lines if line.get_marker() == "v"]
    assert markers and all(line.get_ydata()[0] == 1.0 for line in markers)  # on the 1× line
    crossing = data.load["crossovers"][0]["per_request"]["point"]
    assert 1 < crossing < 4
    assert any(np.isclose(line.get_xdata()[0], np.log(crossing)) for line in markers)


def test_the_report_answers_latency_targets_against_load(served, tmp_path):
    """`plot --itl-p90 …`: the load section states, per workload and target, how far each configuration keeps it
    (the same answers `recommend --objective slo` gives); bad targets are one-line errors, exit 2."""
    from specbench.analysis.load.slo import make_slo, slo_answers
    from specbench.analysis.load.table import serving_table
    from specbench.figures.report import esc
    from tests.cli_helpers import invoke

    frame, folder, _ = served
    slo = make_slo("itl", 90, "40ms")
    report = build_report(folder, tmp_path / "report", n_boot=N_BOOT, formats=("png",), slos=[slo])
    page = report.index.read_text()
    expected = slo_answers(serving_table(frame, n_boot=N_BOOT), slo, "concurrency")
    assert expected and len(report.data.load["slo"]) == len(expected)
    for answer in expected:
        assert f"Latency target: {answer['workload']} · itl p90 ≤ 40 ms" in page
        for entry in answer["configurations"]:
            assert esc(entry["text"]) in page, entry["text"]
        assert esc(answer["text"]) in page
    assert (
        "Latency target"
        not in build_report(folder, tmp_path / "plain", n_boot=N_BOOT, formats=("png",)).index.read_text()
    )
    out = invoke(
        "plot", folder, "--out", tmp_path / "cli", "--format", "png", "--bootstrap", "40", "--slo", "latency-p99=3s"
    )
    assert out.exit_code == 0, out.output
    assert "· latency p99 ≤ 3000 ms against" in (tmp_path / "cli" / "index.html").read_text()
    bad = invoke("plot", folder, "--out", tmp_path / "bad", "--slo", "itl=4ms")
    assert bad.exit_code == 2 and "METRIC-pNN=DURATION" in bad.output and not (tmp_path / "bad").exists()
