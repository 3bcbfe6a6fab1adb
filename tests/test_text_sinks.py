"""Text from data reaches terminals, SVG figures and the HTML report through one sanitiser per sink
(`specbench.text_sinks`): every SVG parses as XML, the report parses as HTML without a single parse error, and
no control character or escape sequence from the data reaches a terminal.

The property: Hypothesis writes arbitrary Unicode (control characters, escape sequences, bidirectional
overrides, lone surrogates' neighbours, markup, ``$``) into the prompt ids, categories, workload, target and
drafter names of a results folder, then runs `plot`, `results show` and `recommend` on it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import html5lib
from hypothesis import strategies as st

from specbench.text_sinks import for_html, for_label, for_terminal, for_xml
from tests.cli_helpers import invoke
from tests.synthetic_results import SyntheticDrafter, make_records, write_results
from tests.test_fuzz import fuzz

# what a terminal must never receive from data: C0 controls but newline, DEL, C1 controls (ESC starts every escape
# sequence; CSI is also the single C1 character 0x9b)
TERMINAL_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
NASTY = [
    "\x00",
    "\x1b[2J",
    "\x1b]0;owned\x07",
    "\x0c",
    "\x9b31m",
    "\u202e",
    "\x7f",
    "&",
    "<b>",
    "]]>",
    "--",
    "$x$",
    "\r",
    "\t",
    "'\"",
    "\ufffe",
]
TEXT = st.one_of(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=8),
    st.lists(st.sampled_from(NASTY), min_size=1, max_size=3).map("".join),
)
FIELDS = ("prompt_id", "category", "workload", "target", "drafter_label")


def _folder(tmp: Path, names: dict) -> Path:
    records = make_records([SyntheticDrafter(gammas=(1, 2, 4))], n_prompts=6, max_new_tokens=24)
    for record in records:
        for field, value in names.items():
            if field == "prompt_id":
                record[field] = f"{value}{int(record[field][1:]) % 6}"
            elif field == "category":
                record[field] = f"{value}{int(record['prompt_id'][-1]) % 2}"
            elif field != "drafter_label" or record["drafter"] != "none":
                record[field] = value
    return write_results(tmp, records, {"sweep": names.get("workload", "s"), "synthetic": True})


def _check_terminal(output: str) -> None:
    found = TERMINAL_UNSAFE.search(output)
    assert found is None, (
        f"{found.group()!r} reached the terminal: {output[max(0, found.start() - 80) : found.end() + 40]!r}"
    )


def _check_files(report: Path) -> None:
    svgs = sorted(report.glob("*.svg"))
    assert svgs, "no SVG written"
    for svg in svgs:
        ET.parse(svg)  # raises on any character XML 1.0 does not allow
    parser = html5lib.HTMLParser(strict=True)
    parser.parse((report / "index.html").read_bytes())  # strict: any parse error raises


_COUNTER = iter(range(10**9))
_TMP = Path(__import__("tempfile").mkdtemp(prefix="specbench-text-sinks-"))


@fuzz(st.fixed_dictionaries({field: TEXT for field in FIELDS}), short=3, long=150)
def _every_sink(names):
    folder = _folder(_TMP / f"case-{next(_COUNTER)}", names)
    report = folder / "report"
    result = invoke("plot", folder, "--out", report, "--format", "svg", "--bootstrap", 40)
    assert result.exit_code == 0, result.output[-3000:]
    _check_terminal(result.output)
    _check_files(report)
    for args in (("results", "show", folder), ("recommend", folder, "--bootstrap", 40)):
        result = invoke(*args)
        assert result.exit_code in (0, 2), result.output[-3000:]
        _check_terminal(result.output)


test_every_svg_and_html_parses_and_no_terminal_sees_a_control_character, test_text_sinks_long = _every_sink


def test_each_sanitiser_keeps_ordinary_text_and_escapes_the_rest_visibly():
    plain = "MT-Bench: writing / roleplay — α ≥ 0.5 ✓ 日本語"
    assert for_terminal(plain) == for_label(plain) == for_xml(plain) == plain
    assert for_terminal("a\x1b[2Jb") == "a\\x1b[2Jb" and for_terminal("x\u202ey") == "x\\u202ey"
    assert for_terminal("two\nlines\tok") == "two\nlines\tok"
    assert for_xml("a\x00b\x0cc") == "a\\x00b\\x0cc"
    assert for_html("<a href='x'>&\x00") == "&lt;a href=&#x27;x&#x27;&gt;&amp;\\x00"
    assert for_terminal("id\x00") != for_terminal("id")  # made visible, not dropped: distinct ids stay distinct
