"""What `specbench recommend` prints about load (`specbench.analysis.load.verdicts`, `specbench.analysis.load.slo`):
the per-load table, the verdict at each load, the crossover line per workload, vLLM's per-batch-size
schedules, and the SLO answers."""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from specbench.analysis.load.table import load_label
from specbench.analysis.load.verdicts import level_line
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.cli.fit_cmd import text_row
from specbench.records.summary import PERCENTILES


def _ci(point, lo, hi) -> str:
    if point is None or point != point:
        return "-"
    if lo is None or lo != lo or hi is None or hi != hi:
        return f"{point:.2f}×"
    return f"{point:.2f}× [{lo:.2f}, {hi:.2f}]"


def _ms(row: dict, name: str) -> str:
    values = [row.get(f"{name}_p{p}_s") for p in PERCENTILES]
    return "/".join("-" if v is None or v != v else f"{v * 1e3:.0f}" for v in values)


def _label(row: dict) -> str:
    name = "target only" if row["drafter"] == TARGET_ONLY else f"{row['drafter_label']} γ={int(row['gamma'])}"
    return name + ("" if row["tree"] == "chain" else f" tree {row['tree']}")


def _tokens(value) -> str:
    return "-" if value is None or value != value else f"{value:.1f}"


def load_table(summary: dict) -> Table:
    """Per (workload, load, configuration): tokens/s per request and for the system, latency percentiles,
    and the speedups against the target-only run at the same load."""
    axis = summary["axis"]
    table = Table(
        title=f"Per load ({summary['axis_label']}): speedups against target only at the same load, "
        "95% intervals (unadjusted)",
        caption="rows read the same (configuration, baseline) pairs as the verdicts: those timed "
        "undisturbed on both sides, else all (disturbed: yes); req: requests used; (the verdict's): "
        "the configuration the verdict at that load names. "
        "tok/s: per request = decode tokens ÷ decode time of each request; "
        "system = output tokens ÷ wall time of the whole batch. Latencies "
        "in ms, p50/p90/p99 over requests; ITL: each request's mean gap",
    )
    for c in (
        "workload",
        "load",
        "configuration",
        "req",
        "per-request tok/s",
        "speedup",
        "system tok/s",
        "system speedup",
        "TTFT ms",
        "ITL ms",
        "latency ms",
        "disturbed",
    ):
        table.add_column(c, overflow="fold")
    for r in summary["table"]:
        named = " (the verdict's)" if r.get("verdict_named") else ""
        text_row(
            table,
            r["workload"],
            load_label(axis, r[axis]),
            _label(r) + named,
            str(r["requests"]),
            _tokens(r["tokens_per_s"]),
            _ci(r.get("speedup"), r.get("speedup_lo"), r.get("speedup_hi")),
            _tokens(r["system_tokens_per_s"]),
            _ci(r.get("system_speedup"), r.get("system_speedup_lo"), r.get("system_speedup_hi")),
            _ms(r, "ttft"),
            _ms(r, "itl"),
            _ms(r, "latency"),
            "yes" if r.get("timing_disturbed") else "",
        )
    return table


def latency_speedup_table(summary: dict) -> Table:
    """Each latency percentile's speedup (baseline ÷ configuration; above 1: faster) with its interval."""
    axis = summary["axis"]
    table = Table(
        title="Latency speedups against target only at the same load (baseline ÷ configuration; "
        "paired prompt bootstrap, 95%)"
    )
    for c in (
        "workload",
        "load",
        "configuration",
        "TTFT p50 / p90 / p99",
        "ITL p50 / p90 / p99",
        "latency p50 / p90 / p99",
    ):
        table.add_column(c, overflow="fold")
    for r in summary["table"]:
        if r["drafter"] == TARGET_ONLY:
            continue
        cells = [
            " / ".join(
                _ci(r.get(f"{m}_p{p}_speedup"), r.get(f"{m}_p{p}_speedup_lo"), r.get(f"{m}_p{p}_speedup_hi"))
                for p in PERCENTILES
            )
            for m in ("ttft", "itl", "latency")
        ]
        text_row(table, r["workload"], load_label(axis, r[axis]), _label(r), *cells)
    return table


def verdict_table(summary: dict) -> Table:
    axis = summary["axis"]
    table = Table(title="The verdict at each load (the same decision rule as the main verdict)")
    for c in ("workload", "load", "verdict", "confident"):
        table.add_column(c, overflow="fold")
    for v in summary["verdicts"]:
        text_row(table, v.workload, load_label(axis, v.load), v.short, "yes" if v.confident else "no")
    return table


def print_load(summary: dict, console) -> None:
    """Everything about load, in reading order."""
    if summary["table"]:
        console.print(load_table(summary))
        console.print(latency_speedup_table(summary))
    if summary["verdicts"]:
        console.print(verdict_table(summary))
    for line in summary["lines"]:
        console.print(Text(f"{line['workload']}: {line['text']}", style="bold"))
    for s in summary["schedules"]:
        setting = s["setting"]
        levels = "\n".join(level_line(e) for e in s["levels"])
        body = (
            f"{levels}\n\nnum_speculative_tokens_per_batch_size: {s['ranges']}\n\n{setting.snippet}\n\n"
            + "\n".join(f"note: {n}" for n in setting.notes)
            + f"\nchecked: {setting.checked}"
        )
        console.print(
            Panel(
                Text(body),
                title=Text(f"{s['workload']} · {s['drafter_label']} · vLLM γ per batch size"),
                border_style="cyan" if setting.supported else "red",
            )
        )
    if summary["schedule_asked"] and summary["verdicts"] and not summary["schedules"]:
        console.print(
            Text(
                "vLLM per batch size: no schedule — no load has a confident yes on undisturbed timing (see "
                "the verdicts above)",
                style="yellow",
            )
        )
    for note in summary.get("notes", []):
        console.print(Text(f"note: {note}", style="dim"))


def print_slo(answers: list[dict], axis_label: str, console) -> None:
    """Per workload and SLO: how far each configuration keeps it, and the one-line comparison."""
    for answer in answers:
        table = Table(
            title=Text(
                f"{answer['workload']} · {answer['slo']['metric']} p{answer['slo']['percentile']} ≤ "
                f"{answer['slo']['limit_s'] * 1e3:g} ms against {axis_label}"
            )
        )
        for c in ("configuration", "kept up to (95% range)", "highest measured load that keeps it"):
            table.add_column(c, overflow="fold")
        for e in answer["configurations"]:
            kept = e["highest_measured_kept"]
            text_row(table, _label({**e, "drafter": e["drafter"]}), e["text"], "-" if kept is None else f"{kept:g}")
        console.print(table)
        console.print(Text(f"{answer['workload']}: {answer['text']}", style="bold"))
