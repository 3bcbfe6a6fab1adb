"""The sweep's ``timing`` key: the timing protocol's settings (`TimingProtocol`), read and checked, and the
machine-state columns of a record whose timings are not measured. What the settings mean and how a sweep times
units under them: `specbench.measure.timing.timing_protocol`."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.bounds import check
from specbench.errors import SpecbenchError
from specbench.records.store import null_energy_columns

ORDERS = ("once", "bracket", "abba")
TIMED_SCALARS = ("prefill_s", "decode_s", "draft_s", "verify_s", "overhead_s")
TIMED_LISTS = ("round_draft_s", "round_verify_s")


@dataclass(frozen=True)
class TimingProtocol:
    order: str = "bracket"
    warmup_s: float = 1.0
    max_other_cores: float = 0.25
    retries: int = 1

    def to_dict(self) -> dict:
        return {
            "order": self.order,
            "warmup_s": self.warmup_s,
            "max_other_cores": self.max_other_cores,
            "retries": self.retries,
        }


DEFAULT = TimingProtocol()


def parse_timing(value, where: str) -> TimingProtocol:
    """The sweep file's ``timing`` mapping (any key may be left out)."""
    if value is None:
        return DEFAULT
    if not isinstance(value, dict):
        raise SpecbenchError(f"{where}: 'timing' must be a mapping, e.g. {{order: bracket, warmup_s: 2}}")
    extra = set(value) - set(DEFAULT.to_dict())
    if extra:
        raise SpecbenchError(f"{where}: 'timing' takes {', '.join(DEFAULT.to_dict())}, not {sorted(map(str, extra))}")
    order = str(value.get("order", DEFAULT.order))
    if order not in ORDERS:
        raise SpecbenchError(f"{where}: timing.order must be one of {', '.join(ORDERS)}, got '{order}'")
    values = {
        key: check(f"timing.{key}", value.get(key, getattr(DEFAULT, key)), where, f"timing.{key}")
        for key in ("warmup_s", "max_other_cores", "retries")
    }  # the bounds table's rows
    return TimingProtocol(order=order, **values)


def untimed_columns(flag: str = "modelled") -> dict:
    """Machine-state columns of a record whose timings are not measured (replayed units)."""
    nan = float("nan")
    return {
        **null_energy_columns(),
        "timing_ok": True,
        "timing_flag": flag,
        "timing_attempts": 0,
        "timing_kept": 0,
        "attempt_decode_s": [],
        "attempt_other_cores": [],
        "load_1m": nan,
        "other_cpu_s": nan,
        "other_cores": nan,
        "cpu_mhz": nan,
    }
