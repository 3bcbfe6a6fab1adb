"""The device the engine computes on: its name, memory and thread counts (what records and run.json name)."""

from __future__ import annotations

import os

from specbench.engine.cpu.cpu_info import cpu_model


def cpu_name() -> str:
    return cpu_model()


def device_info(device: str) -> dict:
    """Name, memory and thread count of the device measurements ran on."""
    import torch

    if str(device).startswith("cuda"):
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        return {
            "device": str(device),
            "device_name": props.name,
            "device_memory_bytes": int(props.total_memory),
            "cuda_version": torch.version.cuda,
            "capability": f"{props.major}.{props.minor}",
        }
    return {
        "device": "cpu",
        "device_name": cpu_name(),
        "cpu_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }
