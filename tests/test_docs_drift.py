"""Docs that cannot drift: docs/index.md links every page, README.md stays a short front door with no dated run
in it (measured runs belong on the docs/bench-*.md pages), and no page holds an unfilled placeholder. Each rule
is a function that the tests apply to the tree and to a planted offender."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 160
# an ISO date, a run's duration ("8 min 25 s", "2 h 5 min", "took 7 min"), or a block of printed output
DATED_RUN = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b\d+ (?:h|min) \d+ (?:min|s)\b|\btook(?= \d)|^```text\s*$", re.MULTILINE)
# an all-caps token ending in _TABLE (or another word a writer leaves to fill later), TODO, XXX, TBD, FIXME
PLACEHOLDER = re.compile(r"\b(?:[A-Z][A-Z0-9]*_)+(?:TABLE|TBD|FILL|HERE|PLACEHOLDER)\b|\b(?:TODO|XXX+|TBD|FIXME)\b")
# placeholders known to be unfilled, each with the work that fills it: its test is an expected failure that turns
# into a failure (strict) the day the page is filled, so that the entry is removed then
KNOWN_UNFILLED: dict[tuple[str, str], str] = {}  # (page, token) → why it may stay unfilled for now


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def unlinked(index_text: str, names: list[str]) -> list[str]:
    """The page names that the index does not link (a Markdown link whose target is the page)."""
    return [name for name in names if not re.search(rf"\]\({re.escape(name)}(?:#[\w-]*)?\)", index_text)]


def dated_runs(text: str) -> list[str]:
    return [m.group(0) for m in DATED_RUN.finditer(text)]


def placeholders(text: str) -> list[str]:
    return [m.group(0) for m in PLACEHOLDER.finditer(text)]


def test_the_index_links_every_page():
    names = [p.name for p in pages() if p.name != "index.md"]
    assert not unlinked((DOCS / "index.md").read_text(), names), "docs/index.md does not link these pages"


def test_an_unlinked_page_is_found():
    index = "| [fit.md](fit.md) | fit |\n| [plots.md](plots.md#figures) | plots |\nconfirm.md is mentioned, not linked"
    assert unlinked(index, ["fit.md", "plots.md", "confirm.md"]) == ["confirm.md"]


def test_the_readme_is_short_and_holds_no_dated_run():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md has {len(text.splitlines())} lines"
    assert not dated_runs(text), "measured runs belong on the docs/bench-*.md pages"


def test_a_dated_run_is_found():
    planted = "What it printed on a 2-core AMD EPYC, 2026-12-03, in 8 min 25 s:\n\n```text\nhumaneval: yes\n```\n"
    assert dated_runs(planted) == ["2026-12-03", "8 min 25 s", "```text"]
    assert dated_runs("the build took 2 h 5 min") == ["took", "2 h 5 min"]
    assert not dated_runs("γ 1…6 within an 8-minute budget; docs/bench-confirm.md has the runs")


def _known(page: Path) -> set[str]:
    return {token for (doc, token) in KNOWN_UNFILLED if ROOT / doc == page}


@pytest.mark.parametrize("page", [*pages(), ROOT / "README.md"], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_unfilled_placeholder(page):
    found = [t for t in placeholders(page.read_text()) if t not in _known(page)]
    assert not found, f"{page.relative_to(ROOT)}: unfilled placeholders {found}"


@pytest.mark.parametrize(
    "doc,token",
    [
        pytest.param(doc, token, marks=pytest.mark.xfail(strict=True, reason=why))
        for (doc, token), why in KNOWN_UNFILLED.items()
    ],
)
def test_the_known_placeholder_is_filled(doc, token):
    """Fails while the placeholder is there (expected); passes — and so fails the strict xfail — once it is
    filled: then remove its entry from KNOWN_UNFILLED."""
    assert token not in placeholders((ROOT / doc).read_text())


def test_a_placeholder_is_found():
    planted = "| γ | speedup |\n\nCONFIRM_TABLE\n\nTODO: rerun. The XXX figure. RESULTS_TABLE"
    assert placeholders(planted) == ["CONFIRM_TABLE", "TODO", "XXX", "RESULTS_TABLE"]
    assert not placeholders("SPECBENCH_SPEED_BENCH=DIR, SPECBENCH_MAX_MEMORY_GIB, KEY_ROWS and FLAG_ROWS, tmpXXXXXXXX")
