"""`specbench recommend RESULTS_DIR`: the best (drafter, tree, γ) per workload, or no speculation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.panel import Panel
from rich.table import Table

from specbench.analysis.context.summary import context_for, context_summary, has_context_axis
from specbench.analysis.fit import load_results
from specbench.analysis.load.goodput import goodput_answers
from specbench.analysis.load.operating import for_scenario as operating_for_scenario
from specbench.analysis.load.operating import operating, price_of
from specbench.analysis.load.slo import Slo, slo_answers, slos_from_flags
from specbench.analysis.load.table import AXES as AXIS_LABELS
from specbench.analysis.load.table import axis_of, has_load_axis, normalised, serving_table
from specbench.analysis.load.verdicts import for_scenario as load_for_scenario
from specbench.analysis.load.verdicts import settings_of
from specbench.analysis.load.verdicts import summary as load_summary
from specbench.analysis.options import MAX_GAMMA
from specbench.analysis.recommendation.confirm_report import load_report
from specbench.analysis.recommendation.quantization import for_recommendation
from specbench.analysis.recommendation.recommend import MeasuredCosts, ProfiledCosts, recommend
from specbench.analysis.recommendation.recommend import to_json as recommendations_json
from specbench.analysis.recommendation.result import recommendation_lines
from specbench.analysis.settings.engine_settings import engine_settings
from specbench.analysis.statistics.intervals import N_BOOT
from specbench.analysis.statistics.speedup_interval import speedup_words
from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.analysis.verdicts.decision import describe_best
from specbench.analysis.verdicts.stopping_history import load_history
from specbench.bounds import int_list
from specbench.catalogue import engines as catalogue_engines
from specbench.cli.fit_cmd import group_label, text_row
from specbench.cli.results_cmd import print_history
from specbench.cli.shell.engine_checks import check_engine_settings, local_model_folder
from specbench.cli.shell.params import bounded
from specbench.cli.views.confirm import print_confirmation, print_deployments
from specbench.cli.views.context import print_context
from specbench.cli.views.load import print_load, print_slo
from specbench.cli.views.online import print_online_verdict
from specbench.cli.views.operating import print_goodput, print_operating
from specbench.cli.views.quantization import print_quantization
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import fmt, ms, plain
from specbench.errors import SpecbenchError, did_you_mean
from specbench.models.gguf_files import paste_names
from specbench.records.profile_file import load_profile
from specbench.records.store import load_run_info
from specbench.safe_files import json_ready

ALL_ENGINES = "all"  # --engine all: every engine of the catalogue (`specbench.catalogue.engines`)


def _interval(option) -> str:
    if option.lo != option.lo and option.speedup == option.speedup:
        return f"{option.speedup:.2f}× (too few prompts to tell)"
    return speedup_words(option.speedup, option.lo, option.hi)


def _context_bin(keys: dict) -> str:
    """' · context bin 4k' for a verdict per context-length bin (`specbench.analysis.context`), else ''."""
    label = keys.get("context_bin")
    return f" · context bin {label}" if isinstance(label, str) else ""


def _print_recommendation(rec, console) -> None:
    """One recommendation, whatever its cost source: the verdict, then the sections it has."""
    k = rec.keys
    title = (
        f"{k['workload']}{_context_bin(k)} · {k['target']} · T={fmt(k['temperature'], 2)} · objective {rec.objective} · "
        f"{rec.n_prompts} prompts · costs: {rec.cost_source}"
    )
    if rec.baseline_tokens_per_s is not None:
        title += f" · baseline {rec.baseline_tokens_per_s:.1f} tok/s"
    if rec.per_batch is not None:
        title += f" · context {rec.per_batch.context}"
    title += "".join(
        f" · {name} {k[name]:g}" if isinstance(k[name], float) else f" · {name} {k[name]}"
        for name in ("backend", "concurrency", "request_rate")
        if name in k
    )
    style = "green" if rec.speculates else "yellow"
    body = "\n".join(recommendation_lines(rec)) + f"\n\n{rec.verdict}"
    console.print(Panel(plain(body), title=plain(title), border_style=style))
    if rec.schedules is not None:
        console.print(plain(rec.schedules["text"], style="bold"))
    if rec.online is not None:
        print_online_verdict(rec.online, console)
    if rec.measured is not None:
        _print_batch_one(rec, console)
    if rec.per_batch is not None:
        _print_per_batch(rec.per_batch, console)
    for name, setting in rec.settings.items():
        body = setting.snippet or "(not expressible)"
        if setting.notes:
            body += "\n\n" + "\n".join(f"note: {n}" for n in setting.notes)
        body += f"\nchecked: {setting.checked}"
        title = f"{name} settings" + (" (target only: no speculation)" if setting.target_only else "")
        style = "yellow" if setting.target_only else "cyan" if setting.supported else "red"
        console.print(Panel(plain(body), title=plain(title), border_style=style))
    for note in rec.notes:
        console.print(plain(f"note: {note}", style="dim"))


def _print_batch_one(rec, console) -> None:
    """The sweep's own costs: the supporting detail under the one recommendation — each path's own best, the
    measured configurations, the model curve, the predictions."""
    picks = Table(
        title="Supporting detail: each path's own best (not a recommendation: the verdict row is)",
        caption="verdict: the configuration the recommendation names (★ when it is recommended), its "
        "interval adjusted for the looks and for picking among the configurations; measured / "
        "model: that path's best point estimate with its unadjusted 95% interval, so it can name "
        "another γ; γ interval: argmax γ of that drafter over bootstrap replicates; wins: share of "
        "replicates its drafter is best",
    )
    for c in ("path", "best", "speedup [95% CI]", "γ interval", "wins", "reason"):
        picks.add_column(c, overflow="fold")
    final = rec.final
    decision = rec.decision
    if decision is not None:
        if decision.option is not None:
            name, speedup = decision.option.describe(), _interval(decision.option)
            name += " ★" if final is not None else " (not recommended: disturbed timing)"
        elif describe_best(decision.best):
            name, speedup = f"none (best so far: {describe_best(decision.best)})", "not recommended"
        else:
            name, speedup = "none", "nothing compared"
        text_row(
            picks,
            f"verdict ({decision.evidence})",
            name,
            speedup,
            "-",
            "-",
            f"{decision.headline()}; intervals adjusted for the looks and the {len(decision.candidates)} "
            "configurations",
        )
    for pick in (rec.measured, rec.model):
        option = pick.best
        if option is None:
            text_row(picks, pick.source, "none", "nothing compared", "-", "-", pick.reason)
            continue
        text_row(
            picks,
            pick.source,
            option.describe(),
            _interval(option),
            f"[{pick.gamma_lo}, {pick.gamma_hi}]",
            "-" if pick.win_share is None else f"{pick.win_share:.0%}",
            pick.reason,
        )
    console.print(picks)

    if not rec.options.empty:
        measured = Table(title=f"Measured configurations ({rec.objective} speedup, paired with the baseline)")
        for c in ("drafter", "γ", "tok/s", "speedup [95% CI]"):
            measured.add_column(c, overflow="fold")
        chosen = rec.final
        for _, r in rec.options.sort_values("speedup", ascending=False).iterrows():
            mark = (
                " ★"
                if chosen is not None
                and (r["drafter_label"], r["tree"], r["gamma"], r["schedule"])
                == (chosen.drafter_label, chosen.tree, chosen.gamma, chosen.schedule)
                else ""
            )
            mark += " (timing disturbed)" if r.get("timing_disturbed") else ""
            text_row(
                measured,
                f"{group_label(r)}{mark}",
                str(r["gamma"]),
                fmt(r["tokens_per_s"], 1),
                _ci(r["speedup"], r["lo"], r["hi"], rec.n_prompts),
            )
        console.print(measured)

    ref = rec.model.choice or rec.model.best
    if ref is not None and not rec.curves.empty:
        curve = rec.curves[(rec.curves["drafter_label"] == ref.drafter_label) & (rec.curves["tree"] == ref.tree)]
        first = curve.iloc[0]
        table = Table(
            title=plain(
                f"Model prediction for {ref.drafter_label} (α̂={fmt(first['alpha'])}, {first['acceptance_model']} model)"
            ),
            caption="E[tok]: expected tokens per round; speedup: measured-cost model vs the "
            "measured baseline; paper: Leviathan et al. "
            "(1 − α^(γ+1)) / ((1 − α)(γc + 1)); * = measured γ",
        )
        for c in ("γ", "E[tok]", "round ms", "tok/s", "speedup [95% CI]", "paper"):
            table.add_column(c, justify="right")
        for _, r in curve.iterrows():
            text_row(
                table,
                f"{r['gamma']}{'*' if r['measured'] else ''}",
                fmt(r["expected_tokens"], 2),
                ms(r["round_s"]),
                fmt(r["tokens_per_s"], 1),
                _ci(r["objective_speedup"], r["lo"], r["hi"]),
                _times(r["paper_factor"]),
            )
        console.print(table)

    if not rec.predicted.empty:
        console.print(predicted_table(rec.predicted))


def _print_per_batch(plan, console) -> None:
    """A profile's costs: the choice per batch size, each drafter's γ per batch size, vLLM's schedule."""
    table = Table(
        title="γ per batch size",
        caption="speedup: predicted decode tokens/s ÷ target-only at the "
        "same batch size [95% prompt-bootstrap interval]; tok/s: "
        "whole batch",
    )
    for c in ("batch", "choice", "γ", "speedup [95% CI]", "tok/s", "target-only tok/s"):
        table.add_column(c, justify="left" if c == "choice" else "right", overflow="fold")
    for _, r in plan.table.iterrows():
        if r["gamma"] > 0:
            choice, ci = str(r["drafter_label"]), f"{r['speedup']:.2f}× [{r['lo']:.2f}, {r['hi']:.2f}]"
        else:
            best = r.get("best_drafter")
            choice = "none" if not isinstance(best, str) else f"none (best: {best} γ={int(r['best_gamma'])})"
            ci = (
                "-"
                if not isinstance(best, str)
                else f"{r['best_speedup']:.2f}× [{r['best_lo']:.2f}, {r['best_hi']:.2f}]"
            )
        if isinstance(r.get("extrapolated"), str) and ci != "-":  # beyond the profiled grid: the verdict line says how
            ci += " extrapolated"
        text_row(
            table,
            str(r["batch"]),
            choice,
            str(int(r["gamma"])),
            ci,
            f"{r['tokens_per_s']:.1f}",
            f"{r['baseline_tokens_per_s']:.1f}",
        )
    console.print(table)
    for drafter in plan.plans:
        per = Table(
            title=plain(
                f"{drafter.drafter_label} (α̂={drafter.alpha:.3f}, {drafter.acceptance_model} model, "
                f"drafts in {drafter.propose_rate:.0%} of rounds, costs of profiled "
                f"'{drafter.profile_drafter}')"
            )
        )
        for c in ("batch", "chosen γ", "speedup", "best γ (point)", "speedup at best"):
            per.add_column(c, justify="right")
        for b in plan.batches:
            row = drafter.at(b)
            best = row["best_gamma"]
            text_row(
                per,
                str(b),
                str(row["gamma"]),
                f"{row['speedup']:.2f}× [{row['lo']:.2f}, {row['hi']:.2f}]",
                str(best),
                f"{drafter.speedup[b - 1, best]:.2f}×",
            )
        console.print(per)
    if plan.vllm is not None:
        body = plan.vllm["snippet"] or "(not expressible)"
        if plan.vllm["notes"]:
            body += "\n\n" + "\n".join(f"note: {n}" for n in plan.vllm["notes"])
        console.print(
            Panel(
                plain(body),
                title=plain(f"vLLM: γ per batch size ({plan.vllm['drafter_label']})"),
                border_style="cyan" if plan.vllm["supported"] else "red",
            )
        )
    else:
        console.print(
            plain(
                f"vLLM: no speculation at any batch size up to {max(plan.batches)}: leave speculative_config out",
                style="yellow",
            )
        )


def predicted_table(predicted):
    """The acceptance × cost predictions with the measured check (`specbench.analysis.cost.predicted_speedup`)."""

    first = predicted.iloc[0]
    table = Table(
        title=plain(
            f"Predicted speedup: acceptance on {int(predicted['n_prompts'].max())} prompts × "
            f"cost per round timed on {int(first['n_calibration'])}"
        ),
        caption="predicted: 95% interval carrying acceptance and cost uncertainty; measured: live "
        "end-to-end on the calibration prompts; realized ÷ predicted on those same units (95% CI)",
    )
    for c in ("drafter", "γ", "τ", "predicted [95% CI]", "measured [95% CI]", "realized ÷ predicted"):
        table.add_column(c, justify="left" if c == "drafter" else "right", overflow="fold")
    for _, r in predicted.sort_values(["drafter_label", "tree", "gamma"]).iterrows():
        label = r["drafter_label"] + ("" if r["tree"] == "chain" else f" tree {r['tree']}")
        measured = (
            "-" if r["n_measured"] == 0 else _ci(r["measured"], r["measured_lo"], r["measured_hi"], r["n_measured"])
        )
        text_row(
            table,
            label,
            str(r["gamma"]),
            fmt(r["tau"], 2),
            _ci(r["predicted"], r["lo"], r["hi"], r["n_prompts"]),
            measured,
            _ci(r["realized_over_predicted"], r.get("realized_lo"), r.get("realized_hi"), r["n_measured"]),
        )
    return table


def _times(value) -> str:
    """'1.42×'; '-' for an unknown factor."""
    return "-" if fmt(value, 2) == "-" else f"{fmt(value, 2)}×"


def _ci(point, lo, hi, n=None) -> str:
    """'1.42× [1.30, 1.55]'; without an interval '1.42× (too few prompts to tell, P = n)'; '-' for an unknown
    speedup (a quantity it needs was not measured), never 'nan×'."""
    if point is None or not math.isfinite(point):
        return "-"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{point:.2f}× (too few prompts to tell{'' if n is None else f', P = {int(n)}'})"
    return f"{point:.2f}× [{lo:.2f}, {hi:.2f}]"


def recommend_command(
    results_dir: Path = typer.Argument(..., help="A results folder written by `specbench sweep`."),
    objective: str = typer.Option(
        "throughput",
        "--objective",
        help="throughput: decode tokens/s; latency: mean time of one request of the "
        "workload's max new tokens, prefill included; slo: the highest load that "
        "keeps a latency target (with --itl-p90 50ms or the like); goodput: the most "
        "requests per second that meet the latency targets, at each load.",
    ),
    itl_p90: str = typer.Option(
        None, "--itl-p90", help="With --objective slo: the p90 inter-token latency to keep, e.g. 50ms."
    ),
    ttft_p90: str = typer.Option(
        None, "--ttft-p90", help="With --objective slo: the p90 time to first token to keep, e.g. 2s."
    ),
    latency_p90: str = typer.Option(
        None,
        "--latency-p90",
        help="With --objective slo or goodput: the p90 request latency (arrival to last token) to keep, e.g. 4s.",
    ),
    slo: list[str] = typer.Option(
        None,
        "--slo",
        help="With --objective slo or goodput: METRIC-pNN=DURATION (metric "
        "ttft, itl or latency; p50, p90 or p99), e.g. itl-p99=80ms "
        "(repeatable).",
    ),
    price_per_hour: float = typer.Option(
        None,
        "--price-per-hour",
        callback=bounded("price_per_hour"),
        help="The machine's price per hour (any currency; default: the sweep's "
        "price_per_hour key): cost per million output tokens at each load.",
    ),
    max_gamma: int = typer.Option(
        MAX_GAMMA, "--max-gamma", callback=bounded("max_gamma"), help="Largest γ the model predicts (measured or not)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    engine: str = typer.Option(
        "all",
        "--engine",
        help=f"Engine settings to export: {catalogue_engines.choices_help()}, or {ALL_ENGINES}. A confident no "
        "prints each engine's target-only command line.",
    ),
    n_boot: int = typer.Option(
        N_BOOT, "--bootstrap", callback=bounded("bootstrap"), help="Bootstrap replicates over prompts."
    ),
    seed: int = typer.Option(0, "--seed", callback=bounded("seed"), help="Seed of the bootstrap."),
    tolerance: float = typer.Option(
        None,
        "--tolerance",
        callback=bounded("tolerance"),
        help="ε of the choice: the recommended option is within ε of the best option's speedup with "
        "probability ≥ 95 % (default: the sweep's, else 0.05).",
    ),
    cost_profile: Path = typer.Option(
        None,
        "--cost-profile",
        help="A profile folder from `specbench profile`: price rounds with its costs "
        "(any device, batch size and context) and recommend γ per batch size.",
    ),
    batch: str = typer.Option(
        None, "--batch", help="With --cost-profile: batch sizes, e.g. 1,8,32 (default: the profile's)."
    ),
    context: int = typer.Option(
        None,
        "--context",
        callback=bounded("context"),
        help="With --cost-profile: context length while decoding "
        "(default: each workload's mean prompt + half its output).",
    ),
):
    """Recommend the best drafter, tree and γ per workload — or no speculation.

    Per workload: the best measured configuration and the best prediction of the fitted model
    (acceptance × cost, every γ up to --max-gamma), each with a prompt-bootstrap 95% interval of the
    speedup and of the chosen γ. A configuration is recommended only when its speedup interval lies
    above 1; then ready-to-paste settings follow for each engine (--engine). A confident no prints each
    engine's command line without speculation (the target alone). How to read it: docs/fit.md.

    Examples:

      specbench recommend results/demo

      specbench recommend results/mt-bench --objective latency --engine vllm

      specbench recommend results/llamacpp-qwen --engine llamacpp

      specbench recommend results/demo --max-gamma 8 --json > recommendation.json

      specbench recommend results/mt-bench --cost-profile profiles/h100 --batch 1,8,32

      specbench recommend results/vllm-load --objective goodput --itl-p90 100ms --latency-p90 4s \
          --price-per-hour 2.50

    With --cost-profile the acceptance comes from the results and the cost from the profile: γ (or
    none) per workload and batch size, and vLLM's num_speculative_tokens_per_batch_size
    (docs/profile.md). Records spanning two or more context-length bins get a verdict per bin, the
    crossover length and γ per context range (docs/context-length.md).
    """
    choices = [*catalogue_engines.names(), ALL_ENGINES]
    if engine not in choices:
        raise SpecbenchError(
            f"unknown engine '{engine}'{did_you_mean(engine, choices)} (choose from: {', '.join(choices)})"
        )
    slos = slos_from_flags(itl_p90, ttft_p90, slo or [], latency_p90=latency_p90)
    if objective in ("slo", "goodput") or slos:
        if objective not in ("slo", "goodput"):
            raise SpecbenchError(
                "--itl-p90, --ttft-p90, --latency-p90 and --slo set a latency target: they need "
                "--objective slo or --objective goodput"
            )
        if not slos:
            raise SpecbenchError(
                f"--objective {objective} needs a latency target, e.g. --itl-p90 50ms (or --ttft-p90, "
                "--latency-p90, --slo)"
            )
        if objective == "slo":
            _slo_command(results_dir, slos, n_boot, seed, json_out)
        else:
            _goodput_command(results_dir, slos, price_per_hour, n_boot, seed, json_out)
        return
    engines = catalogue_engines.names() if engine == ALL_ENGINES else [engine]
    records = load_results(results_dir)
    costs = _cost_source(cost_profile, batch, context)
    history = load_history(results_dir)  # an adaptive sweep: judge its records the way it stopped on them
    plans = history.plans() if history else {}
    hubs = paste_names()  # Hugging Face ids, and GGUF files for llama-server lines
    how = dict(objective=objective, max_gamma=max_gamma, n_boot=n_boot, seed=seed, engines=engines, hub_ids=hubs)
    how.update(plans=plans, tolerance=sweep_tolerance(results_dir) if tolerance is None else tolerance)
    recs = recommend(records, costs, **how)
    context = None
    if has_context_axis(records) and isinstance(costs, MeasuredCosts):  # a verdict per context-length bin
        pooled, recs = recs, recommend(records, costs, by_context=True, **how)
        context = context_summary(records, recs, pooled, engines=engines, n_boot=n_boot, seed=seed)
    load = (
        load_summary(records, recs, hub_ids=hubs, n_boot=n_boot, seed=seed, engines=engines)
        if has_load_axis(records) and isinstance(costs, MeasuredCosts)
        else None
    )
    costs_data = _operating(records, results_dir, price_per_hour, load is not None, n_boot, seed)
    target_folder = local_model_folder(str(recs[0].keys["target"])) if recs else None
    check_engine_settings(
        [(rec.settings, local_model_folder(str(rec.keys["target"]))) for rec in recs]
        + [({s.engine: s}, target_folder) for s in (settings_of(load) if load else [])]
    )
    quantization = [for_recommendation(records, rec, n_boot=n_boot, seed=seed) for rec in recs]
    if json_out:
        typer.echo(
            recommendations_json(
                recs,
                None if load is None else [load_for_scenario(load, rec.keys) for rec in recs],
                history,
                None if costs_data is None else [operating_for_scenario(costs_data, rec.keys) for rec in recs],
                load_report(results_dir),
                None if context is None else [context_for(context, rec.keys) for rec in recs],
                quantization,
            )
        )
        return
    console = wide_console()
    for rec in recs:
        _print_recommendation(rec, console)
    print_quantization(quantization, console)
    if load is not None:
        print_load(load, console)
    if context is not None:
        print_context(context, console)
    if costs_data is not None:
        print_operating(costs_data, axis_of(normalised(records)), console)
    print_history(history, console)
    report = load_report(results_dir)
    print_confirmation(report, console, detail=False)
    target = str(recs[0].keys["target"]) if recs else "<target>"
    print_deployments(
        report,
        console,
        lambda arm: engine_settings(
            arm.drafter, arm.drafter_params, arm.tree, arm.gamma, target=target, engines=engines, hub_ids=hubs
        ),
    )


def sweep_tolerance(results_dir: Path) -> float:
    """The tolerance the sweep in ``results_dir`` was run with (run.json), else the default."""
    sweep = load_run_info(results_dir).get("sweep")
    value = sweep.get("tolerance") if isinstance(sweep, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else TOLERANCE


def _operating(
    records, results_dir: Path, price_flag: float | None, load_axis: bool, n_boot: int, seed: int
) -> dict | None:
    """Cost and energy per load (`specbench.analysis.load.operating`) when there is something to say: a load axis, a
    price, or energy readings; None otherwise (and for records with no live unit)."""
    price = price_of(price_flag, load_run_info(results_dir))
    live = records[records["mode"] == "live"]
    measured = "energy_j" in live and live["energy_j"].notna().any()
    if live.empty or not (load_axis or price is not None or measured):
        return None
    return operating(records, price_per_hour=price, n_boot=n_boot, seed=seed).as_dict()


def _goodput_command(
    results_dir: Path, slos: list[Slo], price_flag: float | None, n_boot: int, seed: int, json_out: bool
) -> None:
    """`recommend --objective goodput`: per workload, the configuration serving the most requests/s within the
    targets, against target only, with goodput, cost and energy at every load."""
    records = load_results(results_dir)
    if records[records["mode"] == "live"].empty:
        raise SpecbenchError("no live records: goodput needs requests that were timed (replayed units have no latency)")
    price = price_of(price_flag, load_run_info(results_dir))
    axis = axis_of(normalised(records))
    op = operating(records, slos=slos, price_per_hour=price, n_boot=n_boot, seed=seed)
    answers = goodput_answers(op, axis)
    if not answers:
        raise SpecbenchError("no request of these records has the latencies the targets name (TTFT, ITL, latency)")
    data = op.as_dict()
    if json_out:
        typer.echo(json.dumps(json_ready({"objective": "goodput", "axis": axis, "answers": answers, **data}), indent=2))
        return
    print_goodput(answers, data, axis, wide_console())


def _slo_command(results_dir: Path, slos: list[Slo], n_boot: int, seed: int, json_out: bool) -> None:
    """`recommend --objective slo`: per workload and target, how far each configuration keeps it."""
    records = load_results(results_dir)
    table = serving_table(records, n_boot=n_boot, seed=seed)
    axis = axis_of(normalised(records))
    answers = [a for s in slos for a in slo_answers(table, s, axis)]
    if not answers:
        raise SpecbenchError(
            "no latency figures in these records (TTFT, ITL): the SLO objective needs live "
            "requests of a serving backend (or the own engine's)"
        )
    if json_out:
        typer.echo(json.dumps(json_ready({"objective": "slo", "axis": axis, "answers": answers}), indent=2))
        return
    print_slo(answers, AXIS_LABELS[axis], wide_console())


def _cost_source(folder: Path | None, batch: str | None, context: int | None):
    """`MeasuredCosts`, or `ProfiledCosts` from the --cost-profile folder at --batch and --context."""
    if folder is None:
        if batch is not None or context is not None:
            raise SpecbenchError("--batch and --context need --cost-profile (a sweep's own costs hold for its batch 1)")
        return MeasuredCosts()
    profile = load_profile(folder)
    return ProfiledCosts(
        profile, batches=int_list(batch, "batch", "--batch") if batch is not None else None, context=context
    )


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend_command)
