"""Rich renderings shared by commands, and the one way text reaches Rich.

Sweep names, prompt ids, categories, workload and drafter labels, model names, server answers
and error texts come from users and data: ``[/]``, ``[link=...]`` or ``:smile:`` in them must
print as written, never be read as Rich markup (a stray ``[/]`` raises MarkupError) or emoji. So:

* every console comes from `console`, which has markup, emoji and highlighting off: a ``str``
  printed, put in a table cell, title, caption or column is shown literally;
* Rich parses markup in a few places whatever the console says — a `Panel` title, a status
  spinner's text, a progress `TextColumn` with markup on — so those get a `plain` Text, and every
  progress column is made by `text_column` (markup off);
* styling is never written as markup: `plain(text, style)` and `styled(...)` build Text objects.

tests/test_architecture.py checks that no other module of the CLI creates a Console, imports
``rich.markup`` or makes a TextColumn.
"""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.progress import TextColumn
from rich.table import Table
from rich.text import Text

from specbench.text_sinks import for_terminal

_LITERAL = {"markup": False, "emoji": False, "highlight": False}


class LiteralConsole(Console):
    """A console whose strings (cells, titles, captions, column headers: everything Rich turns into Text
    itself) reach the terminal through `for_terminal`: an ESC or NUL from data is printed as its escape."""

    def render_str(self, text: str, **kwargs) -> Text:
        return super().render_str(for_terminal(text), **kwargs)


def console(stderr: bool = False, wide: bool = True) -> Console:
    """A console that prints text as written (no markup, no emoji codes, no control characters from data);
    ``wide``: it does not squeeze tables to 80 columns when output goes to a file or pipe."""
    probe = LiteralConsole(stderr=stderr, **_LITERAL)
    return probe if probe.is_terminal or not wide else LiteralConsole(stderr=stderr, width=160, **_LITERAL)


def plain(value, style: str = "") -> Text:
    """``value`` as literal text (never parsed as markup, control characters escaped), optionally styled."""
    return Text(for_terminal(value), style=style)


def styled(*parts) -> Text:
    """Literal pieces joined, each a str or a (text, style) pair: ``styled(("done", "green"), ": 3 units")``."""
    return Text.assemble(*((for_terminal(p[0]), p[1]) if isinstance(p, tuple) else for_terminal(p) for p in parts))


def text_column(template: str, style: str = "") -> TextColumn:
    """A progress column whose formatted text (task descriptions and fields: data) is shown literally."""
    return TextColumn(template, style=style, markup=False)


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def ms(seconds, digits: int = 2) -> str:
    """Seconds as milliseconds for a table cell; '-' for an unknown (None, NaN) value, never 'nan'."""
    return fmt(None if seconds is None else 1e3 * float(seconds), digits)


def signed(value, digits: int = 3) -> str:
    """'+0.012' / '-0.300'; '-' for an unknown (None, NaN) value, never '+nan'."""
    return "-" if fmt(value, digits) == "-" else f"{float(value):+.{digits}f}"


def estimate(point, lo, hi, digits: int = 3) -> str:
    """'0.712 [0.690, 0.731]'; '-' for an unknown point, '-' for an unknown end."""
    if fmt(point, digits) == "-":
        return "-"
    return f"{fmt(point, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def milliseconds(values) -> str:
    """Seconds as 'a/b/c' in ms with one decimal (percentiles p50/p90/p99); '-' for a missing value, and
    for all of them missing."""
    missing = [v is None or v != v for v in values]
    if all(missing):
        return "-"
    return "/".join("-" if gone else f"{v * 1e3:.1f}" for v, gone in zip(values, missing))


def print_run_report(report: dict) -> None:
    out = console()
    out.print(Panel(plain(report["text"] or "(no text)"), title="output", expand=False))
    m = report["metrics"]
    tree = f" tree {report['tree']}" if report.get("tree", "chain") != "chain" else ""
    table = Table(title=f"{report['drafter']} γ={report['gamma']}{tree} on {report['target']} ({report['device']})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning", style="dim")
    table.add_row("tokens/s", fmt(m["tokens_per_s"], 1), "decode tokens ÷ decode time (prefill excluded)")
    if "speedup" in report:
        table.add_row(
            "speedup",
            fmt(report["speedup"], 2) + "×",
            f"vs target-only {fmt(report['baseline']['tokens_per_s'], 1)} tokens/s, same prompt",
        )
        table.add_row(
            "lossless check",
            "identical" if report["identical_to_baseline"] else "differs",
            "output vs target-only (greedy must be identical)",
        )
    table.add_row(
        "α",
        fmt(m["alpha"]),
        f"accepted ÷ drafted = {m['accepted']} ÷ {m['drafted']}" + (" (tree: nodes offered)" if tree else ""),
    )
    table.add_row("τ", fmt(m["tau"], 2), "tokens per target forward, bonus included")
    table.add_row("target forwards", str(m["target_forwards"]), f"for {m['new_tokens']} new tokens")
    pos = " ".join(fmt(p, 2) for p in m["position_acceptance"])
    table.add_row("acceptance by position", pos, "P(position i accepted | all before accepted)")
    decode = m["decode_s"] or float("nan")
    split = (
        f"draft {m['draft_s']:.2f}s ({m['draft_s'] / decode:.0%}) · verify {m['verify_s']:.2f}s "
        f"({m['verify_s'] / decode:.0%}) · other {m['overhead_s']:.2f}s"
    )
    table.add_row("time split", split, f"decode {m['decode_s']:.2f}s, prefill {m['prefill_s']:.2f}s")
    table.add_row("peak memory", f"{m['peak_memory_bytes'] / 2**20:.0f} MiB", "CUDA max allocated or CPU peak RSS")
    out.print(table)
    if report.get("layout"):  # the CPU's dtype and weight layout, and why: one line
        out.print(f"CPU: {report['layout']}", soft_wrap=True)
