"""The HTML report of a results folder: one self-contained ``index.html`` beside its figures.

The page works opened from disk, offline: inline CSS, no script, no external asset; figures are
the files `specbench.figures.plot` wrote next to it (PNG, else SVG, in ``<img>``; every written format
linked), and only files written in this run are referenced. Every piece of text from the results
(labels, notes, settings, the spec) is HTML-escaped. Sections: recommendation, engine settings,
figures (each with a line on how to read it, or the reason it was skipped), fitted α and goodness
of fit, costs, the lossless check, the environment from run.json and the sweep spec.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from specbench.analysis.load.slo import Slo
from specbench.analysis.load.table import load_label
from specbench.analysis.recommendation.result import recommendation_lines
from specbench.analysis.statistics.intervals import N_BOOT
from specbench.analysis.strategies import strategy_table
from specbench.analysis.stream_adaptation import WINDOW, per_prompt, recovery_table, window_table
from specbench.analysis.verdicts.decision import gamma_span
from specbench.analysis.verdicts.stopping_report import look_rows, summary_lines
from specbench.errors import SpecbenchError
from specbench.figures.plot import DEFAULT_FORMATS, RenderedFigure, figures_for, render_figure
from specbench.figures.plot_data import PlotData, load_plot_data, series_name
from specbench.records.store import atomic_write_bytes
from specbench.text_sinks import for_html

INDEX = "index.html"
IMAGE_PREFERENCE = ("png", "svg")  # what an <img> shows; PDF is linked only
CSS_PX_PER_PNG_PX = 96 / 150  # PNGs are written at 150 dpi: shown at their physical size, crisp on HiDPI
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "transformers": "transformers"}
CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0;
       background: #fafafa; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5em 2em 4em; background: #fff; }
h1 { margin-bottom: 0.1em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
nav a { margin-right: 1em; } .muted { color: #666; } .note { color: #555; font-size: 0.92em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f5f5f5; border: 1px solid #e2e2e2; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
figure { margin: 1.5em 0 2.5em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { margin-top: 0.4em; } .skipped { background: #fff8e1; border-left: 4px solid #f0b400;
                                             padding: 0.5em 0.8em; margin: 0.6em 0; }
.verdict-yes { color: #176f2c; font-weight: 600; } .verdict-no { color: #8a5a00; font-weight: 600; }
"""


class Html(str):
    """Markup already built from escaped parts: `table` and `esc` pass it through unchanged."""


def esc(value) -> str:
    """Text → HTML-escaped text, control characters written as escapes (`specbench.text_sinks.for_html`, the
    report's one HTML sink); Html passes through."""
    return value if isinstance(value, Html) else for_html(value)


def num(value, digits: int = 3, suffix: str = "") -> str:
    """A number for a table cell; '–' for None and NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, (int, float)) or hasattr(value, "__float__"):
        value = float(value)
        if not math.isfinite(value):
            return "–"
        return f"{value:.{digits}f}{suffix}"
    return str(value)


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def interval(point, lo, hi, digits: int = 3, suffix: str = "") -> str:
    """'1.23× [1.05, 1.44]' for a table cell; what is missing in words ('1.23× (no interval)', 'not measured'),
    never a placeholder inside the figure."""
    if not _finite(point):
        return "not measured"
    if not (_finite(lo) and _finite(hi)):
        return f"{num(point, digits)}{suffix} (no interval)"
    return f"{num(point, digits)}{suffix} [{num(lo, digits)}, {num(hi, digits)}]"


def table(headers: list[str], rows: list[list], numeric: set[int] = frozenset()) -> Html:
    """A table; every cell escaped (Html cells kept), columns in ``numeric`` right-aligned."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    cell = ('<td class="num">{}</td>', "<td>{}</td>")
    body = "".join(
        "<tr>" + "".join(cell[i not in numeric].format(esc(c)) for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    return Html(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def section(anchor: str, title: str, *parts: str) -> Html:
    return Html(f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{"".join(parts)}</section>')


def paragraph(text: str, cls: str = "") -> Html:
    attribute = f' class="{esc(cls)}"' if cls else ""
    return Html(f"<p{attribute}>{esc(text)}</p>")


def bullet_list(items: list[str], cls: str = "note") -> Html:
    if not items:
        return Html("")
    return Html(f'<ul class="{esc(cls)}">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>")


def pre(text: str) -> Html:
    return Html(f"<pre><code>{esc(text)}</code></pre>")


# ----------------------------------------------------------------------------- sections


def header(data: PlotData, generated: str) -> Html:
    spec = sweep_spec(data.run_info) or {}
    plain = data.run_info.get("sweep")
    name = spec.get("name") or (plain if isinstance(plain, str) else None) or data.folder.name
    targets = ", ".join(sorted(map(str, data.records["target"].unique())))
    lines = [
        f"target {targets} · {len(data.records)} records · "
        f"{data.records['prompt_id'].nunique()} prompts · objective {data.objective}",
        f"results {data.folder} · report generated {generated}",
    ]
    description = spec.get("description")
    return Html(
        f"<h1>specbench report — {esc(name)}</h1>"
        + (paragraph(description) if description else "")
        + "".join(paragraph(line, "muted") for line in lines)
    )


def row_series(row) -> str:
    """A table row's drafter and tree (`series_name`), and its verify-length schedule when not fixed."""
    schedule = row.get("schedule")
    name = series_name(row["drafter_label"], row["tree"])
    return name if not isinstance(schedule, str) or schedule == "fixed" else f"{name} · schedule {schedule}"


def scenario_name(keys: dict) -> str:
    """The workload, and the load level when the scenario has one (a serving sweep's concurrency or rate)."""
    load = [load_label(k, keys[k]) for k in ("concurrency", "request_rate") if k in keys]
    return " · ".join([str(keys["workload"]), *load])


def recommendation_section(data: PlotData) -> Html:
    """One row per scenario: the one configuration to deploy (or the verdict's words when there is none), its
    adjusted interval and the γ within it; then each scenario's recommendation and verdict in words."""
    if not data.recommendations:
        return section(
            "recommendation", "Recommendation", paragraph("No recommendation could be made."), bullet_list(data.notes)
        )
    rows = []
    for rec in data.recommendations:
        k, choice = rec.keys, rec.final
        flat = rec.flat_range
        rows.append(
            [
                scenario_name(k),
                k["target"],
                num(k["temperature"], 2),
                Html(f'<span class="verdict-{"yes" if choice else "no"}">{esc(rec.headline())}</span>'),
                interval(choice.speedup, choice.lo, choice.hi, 2, "×") if choice else "none recommended",
                gamma_span(flat["gammas"]) if flat else "none recommended",
                num(rec.baseline_tokens_per_s, 1),
                rec.n_prompts,
            ]
        )
    headers = [
        "workload",
        "target",
        "T",
        "verdict",
        "speedup [adjusted 95% CI]",
        "γ within the interval",
        "baseline tokens/s",
        "prompts",
    ]
    verdicts = [
        f"{scenario_name(rec.keys)}: " + "; ".join(recommendation_lines(rec)) + f" — {rec.verdict}"
        for rec in data.recommendations
    ]
    verdicts += [
        f"{rec.keys['workload']}: {rec.schedules['text']}"
        for rec in data.recommendations
        if getattr(rec, "schedules", None) is not None
    ]
    notes = sorted({n for rec in data.recommendations for n in rec.notes} | set(data.notes))
    return section(
        "recommendation",
        "Recommendation",
        table(headers, rows, {2, 4, 6, 7}),
        bullet_list(verdicts, ""),
        Html("<h3>Notes</h3>") + bullet_list(notes) if notes else "",
    )


def stopping_section(data: PlotData) -> Html:
    """An adaptive sweep's looks per workload (and load): prompts, answer, best option and its adjusted interval
    (`specbench.analysis.verdicts.stopping_report.look_rows`, the rows the text table prints)."""
    if not data.history:
        return section(
            "stopping",
            "Stopping history",
            paragraph(
                "A fixed grid: every prompt was measured, then judged once. A verdict picks the best "
                "of the configurations, so its interval is adjusted for that choice (docs/fit.md, "
                "'Sweeps that decide'); `specbench sweep --until-decided` measures until each "
                "workload is decided instead."
            ),
        )
    rows = [
        [
            r["workload"],
            r["look"],
            r["prompts"],
            "none" if r["timed"] is None else r["timed"],
            r["said"],
            r["best"],
            r["interval"],
            r["dropped"],
        ]
        for r in look_rows(data.history)
    ]
    outcome = bullet_list([esc(line) for line in summary_lines(data.history)], cls="")
    return section(
        "stopping",
        "Adaptive sweep: stopping history",
        paragraph(
            "Each workload was measured look by look until its verdict was confident; intervals "
            "are adjusted for the planned looks and for picking the best configuration "
            "(docs/fit.md, 'Sweeps that decide')."
        ),
        outcome,
        table(
            [
                "workload",
                "look",
                "prompts",
                "timed prompts",
                "answer",
                "best",
                "speedup [adjusted]",
                "dropped from timing",
            ],
            rows,
            numeric={1, 2, 3},
        ),
    )


def confirmation_section(data: PlotData) -> Html:
    """`specbench confirm`'s report: per target the prediction against what fresh prompts realized, held or
    missed, the regret against the best contender, losslessness; nothing when the folder was not confirmed."""
    report = data.confirmation
    if report is None:
        return Html("")
    rows = []
    for state in report.targets.values():
        target, last = state.target, state.last
        prediction = target.prediction
        check = last.check if last else None
        rows.append(
            [
                target.name,
                target.chosen.name,
                prediction.interval_text if prediction else "–",
                check.realized.text if check else "–",
                str(check.outcome) if check else "–",
                f"{last.regret.best} at {last.regret.ratio_text}" if last and last.regret.best else "–",
                last.regret.answer.word if last else "–",
                last.n_prompts if last else 0,
                (last.cliff or "–") if last else "–",
                (last.lossless or "–") if last else "–",
            ]
        )
    return section(
        "confirmation",
        "Confirmation on fresh prompts",
        paragraph(
            "The recommendation was run again, live, on prompts the sweep never used, beside the "
            "target alone and its contenders (the engine's own adaptive mechanisms, the other γ the "
            "sweep named), under the sweep's timing protocol (`specbench confirm`). Held: the "
            "realized interval lies on the verdict's side of 1 and meets the predicted one; regret: "
            "the best contender's tokens/s ÷ the recommendation's (docs/fit.md, 'Recommendations "
            "that prove themselves')."
        ),
        table(
            [
                "target",
                "configuration",
                "predicted",
                "realized",
                "prediction",
                "best contender",
                "beats it",
                "fresh prompts",
                "cliff",
                "lossless",
            ],
            rows,
            numeric={7},
        ),
        bullet_list(report.lines(), cls=""),
        bullet_list([f"absent: {line}" for line in report.absent] + [f"note: {line}" for line in report.notes]),
    )


def settings_section(data: PlotData) -> Html:
    parts = []
    for rec in data.recommendations:
        if rec.final is None:
            continue
        parts.append(Html(f"<h3>{esc(scenario_name(rec.keys))}: {esc(rec.final.describe())}</h3>"))
        for engine, setting in rec.settings.items():
            title = ENGINE_NAMES.get(engine, engine) + ("" if setting.supported else " (not fully expressible)")
            parts.append(Html(f"<h4>{esc(title)}</h4>"))
            parts.append(pre(setting.snippet) if setting.snippet else paragraph("no setting for this engine"))
            parts.append(bullet_list(setting.notes + [f"checked: {setting.checked}"]))
    if not parts:
        parts = [
            paragraph(
                "No configuration is recommended, so there is nothing to paste: serve the target "
                "model without speculation."
            )
        ]
    return section("settings", "Engine settings to paste", *parts)


def configuration_name(row: dict) -> str:
    """``target only`` or ``<drafter label> γ=<γ>`` for a row of the load tables."""
    return "target only" if row["gamma"] == 0 else f"{row['drafter_label']} γ={int(row['gamma'])}"


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
        levels = [
            f"concurrency {e['concurrency']}: "
            + (f"K = {e['K']} — {e['why']}" if e["K"] is not None else f"absent — {e['why']}")
            for e in s["levels"]
        ]
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


def image_for(files: dict[str, Path]) -> Path | None:
    return next((files[f] for f in IMAGE_PREFERENCE if f in files), None)


def figure_block(fig: RenderedFigure, out_dir: Path) -> Html:
    spec = fig.spec
    if fig.skipped:
        return Html(
            f'<div class="skipped" id="{esc(spec.name)}"><strong>{esc(spec.title)}</strong> — skipped: '
            f"{esc(fig.skipped)}</div>"
        )
    image = image_for(fig.files)
    links = " · ".join(
        f'<a href="{esc(relative(path, out_dir))}">{esc(fmt.upper())}</a>' for fmt, path in fig.files.items()
    )
    img = (
        f'<img src="{esc(relative(image, out_dir))}" alt="{esc(spec.title)}"{size_attributes(image)}>'
        if image
        else paragraph("(PDF only: open the link below)", "muted")
    )
    return Html(
        f'<figure id="{esc(spec.name)}"><h3>{esc(spec.title)}</h3>{img}<figcaption>'
        f'<strong>How to read:</strong> {esc(spec.how_to_read)} <span class="muted">Files: {links}</span>'
        "</figcaption></figure>"
    )


def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG's IHDR chunk; None for anything else."""
    head = Path(path).read_bytes()[:24]
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def size_attributes(image: Path) -> str:
    """width/height attributes that show a PNG at its physical size (SVGs carry their own)."""
    size = png_size(image) if image.suffix == ".png" else None
    if size is None:
        return ""
    return f' width="{round(size[0] * CSS_PX_PER_PNG_PX)}" height="{round(size[1] * CSS_PX_PER_PNG_PX)}"'


def relative(path: Path, out_dir: Path) -> str:
    return Path(path).resolve().relative_to(Path(out_dir).resolve()).as_posix()


def figures_section(figures: list[RenderedFigure], out_dir: Path) -> Html:
    skipped = [f for f in figures if f.skipped]
    summary = (
        paragraph(
            f"{len(skipped)} figure(s) skipped because their data are absent; the reason "
            "stands where the figure would be.",
            "note",
        )
        if skipped
        else ""
    )
    return section("figures", "Figures", summary, *[figure_block(f, out_dir) for f in figures])


def acceptance_section(data: PlotData) -> Html:
    if data.fits.empty:
        return section("acceptance", "Fitted acceptance", paragraph("No speculative records: nothing was fitted."))
    rows = [
        [
            r["workload"],
            row_series(r),
            num(r["temperature"], 2),
            r["gammas"],
            interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
            num(r["alpha_observed"]),
            r["model"],
            num(r["decay"]),
            num(r["p_constant_vs_free"], 3),
            r["n_prompts"],
            r["trials"],
            "; ".join(x for x in (r["flag"], r["notes"]) if x),
        ]
        for _, r in data.fits.iterrows()
    ]
    fits = table(
        [
            "workload",
            "drafter",
            "T",
            "γ measured",
            "α̂ [95% CI]",
            "α observed",
            "model",
            "decay d",
            "p (constant vs per-position)",
            "prompts",
            "draft positions tested",
            "flags and notes",
        ],
        rows,
        {2, 4, 5, 7, 8, 9, 10},
    )
    parts = [
        paragraph(
            "α̂: maximum-likelihood α of the geometric model, pooled over γ (interval: prompt "
            "bootstrap, or exact binomial where stated). α observed: accepted ÷ drafted. The p-value "
            "tests constant α against one rate per draft position (see docs/fit.md).",
            "note",
        ),
        fits,
    ]
    if not data.goodness.empty:
        rows = [
            [
                r["workload"],
                row_series(r),
                r["gamma"],
                r["rounds"],
                num(r["tau_observed"]),
                num(r["tau_predicted"]),
                f"{r['residual']:+.3f}",
                num(r["z"], 2),
            ]
            for _, r in data.goodness.iterrows()
        ]
        parts += [
            Html("<h3>Goodness of fit: observed vs predicted τ</h3>"),
            paragraph(
                "Predicted over each round's own draft length; z = residual ÷ the model's standard "
                "error (rounds treated as independent, so |z| a little above 2 is not alarming).",
                "note",
            ),
            table(
                ["workload", "drafter", "γ", "rounds", "τ observed", "τ predicted", "residual", "z"],
                rows,
                {2, 3, 4, 5, 6, 7},
            ),
        ]
    if not data.category_fits.empty:
        rows = [
            [
                r["workload"],
                r["category"],
                row_series(r),
                interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
                num(r["alpha_observed"]),
                r["n_prompts"],
            ]
            for _, r in data.category_fits.iterrows()
        ]
        parts += [
            Html("<h3>α̂ by prompt category</h3>"),
            table(["workload", "category", "drafter", "α̂ [95% CI]", "α observed", "prompts"], rows, {3, 4, 5}),
        ]
    if not data.context_bins.empty:
        rows = [
            [
                r["workload"],
                series_name(r["drafter_label"], r["tree"]),
                r["gamma"],
                r["context_bin"],
                num(r["prompt_tokens"], 0),
                r["n_prompts"],
                interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
                num(r["alpha_observed"]),
                interval(r["tau"], r["tau_lo"], r["tau_hi"], 2),
            ]
            for _, r in data.context_bins.iterrows()
        ]
        parts += [
            Html("<h3>α̂ and τ by context length</h3>"),
            paragraph(
                "Long-context prompts: the same documents and tasks cut to each bin; prompt tokens is "
                "the bin's mean encoded prompt length.",
                "note",
            ),
            table(
                [
                    "workload",
                    "drafter",
                    "γ",
                    "bin",
                    "prompt tokens",
                    "prompts",
                    "α̂ [95% CI]",
                    "α observed",
                    "τ [95% CI]",
                ],
                rows,
                {2, 4, 5, 6, 7, 8},
            ),
        ]
    return section("acceptance", "Fitted acceptance", *parts)


def costs_section(data: PlotData) -> Html:
    fitted = data.costs[data.costs["verify_a_s"].notna()] if "verify_a_s" in data.costs else pd.DataFrame()
    if fitted.empty:
        return section(
            "costs", "Costs", paragraph("No cost model: costs need live timings and a target-only baseline.")
        )
    rows = [
        [
            r["workload"],
            row_series(r),
            f"{1e3 * r['verify_a_s']:.2f} + {1e3 * r['verify_b_s']:.3f}·k"
            + (f" (+ knee at {r['verify_knee']:.0f})" if r["verify_model"] == "knee" else ""),
            num(1e3 * r["target_step_s"], 2),
            num(1e3 * r["draft_step_s"], 2),
            num(r["c"]),
            num(1e3 * r["overhead_s"], 2),
            num(r["propose_rate"], 2),
            r["cost_notes"] or "",
        ]
        for _, r in fitted.iterrows()
    ]
    return section(
        "costs",
        "Costs (measured, batch 1)",
        paragraph(
            "t(k): target forward over k = drafted + 1 tokens, in ms; c = draft step ÷ target "
            "step; ρ = share of rounds that drafted at all.",
            "note",
        ),
        table(
            [
                "workload",
                "drafter",
                "verify t(k) [ms]",
                "target step [ms]",
                "draft step [ms]",
                "c",
                "overhead per round [ms]",
                "ρ",
                "notes",
            ],
            rows,
            {3, 4, 5, 6, 7},
        ),
    )


def strategies_section(data: PlotData) -> Html:
    """Nested speculation vs sequential per configuration; nothing when no unit ran nested."""
    rows = [
        [
            r["workload"],
            series_name(r["drafter_label"], r["tree"]),
            r["gamma"],
            r["units"],
            num(r["tokens_per_s"], 2),
            num(r["vs_sequential"], 3, "×"),
            num(r["hit_rate"], 3),
            num(r["draft_hidden_share"], 3),
            num(r["draft_share"], 3),
        ]
        for _, r in strategy_table(data.records).iterrows()
    ]
    if not rows:
        return Html("")
    return section(
        "strategies",
        "Nested speculation vs sequential",
        paragraph(
            "Hit rate: rounds (after each generation's first) that verified a draft prepared during "
            "the previous verification. Draft hidden / on path: drafting time that ran during "
            "verification and was used, and drafting still on the critical path, as shares of "
            "decode time. × sequential: tokens/s over the sequential run's on the same units.",
            "note",
        ),
        table(
            [
                "workload",
                "drafter",
                "γ",
                "units",
                "tokens/s",
                "× sequential",
                "hit rate",
                "draft hidden",
                "draft on path",
            ],
            rows,
            {2, 3, 4, 5, 6, 7, 8},
        ),
    )


def online_section(data: PlotData) -> Html:
    """Online adaptation over a stream: windows, recovery after each shift, and the verdicts; nothing without
    online units."""
    prompts = per_prompt(data.records)
    if prompts.empty:
        return Html("")
    windows = window_table(prompts)
    rows = [
        [
            r["workload"],
            r["drafter_label"],
            f"{r['first']}–{r['last']}",
            r["stream_segment"],
            r["versions"],
            interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
            interval(r["tau"], r["tau_lo"], r["tau_hi"], 2),
            interval(r["speedup"], r["speedup_lo"], r["speedup_hi"], 2, "×"),
            interval(r["speedup_with_training"], r["speedup_with_training_lo"], r["speedup_with_training_hi"], 2, "×"),
        ]
        for _, r in windows.iterrows()
    ]
    recovery = recovery_table(prompts)
    shifts = [
        [
            r["workload"],
            r["drafter_label"],
            r["shift_at"],
            r["segment"],
            num(r["alpha_before"]),
            num(r["alpha_first"]),
            num(r["alpha_end"]),
            num(r["recover_prompts"], 0),
            num(r["beats_static_at"], 0) if r["strategy"] == "online" else "–",
        ]
        for _, r in recovery.iterrows()
    ]
    verdicts = [
        paragraph(line["text"])
        for rec in data.recommendations
        if getattr(rec, "online", None)
        for line in rec.online["deployments"]
    ]
    return section(
        "online",
        "Online adaptation over the stream",
        *verdicts,
        paragraph(
            f"Windows of {WINDOW} prompts, cut at shift points; α and τ are ratios of sums with a "
            "t-interval over the window's prompts; speedups over the target alone, without and with "
            "the training seconds (docs/strategies.md).",
            "note",
        ),
        table(
            [
                "workload",
                "configuration",
                "prompts",
                "segment",
                "versions",
                "α [95% CI]",
                "τ [95% CI]",
                "speedup",
                "with training",
            ],
            rows,
            {5, 6, 7, 8},
        ),
        Html("<h3>Recovery after each shift point</h3>"),
        paragraph(
            "Recover: prompts from the shift until the windowed α reaches 90 % of the level the "
            "configuration ends the segment at; beats static: until an online drafter's windowed α "
            "exceeds the static drafter's.",
            "note",
        ),
        table(
            [
                "workload",
                "configuration",
                "shift at",
                "to",
                "α before",
                "α first",
                "α end",
                "recover (prompts)",
                "beats static at",
            ],
            shifts,
            {2, 4, 5, 6, 7, 8},
        ),
    )


def lossless_section(data: PlotData) -> Html:
    if data.lossless.empty:
        return section(
            "lossless",
            "Lossless check",
            paragraph("No greedy speculative units paired with the baseline: nothing to compare."),
        )
    rows = [[r["workload"], row_series(r), r["gamma"], f"{r['identical']:.0%}"] for _, r in data.lossless.iterrows()]
    return section(
        "lossless",
        "Lossless check",
        paragraph(
            "Greedy speculative decoding must reproduce the target-only output token for token: "
            "share of units whose output equals the baseline's.",
            "note",
        ),
        table(["workload", "drafter", "γ", "identical to baseline"], rows, {2, 3}),
    )


ENVIRONMENT_KEYS = (
    ("device", "device"),
    ("device_name", "device name"),
    ("device_memory_bytes", "device memory"),
    ("cuda_version", "CUDA"),
    ("capability", "compute capability"),
    ("cpu_threads", "CPU threads"),
    ("cpu_count", "CPU count"),
    ("dtype", "dtype"),
    ("git_commit", "git commit"),
    ("created", "created"),
    ("updated", "updated"),
    ("spec_hash", "spec hash"),
    ("schema_version", "schema version"),
    ("shards", "shards"),
)


def environment_rows(info: dict) -> list[list[str]]:
    """(what, value) rows: the known run.json keys first, then any other scalar, then versions."""
    rows = []
    for key, label in ENVIRONMENT_KEYS:
        if info.get(key) is not None:
            value = info[key]
            if key == "device_memory_bytes":
                value = f"{int(value) / 2**30:.1f} GiB"
            rows.append([label, value if isinstance(value, (str, int, float)) else json.dumps(value)])
    known = {k for k, _ in ENVIRONMENT_KEYS} | {"sweep", "spec", "versions", "previous_specs"}
    rows += [
        [key, str(value)]
        for key, value in info.items()
        if key not in known and isinstance(value, (str, int, float, bool))
    ]
    rows += [[f"version: {name}", version or "not installed"] for name, version in (info.get("versions") or {}).items()]
    return rows


def environment_section(data: PlotData) -> Html:
    rows = environment_rows(data.run_info)
    if "backend" in data.records:  # who measured what (docs/backends.md); null in older records = own
        counts = data.records["backend"].fillna("own").value_counts()
        rows.insert(0, ["measured by (backend)", ", ".join(f"{b} ({n} records)" for b, n in counts.items())])
    ran = Path(data.folder) / "backend.json"  # a serving backend's engine version and settings
    if ran.is_file():
        try:
            rows.insert(1, ["backend.json", ran.read_text()[:2000]])
        except OSError:
            pass
    body = table(["what", "value"], rows) if rows else paragraph("run.json records no environment.")
    return section("environment", "Environment (run.json)", body)


def sweep_spec(info: dict) -> dict | None:
    spec = info.get("sweep")
    return spec if isinstance(spec, dict) else info.get("spec") if isinstance(info.get("spec"), dict) else None


def spec_section(data: PlotData) -> Html:
    spec = sweep_spec(data.run_info)
    body = pre(json.dumps(spec, indent=2, default=str)) if spec else paragraph("run.json holds no sweep spec.")
    return section("spec", "Sweep spec", body)


NAV = (
    ("recommendation", "Recommendation"),
    ("stopping", "Stopping history"),
    ("confirmation", "Confirmation"),
    ("settings", "Engine settings"),
    ("load", "Load"),
    ("operating", "Cost"),
    ("figures", "Figures"),
    ("acceptance", "Acceptance"),
    ("costs", "Costs"),
    ("lossless", "Lossless check"),
    ("environment", "Environment"),
    ("spec", "Sweep spec"),
)


def render_html(data: PlotData, figures: list[RenderedFigure], out_dir: Path, generated: str) -> str:
    """The whole page as a string."""
    nav = Html(
        "<nav>"
        + "".join(
            f'<a href="#{esc(a)}">{esc(t)}</a>'
            for a, t in NAV
            if (a != "load" or data.load)
            and (a != "operating" or data.operating)
            and (a != "confirmation" or data.confirmation)
        )
        + "</nav>"
    )
    body = [
        header(data, generated),
        nav,
        recommendation_section(data),
        stopping_section(data),
        confirmation_section(data),
        settings_section(data),
        load_section(data),
        operating_section(data),
        figures_section(figures, out_dir),
        acceptance_section(data),
        costs_section(data),
        strategies_section(data),
        online_section(data),
        lossless_section(data),
        environment_section(data),
        spec_section(data),
    ]
    title = esc(f"specbench report — {data.folder.name}")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>'
        f"<style>{CSS}</style></head><body><main>{''.join(body)}</main></body></html>\n"
    )


# ----------------------------------------------------------------------------- entry point


@dataclass
class Report:
    index: Path
    figures: list[RenderedFigure]
    data: PlotData


def prepare_out_dir(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SpecbenchError(f"--out {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecbenchError(f"cannot create output folder {out}: {exc.strerror or exc}") from None
    return out


def write_report(data: PlotData, figures: list[RenderedFigure], out_dir: str | Path) -> Path:
    """Write ``out_dir/index.html`` for already rendered figures; returns its path."""

    out = Path(out_dir)
    index = out / INDEX
    atomic_write_bytes(
        index,
        render_html(data, figures, out, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")).encode("utf-8"),
    )
    index.chmod(0o644)  # a temporary file's 0600 would hide the page from a web server
    return index


def build_report(
    folder: str | Path,
    out_dir: str | Path,
    *,
    formats=DEFAULT_FORMATS,
    n_boot: int = N_BOOT,
    seed: int = 0,
    max_gamma: int | None = None,
    objective: str = "throughput",
    status: Callable[[str], None] | None = None,
    on_figure: Callable[[RenderedFigure], None] | None = None,
    hub_ids: Mapping[str, str] | None = None,
    check_settings: Callable[[PlotData], None] | None = None,
    slos: Sequence[Slo] = (),
    price_per_hour: float | None = None,
) -> Report:
    """Results folder → figures + index.html in ``out_dir``.

    ``status`` hears what is being done; ``on_figure`` each figure as it is rendered or skipped; ``hub_ids``
    names models in the engine settings; ``check_settings`` checks them with the engines (marks ``checked``);
    ``slos``: latency targets answered in the load section (a serving sweep), and whose goodput the cost section
    shows; ``price_per_hour``: the machine's price (default: the sweep's key), for the cost per token.
    """
    status = status or (lambda message: None)
    status("fitting acceptance and costs")
    data = load_plot_data(
        folder,
        n_boot=n_boot,
        seed=seed,
        max_gamma=max_gamma,
        objective=objective,
        hub_ids=hub_ids,
        slos=slos,
        price_per_hour=price_per_hour,
    )
    if check_settings is not None:
        status("checking the engine settings")
        check_settings(data)
    out = prepare_out_dir(out_dir)
    figures = []
    for spec in figures_for(data):
        status(f"rendering {spec.title}")
        figures.append(render_figure(spec, data, out, formats))
        if on_figure:
            on_figure(figures[-1])
    status("writing index.html")
    return Report(index=write_report(data, figures, out), figures=figures, data=data)
