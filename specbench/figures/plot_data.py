"""What every figure reads: `PlotData` (a results folder's records, fits, recommendations and notes, loaded
once by `load_plot_data`), its scenarios and series, and the checks that skip a figure whose data are absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.analysis.context.summary import context_summary, has_context_axis
from specbench.analysis.context_bins import fit_by_context_bin
from specbench.analysis.cost.round_cost import fit_group_costs, group_cost_fits
from specbench.analysis.fit import (
    fit_acceptance,
    fits_frame,
    goodness_frame,
    load_results,
    positions_frame,
    tau_intervals,
)
from specbench.analysis.load.goodput import goodput_answers
from specbench.analysis.load.operating import operating, price_of
from specbench.analysis.load.slo import Slo, slo_answers
from specbench.analysis.load.table import LOAD_KEYS, has_load_axis, load_keys, normalised, serving_table
from specbench.analysis.load.verdicts import summary as load_summary
from specbench.analysis.options import MAX_GAMMA
from specbench.analysis.recommendation.confirm_report import Report as ConfirmationReport
from specbench.analysis.recommendation.confirm_report import load_report as load_confirmation
from specbench.analysis.recommendation.recommend import OBJECTIVES, recommend
from specbench.analysis.statistics.intervals import LEVEL, N_BOOT
from specbench.analysis.verdicts.stopping_history import History, load_history
from specbench.errors import SpecbenchError
from specbench.figures.palette import CHAIN, Palette
from specbench.figures.skipped import FigureSkipped
from specbench.records.store import load_run_info
from specbench.records.summary import (
    BASELINE_KEYS,
    configuration_table,
    fixed_schedule,
    is_baseline,
    lossless_check,
    prefer_live,
)

SCENARIO_KEYS = BASELINE_KEYS  # target, temperature, top_p, top_k, workload
SERIES_KEYS = ["drafter_label", "tree"]


CI = f"{LEVEL:.0%} CI"


@dataclass
class PlotData:
    """Everything the figures and the report read, computed once from a results folder."""

    folder: Path
    run_info: dict
    records: pd.DataFrame
    configs: pd.DataFrame  # summary.configuration_table of live records
    taus: pd.DataFrame  # fit.tau_intervals (a unit once, live preferred): τ per configuration, interval
    fits: pd.DataFrame  # fit.fits_frame per (target, drafter, tree, workload, sampling)
    positions: pd.DataFrame  # fit.positions_frame
    goodness: pd.DataFrame  # fit.goodness_frame
    category_fits: pd.DataFrame  # fits_frame by category, workloads with ≥ 2 categories
    costs: pd.DataFrame  # cost.fit_group_costs
    cost_fits: list  # cost.group_cost_fits: (keys, CostFit | None)
    recommendations: list  # recommend.Recommendation per scenario with a baseline
    lossless: pd.DataFrame  # summary.lossless_check
    palette: Palette
    max_gamma: int
    objective: str
    notes: list[str] = field(default_factory=list)
    context_bins: pd.DataFrame = field(default_factory=pd.DataFrame)  # context_bins.fit_by_context_bin
    history: History | None = None  # an adaptive sweep's stopping history (analysis.verdicts.stopping_history)
    load: dict | None = None  # a serving sweep with a load axis: analysis.load.verdicts.summary (None: one load)
    # goodput, cost and energy per load (analysis.load.operating.Operating.as_dict, with "goodput": the goodput
    # objective's answers); None without live records or with nothing to say (one load, no price, no energy)
    operating: dict | None = None
    confirmation: ConfirmationReport | None = None  # `specbench confirm`'s report (None: not confirmed)
    # records spanning two or more context-length bins: analysis.context.summary.context_summary (None otherwise)
    context: list[dict] | None = None


def default_max_gamma(records: pd.DataFrame) -> int:
    """Largest γ the model curves and the heat map reach: twice the largest measured, 8 to MAX_GAMMA."""
    measured = int(records["gamma"].max()) if len(records) else 0
    return int(min(MAX_GAMMA, max(8, 2 * measured)))


def category_workloads(spec: pd.DataFrame) -> list[str]:
    """Workloads whose speculative records span at least two categories (MT-Bench's eight)."""
    counts = spec.dropna(subset=["category"]).groupby("workload")["category"].nunique()
    return sorted(str(w) for w in counts[counts >= 2].index)


def load_plot_data(
    folder: str | Path,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    max_gamma: int | None = None,
    objective: str = "throughput",
    hub_ids: Mapping[str, str] | None = None,
    slos: Sequence[Slo] = (),
    price_per_hour: float | None = None,
) -> PlotData:
    """Load a results folder and compute every table the figures use (``hub_ids``: model spec → Hugging Face
    id, how the engine settings name models; ``slos``: latency targets whose answers a serving sweep's load
    summary carries, `specbench.analysis.load.slo`, and whose goodput `specbench.analysis.load.operating` measures;
    ``price_per_hour``: the machine's price, for the cost per token (default: the sweep's key)).

    Raises `SpecbenchError` for a missing folder, a folder without run.json or without records.
    Missing parts (no speculative records, no baseline) leave empty tables and a note: the
    figures that need them are skipped, never an error.
    """

    if objective not in OBJECTIVES:
        raise SpecbenchError(f"unknown objective '{objective}' (choose from: {', '.join(OBJECTIVES)})")
    folder = Path(folder)
    records = load_results(folder)
    run_info = load_run_info(folder)
    max_gamma = max_gamma or default_max_gamma(records)
    notes: list[str] = []
    spec = records[~is_baseline(records) & (records["gamma"] > 0)]
    fits = positions = goodness = category_fits = pd.DataFrame()
    if spec.empty:
        notes.append("no speculative records (γ ≥ 1): acceptance figures and tables are empty")
    else:
        accepted = fit_acceptance(records, n_boot=n_boot, seed=seed)
        fits, positions, goodness = fits_frame(accepted), positions_frame(accepted), goodness_frame(accepted)
        with_categories = category_workloads(spec)
        if with_categories:
            subset = records[records["workload"].isin(with_categories)]
            category_fits = fits_frame(fit_acceptance(subset, by=["category"], n_boot=n_boot, seed=seed))
    history = load_history(folder)  # an adaptive sweep is judged the way it stopped (analysis.statistics.sequential)
    plans = history.plans() if history else {}
    try:
        recommendations = recommend(
            records, objective=objective, max_gamma=max_gamma, n_boot=n_boot, seed=seed, plans=plans, hub_ids=hub_ids
        )
    except SpecbenchError as exc:
        recommendations = []
        notes.append(f"no recommendation: {exc}")
    context = None
    if recommendations and has_context_axis(records):  # a verdict per context-length bin
        how = dict(objective=objective, max_gamma=max_gamma, n_boot=n_boot, seed=seed, plans=plans, hub_ids=hub_ids)
        by_bin = recommend(records, by_context=True, **how)
        context = context_summary(records, by_bin, recommendations, n_boot=n_boot, seed=seed)
    levels = load_keys(records)  # timings per load level, never pooled across levels (acceptance is pooled)
    live = normalised(records) if levels else records[records["mode"] == "live"]
    load = None
    if has_load_axis(records):
        table = serving_table(records, n_boot=n_boot, seed=seed)
        load = load_summary(records, recommendations, hub_ids=hub_ids, n_boot=n_boot, seed=seed, table=table)
        load["slo"] = [answer for slo in slos for answer in slo_answers(table, slo, load["axis"])]
    elif slos:
        notes.append("latency targets need a sweep with a load axis (--concurrency or --request-rate): no SLO section")
    price = price_of(price_per_hour, run_info)
    costs = None
    live_records = records[records["mode"] == "live"]
    measured = "energy_j" in live_records and live_records["energy_j"].notna().any()
    if len(live_records) and (load is not None or price is not None or measured):
        op = operating(records, slos=slos if load is not None else (), price_per_hour=price, n_boot=n_boot, seed=seed)
        costs = {**op.as_dict(), "goodput": goodput_answers(op, load["axis"]) if load is not None else []}
    return PlotData(
        folder=folder,
        run_info=run_info,
        records=records,
        configs=configuration_table(live, by=levels or None),
        load=load,
        operating=costs,
        taus=tau_intervals(prefer_live(records), n_boot=n_boot, seed=seed),
        fits=fits,
        positions=positions,
        goodness=goodness,
        category_fits=category_fits,
        costs=fit_group_costs(records),
        cost_fits=group_cost_fits(records),
        recommendations=recommendations,
        lossless=lossless_check(records),
        palette=Palette(records["drafter_label"], records["tree"]),
        max_gamma=max_gamma,
        objective=objective,
        notes=notes,
        context_bins=fit_by_context_bin(records, n_boot=n_boot, seed=seed),
        history=history,
        confirmation=load_confirmation(folder),
        context=context,
    )


def scenarios(frame: pd.DataFrame) -> list[dict]:
    """The distinct (target, temperature, top_p, top_k, workload) of a frame — and load level (concurrency,
    request rate) where the frame has that column: figures over γ draw one panel per load, never pooled —
    sorted."""
    if frame.empty or not set(SCENARIO_KEYS) <= set(frame.columns):
        return []
    keys = SCENARIO_KEYS + [k for k in LOAD_KEYS if k in frame.columns]
    unique = frame[keys].drop_duplicates().sort_values(["workload", "target", "temperature"] + keys[5:])
    return [dict(zip(keys, row)) for row in unique.itertuples(index=False)]


def series_name(label: str, tree: str) -> str:
    """Legend name of a (drafter, tree) series: the drafter label, the tree when not a chain."""
    return str(label) if tree == CHAIN else f"{label} · tree {tree}"


def series(frame: pd.DataFrame, palette: Palette):
    """(name, style, rows) per (drafter label, tree) of ``frame``, in palette order. Rows of a dynamic
    verify-length schedule are left out: these figures plot against γ, which such a schedule only caps
    (the schedule figure, `specbench.figures.schedules`, shows them)."""
    frame = frame[fixed_schedule(frame)]
    order = {label: i for i, label in enumerate(palette.labels)}
    groups = sorted(frame.groupby(SERIES_KEYS, sort=False), key=lambda kv: (order.get(kv[0][0], -1), str(kv[0][1])))
    for (label, tree), rows in groups:
        yield series_name(label, tree), palette.style(label, tree), rows


def find_recommendation(data: PlotData, scenario: dict):
    """The recommendation of a scenario, or None (no baseline there)."""
    for rec in data.recommendations:
        if all(rec.keys.get(k) == v for k, v in scenario.items()):
            return rec
    return None


def gamma_axis(ax, top: int, *, label: bool = True) -> None:
    """Integer γ ticks from 0 to ``top``."""
    ax.set_xlim(-0.4, top + 0.4)
    step = 1 if top <= 10 else 2
    ax.set_xticks(range(0, top + 1, step))
    if label:
        ax.set_xlabel("draft length γ (tokens drafted per round)")


def spec_taus(data: PlotData) -> pd.DataFrame:
    return data.taus[~is_baseline(data.taus) & (data.taus["gamma"] > 0)] if len(data.taus) else data.taus


def require_gammas(frame: pd.DataFrame) -> None:
    """Skip unless some (drafter, tree) of some scenario was measured at two or more γ."""
    if frame.empty:
        raise FigureSkipped("no speculative configuration (γ ≥ 1) was measured")
    widest = frame.groupby(SCENARIO_KEYS + SERIES_KEYS)["gamma"].nunique().max()
    if widest < 2:
        raise FigureSkipped("only one draft length γ per drafter was measured: a curve over γ needs at least two")


def require_baseline(data: PlotData) -> None:
    if not data.recommendations:
        reason = next((n for n in data.notes if n.startswith("no recommendation")), "no target-only baseline")
        raise FigureSkipped(f"speedup needs the target-only baseline (γ = 0) — {reason}")
