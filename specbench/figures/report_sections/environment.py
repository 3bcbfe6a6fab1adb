"""The report's last sections, from run.json: the environment a sweep ran in and the sweep spec as run."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, paragraph, pre, section, table

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
