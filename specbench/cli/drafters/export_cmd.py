"""`specbench export-drafter`: a trained drafter in a serving engine's checkpoint layout."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specbench.catalogue import drafters as catalogue
from specbench.cli.shell.params import folder_path
from specbench.cli.views.render import console as wide_console


def _kinds() -> str:
    vllm = catalogue.exportable()
    return ", ".join(vllm + [k for k in catalogue.speculators_kinds() if k not in vllm])


def export_drafter_command(
    kind: str = typer.Argument(
        ...,
        help=f"Drafter type: {_kinds()} (the catalogue's exportable kinds; docs/drafters.md says why others are not).",
    ),
    out: Path = typer.Option(..., "--out", "-o", parser=folder_path, help="New folder for the exported checkpoint."),
    fmt: str = typer.Option(
        "vllm",
        "--format",
        help="vllm (vLLM's own layout of the kind) or speculators (the "
        f"speculators format: {', '.join(catalogue.speculators_kinds())}).",
    ),
    checkpoint: str = typer.Option(
        None, "--checkpoint", help="Checkpoint folder or shipped name (default: the one shipped for the target)."
    ),
    target: str = typer.Option("smollm2-135m", "--target", help="The target the drafter was trained for."),
    verifier: str = typer.Option(
        None,
        "--verifier",
        help="--format speculators: the target the config names "
        "(default: the target's hub id, else --target as given).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the export report as JSON."),
):
    """Write a trained drafter (the shipped SmolLM2 EAGLE / EAGLE-3 / Medusa heads, or your own) in
    the folder layout vLLM loads or in the speculators format, and print the speculative_config that
    serves it.

    What each layout keeps exactly and what it cannot: docs/drafters.md, "Exporting to vLLM";
    the speculators format: docs/speculators.md.

    Examples: specbench export-drafter eagle3 --out exported/eagle3-vllm
              specbench export-drafter eagle3 --format speculators --out exported/eagle3-speculators
    """
    from specbench.training.vllm_export import export_drafter  # lazy: loads torch and the target

    report = export_drafter(kind, out, checkpoint=checkpoint, target=target, fmt=fmt, verifier=verifier)
    if json_out:
        typer.echo(json.dumps(report, indent=2))
        return
    console = wide_console()
    layout = "the speculators format" if fmt == "speculators" else "vLLM's layout"
    console.print(f"wrote {report['folder']} ({len(report['tensors'])} tensors, {kind} in {layout})")
    console.print(f"speculative_config: {json.dumps(report['speculative_config'])}")
    for note in report["notes"]:
        console.print(f"note: {note}", style="dim")


def register(app: typer.Typer) -> None:
    app.command("export-drafter")(export_drafter_command)
