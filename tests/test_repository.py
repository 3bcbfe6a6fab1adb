"""What a committed file must not hold, and what every script must have: no machine paths (the shipped
drafter configs, the docs and everything else tracked name no home folder, checkout or temporary folder
of the machine they were made on), and a Makefile target or a line in docs/benchmarks.md per script."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a checkout or home folder, or a temporary folder with a generated name (tempfile's tmpXXXXXXXX, prefix-XXXXXXXX)
MACHINE_PATH = re.compile(r"(/work/|/root/|/home/[a-z]|/Users/|/tmp/tmp[a-z0-9_]{6,}|/tmp/[\w.-]+-[a-z0-9_]{8}\b)")
SELF = Path(__file__).relative_to(ROOT).as_posix()


def machine_paths(text: str) -> list[str]:
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


def test_committed_files_name_no_machine_path():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in files:
        path = ROOT / name
        if name == SELF or not path.is_file() or path.suffix in (".safetensors", ".parquet", ".png", ".gguf"):
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{name}: {hit}" for hit in machine_paths(text)]
    assert not found, "machine paths in committed files:\n" + "\n".join(found)


def test_the_shipped_drafter_configs_are_checked():
    configs = sorted(ROOT.glob("drafters/*/*/config.json"))
    assert configs and all(not machine_paths(c.read_text()) for c in configs)


def test_the_check_finds_machine_paths():
    assert machine_paths('"command": "train --out /work/train/x"') == ["/work/"]
    assert machine_paths("results in /tmp/bench-schedule-9dn_p53z and /tmp/tmpn43uflqv/x") == [
        "/tmp/bench-schedule-9dn_p53z",
        "/tmp/tmpn43uflqv",
    ]
    assert not machine_paths("--out /tmp/cpu-profile, results/demo, ~/.cache/specbench")


def test_every_script_is_run_by_make_or_listed_in_the_benchmarks_doc():
    listed = (ROOT / "Makefile").read_text() + (ROOT / "docs" / "benchmarks.md").read_text()
    scripts = [p.name for p in (ROOT / "scripts").iterdir() if p.suffix in (".py", ".sh")]
    assert scripts and not [s for s in scripts if s not in listed]
