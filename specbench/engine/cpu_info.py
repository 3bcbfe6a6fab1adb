"""Which CPU this is, in the terms that decide how fast its matrix products run.

Three things decide which of torch's CPU products a linear layer reaches (torch 2.13, measured in
docs/bench-engine-steps.md "Engine speed, fourth step"):

* AVX2 only: float32 through MKL; a 16-bit product is one float32 dot product per output element,
  its cost linear in the rows;
* AVX-512 (the avx512bw/vl/dq subset torch checks): a bfloat16 product of two or more rows goes
  through oneDNN, whose cost barely grows with the rows, and a single row through a separate
  matrix-vector kernel; AVX512-BF16 and AMX-BF16 make oneDNN's bf16 kernels native;
* AVX512-FP16 or AMX-FP16: the same for float16 (without them float16 stays on the slow path).

`cpu_flags` reads these from the operating system (Linux ``/proc/cpuinfo``); `describe_cpu` is the one
line the benchmarks and the layout probe print beside their figures.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path

# /proc/cpuinfo flag -> the name the tables print, in the order they print
FLAGS_THAT_MATTER = {
    "avx2": "AVX2",
    "avx512f": "AVX-512",
    "avx512_bf16": "AVX512-BF16",
    "avx512_fp16": "AVX512-FP16",
    "amx_bf16": "AMX-BF16",
    "amx_fp16": "AMX-FP16",
}
ONEDNN_BF16_FLAGS = ("avx512bw", "avx512vl", "avx512dq")  # torch's check for its oneDNN bf16 products


@lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    model, flags = "", frozenset()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key == "flags" and not flags:
                flags = frozenset(value.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's processor string elsewhere)."""
    return _cpuinfo()[0]


def cpu_flags() -> frozenset[str]:
    """Every instruction-set flag the operating system reports (empty where it reports none)."""
    return _cpuinfo()[1]


def flags_that_matter() -> list[str]:
    """The flags of `FLAGS_THAT_MATTER` this CPU has, by their printed names."""
    flags = cpu_flags()
    return [name for flag, name in FLAGS_THAT_MATTER.items() if flag in flags]


def describe_cpu() -> str:
    """One line: model, cores this process may use, and the flags that decide the products' speed,
    e.g. ``AMD EPYC, 2 cores: AVX2, AVX-512, AVX512-BF16 (no AMX)``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    have = flags_that_matter()
    amx = "" if any(name.startswith("AMX") for name in have) else " (no AMX)"
    return f"{cpu_model()}, {cores} cores: {', '.join(have) or 'none of AVX2, AVX-512, AMX'}{amx}"


def onednn_16bit(dtype_name: str) -> bool:
    """Whether torch sends this CPU's multi-row ``dtype_name`` ('bf16' / 'fp16') products to oneDNN
    (cost nearly flat in the rows) rather than to its dot-product fallback (cost linear in them)."""
    flags = cpu_flags()
    if dtype_name == "bf16":
        return all(flag in flags for flag in ONEDNN_BF16_FLAGS)
    if dtype_name == "fp16":
        return "avx512_fp16" in flags or "amx_fp16" in flags
    return False
