"""`specbench recommend RESULTS_DIR`: the best (drafter, tree, γ) per workload, or no speculation."""

from __future__ import annotations

from pathlib import Path

import typer

from specbench.intervals import N_BOOT

ENGINE_CHOICES = ("vllm", "sglang", "transformers", "all")


def _interval(option) -> str:
    return f"{option.speedup:.2f}× [{option.lo:.2f}, {option.hi:.2f}]"


def _print_recommendation(rec, console) -> None:
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from specbench.cli.fit_cmd import group_label, text_row
    from specbench.cli.render import fmt

    k = rec.keys
    title = (f"{k['workload']} · {k['target']} · T={fmt(k['temperature'], 2)} · objective {rec.objective} · "
             f"{rec.n_prompts} prompts · baseline {rec.baseline_tokens_per_s:.1f} tok/s")
    style = "green" if rec.final is not None else "yellow"
    console.print(Panel(Text(rec.verdict), title=escape(title), border_style=style))

    picks = Table(title="Best option by path", caption="γ interval: argmax γ of the chosen drafter over bootstrap "
                                                       "replicates; wins: share of replicates its drafter is best")
    for c in ("path", "choice", "speedup [95% CI]", "γ interval", "wins", "reason"):
        picks.add_column(escape(c), overflow="fold")
    for pick in (rec.measured, rec.model):
        option = pick.choice or pick.best
        if option is None:
            text_row(picks, pick.source, "-", "-", "-", "-", pick.reason)
            continue
        name = option.describe() if pick.choice is not None else f"none (best: {option.describe()})"
        text_row(picks, pick.source, name, _interval(option), f"[{pick.gamma_lo}, {pick.gamma_hi}]",
                      "-" if pick.win_share is None else f"{pick.win_share:.0%}", pick.reason)
    console.print(picks)

    if not rec.options.empty:
        measured = Table(title=f"Measured configurations ({rec.objective} speedup, paired with the baseline)")
        for c in ("drafter", "γ", "tok/s", "speedup [95% CI]"):
            measured.add_column(escape(c), overflow="fold")
        chosen = rec.final
        for _, r in rec.options.sort_values("speedup", ascending=False).iterrows():
            mark = " ★" if chosen is not None and (r["drafter_label"], r["tree"], r["gamma"]) == \
                (chosen.drafter_label, chosen.tree, chosen.gamma) else ""
            text_row(measured, f"{group_label(r)}{mark}", str(r["gamma"]), fmt(r["tokens_per_s"], 1),
                             f"{r['speedup']:.2f}× [{r['lo']:.2f}, {r['hi']:.2f}]")
        console.print(measured)

    ref = rec.model.choice or rec.model.best
    if ref is not None and not rec.curves.empty:
        curve = rec.curves[(rec.curves["drafter_label"] == ref.drafter_label) & (rec.curves["tree"] == ref.tree)]
        first = curve.iloc[0]
        table = Table(title=escape(f"Model prediction for {ref.drafter_label} (α̂={first['alpha']:.3f}, "
                                   f"{first['acceptance_model']} model)"),
                      caption=escape("E[tok]: expected tokens per round; speedup: measured-cost model vs the "
                                     "measured baseline; paper: Leviathan et al. "
                                     "(1 − α^(γ+1)) / ((1 − α)(γc + 1)); * = measured γ"))
        for c in ("γ", "E[tok]", "round ms", "tok/s", "speedup [95% CI]", "paper"):
            table.add_column(escape(c), justify="right")
        for _, r in curve.iterrows():
            text_row(table, f"{r['gamma']}{'*' if r['measured'] else ''}", fmt(r["expected_tokens"], 2),
                     f"{1e3 * r['round_s']:.2f}", fmt(r["tokens_per_s"], 1),
                     f"{r['objective_speedup']:.2f}× [{r['lo']:.2f}, {r['hi']:.2f}]", f"{r['paper_factor']:.2f}×")
        console.print(table)

    for name, setting in rec.settings.items():
        body = setting.snippet or "(not expressible)"
        if setting.notes:
            body += "\n\n" + "\n".join(f"note: {n}" for n in setting.notes)
        console.print(Panel(Text(body), title=f"{name} settings", border_style="cyan" if setting.supported else "red"))
    for note in rec.notes:
        console.print(Text(f"note: {note}", style="dim"))


def recommend_command(
    results_dir: Path = typer.Argument(..., help="A results folder written by `specbench sweep`."),
    objective: str = typer.Option("throughput", "--objective",
                                  help="throughput: decode tokens/s; latency: mean time of one request of the "
                                       "workload's max new tokens, prefill included."),
    max_gamma: int = typer.Option(16, "--max-gamma", help="Largest γ the model predicts (measured or not)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    engine: str = typer.Option("all", "--engine", help="Engine settings to export: vllm, sglang, transformers or all."),
    n_boot: int = typer.Option(N_BOOT, "--bootstrap", min=0, help="Bootstrap replicates over prompts."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
):
    """Recommend the best drafter, tree and γ per workload — or no speculation.

    Per workload: the best measured configuration and the best prediction of the fitted model
    (acceptance × cost, every γ up to --max-gamma), each with a prompt-bootstrap 95% interval of the
    speedup and of the chosen γ. A configuration is recommended only when its speedup interval lies
    above 1; then ready-to-paste vLLM, SGLang and transformers settings follow. How to read it:
    docs/fit.md.

    Examples:

      specbench recommend results/demo

      specbench recommend results/mt-bench --objective latency --engine vllm

      specbench recommend results/demo --max-gamma 8 --json > recommendation.json
    """
    from rich.console import Console

    from specbench.errors import SpecbenchError, did_you_mean
    from specbench.fit import load_results
    from specbench.recommend import recommend, to_json

    if engine not in ENGINE_CHOICES:
        raise SpecbenchError(f"unknown engine '{engine}'{did_you_mean(engine, list(ENGINE_CHOICES))} "
                             f"(choose from: {', '.join(ENGINE_CHOICES)})")
    engines = ENGINE_CHOICES[:-1] if engine == "all" else (engine,)
    records = load_results(results_dir)
    recs = recommend(records, objective=objective, max_gamma=max_gamma, n_boot=n_boot, seed=seed, engines=engines)
    if json_out:
        typer.echo(to_json(recs))
        return
    console = Console()
    for rec in recs:
        _print_recommendation(rec, console)


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend_command)
