"""`specbench plot`: figures and the HTML report from a real tiny sweep and from synthetic folders.

Checks: every figure is written in the chosen formats or skipped with a reason; the HTML points
only at files that exist (and at ids it holds); skipped-figure notes appear when data are absent;
text from the results is escaped; user errors exit 2 with one line; and, where Chromium is
installed (scripts/install_test_browser.sh), every image of the report renders in a real browser.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from specbench.analysis.cost.round_cost import fit_group_costs, group_cost_fits
from specbench.analysis.fit import tau_intervals
from specbench.errors import SpecbenchError
from specbench.figures.palette import BASELINE_COLOUR, Palette
from specbench.figures.plot import FIGURES, parse_formats
from specbench.figures.report_page import build_report
from specbench.records.store import ResultsStore
from tests.cli_helpers import assert_user_error, invoke
from tests.synthetic_results import (
    MT_BENCH_CATEGORIES,
    SyntheticDrafter,
    make_context_bin_records,
    make_records,
    records_frame,
)

N_BOOT = 30
ALL = {spec.name for spec in FIGURES}
DENSE = ALL - {"moe_experts"}  # what a dense target's report draws (the MoE figure is skipped)
SYNTHETIC = DENSE | {"speedup_vs_context"}  # the synthetic report's records span two context-length bins
ODD_MODEL = r'<b>$\oops$</b>&"q"'  # a drafter parameter: escaped in HTML, not mathtext in figures


# ----------------------------------------------------------------------------- helpers


class Links(HTMLParser):
    """Collects src/href attributes, element ids, <img> sources and whether a <script> appears."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links += [attrs[k] for k in ("src", "href") if attrs.get(k)]
        if tag == "img":
            self.images.append(attrs["src"])
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        self.scripts += tag == "script"


def parse(index: Path) -> Links:
    links = Links()
    links.feed(index.read_text(encoding="utf-8"))
    return links


def assert_links_resolve(index: Path) -> Links:
    """Every src/href is a file beside index.html or an anchor of the page; nothing external."""
    links = parse(index)
    for link in links.links:
        if link.startswith("#"):
            assert link[1:] in links.ids, link
            continue
        assert "://" not in link and not link.startswith("//"), f"external reference {link}"
        assert (index.parent / link).is_file(), f"{link} does not exist"
    return links


def rendered(report) -> set[str]:
    return {f.spec.name for f in report.figures if not f.skipped}


def skipped(report) -> dict[str, str]:
    return {f.spec.name: f.skipped for f in report.figures if f.skipped}


def synthetic_folder(
    folder: Path,
    drafters,
    workloads=(("mt-bench", MT_BENCH_CATEGORIES), ("humaneval", ("code",))),
    extra: list[dict] = (),
    **kwargs,
) -> Path:
    """A synthetic results folder over several workloads (and ``extra`` records), with a run.json like a sweep's."""
    records = list(extra)
    for i, (workload, categories) in enumerate(workloads):
        records += make_records(drafters, workload=workload, categories=categories, seed=i, **kwargs)
    info = {
        "kind": "sweep",
        "sweep": {
            "name": "synthetic <test>",
            "target": "synthetic-target",
            "drafters": [{"type": d.name, "params": d.params} for d in drafters],
        },
        "versions": {"python": "3.11", "specbench": "0.1.0"},
        "git_commit": "abc123",
        "device": "cpu",
        "device_name": "Test CPU",
        "dtype": "fp32",
        "created": "2026-01-01T00:00:00+00:00",
    }
    store = ResultsStore(folder)  # one part file: faster than a sweep's file per unit
    store.write_run_info(info)
    store.replace_records(records_frame(records))
    return folder


DRAFTERS = [
    SyntheticDrafter(alpha=0.8, gammas=(1, 2, 4)),
    SyntheticDrafter(
        name="ngram",
        params={"n_max": 3},
        alpha=0.5,
        model_free=True,
        draft_fixed_s=0.0003,
        no_match_rate=0.3,
        gammas=(1, 2, 4),
    ),
    SyntheticDrafter(
        name="eagle", params={"checkpoint": ODD_MODEL}, alpha=0.85, tree="2x2", nodes_per_depth=2, gammas=(2, 3)
    ),
]


# ----------------------------------------------------------------------------- fixtures

REAL_PROMPTS = [
    ("Tell me about tea.", "writing"),
    ("Count to ten please.", "math"),
    ("Why is the sky blue?", "stem"),
    ("Name a prime number.", "math"),
    ("Write a haiku on rain.", "writing"),
    ("What is 2 + 2?", "math"),
]


@pytest.fixture(scope="session")
def real_results(tmp_path_factory) -> Path:
    """A real sweep on tiny random models: baseline, n-gram and a draft model at γ 1 and 3 on 4 short
    categorised prompts (a JSON-lines workload; short prompts keep the byte-level prefill cheap)."""
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner

    base = tmp_path_factory.mktemp("real")
    prompts = base / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": i, "text": text, "cat": cat}) + "\n" for i, (text, cat) in enumerate(REAL_PROMPTS))
    )
    spec = build_spec(
        {
            "name": "tiny-plot",
            "target": "tiny-random-llama",
            "max_new_tokens": 8,
            "ignore_eos": True,
            "drafters": [{"type": "ngram"}, {"type": "draft-model", "params": {"model": "tiny-random-llama-draft"}}],
            "gammas": [1, 3],
            "temperatures": [0.0],
            "workloads": [{"name": f"jsonl:{prompts}:field=text:id=id:category=cat", "count": 4}],
        }
    )
    SweepRunner(spec, base / "results").run()
    return base / "results"


@pytest.fixture(scope="session")
def real_report(real_results, tmp_path_factory):
    return build_report(real_results, tmp_path_factory.mktemp("real-report"), n_boot=N_BOOT, formats=("png",))


@pytest.fixture(scope="session")
def synthetic_report(tmp_path_factory):
    base = tmp_path_factory.mktemp("synthetic")
    long_context = make_context_bin_records(
        {
            label: (tokens, [SyntheticDrafter(alpha=alpha, gammas=(2,))])
            for label, tokens, alpha in (("1k", 1000, 0.8), ("7k", 7000, 0.6))
        },
        n_prompts=3,
        max_new_tokens=24,
    )
    folder = synthetic_folder(base / "results", DRAFTERS, extra=long_context, n_prompts=6, max_new_tokens=24)
    return build_report(folder, base / "report", n_boot=N_BOOT, max_gamma=8)


@pytest.fixture(scope="session")
def small_folder(tmp_path_factory) -> Path:
    """One workload, one drafter at two γ, four prompts."""
    return synthetic_folder(
        tmp_path_factory.mktemp("small") / "results",
        DRAFTERS[:1],
        workloads=(("chat", ("chat",)),),
        n_prompts=4,
        max_new_tokens=16,
    )


@pytest.fixture(scope="session")
def svg_report(small_folder, tmp_path_factory):
    return build_report(small_folder, tmp_path_factory.mktemp("svg-report"), n_boot=0, formats=("svg",))


# ----------------------------------------------------------------------------- reports


def test_real_sweep_report(real_report):
    index = real_report.index
    assert index.name == "index.html" and index.is_file()
    links = assert_links_resolve(index)
    assert links.scripts == 0
    assert rendered(real_report) | set(skipped(real_report)) == ALL
    assert {
        "tau_vs_gamma",
        "throughput_vs_gamma",
        "alpha_by_workload",
        "alpha_by_category",
        "round_time_split",
    } <= rendered(real_report)
    for figure in real_report.figures:
        assert set(figure.files) == ({"png"} if not figure.skipped else set())
        for path in figure.files.values():
            assert path.stat().st_size > 1000
    assert len(links.images) == len(rendered(real_report))
    text = index.read_text()
    for section in (
        "Recommendation",
        "Engine settings to paste",
        "Fitted acceptance",
        "Environment (run.json)",
        "Sweep spec",
        "tiny-random-llama",
        "How to read",
    ):
        assert section in text
    for reason in skipped(real_report).values():  # random models accept nothing: per-position has one point
        assert html.escape(reason) in text


def test_synthetic_report_has_every_figure_and_table(synthetic_report):
    assert rendered(synthetic_report) == SYNTHETIC, skipped(synthetic_report)
    links = assert_links_resolve(synthetic_report.index)
    assert sorted(Path(src).stem for src in links.images) == sorted(SYNTHETIC)
    text = synthetic_report.index.read_text()
    for needle in (
        "Goodness of fit",
        "α̂ by prompt category",
        "α̂ and τ by context length",
        "Costs (measured, batch 1)",
        "Lossless check",
        "abc123",
        "Test CPU",
        "fp32",
        "vLLM",
        "SGLang",
        "transformers",
    ):
        assert needle in text, needle


def test_text_from_results_is_escaped(synthetic_report):
    text = synthetic_report.index.read_text()
    assert ODD_MODEL not in text and "<b>" not in text
    assert "&lt;b&gt;$\\oops$&lt;/b&gt;&amp;&quot;q&quot;" in text
    assert "synthetic &lt;test&gt;" in text


def test_missing_data_skip_figures_with_notes(tmp_path):
    one_gamma = synthetic_folder(
        tmp_path / "one",
        [SyntheticDrafter(alpha=0.7, gammas=(1,))],
        workloads=(("humaneval", ("code",)),),
        n_prompts=4,
        max_new_tokens=16,
    )
    report = build_report(one_gamma, tmp_path / "one-report", n_boot=N_BOOT, formats=("png",))
    assert set(skipped(report)) == {
        "tau_vs_gamma",
        "throughput_vs_gamma",
        "acceptance_by_position",
        "alpha_by_category",
        "alpha_vs_context",
        "moe_experts",
    }
    assert "one draft length" in skipped(report)["tau_vs_gamma"]
    assert "categories" in skipped(report)["alpha_by_category"]
    text = report.index.read_text()
    assert text.count('class="skipped"') == 6 and "skipped:" in text
    assert_links_resolve(report.index)

    no_base = synthetic_folder(
        tmp_path / "nobase",
        [SyntheticDrafter(alpha=0.7, gammas=(1, 2))],
        workloads=(("mt-bench", MT_BENCH_CATEGORIES[:2]),),
        n_prompts=4,
        max_new_tokens=16,
        baseline=False,
    )
    report = build_report(no_base, tmp_path / "nobase-report", n_boot=N_BOOT, formats=("png",))
    assert set(skipped(report)) == {"throughput_vs_gamma", "speedup_heatmap", "alpha_vs_context", "moe_experts"}
    assert all(
        "baseline" in reason
        for name, reason in skipped(report).items()
        if name not in ("alpha_vs_context", "moe_experts")
    )
    assert "nothing to paste" in report.index.read_text()
    assert_links_resolve(report.index)


def test_formats_are_honoured(small_folder, svg_report, tmp_path):
    report = build_report(small_folder, tmp_path / "pdf", n_boot=0, formats=("pdf",))
    written = {p.suffix for p in (tmp_path / "pdf").iterdir() if p.name != "index.html"}
    assert written == {".pdf"}
    links = assert_links_resolve(report.index)
    assert links.images == [] and any(link.endswith(".pdf") for link in links.links)
    assert (tmp_path / "pdf" / "tau_vs_gamma.pdf").read_bytes().startswith(b"%PDF")

    links = assert_links_resolve(svg_report.index)
    assert links.images and all(src.endswith(".svg") for src in links.images)
    assert {p.suffix for p in svg_report.index.parent.iterdir()} == {".svg", ".html"}
    assert b"<svg" in (svg_report.index.parent / "tau_vs_gamma.svg").read_bytes()[:2000]


def test_parse_formats():
    assert parse_formats(None) == ("png", "svg")
    assert parse_formats("PNG, pdf,png") == ("png", "pdf")
    for bad, needle in (("gif", "unknown format 'gif'"), (" , ", "no format")):
        with pytest.raises(SpecbenchError, match=needle):
            parse_formats(bad)


# ----------------------------------------------------------------------------- pieces


def test_palette_is_deterministic_and_shared():
    a = Palette(["ngram", "draft-model(model=x)", "none", "eagle"], ["chain", "2x2"])
    b = Palette(["eagle", "ngram", "draft-model(model=x)"], ["2x2", "chain"])
    for label in ("ngram", "draft-model(model=x)", "eagle"):
        assert a.colour(label) == b.colour(label)
    assert len({a.colour(label) for label in a.labels}) == 3
    assert a.colour("none") == BASELINE_COLOUR
    assert a.style("ngram", "chain")["linestyle"] == "-" and a.style("ngram", "2x2")["linestyle"] != "-"


def test_figures_use_the_palette_colour_of_each_drafter(synthetic_report):
    """The same drafter label is drawn in the same colour in the τ figure and the throughput figure."""
    from matplotlib.colors import to_hex

    from specbench.figures.families.gamma import figure_tau, figure_throughput

    data = synthetic_report.data
    for build in (figure_tau, figure_throughput):
        legend = build(data).legends[0]
        colours = {
            text.get_text(): to_hex(handle.get_color())
            for text, handle in zip(legend.get_texts(), legend.legend_handles)
            if hasattr(handle, "get_color")
        }
        for label in data.palette.labels:
            if label in colours:
                assert colours[label] == data.palette.colour(label).lower()


def test_tau_intervals():
    records = pd.DataFrame(make_records([SyntheticDrafter(alpha=0.7, gammas=(2,))], n_prompts=6, max_new_tokens=24))
    table = tau_intervals(records, n_boot=200)
    spec = table[table["gamma"] == 2].iloc[0]
    part = records[records["gamma"] == 2]
    assert spec["tau"] == pytest.approx(part["decode_tokens"].sum() / part["rounds"].sum())
    assert spec["tau_lo"] < spec["tau"] < spec["tau_hi"] and spec["n_prompts"] == 6
    base = table[table["gamma"] == 0].iloc[0]
    assert base["tau"] == base["tau_lo"] == base["tau_hi"] == 1.0
    single = tau_intervals(records[records["prompt_id"] == "q000"], n_boot=200)
    assert (single["tau_lo"] == single["tau"]).all() and (single["tau_hi"] == single["tau"]).all()


def test_group_cost_fits_match_the_cost_table():
    records = pd.DataFrame(make_records([SyntheticDrafter(alpha=0.7, gammas=(1, 2))], n_prompts=4, max_new_tokens=16))
    fits, table = group_cost_fits(records), fit_group_costs(records)
    assert len(fits) == len(table) == 1
    keys, fit = fits[0]
    assert keys["drafter"] == "draft-model" and fit.c == pytest.approx(table["c"].iloc[0])


def test_rendering_does_not_use_pyplot(small_folder, tmp_path):
    """Figures are plain Figure objects: pyplot and its global figure registry are never imported."""
    code = (
        "import sys; from specbench.figures.plot import FIGURES, render_figure; "
        "from specbench.figures.plot_data import load_plot_data; "
        f"data = load_plot_data({str(small_folder)!r}, n_boot=0); "
        f"done = [render_figure(spec, data, {str(tmp_path)!r}, ('png',)) for spec in FIGURES[:2]]; "
        "print(all(d.files for d in done), 'matplotlib.pyplot' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["True", "False"], done.stderr[-2000:]


# ----------------------------------------------------------------------------- CLI


def test_cli_writes_the_report(small_folder, tmp_path):
    result = invoke("plot", small_folder, "--out", tmp_path / "out", "--format", "png", "--bootstrap", 40)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == f"report: {tmp_path / 'out' / 'index.html'}"
    assert "wrote tau_vs_gamma (png)" in result.stderr
    written = {f"{name}.png" for name in DENSE} - {
        "alpha_by_category.png",
        "alpha_vs_context.png",
    }  # one category, no bins
    assert {p.name for p in (tmp_path / "out").glob("*.png")} == written
    assert "skipped alpha_by_category" in result.stderr


def test_cli_reports_skipped_figures(tmp_path):
    folder = synthetic_folder(
        tmp_path / "res",
        [SyntheticDrafter(alpha=0.7, gammas=(1,))],
        workloads=(("chat", ("chat",)),),
        n_prompts=3,
        max_new_tokens=12,
    )
    result = invoke("plot", folder, "--format", "png", "--bootstrap", 0)
    assert result.exit_code == 0, result.output
    assert "skipped tau_vs_gamma: only one draft length" in result.stderr
    assert (folder / "report" / "index.html").is_file()


def test_cli_user_errors(small_folder, tmp_path):
    assert_user_error(invoke("plot", tmp_path / "missing"), "not found")
    assert not (tmp_path / "missing").exists()  # nothing created for a folder that is not there
    assert_user_error(invoke("plot", tmp_path), "not a results folder")
    (tmp_path / "run.json").write_text('{"kind": "sweep", "sweep": {"name": "empty"}}')
    assert_user_error(invoke("plot", tmp_path), "no records")
    assert_user_error(invoke("plot", tmp_path, "--format", "png,gif"), "unknown format 'gif'")
    assert_user_error(invoke("plot", tmp_path, "--objective", "fast"), "unknown objective")
    (tmp_path / "file").write_text("")
    assert_user_error(invoke("plot", small_folder, "--out", tmp_path / "file", "--bootstrap", 0), "not a folder")


# ----------------------------------------------------------------------------- browser

CHECK_SCRIPT = """<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var broken = images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                     .map(function (i) { return i.getAttribute("src"); });
  var out = document.createElement("pre");
  out.id = "image-check";
  out.textContent = JSON.stringify({total: images.length, broken: broken});
  document.body.appendChild(out);
});
</script>"""


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def images_in_chromium(index: Path) -> dict:
    """Load a copy of the report (same folder, a check script added) in headless Chromium; return
    {total, broken} as the page's script saw them after the load event."""
    probe = index.with_name("_browser_check.html")
    probe.write_text(index.read_text(encoding="utf-8").replace("</body>", CHECK_SCRIPT + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                chromium_binary(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                probe.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    probe.unlink()
    found = re.search(r'<pre id="image-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"the check script did not run: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.skipif(
    chromium_binary() is None,
    reason="Chromium not installed: run scripts/install_test_browser.sh (Debian package 'chromium')",
)
def test_report_renders_in_chromium(synthetic_report, svg_report):
    check = images_in_chromium(synthetic_report.index)  # PNG images
    assert check["total"] == len(SYNTHETIC) and check["broken"] == [], check
    check = images_in_chromium(svg_report.index)  # SVG images
    assert check["total"] == len(rendered(svg_report)) > 0 and check["broken"] == [], check
