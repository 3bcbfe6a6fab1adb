"""The report's load section (a serving sweep): the verdict at every load, the crossovers, and the latency targets
answered against load.
"""

from __future__ import annotations

from specbench.analysis.load.table import load_label
from specbench.analysis.load.verdicts import level_line
from specbench.figures.plot_data import PlotData
from specbench.figures.report import (
    Html,
    bullet_list,
    configuration_name,
    esc,
    interval,
    num,
    paragraph,
    pre,
    section,
    table,
)


def load_section(data: PlotData) -> Html:
    """A serving sweep's load axis: the crossover per workload, the verdict at every load, the per-load table
    and vLLM's per-batch-size schedules (`specbench.analysis.load.verdicts`); nothing for one load level."""
    load = data.load
    if not load:
        return Html("")
    axis = load["axis"]
    lines = [f"{r['workload']}: {r['text']}" for r in load["lines"]]
    verdicts = [
        [v.workload, load_label(axis, v.load), v.short, "yes" if v.confident else "no"] for v in load["verdicts"]
    ]
    rows = []
    for r in load["table"]:
        named = " (the verdict's)" if r.get("verdict_named") else ""
        rows.append(
            [
                r["workload"],
                load_label(axis, r[axis]),
                configuration_name(r) + named,
                r["requests"],
                num(r["tokens_per_s"], 1),
                interval(r.get("speedup"), r.get("speedup_lo"), r.get("speedup_hi"), 2, "×") if r["gamma"] else "–",
                num(r["system_tokens_per_s"], 1),
                interval(r.get("system_speedup"), r.get("system_speedup_lo"), r.get("system_speedup_hi"), 2, "×")
                if r["gamma"]
                else "–",
            ]
            + [
                "/".join(
                    num(r.get(f"{m}_p{p}_s") * 1e3 if r.get(f"{m}_p{p}_s") is not None else None, 0)
                    for p in (50, 90, 99)
                )
                for m in ("ttft", "itl", "latency")
            ]
            + [
                " / ".join(num(r.get(f"{m}_p90_speedup"), 2, "×") for m in ("ttft", "itl", "latency"))
                if r["gamma"]
                else "–",
                "yes" if r.get("timing_disturbed") else "",
            ]
        )
    parts = [
        paragraph(
            f"Load axis: {load['axis_label']}. Every speedup is against the target-only run at the same "
            "load, on the same prompts; intervals 95 % (docs/results-schema.md, 'Load').",
            "note",
        ),
        bullet_list(lines, ""),
        Html("<h3>The verdict at each load</h3>"),
        table(["workload", "load", "verdict", "confident"], verdicts),
        Html("<h3>Per load and configuration</h3>"),
        paragraph(
            "Each row reads the (configuration, baseline) pairs its load's verdict reads: those timed "
            "undisturbed on both sides, else all (disturbed: yes); requests: the requests used. "
            "(the verdict's): the configuration the verdict at that load names.",
            "note",
        ),
        table(
            [
                "workload",
                "load",
                "configuration",
                "requests",
                "per-request tok/s",
                "speedup [95% CI]",
                "system tok/s",
                "system speedup [95% CI]",
                "TTFT ms p50/p90/p99",
                "ITL ms p50/p90/p99",
                "latency ms p50/p90/p99",
                "p90 speedup TTFT / ITL / latency",
                "disturbed",
            ],
            rows,
            {3, 4, 6},
        ),
    ]
    for s in load["schedules"]:
        setting = s["setting"]
        levels = [level_line(e) for e in s["levels"]]
        parts += [
            Html(f"<h3>vLLM γ per batch size: {esc(s['workload'])} · {esc(s['drafter_label'])}</h3>"),
            bullet_list(levels, ""),
            pre(setting.snippet),
            bullet_list(setting.notes + [f"checked: {setting.checked}"]),
        ]
    if load["schedule_asked"] and not load["schedules"]:
        parts.append(
            paragraph("vLLM per batch size: no schedule — no load has a confident yes on undisturbed timing.", "note")
        )
    parts += slo_parts(load.get("slo", []), load["axis_label"])
    parts.append(bullet_list(load.get("notes", [])))
    return section("load", "Speculation against load", *parts)


def slo_parts(answers: list[dict], axis_label: str) -> list[Html]:
    """Per workload and latency target (`specbench.analysis.load.slo.slo_answers`): how far each configuration keeps
    it, and the one line comparing the best with target-only decoding."""
    parts = []
    for answer in answers:
        target = answer["slo"]
        title = (
            f"Latency target: {answer['workload']} · {target['metric']} p{target['percentile']} ≤ "
            f"{target['limit_s'] * 1e3:g} ms against {axis_label}"
        )
        rows = [
            [
                configuration_name(e),
                e["text"],
                "–" if e["highest_measured_kept"] is None else f"{e['highest_measured_kept']:g}",
            ]
            for e in answer["configurations"]
        ]
        parts += [
            Html(f"<h3>{esc(title)}</h3>"),
            table(["configuration", "kept up to (95 % range)", "highest measured load that keeps it"], rows),
            paragraph(answer["text"], "note"),
        ]
    return parts
