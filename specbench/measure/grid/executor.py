"""Who runs a sweep's pieces of work: the sweep file's ``executor`` key and the flags that set it.

``inprocess`` (the default) runs every piece in the ``specbench sweep`` process, one after another.
``ray`` hands them to Ray workers: on a running cluster (``address: auto`` or ``HOST:PORT``) or on a
local Ray instance started for the sweep (no address; ``workers: N`` of them). The choice changes
where and how fast the units run, never what they measure, so it is not part of the spec hash
(`specbench.measure.grid.sweep_spec.SweepSpec.spec_hash`) nor of any unit id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specbench.bounds import BOUNDS
from specbench.errors import SpecbenchError, check_keys, check_text

EXECUTORS = ("inprocess", "ray")
KEYS = ("name", "address", "workers", "retries", "replay_per_gpu")
DEFAULT_RETRIES = 2  # a piece whose worker or node died is run again this many times, then reported failed
DEFAULT_REPLAY_PER_GPU = 4  # replay workers sharing one GPU (acceptance only: no timing to disturb)
_ADDRESS = re.compile(r"^(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


@dataclass(frozen=True)
class ExecutorChoice:
    name: str = "inprocess"
    address: str | None = None  # ray: 'auto', 'HOST:PORT' or 'ray://HOST:PORT'; None starts a local instance
    workers: int | None = None  # ray: workers to start (None: as many as the cluster's resources hold)
    retries: int = DEFAULT_RETRIES
    replay_per_gpu: int = DEFAULT_REPLAY_PER_GPU

    @property
    def is_ray(self) -> bool:
        return self.name == "ray"

    def to_dict(self) -> dict:
        data: dict[str, object] = {"name": self.name}
        if self.is_ray:
            data.update(
                address=self.address, workers=self.workers, retries=self.retries, replay_per_gpu=self.replay_per_gpu
            )
        return data


INPROCESS = ExecutorChoice()


def _count(value, key: str, where: str, row: str) -> int:
    """``value`` of the executor key ``key``: a whole number inside the bounds row ``row`` (its row in
    `specbench.bounds.KEY_ROWS`, or the ``--workers`` flag's bound)."""
    low, high = int(BOUNDS[row].low), int(BOUNDS[row].high)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecbenchError(f"{where}: executor {key} takes a whole number from {low} to {high}, got {value!r}")
    return value


def check_address(address, where: str) -> str:
    text = check_text(address, "executor: address", where).strip()
    if text != "auto" and not _ADDRESS.match(text):
        raise SpecbenchError(f"{where}: the Ray address is 'auto' or HOST:PORT (e.g. 10.0.0.5:6379), got '{text}'")
    if text != "auto" and not 0 < int(text.rsplit(":", 1)[1]) < 65536:
        raise SpecbenchError(f"{where}: the Ray address's port must be 1..65535, got '{text}'")
    return text


def parse_executor(value, where: str) -> ExecutorChoice:
    """The sweep file's ``executor``: a name (``ray``) or a mapping ``{name, address, workers, retries,
    replay_per_gpu}``."""
    if value is None:
        return INPROCESS
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict):
        raise SpecbenchError(
            f"{where}: 'executor' is a name ({', '.join(EXECUTORS)}) or a mapping, e.g. {{name: ray, address: auto}}"
        )
    check_keys(value, KEYS, f"{where}: unknown executor key '{{key}}'")
    name = check_text(
        value.get("name", "ray" if {"address", "workers"} & set(value) else "inprocess"), "executor: name", where
    )
    if name not in EXECUTORS:
        raise SpecbenchError(f"{where}: executor must be one of {', '.join(EXECUTORS)}, got '{name}'")
    extra = sorted(set(value) - {"name"})
    if name == "inprocess":
        if extra:
            raise SpecbenchError(f"{where}: executor inprocess takes no {', '.join(extra)} (they are Ray's)")
        return INPROCESS
    address = value.get("address")
    workers = value.get("workers")
    return ExecutorChoice(
        name="ray",
        address=None if address is None else check_address(address, where),
        workers=None if workers is None else _count(workers, "workers", where, "parallel_size"),
        retries=_count(value.get("retries", DEFAULT_RETRIES), "retries", where, "timing.retries"),
        replay_per_gpu=_count(
            value.get("replay_per_gpu", DEFAULT_REPLAY_PER_GPU), "replay_per_gpu", where, "parallel_size"
        ),
    )


def executor_over(raw, name: str | None, address: str | None, workers: int | None):
    """The sweep file's ``executor`` value with the flags ``--executor``, ``--address`` and ``--workers`` put
    over it. ``--address`` or ``--workers`` alone mean Ray (``--workers N`` on one machine starts a local
    Ray instance, so one worker or many, on one machine or a cluster, take the same path)."""
    if name is None and address is None and workers is None:
        return raw
    base = {"name": raw} if isinstance(raw, str) else dict(raw) if isinstance(raw, dict) else {}
    if name is not None:
        if name == "inprocess" and (address is not None or workers is not None):
            raise SpecbenchError("--executor inprocess takes no --address or --workers (they are Ray's)")
        if name != base.get("name", name):
            base = {}  # another executor: the file's settings belonged to the one it named
        base["name"] = name
    elif base.get("name", "inprocess") == "inprocess":
        base = {"name": "ray"}
    if address is not None:
        base["address"] = address
    if workers is not None:
        base["workers"] = workers
    return base
