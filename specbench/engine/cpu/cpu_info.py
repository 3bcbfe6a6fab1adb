"""What this CPU can do, in the terms that decide which of torch's products a layout or dtype may use.

One module knows it (`cpu_features`); the weight layouts (`specbench.engine.cpu.weight_layout`), the layout
and dtype probe (`specbench.engine.cpu.layout_probe`) and the checks of a sweep's or ``specbench run``'s
settings ask it before they build anything.

Three things decide which of torch's CPU products a linear layer reaches (torch 2.13, measured in
docs/bench-engine-steps.md "Engine speed, fourth step"):

* AVX2 only: float32 through MKL; a 16-bit product is one float32 dot product per output element,
  its cost linear in the rows; oneDNN's 16-bit kernels do not run at all (re-ordering a bfloat16 weight
  for them fails: "bf16 path needs the cpu support avx_ne_convert or avx512bw, avx512vl and avx512dq");
* AVX-512 (the avx512bw/vl/dq subset torch checks) or AVX-NE-CONVERT: a bfloat16 product of two or
  more rows goes through oneDNN, whose cost barely grows with the rows, and a single row through a
  separate matrix-vector kernel; AVX512-BF16 and AMX-BF16 make oneDNN's bf16 kernels native;
* AVX512-FP16 (AMX-FP16 CPUs have it) or AVX-NE-CONVERT: the same for float16 (without them float16
  stays on the slow path, and oneDNN refuses a float16 weight).

Where the facts come from: torch's own queries first — ``torch.cpu.get_capabilities()`` (cpuinfo's
flags, as torch's kernels see them) and ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` /
``_is_mkldnn_fp16_supported()`` (the very checks oneDNN's 16-bit paths make) — and the operating system's
``/proc/cpuinfo`` only where this torch has no such query. `CpuFeatures.from_flags` is the same rule
written over flag names, so that a test can fake a CPU of another kind (`assume_cpu_features`) and
prove that every path is guarded on it. `describe_cpu` is the one line the benchmarks and the layout
probe print beside their figures.
"""

from __future__ import annotations

import os
import platform
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# flag (torch's capability name) -> the name the tables and messages print, in the order they print
FLAGS_THAT_MATTER = {
    "avx2": "AVX2",
    "avx512_f": "AVX-512",
    "avx512_bf16": "AVX512-BF16",
    "avx512_fp16": "AVX512-FP16",
    "avx_ne_convert": "AVX-NE-CONVERT",
    "amx_bf16": "AMX-BF16",
    "amx_fp16": "AMX-FP16",
}
ONEDNN_BF16_FLAGS = ("avx512_bw", "avx512_vl", "avx512_dq")  # torch's check for its oneDNN bf16 products
ONEDNN_FP16_FLAGS = ("avx512_fp16",)  # torch's check for its oneDNN fp16 products
EITHER_16BIT_FLAG = "avx_ne_convert"  # enough for both on its own (torch's checks)
# flags a cached layout choice is keyed by (what changes which products run)
KEY_FLAGS = (
    "avx2",
    "avx512_f",
    "avx512_bw",
    "avx512_vl",
    "avx512_dq",
    "avx512_bf16",
    "avx512_fp16",
    "avx_ne_convert",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
)
# /proc/cpuinfo's spelling -> torch's, where they differ (used only where torch has no capability query)
PROC_NAMES = {"avx512f": "avx512_f", "avx512bw": "avx512_bw", "avx512vl": "avx512_vl", "avx512dq": "avx512_dq"}


@dataclass(frozen=True)
class CpuFeatures:
    """The CPU's instruction-set flags (torch's names) and what they allow.

    onednn: this torch has oneDNN with the packed-linear ops (`weight_layout.PACKED`'s products);
    onednn_bf16 / onednn_fp16: oneDNN's kernels for that 16-bit type run here (torch sends multi-row
    16-bit products to them, and a weight of that type can be packed); source: where the facts came from."""

    model: str
    flags: frozenset[str]
    onednn: bool
    onednn_bf16: bool
    onednn_fp16: bool
    source: str = "torch"

    @classmethod
    def from_flags(cls, flags, *, model: str = "assumed CPU", onednn: bool = True, source: str = "assumed"):
        """The features a CPU with ``flags`` has, by torch's rule (the module docstring)."""
        flags = frozenset(flags)
        either = EITHER_16BIT_FLAG in flags
        return cls(
            model=model,
            flags=flags,
            onednn=onednn,
            onednn_bf16=onednn and (either or all(f in flags for f in ONEDNN_BF16_FLAGS)),
            onednn_fp16=onednn and (either or all(f in flags for f in ONEDNN_FP16_FLAGS)),
            source=source,
        )

    def onednn_16bit(self, dtype_name: str) -> bool:
        """Whether torch sends multi-row ``dtype_name`` ('bf16' / 'fp16') products to oneDNN here (cost nearly
        flat in the rows) rather than to its dot-product fallback (cost linear in them)."""
        return {"bf16": self.onednn_bf16, "fp16": self.onednn_fp16}.get(dtype_name, False)

    def packing_refusal(self, dtype_name: str) -> str | None:
        """Why a oneDNN-packed weight of ``dtype_name`` ('fp32', 'bf16', 'fp16') cannot run here (None: it can),
        naming the missing feature."""
        if not self.onednn:
            return "oneDNN's packed products, which this torch build does not have"
        if dtype_name == "bf16" and not self.onednn_bf16:
            return "oneDNN's bf16 kernels: AVX-512 (avx512bw, avx512vl, avx512dq) or AVX-NE-CONVERT"
        if dtype_name == "fp16" and not self.onednn_fp16:
            return "oneDNN's fp16 kernels: AVX512-FP16 or AVX-NE-CONVERT"
        return None

    def named(self) -> list[str]:
        """The flags of `FLAGS_THAT_MATTER` this CPU has, by their printed names."""
        return [name for flag, name in FLAGS_THAT_MATTER.items() if flag in self.flags]

    def key_flags(self) -> list[str]:
        """The flags a cached layout choice is valid for (`KEY_FLAGS` this CPU has)."""
        return [flag for flag in KEY_FLAGS if flag in self.flags]


def _proc_cpuinfo() -> tuple[str, frozenset[str]]:
    model, flags = "", frozenset()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key == "flags" and not flags:
                flags = frozenset(PROC_NAMES.get(flag, flag) for flag in value.split())
    except OSError:
        pass
    return model, flags


def _torch_query(name: str) -> bool | None:
    """``torch.ops.mkldnn.<name>()`` where this torch has it, else None."""
    import torch  # lazy: the CLI's light modules read the model name without loading torch

    try:
        return bool(getattr(torch.ops.mkldnn, name)())
    except (AttributeError, RuntimeError):
        return None


def detect_cpu_features() -> CpuFeatures:
    """This machine's features, from torch's own queries (the module docstring), measured once per process."""
    import torch  # lazy: the CLI's light modules read the model name without loading torch

    proc_model, proc_flags = _proc_cpuinfo()
    try:
        capabilities = torch.cpu.get_capabilities()
        flags = frozenset(name for name, value in capabilities.items() if value is True)
        model, source = str(capabilities.get("cpu_name") or ""), "torch"
    except (AttributeError, RuntimeError):
        flags, model, source = proc_flags, "", "/proc/cpuinfo"
    ops = getattr(torch.ops, "mkldnn", None)
    onednn = (
        torch.backends.mkldnn.is_available()
        and ops is not None
        and hasattr(ops, "_reorder_linear_weight")
        and hasattr(ops, "_linear_pointwise")
    )
    rule = CpuFeatures.from_flags(flags, onednn=onednn)
    bf16, fp16 = _torch_query("_is_mkldnn_bf16_supported"), _torch_query("_is_mkldnn_fp16_supported")
    return CpuFeatures(
        model=proc_model or model or platform.processor() or platform.machine(),
        flags=flags,
        onednn=onednn,
        onednn_bf16=onednn and (rule.onednn_bf16 if bf16 is None else bf16),
        onednn_fp16=onednn and (rule.onednn_fp16 if fp16 is None else fp16),
        source=source,
    )


_detected = lru_cache(maxsize=1)(detect_cpu_features)
_assumed: list[CpuFeatures] = []  # `assume_cpu_features`, innermost last


def cpu_features() -> CpuFeatures:
    """What this CPU can do (or the CPU a test assumes, `assume_cpu_features`)."""
    return _assumed[-1] if _assumed else _detected()


@contextmanager
def assume_cpu_features(features: CpuFeatures):
    """Within the block every question to this module is answered for ``features`` (a CPU of another kind,
    `CpuFeatures.from_flags`): the guards of every path can be checked on a machine of one kind."""
    _assumed.append(features)
    try:
        yield features
    finally:
        _assumed.remove(features)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's processor string elsewhere), without torch."""
    if _assumed:
        return _assumed[-1].model
    return _proc_cpuinfo()[0] or platform.processor() or platform.machine()


def describe_cpu() -> str:
    """One line: model, cores this process may use, and the flags that decide the products' speed,
    e.g. ``AMD EPYC, 2 cores: AVX2, AVX-512, AVX512-BF16 (no AMX)``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    features = cpu_features()
    have = features.named()
    amx = "" if any(name.startswith("AMX") for name in have) else " (no AMX)"
    return f"{features.model}, {cores} cores: {', '.join(have) or 'none of AVX2, AVX-512, AMX'}{amx}"


def onednn_16bit(dtype_name: str) -> bool:
    """Whether torch sends this CPU's multi-row ``dtype_name`` ('bf16' / 'fp16') products to oneDNN
    (cost nearly flat in the rows) rather than to its dot-product fallback (cost linear in them)."""
    return cpu_features().onednn_16bit(dtype_name)
