"""Text from data on its way out: one sanitiser per sink.

Prompt ids, categories, workload and drafter names, model paths, server answers and error texts come from
files and servers. A NUL, an ESC or a form feed among them must not reach a terminal (an escape sequence
moves the cursor, retitles the window or hides what follows), an SVG (XML 1.0 forbids most control
characters: the file no longer parses), an HTML page (control characters are parse errors) or a
matplotlib label. Each sink has one function here, and each sink's writer calls it in one place:

* `for_terminal` — `specbench.cli.views.render` (every console, `plain`, `styled`) and the one-line errors of
  `specbench.cli.shell.exit_codes`;
* `for_label` — every text of a figure, titles, legends and tick labels alike, just before it is saved
  (`specbench.figures.plot.save_figure`); figures never parse mathtext (``text.parse_math`` off);
* `for_html` — `specbench.figures.report.esc`, the one HTML escape of the report;
* `for_xml` — what the other two build on.

A character a sink cannot hold is written visibly, as its escape (``\\x1b``, ``\\u202e``), never dropped
silently: two ids that differ only in it stay different on the page.
"""

from __future__ import annotations

import html
import re

# C0 controls but tab and newline, DEL, C1 controls; the bidirectional overrides and isolates (text that
# reorders what follows it on screen); and, for XML, lone surrogates and the two non-characters U+FFFE/FFFF
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text) -> str:
    """``text`` safe to print: control characters (but newline and tab), DEL, C1 controls, bidirectional
    overrides and lone surrogates written as escapes."""
    return _TERMINAL_UNSAFE.sub(_visible, str(text))


def for_xml(text) -> str:
    """``text`` made of characters XML 1.0 allows (tab, newline and carriage return kept; the rest escaped);
    markup characters are left to the caller's escaping."""
    return _XML_UNSAFE.sub(_visible, str(text))


def for_html(text) -> str:
    """``text`` as HTML text or attribute value: `for_xml`, then ``& < > " '`` escaped."""
    return html.escape(for_xml(text), quote=True)


def for_label(text) -> str:
    """``text`` as a matplotlib label: `for_xml` (matplotlib's SVG writer copies every label into the file, as
    text or as a comment beside its glyphs); mathtext is off for every figure, so ``$`` stays a ``$``."""
    return for_xml(text)
