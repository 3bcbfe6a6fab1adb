"""What a measurement ran on: package versions, git commit, device name and memory."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

from specbench.engine.cpu_info import cpu_model

PACKAGES = ("specbench", "torch", "transformers", "triton", "numpy", "pandas")


def package_versions() -> dict[str, str | None]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    """The commit of the specbench checkout (with '-dirty' when it has local changes), if any."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def cpu_name() -> str:
    return cpu_model()


def device_info(device: str) -> dict:
    """Name, memory and thread count of the device measurements ran on."""
    import torch

    if str(device).startswith("cuda"):
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        return {"device": str(device), "device_name": props.name, "device_memory_bytes": int(props.total_memory),
                "cuda_version": torch.version.cuda, "capability": f"{props.major}.{props.minor}"}
    return {"device": "cpu", "device_name": cpu_name(), "cpu_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count()}


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
