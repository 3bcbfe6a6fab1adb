"""Files specbench writes inside results, cache and report folders never follow a symlink.

The root fix: every such file is created, truncated, appended to or replaced by one of the helpers of
`specbench.safe_files` (`open_no_follow`, `replacing` / `write_atomic`, `open_appending`, `create_new`). A symlink
at the file's name is refused in one line; the file it points to (another user's, ``~/.bashrc``) is never opened.

* the property: for every writer that puts a file in such a folder (Hypothesis picks the writer and the kind of
  symlink: to a file, to a folder, dangling, relative), a symlink planted at its file's name is refused in one
  line and its target keeps its bytes;
* the scan: no module of specbench but `specbench.safe_files` opens a file for writing in any other way (a new
  writer fails this test until it goes through the helpers, or is listed below with its reason);
* the issue's case through the CLI: a `.specbench.lock` symlink makes `results merge` exit 2 with one line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import strategies as st

from specbench.errors import SpecbenchError
from tests.cli_helpers import assert_user_error, invoke
from tests.test_fuzz import fuzz

ROOT = Path(__file__).resolve().parents[1]
VICTIM_TEXT = b"someone else's file\n"


def _lock(folder: Path) -> str:
    from specbench.records.lock import LOCK_FILE, FolderLock

    with FolderLock(folder):
        pass
    return LOCK_FILE


def _run_info(folder: Path) -> str:
    from specbench.records.store import ResultsStore

    ResultsStore(folder).write_run_info({"sweep": "x"})
    return "run.json"


def _adaptive(folder: Path) -> str:
    from specbench.records.adaptive_history import write_history

    write_history(folder, {"looks": []})
    return "adaptive.json"


def _records(folder: Path) -> str:
    from specbench.records.store import ResultsStore
    from tests.synthetic_results import SyntheticDrafter, make_records

    record = make_records([SyntheticDrafter(gammas=(2,))], n_prompts=1)[0]
    ResultsStore(folder).write_unit(record)
    return f"records/unit-{record['unit_id']}.parquet"


def _figure(folder: Path) -> str:
    from matplotlib.figure import Figure

    from specbench.figures.plot import save_figure

    fig = Figure()
    fig.add_subplot().plot([0, 1], [1, 0])
    save_figure(fig, folder, "alpha_by_category", ("svg",))
    return "alpha_by_category.svg"


def _report(folder: Path) -> str:
    from specbench.records.store import atomic_write_bytes

    atomic_write_bytes(folder / "index.html", b"<!doctype html><title>x</title>")
    return "index.html"


def _layout_cache(folder: Path) -> str:
    from specbench.engine.cpu import layout_probe
    from specbench.engine.cpu.layout_probe import LayoutChoice
    from specbench.engine.cpu.weight_layout import MIXED

    key = {"k": 1}
    path = layout_probe.cache_file(key)
    layout_probe.store(key, LayoutChoice("auto", "fp32", MIXED, 5, "why"))
    return str(path.relative_to(folder))


def _crash_log(folder: Path) -> str:
    from specbench.safe_files import create_new

    create_new(folder / "crash.log", "trace")
    return "crash.log"


def _server_log(folder: Path) -> str:
    from specbench.safe_files import open_appending

    with open_appending(folder / "server-8000.log") as log:
        log.write(b"started\n")
    return "server-8000.log"


def _json_file(folder: Path) -> str:
    from specbench.safe_files import write_json

    write_json(folder / "sharegpt.json", {"records": []}, indent=None)
    return "sharegpt.json"


WRITERS = {
    "the folder lock": _lock,
    "run.json": _run_info,
    "adaptive.json": _adaptive,
    "a records file": _records,
    "a figure": _figure,
    "the report's index.html": _report,
    "a layout-probe cache entry": _layout_cache,
    "a crash log": _crash_log,
    "a server log": _server_log,
    "a JSON file (caches, manifests, configs: safe_files.write_json)": _json_file,
}
LINKS = ("to a file", "to a folder", "dangling", "relative to a file")


def _plant_and_write(writer: str, link: str, base: Path) -> None:
    base.mkdir(parents=True)
    folder, outside = base / "folder", base / "outside"
    folder.mkdir()
    outside.mkdir()
    os.environ["SPECBENCH_CACHE"] = str(folder)
    victim = outside / "victim.txt"
    victim.write_bytes(VICTIM_TEXT)
    # where the writer puts its file: found by a first run in a scratch folder
    scratch = base / "scratch"
    scratch.mkdir()
    os.environ["SPECBENCH_CACHE"] = str(scratch)
    name = WRITERS[writer](scratch)
    os.environ["SPECBENCH_CACHE"] = str(folder)
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() or target.is_symlink():
        target.unlink()
    pointee = {
        "to a file": victim,
        "to a folder": outside,
        "dangling": outside / "absent.txt",
        "relative to a file": os.path.relpath(victim, target.parent),
    }[link]
    target.symlink_to(pointee)
    with pytest.raises(SpecbenchError) as refused:
        WRITERS[writer](folder)
    message = str(refused.value)
    assert "is a symlink" in message and "\n" not in message, message
    assert victim.read_bytes() == VICTIM_TEXT, f"{writer}: the symlink's target was written"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"], f"{writer}: a file appeared outside"
    assert target.is_symlink(), f"{writer}: the symlink was replaced silently"


@pytest.fixture(autouse=True)
def _restore_cache(monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", os.environ.get("SPECBENCH_CACHE", ""))


_COUNTER = iter(range(10**9))


def _property(tmp_root: Path):
    @fuzz(st.tuples(st.sampled_from(sorted(WRITERS)), st.sampled_from(LINKS)), short=20, long=400)
    def prop(case):
        writer, link = case
        _plant_and_write(writer, link, tmp_root / f"case-{next(_COUNTER)}")

    return prop


_TMP = Path(__import__("tempfile").mkdtemp(prefix="specbench-no-follow-"))
test_a_symlink_where_any_writer_writes_is_refused_and_its_target_untouched, test_no_follow_long = _property(_TMP)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_each_writer_writes_a_plain_file(writer, tmp_path, monkeypatch):
    """The other side: without a symlink each writer writes its file (the property is not vacuous)."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    name = WRITERS[writer](tmp_path)
    path = tmp_path / name
    assert writer == "the folder lock" or (path.is_file() and not path.is_symlink())


# ----------------------------------------------------------------------------- the scan

WRITE_CALL = re.compile(
    r"\.write_text\(|\.write_bytes\(|\bopen\([^)]*['\"](?:w|a|x|wb|ab|xb|r\+|w\+)['\"]|os\.open\(|\.savefig\(|"
    r"mkstemp\(|mkdtemp\(|os\.replace\(|\.to_csv\(|save_file\(|torch\.save\(|\.open\(['\"][wax]|save_pretrained\("
)
# module -> the calls there that are not through the helpers, each with why it is safe
ALLOWED = {
    "specbench/safe_files.py": "the helpers themselves",
    "specbench/cli/results_cmd.py": "`results show --csv FILE`: a file the user names, wherever they name it",
    "specbench/models/cache.py": "a private new folder (mkdtemp, 0700) filled, then renamed over a checked name",
    "specbench/models/resolve.py": "save_pretrained into the private new folder of models/cache.py",
    "specbench/backends/servers/server_process.py": "mkdtemp: a private new log folder",
    "specbench/backends/vllm/engine.py": "mkdtemp: a private new log folder",
    "specbench/engine/drafters/checkpoints/published.py": "torch.save into a `replacing` handle",
    "specbench/figures/plot.py": "savefig into a `replacing` handle",
    "specbench/measure/replay/units.py": "to_csv into memory, written by atomic_write_bytes",
}


def test_no_module_writes_a_file_but_through_the_helpers():
    offenders = []
    for path in sorted((ROOT / "specbench").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in ALLOWED:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if WRITE_CALL.search(code):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "write through specbench.safe_files (no symlink followed):\n" + "\n".join(offenders)
    for rel in ALLOWED:
        assert (ROOT / rel).is_file(), f"ALLOWED lists {rel}, which no longer exists"


# ----------------------------------------------------------------------------- the case


def test_a_lock_symlink_makes_results_merge_one_line_and_leaves_its_target(tmp_path):
    from tests.synthetic_results import SyntheticDrafter, write_synthetic_results

    shards = [
        write_synthetic_results(tmp_path / f"s{i}", [SyntheticDrafter(gammas=(2,))], n_prompts=2, seed=i)
        for i in range(2)
    ]
    out = tmp_path / "merged"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM_TEXT)
    (out / ".specbench.lock").symlink_to(victim)
    result = invoke("results", "merge", *shards, "--out", out)
    assert_user_error(result, "is a symlink")
    assert victim.read_bytes() == VICTIM_TEXT
