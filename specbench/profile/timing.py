"""The profile's one timed region (`time_region`: warmup, then repeats between two `DeviceClock` readings), the
spread of its repeats, and the bandwidth bound each time is set against: the device's peak, from vendor
datasheets (`PEAK_BANDWIDTH`) or a measured read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from specbench.engine.timing import DeviceClock

GIB = 2**30

# (pattern in torch's CUDA device name, product, GB/s): memory bandwidth from NVIDIA's datasheets.
# First match wins, so the more specific names come first.
PEAK_BANDWIDTH: tuple[tuple[str, str, float], ...] = (
    (r"H200", "H200 141 GB HBM3e", 4800.0),
    (r"H100.*NVL", "H100 NVL 94 GB HBM3", 3900.0),
    (r"H100.*PCIe", "H100 PCIe 80 GB HBM2e", 2000.0),
    (r"H100", "H100 SXM 80 GB HBM3", 3350.0),
    (r"A100.*(80GB.*PCIe|PCIE.*80GB)", "A100 80 GB PCIe HBM2e", 1935.0),
    (r"A100.*80GB", "A100 80 GB SXM HBM2e", 2039.0),
    (r"A100", "A100 40 GB HBM2", 1555.0),
    (r"L40S", "L40S 48 GB GDDR6", 864.0),
    (r"\bL4\b", "L4 24 GB GDDR6", 300.0),
    (r"\bA10G?\b", "A10 / A10G 24 GB GDDR6", 600.0),
    (r"RTX 4090", "GeForce RTX 4090 24 GB GDDR6X", 1008.0),
)


def time_region(
    run: Callable[[], object], clock, *, warmup: int, repeats: int, reset: Callable[[], None] | None = None
) -> np.ndarray:
    """Seconds of ``repeats`` calls of ``run``, after ``warmup`` untimed calls.

    Each timed call lies between two readings of ``clock`` (`specbench.engine.timing.DeviceClock`:
    on CUDA every reading first waits for all queued device work), so the time covers the device
    work the call launched and nothing before it. ``reset`` (a cache roll-back, say) runs after
    every call, outside the timed region.
    """
    for _ in range(warmup):
        run()
        if reset is not None:
            reset()
    times = np.empty(repeats)
    for i in range(repeats):
        start = clock.now()
        run()
        times[i] = clock.now() - start
        if reset is not None:
            reset()
    return times


def spread(times: np.ndarray) -> dict:
    """Median, quartiles, IQR, min and mean of timed calls, plus the calls themselves."""
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return {
        "repeats": int(len(times)),
        "median_s": float(median),
        "q1_s": float(q1),
        "q3_s": float(q3),
        "iqr_s": float(q3 - q1),
        "min_s": float(np.min(times)),
        "mean_s": float(np.mean(times)),
        "times_s": [float(t) for t in times],
    }


def probe_bytes(device: str) -> int:
    """The read-bandwidth probe's buffer: 2 GiB on a GPU, 256 MiB on the CPU."""
    return 2 * GIB if str(device).startswith("cuda") else 256 * 2**20


def measure_read_bandwidth(device: str, nbytes: int | None = None) -> float:
    """GB/s of torch's ``sum`` over a ``nbytes`` float32 tensor (256 MiB on the CPU, 2 GiB on a
    GPU), best of five after one warm-up: a quick read bandwidth of the device."""
    import torch

    nbytes = nbytes or probe_bytes(device)
    data = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    times = time_region(lambda: data.sum(), DeviceClock(device), warmup=1, repeats=5)  # noqa: F821 - called before del
    del data
    return nbytes / float(times.min()) / 1e9


def peak_bandwidth(device_name: str, measured_gb_s: float | None) -> tuple[float | None, str]:
    """(GB/s, where the figure comes from): the vendor table for a known GPU, else the measured read."""
    for pattern, product, gb_s in PEAK_BANDWIDTH:
        if re.search(pattern, device_name or ""):
            return gb_s, f"vendor datasheet: {product}, {gb_s:.0f} GB/s"
    if measured_gb_s:
        return measured_gb_s, "measured: torch sum over a large tensor, best of 5"
    return None, "unknown"
