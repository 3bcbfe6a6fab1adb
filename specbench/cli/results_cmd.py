"""`specbench results show|merge`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from specbench.cli.render import console, fmt
from specbench.cli.render import console as wide_console
from specbench.errors import SpecbenchError
from specbench.records.merge import merge_folders
from specbench.records.store import load_records, load_run_info
from specbench.records.summary import configuration_table, lossless_check

results_app = typer.Typer(help="Inspect and combine results folders.", no_args_is_help=True)


@results_app.command("show")
def show(folder: Path = typer.Argument(..., help="A results folder (results/NAME)."),
         csv: Path = typer.Option(None, "--csv", help="Also write the summary table to this CSV file.")):
    """One table per workload: α, τ, tokens/s and speedup for every drafter × γ, with prompt counts.

    Rows of mode 'replay' (sweeps with --mode replay|both) hold replayed acceptance and τ; their
    tokens/s and speedup are cost-model predictions, marked "pred". Live-vs-replay agreement:
    RESULTS/replay-summary.csv.

    Example: specbench results show results/demo
    """

    info = load_run_info(folder)
    records = load_records(folder)
    if records.empty:
        raise SpecbenchError(f"{folder} has no records yet")
    levels = "concurrency" in records and records["concurrency"].fillna(1).nunique() > 1  # serving backends
    if levels:
        records = records.assign(concurrency=records["concurrency"].fillna(1).astype(int))
    table = configuration_table(records, by=["concurrency"] if levels else None)
    check = lossless_check(records)
    table = table.merge(check, how="left", on=[c for c in check.columns if c in table.columns and c != "identical"])
    if csv is not None:
        table.to_csv(csv, index=False)
    out = console()
    out.print(f"[bold]{info.get('sweep', {}).get('name', folder)}[/bold] · target {info['sweep']['target']} · "
              f"{info.get('device_name')} · {info.get('dtype')} · {len(records)} records")
    replayed = (records["mode"] == "replay").any()  # a mode column only where replayed rows exist
    several_t = records["temperature"].nunique() > 1
    for workload, rows in table.groupby("workload", sort=True):
        t = Table(title=f"workload {workload}")
        t.add_column("configuration", no_wrap=True)
        columns = ["γ"] + (["T"] if several_t else []) + (["in flight"] if levels else []) + (["mode"] if replayed else []) + [
            "prompts", "α", "τ", "tokens/s", "speedup", "greedy identical"]
        for col in columns:
            t.add_column(col, justify="left" if col == "mode" else "right", no_wrap=True)
        order = ["temperature", "drafter_label", "tree", "gamma", "mode"] + (["concurrency"] if levels else [])
        for r in rows.sort_values(order).itertuples():
            is_replay = r.mode == "replay"
            ident = "-" if r.temperature > 0 or r.gamma == 0 or is_replay else f"{r.identical:.0%}"
            speedup = (fmt(r.speedup, 2) + "×" + (" pred" if is_replay else "")) if r.speedup == r.speedup else "-"
            label = "target only" if r.drafter == "none" else r.drafter_label
            label += "" if r.tree == "chain" else f" · tree {r.tree}"
            cells = [str(r.gamma)] + ([f"{r.temperature:g}"] if several_t else []) + (
                [str(r.concurrency)] if levels else []) + (
                [r.mode] if replayed else []) + [str(r.n_prompts), fmt(r.alpha), fmt(r.tau, 2),
                                                 fmt(r.tokens_per_s, 1), speedup, ident]
            t.add_row(label, *cells)
        out.print(t)


@results_app.command("merge")
def merge(folders: list[Path] = typer.Argument(..., help="Results folders to combine (e.g. shards)."),
          out: Path = typer.Option(..., "--out", "-o", help="Folder to write the union to."),
          force: bool = typer.Option(False, "--force", help="Merge even if measured on different devices.")):
    """Combine results folders of the same sweep (e.g. --shard runs) into one.

    Example: specbench results merge results/qwen-0 results/qwen-1 --out results/qwen
    """

    count = merge_folders(list(folders), out, force=force)
    wide_console().print(f"[green]merged[/green] {count} records -> {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")
