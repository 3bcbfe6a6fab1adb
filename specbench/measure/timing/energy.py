"""Energy counters read around every timed unit or batch: what the machine's measured parts drew.

Two sources, summed where both exist (the machine's bill covers both):

* **NVML** (NVIDIA GPUs, through ``nvidia-ml-py``, imported only here and only when first asked:
  the ``energy`` extra): ``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver
  loaded, per GPU — the GPUs ``CUDA_VISIBLE_DEVICES`` names (indices or UUIDs), else every one;
* **RAPL powercap** (Intel, and AMD on recent kernels): ``/sys/class/powercap/intel-rapl:N/energy_uj``
  of each top-level *package* domain (its sub-domains, core and uncore, lie inside it and would
  count twice), microjoules in a counter that wraps at ``max_energy_range_uj``. A reading below the
  last one means the counter wrapped once: Δ = now + max_energy_range_uj − last. (A unit long enough
  to wrap twice — about an hour at 250 W for a 2^32 µJ range — would lose a wrap; none is that long.)

Idle power. The counters measure everything the parts drew, the idle draw included. Before the
first timed unit a meter reads its counters over ``IDLE_S`` seconds of nothing and keeps
P_idle = ΔE ÷ Δt; every interval then records

    E = ΔE − P_idle · Δt                                            (joules above idle)

so that a figure per token charges the work its own energy, not the machine's standing draw. E can
come out slightly negative for a very short interval (a counter updates every few ms to 100 ms, and
P_idle has its own noise); it is kept as measured, so that sums over many units stay unbiased.

Where no counter exists (no GPU and no readable RAPL file: this CPU in a VM, macOS, RAPL files
readable by root only since Linux 5.10), the meter has none, every energy column stays null, and
`EnergyMeter.reason` is the one line that says why.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from specbench.records.store import null_energy_columns

POWERCAP = Path("/sys/class/powercap")
IDLE_S = 2.0  # seconds of idle measured before the first timed unit


class EnergyCounter(Protocol):
    """A cumulative energy counter: ``joules()`` never decreases (wraparound handled inside)."""

    name: str

    def joules(self) -> float: ...


# ----------------------------------------------------------------------------- RAPL


@dataclass
class _Domain:
    path: Path  # .../energy_uj
    range_uj: float  # max_energy_range_uj: where the counter wraps
    last_uj: float
    total_j: float = 0.0


class RaplCounter:
    """The top-level RAPL package domains under ``root``, their wraps accumulated."""

    def __init__(self, domains: list[tuple[str, Path, float]]):
        self._domains = [_Domain(path, range_uj, _read_uj(path)) for _, path, range_uj in domains]
        self.name = "rapl: " + ", ".join(label for label, _, _ in domains)

    def joules(self) -> float:
        total = 0.0
        for d in self._domains:
            now = _read_uj(d.path)
            delta = now - d.last_uj
            if delta < 0:  # wrapped once since the last reading
                delta += d.range_uj
            d.total_j += delta * 1e-6
            d.last_uj = now
            total += d.total_j
        return total


def _read_uj(path: Path) -> float:
    return float(path.read_text().strip())


def find_rapl(root: Path = POWERCAP) -> tuple[RaplCounter | None, str]:
    """(a counter over the readable package domains, '') or (None, why there is none)."""
    if not root.is_dir():
        return None, f"no RAPL powercap interface ({root} does not exist)"
    packages = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not packages:
        return None, f"no RAPL package domain under {root}"
    domains, unreadable = [], []
    for folder in packages:
        energy, limit = folder / "energy_uj", folder / "max_energy_range_uj"
        try:
            _read_uj(energy)
            range_uj = _read_uj(limit)
        except PermissionError:
            unreadable.append(folder.name)
            continue
        except (OSError, ValueError):
            continue
        label = _read_text(folder / "name") or folder.name
        domains.append((label, energy, range_uj))
    if domains:
        return RaplCounter(domains), ""
    if unreadable:
        return None, (
            f"RAPL energy files are readable by root only ({', '.join(unreadable)}; Linux ≥ 5.10): "
            "run as root or `chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj`"
        )
    return None, f"RAPL domains under {root} gave no reading"


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


# ----------------------------------------------------------------------------- NVML


class NvmlCounter:
    """NVML's total-energy counter summed over the visible GPUs (millijoules since the driver loaded)."""

    def __init__(self, nvml, handles: list, names: list[str]):
        self._nvml, self._handles = nvml, handles
        self.name = "nvml: " + ", ".join(names)

    def joules(self) -> float:
        return sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self._handles) * 1e-3


def _visible(count: int, uuids: list[str]) -> list[int]:
    """The indices CUDA_VISIBLE_DEVICES names (by index or UUID prefix), or all ``count`` GPUs."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return list(range(count))
    out = []
    for item in (v.strip() for v in visible.split(",") if v.strip()):
        if item.isdigit():
            if int(item) < count:
                out.append(int(item))
        else:
            out.extend(i for i, u in enumerate(uuids) if u.startswith(item))
    return list(dict.fromkeys(out))


def find_nvml() -> tuple[NvmlCounter | None, str]:
    """(a counter over the visible GPUs, '') or (None, why there is none)."""
    try:
        import pynvml  # lazy: nvidia-ml-py, the 'energy' extra; only a GPU machine needs it
    except ImportError:
        return None, "no NVML (nvidia-ml-py is not installed: pip install 'specbench[energy]')"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        uuids = [_text(pynvml.nvmlDeviceGetUUID(h)) for h in handles]
        chosen = _visible(count, uuids)
        if not chosen:
            return None, "NVML sees no GPU this process may use"
        for i in chosen:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handles[i])  # refused before Volta
        names = [f"{_text(pynvml.nvmlDeviceGetName(handles[i]))} (GPU {i})" for i in chosen]
        return NvmlCounter(pynvml, [handles[i] for i in chosen], names), ""
    except pynvml.NVMLError as exc:
        return None, f"NVML gives no energy counter ({exc})"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ----------------------------------------------------------------------------- the meter


class SumCounter:
    """Several counters read as one (a GPU's and the CPU packages')."""

    def __init__(self, counters: list):
        self._counters = counters
        self.name = "; ".join(c.name for c in counters)

    def joules(self) -> float:
        return sum(c.joules() for c in self._counters)


@dataclass
class Reading:
    """A counter's value at the start of an interval."""

    joules: float
    time_s: float


class EnergyMeter:
    """One process's energy counter with its idle power: ``start()`` before a timed interval,
    ``joules_since(reading)`` after it (joules above idle; NaN without a counter)."""

    def __init__(
        self,
        counter: EnergyCounter | None,
        reason: str = "",
        idle_s: float = IDLE_S,
        sleep=time.sleep,
        clock=time.perf_counter,
        idle_w: float | None = None,
    ):
        self.counter, self.reason = counter, reason
        self._clock = clock
        self.idle_w = float("nan") if idle_w is None else float(idle_w)  # given: not measured (tests)
        self.idle_s = idle_s if idle_w is None else 0.0
        if counter is not None and idle_w is None:
            before, t0 = counter.joules(), clock()
            sleep(idle_s)
            after, t1 = counter.joules(), clock()
            self.idle_w = (after - before) / (t1 - t0) if t1 > t0 else float("nan")

    @property
    def available(self) -> bool:
        return self.counter is not None

    @property
    def source(self) -> str | None:
        return None if self.counter is None else self.counter.name

    def start(self) -> Reading | None:
        if self.counter is None:
            return None
        return Reading(self.counter.joules(), self._clock())

    def joules_since(self, reading: Reading | None) -> float:
        """Joules above idle since ``reading``: ΔE − P_idle · Δt (NaN without a counter)."""
        if reading is None or self.counter is None:
            return float("nan")
        energy, elapsed = self.counter.joules() - reading.joules, self._clock() - reading.time_s
        idle = self.idle_w if math.isfinite(self.idle_w) else 0.0
        return float(energy - idle * elapsed)

    def describe(self) -> dict:
        """What run.json records under ``energy``."""
        return {
            "source": self.source,
            "idle_w": None if not math.isfinite(self.idle_w) else self.idle_w,
            "idle_s": self.idle_s if self.available else None,
            "reason": self.reason or None,
        }


def find_counter() -> tuple[EnergyCounter | None, str]:
    """Every counter this machine has, summed; or (None, one line naming why each source is absent)."""
    found, reasons = [], []
    for finder in (find_nvml, find_rapl):
        counter, reason = finder()
        if counter is not None:
            found.append(counter)
        else:
            reasons.append(reason)
    if not found:
        return None, "no energy counter: " + "; ".join(reasons)
    return (found[0] if len(found) == 1 else SumCounter(found)), ""


_METER: EnergyMeter | None = None


def meter() -> EnergyMeter:
    """This process's meter, found (and its idle power measured) on first use."""
    global _METER
    if _METER is None:
        counter, reason = find_counter()
        _METER = EnergyMeter(counter, reason)
    return _METER


def use_meter(new: EnergyMeter | None) -> EnergyMeter | None:
    """Replace this process's meter (tests: a fake counter; None: find the real one again); returns the old."""
    global _METER
    old, _METER = _METER, new
    return old


def energy_columns(joules: float, output_tokens: float, accepted: float, m: EnergyMeter) -> dict:
    """The record's energy columns for ``joules`` above idle spent on ``output_tokens`` (``accepted`` draft
    tokens among them); null everywhere without a counter."""
    if not m.available or not math.isfinite(joules):
        return null_energy_columns()
    return {
        "energy_j": joules,
        "idle_w": m.idle_w if math.isfinite(m.idle_w) else None,
        "energy_counter": m.source,
        "joules_per_token": joules / output_tokens if output_tokens > 0 else None,
        "joules_per_accepted": joules / accepted if accepted > 0 else None,
    }
