"""`specbench compare OLD NEW`: the same sweep run twice — before and after an engine upgrade, on two machines,
with two drafter checkpoints — compared configuration by configuration, with an exit code for CI."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from specbench.analysis.compare import EQUIVALENT, INCONCLUSIVE, MARGIN, QUANTITIES, REGRESSED, compare, side, to_json
from specbench.analysis.fit import load_results
from specbench.cli.fit_cmd import text_row
from specbench.cli.shell.exit_codes import BAD_INPUT, INCONCLUSIVE_CODE, OK, REGRESSED_CODE
from specbench.cli.shell.params import bounded
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import plain
from specbench.records.store import load_run_info
from specbench.safe_files import read_json

BACKEND_FILE = "backend.json"
EXIT_CODES = {EQUIVALENT: OK, INCONCLUSIVE: INCONCLUSIVE_CODE, REGRESSED: REGRESSED_CODE}
STYLES = {
    "identical": "green",
    "equivalent": "green",
    "improved": "cyan",
    "inconclusive": "yellow",
    "regressed": "bold red",
}

EPILOG = f"""Exit codes: {OK} equivalent (every τ, α and speedup identical or within the margin, or better);
{REGRESSED_CODE} NEW regressed beyond the margin (one line per regression on stderr); {INCONCLUSIVE_CODE} inconclusive
(no regression shown, but some quantity could not be shown within the margin: more prompts, or a quiet machine);
{BAD_INPUT} bad input (folders of different sweeps, a broken file).

Examples:

  specbench compare results/before-upgrade results/after-upgrade

  specbench compare results/vllm-0.31 results/vllm-0.32 --margin 0.03 --json > comparison.json

  specbench compare results/old results/new --quantities tau,alpha      # acceptance only: a busy CI runner
"""


def _backend_info(folder: Path) -> dict:
    path = folder / BACKEND_FILE
    if not path.exists():
        return {}
    info = read_json(path, "backend file")
    return info if isinstance(info, dict) else {}


def _side(folder: Path):
    records = load_results(folder)
    return side(folder, records, load_run_info(folder), _backend_info(folder))


def _cell(q: dict) -> str:
    if q["state"] == "identical":
        return f"{q['old']:.4g} = {q['new']:.4g} (identical)"
    interval = "" if q["lo"] is None else f" [{q['lo']:.3f}, {q['hi']:.3f}]"
    return f"{q['old']:.4g} → {q['new']:.4g}  {q['ratio']:.3f}×{interval}  {q['state']}"


def compare_command(
    old: Path = typer.Argument(..., help="The results folder before the change (the reference)."),
    new: Path = typer.Argument(..., help="The results folder after it: the same sweep spec, run again."),
    margin: float = typer.Option(
        MARGIN,
        "--margin",
        callback=bounded("margin"),
        help="Equivalence margin, relative: 0.05 calls NEW equivalent when the 90% interval of "
        "NEW ÷ OLD lies inside [0.95, 1.05].",
    ),
    quantities: str = typer.Option(
        ",".join(QUANTITIES),
        "--quantities",
        help="What the verdict (and the exit code) reads, comma separated: tau, alpha, "
        "speedup. tau,alpha gates on acceptance alone (a busy or shared CI runner "
        "cannot time); every quantity is shown either way.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON (for CI pipelines)."),
    n_boot: int = typer.Option(
        1000, "--bootstrap", callback=bounded("bootstrap"), help="Bootstrap replicates over prompts."
    ),
    seed: int = typer.Option(0, "--seed", callback=bounded("seed"), help="Seed of the bootstrap."),
):
    """Compare two results folders of the same sweep: τ, α and speedup per configuration, NEW against OLD.

    Says what changed between the runs (engine version, weights, machine, specbench) and, per
    configuration and load, whether τ, α and the speedup stayed the same: identical (greedy on the same
    engine), equivalent within --margin, improved, regressed beyond it, or inconclusive — each from a
    90% prompt-bootstrap interval of NEW ÷ OLD (two one-sided tests at 5%). The exit code says which
    (below), so the command can gate an engine upgrade in CI. How to read it: docs/compare.md.
    """
    gated = tuple(q.strip() for q in quantities.split(",") if q.strip())
    result = compare(_side(old), _side(new), margin=margin, n_boot=n_boot, seed=seed, gated=gated)
    code = EXIT_CODES[result.verdict]
    if json_out:
        typer.echo(to_json(result))
    else:
        _print(result, old, new)
    if code == REGRESSED_CODE:  # one line per regression, where a CI log shows it
        for line in result.regressions:
            typer.echo(f"specbench: regression: {line}", err=True)
    raise typer.Exit(code)


def _print(result, old: Path, new: Path) -> None:
    console = wide_console()
    console.print(plain(f"OLD {old}: {result.environments['old']['text']}", style="bold"))
    console.print(plain(f"NEW {new}: {result.environments['new']['text']}", style="bold"))
    for line in result.changes or ["nothing recorded differs (the same engine, weights, machine and specbench)"]:
        console.print(plain(f"changed: {line}"))
    ungated = [q for q in QUANTITIES if q not in result.gated]
    table = Table(
        title=f"NEW ÷ OLD per configuration (90% prompt-bootstrap intervals; margin ±{result.margin:.0%})"
        + (f"; not in the verdict: {', '.join(ungated)}" if ungated else "")
    )
    for c in ("configuration", "prompts", *(("τ", "α", "speedup"))):
        table.add_column(c, overflow="fold")
    for row in result.rows:
        text_row(table, row["name"], str(row["prompts"]), *(_cell(row["quantities"][q]) for q in QUANTITIES))
    console.print(table)
    for note in result.notes:
        console.print(plain(f"note: {note}", style="dim"))
    for row in result.rows:
        for name, q in row["quantities"].items():
            if q.get("why") and q["state"] != "identical":
                console.print(plain(f"{row['name']} {name}: {q['why']}", style="dim"))
    verdict = result.verdict
    console.print(plain(f"verdict: {verdict} (exit {EXIT_CODES[verdict]})", style=STYLES[verdict]))


def register(app: typer.Typer) -> None:
    app.command("compare", epilog=EPILOG)(compare_command)
