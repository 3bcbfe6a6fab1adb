"""The HTML report's shared look and markup: its constants (the page's CSS, which image an ``<img>`` shows and at
what size, the engines' display names), the one escape (`esc`: every piece of text from the results — labels,
notes, settings, the spec — goes through it) and the building blocks every section uses (tables, sections,
intervals, the names of a row's series, scenario and configuration).

The report — one self-contained ``index.html`` beside its figures — is put together by
`specbench.figures.report_page` from the sections in `specbench.figures.report_sections`, one module each.
"""

from __future__ import annotations

import math

from specbench.analysis.load.table import load_label
from specbench.figures.plot_data import series_name
from specbench.text_sinks import for_html

INDEX = "index.html"
IMAGE_PREFERENCE = ("png", "svg")  # what an <img> shows; PDF is linked only
CSS_PX_PER_PNG_PX = 96 / 150  # PNGs are written at 150 dpi: shown at their physical size, crisp on HiDPI
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


def row_series(row) -> str:
    """A table row's drafter and tree (`series_name`), and its verify-length schedule when not fixed."""
    schedule = row.get("schedule")
    name = series_name(row["drafter_label"], row["tree"])
    return name if not isinstance(schedule, str) or schedule == "fixed" else f"{name} · schedule {schedule}"


def scenario_name(keys: dict) -> str:
    """The workload, and the load level when the scenario has one (a serving sweep's concurrency or rate)."""
    load = [load_label(k, keys[k]) for k in ("concurrency", "request_rate") if k in keys]
    return " · ".join([str(keys["workload"]), *load])


def configuration_name(row: dict) -> str:
    """``target only`` or ``<drafter label> γ=<γ>`` for a row of the load tables."""
    return "target only" if row["gamma"] == 0 else f"{row['drafter_label']} γ={int(row['gamma'])}"
