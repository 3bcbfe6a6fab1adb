"""What `specbench recommend` prints about what serving costs (`specbench.analysis.load.operating`,
`specbench.analysis.load.goodput`): goodput, cost per million output tokens and energy per token at every load, with
and without speculation; the energy- and throughput-optimal γ; the goodput objective's answers."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from specbench.analysis.load.table import load_label
from specbench.cli.fit_cmd import text_row


def _value(row: dict, name: str, digits: str = ".3g", scale: float = 1.0) -> str:
    point = row.get(name)
    if point is None or point != point:
        return "-"
    lo, hi = row.get(f"{name}_lo"), row.get(f"{name}_hi")
    text = f"{point * scale:{digits}}"
    if lo is None or lo != lo or hi is None or hi != hi:
        return text
    return f"{text} [{lo * scale:{digits}}, {hi * scale:{digits}}]"


def _ratio(row: dict, name: str) -> str:
    point = row.get(name)
    if point is None or point != point:
        return "-"
    lo, hi = row.get(f"{name}_lo"), row.get(f"{name}_hi")
    if lo is None or lo != lo:
        return f"{point:.2f}×"
    return f"{point:.2f}× [{lo:.2f}, {hi:.2f}]"


def _label(row: dict) -> str:
    name = "target only" if int(row["gamma"]) == 0 else f"{row['drafter_label']} γ={int(row['gamma'])}"
    return name + ("" if row["tree"] == "chain" else f" tree {row['tree']}")


def operating_table(data: dict, axis: str) -> Table:
    """Per (workload, load, configuration): system tokens/s, goodput, cost and energy, and each against target only."""
    rows = data["table"]
    price, slos = data["price_per_hour"], data["slos"]
    energy = any(r.get("joules_per_token") is not None for r in rows)
    caption = [
        "system tok/s: output tokens ÷ wall time; 95% prompt-bootstrap intervals; × target only: the same "
        "quantity against the target-only run at the same load (paired)"
    ]
    if slos:
        caption.append(
            "goodput: requests/s meeting "
            + ", ".join(_slo_text(s) for s in slos)
            + "; kept: whether each target's percentile held at that load"
        )
    if price is not None:
        caption.append(f"cost: per million output tokens at {price:g} per hour")
    if energy:
        caption.append(f"energy above idle ({data['energy_counter']}); J/acc: per accepted draft token")
    table = Table(title="What serving costs, per load (docs/operating-cost.md)", caption="; ".join(caption))
    columns = ["workload", "load", "configuration", "system tok/s"]
    if slos:
        columns += ["goodput req/s", "good", "kept", "goodput × target only"]
    if price is not None:
        columns += ["cost /Mtok", "cost × target only"]
    if energy:
        columns += ["J/token", "J/acc", "energy × target only"]
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        cells = [r["workload"], load_label(axis, r[axis]), _label(r), _value(r, "system_tokens_per_s", ".1f")]
        if slos:
            kept = r.get("targets_kept")
            cells += [
                _value(r, "goodput"),
                "-" if r.get("attainment") is None else f"{r['attainment']:.0%}",
                "-" if kept is None else ("yes" if kept else "no"),
                _ratio(r, "goodput_ratio"),
            ]
        if price is not None:
            cells += [_value(r, "cost_per_mtok"), _ratio(r, "cost_ratio")]
        if energy:
            cells += [_value(r, "joules_per_token"), _value(r, "joules_per_accepted"), _ratio(r, "energy_ratio")]
        text_row(table, *cells)
    return table


def _slo_text(slo: dict) -> str:
    return f"{slo['metric']} p{slo['percentile']} ≤ {slo['limit_s'] * 1e3:g} ms"


def print_operating(data: dict, axis: str, console) -> None:
    """The table, the optimal γ lines, and the notes (why a column is missing)."""
    if not data["table"]:
        return
    console.print(operating_table(data, axis))
    for entry in data["optimal"]:
        console.print(Text(f"{entry['workload']}: {entry['text']}", style="bold"))
    for note in data["notes"]:
        console.print(Text(f"note: {note}", style="dim"))


def print_goodput(answers: list[dict], data: dict, axis: str, console) -> None:
    """The goodput objective: the per-load table, then one line per workload."""
    print_operating(data, axis, console)
    for answer in answers:
        console.print(Text(f"{answer['workload']}: {answer['text']}", style="bold green"))
