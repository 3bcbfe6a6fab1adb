"""`specbench workloads list|show`."""

from __future__ import annotations

import json
from collections import Counter

import typer
from rich.table import Table

from specbench.cli.shell.params import bounded
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import plain
from specbench.errors import SpecbenchError
from specbench.workloads.catalog import load_workload, workload_names

SAMPLE_CHARS = 600  # how much of each sample turn `show` prints

workloads_app = typer.Typer(
    help="Prompt sets to benchmark on: the built-in ones (mt-bench, humaneval, sharegpt, long-context, and speed-bench "
    "and speculator-benchmarks from a prepared folder or the hub) and your own (a workload .yaml file, "
    "jsonl:PATH[:field=F], hf:DATASET[:SPLIT]).",
    no_args_is_help=True,
)


def _chat(workload) -> bool | str:
    """Whether the prompts use the chat template: True, False, or "mixed" (a stream of workloads that differ)."""
    settings = {workload.chat if p.chat is None else p.chat for p in workload.prompts} or {workload.chat}
    return settings.pop() if len(settings) == 1 else "mixed"


def _summary(workload, split: str) -> dict:
    return {
        "name": workload.name,
        "description": workload.description,
        "source": workload.source,
        "chat": _chat(workload),
        "max_new_tokens": workload.max_new_tokens,
        "split": split,
        "prompts": len(workload.prompts),
        "turns": workload.n_turns,
        "categories": dict(sorted(Counter(p.category for p in workload.prompts).items())),
        "context_bins": dict(Counter(p.context_bin for p in workload.prompts if p.context_bin)),
    }


def _short_source(source: str) -> str:
    """``dist==1.0:deep/folder/file.jsonl`` → ``dist==1.0:…/file.jsonl`` for narrow tables."""
    head, sep, path = source.rpartition(":")
    return f"{head}{sep}…/{path.rsplit('/', 1)[1]}" if sep and path.count("/") > 1 else source


@workloads_app.command("list")
def list_workloads(json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")):
    """Show every built-in workload: its source, prompts (all and in the eval split), turns, categories, chat template.

    Example: specbench workloads list
    """

    rows = []
    for name in workload_names():
        try:
            row = _summary(load_workload(name, split="all"), "all")
        except SpecbenchError as exc:  # a prepared-data workload whose data is not on this machine
            rows.append({"name": name, "available": False, "missing": str(exc)})
            continue
        row["eval_prompts"] = len(load_workload(name, split="eval").prompts)
        rows.append({**row, "available": True})
    if json_out:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="specbench workloads")
    for col in ("name", "prompts", "eval", "turns", "categories", "chat"):
        table.add_column(col, justify="left" if col in ("name", "chat") else "right", no_wrap=True)
    table.add_column("source", overflow="fold")
    for r in rows:
        if not r["available"]:
            table.add_row(r["name"], "-", "-", "-", "-", "-", plain(f"not here: {r['missing'].split(': ', 1)[-1]}"))
            continue
        table.add_row(
            r["name"],
            str(r["prompts"]),
            str(r["eval_prompts"]),
            str(r["turns"]),
            str(len(r["categories"])),
            {True: "yes", False: "no"}.get(r["chat"], r["chat"]),
            plain(_short_source(r["source"])),
        )
    wide_console().print(table)


@workloads_app.command("show")
def show_workload(
    name: str = typer.Argument(
        ..., help="Built-in name, a workload .yaml file, jsonl:PATH[:field=F] or hf:DATASET[:SPLIT]."
    ),
    count: int | None = typer.Option(
        None,
        "--count",
        "-n",
        callback=bounded("prompts"),
        help="Sample this many prompts (default: the workload's own).",
    ),
    seed: int | None = typer.Option(
        None, "--seed", callback=bounded("seed"), help="Seed of the sample (default: the workload's own)."
    ),
    split: str = typer.Option("eval", "--split", help="eval (what sweeps use), train (drafter training) or all."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
):
    """Describe one workload: where its prompts come from, how many, per category, and a sample prompt.

    Example: specbench workloads show mt-bench --count 16
    """

    workload = load_workload(name, count=count, seed=seed, split=split)
    info = _summary(workload, split)
    first = workload.prompts[0]
    info["sample"] = {"prompt_id": first.prompt_id, "category": first.category, "turns": list(first.turns)}
    if first.context is not None:  # long-context: the turn's {document} is cut to the bin when encoded
        info["sample"].update(
            context_bin=first.context.bin,
            target_tokens=first.context.target_tokens,
            document=first.context.origin,
            document_chars=len(first.context.text),
        )
    if json_out:
        typer.echo(json.dumps(info, indent=2, ensure_ascii=False))
        return
    console = wide_console()
    console.print(plain(f"{workload.name}: {workload.description}", style="bold"))
    facts = Table(show_header=False, box=None)
    facts.add_column(no_wrap=True)
    facts.add_column(overflow="fold")
    facts.add_row("source", plain(workload.source))
    facts.add_row("prompts", f"{info['prompts']} ({split} split), {info['turns']} turns")
    chat = {True: "chat template", False: "plain completion (no chat template)"}.get(
        info["chat"], "each prompt as its own workload says (a stream: chat template or plain completion)"
    )
    facts.add_row("prompt", chat)
    facts.add_row("max new tokens", str(workload.max_new_tokens))
    if info["context_bins"]:
        facts.add_row("context bins", ", ".join(f"{b}: {n}" for b, n in info["context_bins"].items()))
    if first.context is not None:
        facts.add_row(
            "sample document",
            plain(
                f"{first.context.origin} ({len(first.context.text):,} characters), "
                f"cut to bin {first.context.bin} ({first.context.target_tokens:,} "
                "tokens of the target's tokenizer) when encoded"
            ),
        )
    console.print(facts)
    categories = Table(title="categories")
    categories.add_column("category")
    categories.add_column("prompts", justify="right")
    for category, n in info["categories"].items():
        categories.add_row(category, str(n))
    console.print(categories)
    sample = Table(title=f"sample prompt {first.prompt_id} ({first.category})", show_lines=True)
    sample.add_column("turn", justify="right")
    sample.add_column("text")
    for i, turn in enumerate(first.turns, start=1):
        shown = turn if len(turn) <= SAMPLE_CHARS else turn[:SAMPLE_CHARS] + " …"
        sample.add_row(str(i), plain(shown))
    console.print(sample)


def register(app: typer.Typer) -> None:
    app.add_typer(workloads_app, name="workloads")
