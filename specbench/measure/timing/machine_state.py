"""What the machine was doing while a unit was timed: load, other processes' CPU time, clock.

A `MachineProbe` is started before a timed generation and stopped after it. It reads

* the 1-minute load average (``os.getloadavg``);
* the CPU time the whole machine spent busy (``/proc/stat``: user + nice + system + irq +
  softirq + steal, in clock ticks) and the CPU time of this process and its children
  (``resource.getrusage``); their difference over the unit is the CPU time *other* processes
  (and, through steal, other virtual machines) took while the unit ran. A serving backend's
  engine runs in process sessions of its own (a vLLM worker, a launched server: each the leader
  of a new session); the CPU time of every process in those sessions (``/proc/PID/stat``:
  utime + stime + the reaped children's cutime + cstime) counts as the sweep's own, not as
  interference;
* the mean current CPU clock over all cores (``/sys/.../cpufreq/scaling_cur_freq`` or
  ``/proc/cpuinfo``), where the OS exposes one;
* the energy the machine's counters measured above idle (`specbench.measure.timing.energy`: NVML on NVIDIA
  GPUs, RAPL on CPUs that expose it), NaN where it has none.

Where a source is missing (no ``/proc`` on macOS, no cpufreq in many containers) the figure is
NaN and the interference rule (`specbench.measure.timing.timing_protocol`) falls back to what is known.
"""

from __future__ import annotations

import math
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from specbench.measure.timing.energy import meter

PROC_STAT = Path("/proc/stat")
CPUFREQ = Path("/sys/devices/system/cpu")
CPUINFO = Path("/proc/cpuinfo")


def _busy_ticks() -> float | None:
    """Machine-wide busy CPU time in clock ticks (all cores), or None without /proc/stat."""
    try:
        first = PROC_STAT.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu":
        return None
    values = [float(v) for v in first[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice; guest time is inside user
    busy = sum(values[i] for i in (0, 1, 2, 5, 6, 7) if i < len(values))
    return busy


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(u.ru_utime + u.ru_stime for u in usage)


def cpu_mhz() -> float:
    """Mean current clock of all cores in MHz; NaN where the OS does not say."""
    values = []
    for path in CPUFREQ.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            values.append(float(path.read_text()) / 1000.0)
        except (OSError, ValueError):
            pass
    if not values:
        try:
            values = [
                float(line.split(":")[1])
                for line in CPUINFO.read_text().splitlines()
                if line.lower().startswith("cpu mhz")
            ]
        except (OSError, ValueError, IndexError):
            values = []
    return float(sum(values) / len(values)) if values else float("nan")


def _session_cpu_ticks(sessions: set[int]) -> float:
    """CPU ticks of every process whose session id is in ``sessions`` (its reaped children included)."""
    total = 0.0
    if not sessions:
        return total
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we read
            continue
        fields = text[text.rfind(")") + 2 :].split()  # fields from the state on (field 3 of proc(5))
        try:
            if int(fields[3]) in sessions:
                total += sum(float(v) for v in fields[11:15])  # utime stime cutime cstime
        except (IndexError, ValueError):
            continue
    return total


def load_average() -> float:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return float("nan")


@dataclass(frozen=True)
class MachineState:
    """The machine over one timed interval."""

    wall_s: float
    load_1m: float  # 1-minute load average at the end of the interval
    other_cpu_s: float  # CPU seconds other processes used during the interval (NaN: unknown)
    own_cpu_s: float  # CPU seconds this process (and children) used
    cpu_mhz: float  # mean core clock at the end (NaN: unknown)
    n_cpus: int
    energy_j: float = float("nan")  # joules above idle the energy counters measured (NaN: no counter)

    @property
    def other_cores(self) -> float:
        """Other processes' CPU use as a number of busy cores, averaged over the interval."""
        if not self.wall_s > 0 or math.isnan(self.other_cpu_s):
            return float("nan")
        return max(self.other_cpu_s, 0.0) / self.wall_s


def _ticks_per_s() -> float:
    return float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


class MachineProbe:
    """``probe = MachineProbe(); ...timed work...; state = probe.stop()``.

    ``sessions``: process sessions whose CPU time is the sweep's own (a serving engine's worker or
    server, started before the probe), read at start and stop.
    """

    def __init__(self, sessions=()):
        self._sessions = set(sessions)
        self._meter = meter()  # the first probe of a process finds the counters and measures idle power
        self._busy = _busy_ticks()
        self._own = self._own_now()
        self._energy = self._meter.start()
        self._wall = time.perf_counter()

    def _own_now(self) -> float:
        return _own_cpu_s() + _session_cpu_ticks(self._sessions) / _ticks_per_s()

    def stop(self) -> MachineState:
        wall = time.perf_counter() - self._wall
        energy = self._meter.joules_since(self._energy)
        own = self._own_now() - self._own
        busy = _busy_ticks()
        if busy is None or self._busy is None:
            other = float("nan")
        else:
            other = (busy - self._busy) / _ticks_per_s() - own
        return MachineState(
            wall_s=wall,
            load_1m=load_average(),
            other_cpu_s=other,
            own_cpu_s=own,
            cpu_mhz=cpu_mhz(),
            n_cpus=os.cpu_count() or 1,
            energy_j=energy,
        )
