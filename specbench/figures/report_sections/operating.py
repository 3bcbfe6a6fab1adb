"""The report's cost section: goodput, cost per million output tokens and energy per token at every load, each
against the target alone.
"""

from __future__ import annotations

from specbench.analysis.load.table import load_label
from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, bullet_list, configuration_name, interval, num, paragraph, section, table


def _ratio_cell(row: dict, name: str) -> str:
    point = row.get(name)
    if point is None:
        return "–"
    if row.get(f"{name}_lo") is None:
        return num(point, 2, "×")
    return interval(point, row.get(f"{name}_lo"), row.get(f"{name}_hi"), 2, "×")


def _value_cell(row: dict, name: str, digits: int) -> str:
    if row.get(name) is None:
        return "–"
    if row.get(f"{name}_lo") is None:
        return num(row[name], digits)
    return interval(row[name], row.get(f"{name}_lo"), row.get(f"{name}_hi"), digits)


def operating_section(data: PlotData) -> Html:
    """Goodput, cost per million output tokens and energy per token at every load (`specbench.analysis.load.operating`),
    the energy- and throughput-optimal γ, and the goodput objective's answers; nothing without them."""
    op = data.operating
    if not op or not op["table"]:
        return Html("")
    rows = op["table"]
    axis = "request_rate" if any((r.get("request_rate") or 0) > 0 for r in rows) else "concurrency"
    price, slos = op["price_per_hour"], op["slos"]
    energy = any(r.get("joules_per_token") is not None for r in rows)
    headers = ["workload", "load", "configuration", "system tok/s [95% CI]"]
    if slos:
        headers += ["goodput req/s [95% CI]", "good", "targets kept", "goodput × target only"]
    if price is not None:
        headers += [f"cost per million output tokens (at {price:g}/hour)", "cost × target only"]
    if energy:
        headers += ["J per output token", "J per accepted token", "energy × target only"]
    cells = []
    for r in rows:
        row = [
            r["workload"],
            load_label(axis, r[axis]),
            configuration_name(r),
            _value_cell(r, "system_tokens_per_s", 1),
        ]
        if slos:
            kept = r.get("targets_kept")
            row += [
                _value_cell(r, "goodput", 3),
                num(r.get("attainment"), 0) if r.get("attainment") is None else f"{r['attainment']:.0%}",
                "–" if kept is None else ("yes" if kept else "no"),
                _ratio_cell(r, "goodput_ratio"),
            ]
        if price is not None:
            row += [_value_cell(r, "cost_per_mtok", 2), _ratio_cell(r, "cost_ratio")]
        if energy:
            row += [
                _value_cell(r, "joules_per_token", 3),
                _value_cell(r, "joules_per_accepted", 3),
                _ratio_cell(r, "energy_ratio"),
            ]
        cells.append(row)
    targets = "; ".join(f"{s['metric']} p{s['percentile']} ≤ {s['limit_s'] * 1e3:g} ms" for s in slos)
    parts = [
        paragraph(
            "System output tokens/s = output tokens ÷ the wall time of the batches; goodput = requests per "
            "second meeting every latency target" + (f" ({targets})" if targets else "") + "; cost = the "
            "price per hour ÷ 3600 ÷ system tokens/s × 10⁶"
            + (f"; energy above idle power ({op['energy_counter']})" if energy else "")
            + ". Intervals: 95 % "
            "prompt bootstrap; × target only: paired against the target-only run at the same load "
            "(docs/operating-cost.md).",
            "note",
        ),
        table(headers, cells, {3}),
        bullet_list([f"{e['workload']}: {e['text']}" for e in op["optimal"]], ""),
        bullet_list([f"{a['workload']}: {a['text']}" for a in op.get("goodput", [])], ""),
        bullet_list(op.get("notes", [])),
    ]
    return section("operating", "What serving costs", *parts)
