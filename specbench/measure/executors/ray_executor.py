"""The Ray executor: a sweep's pieces on Ray workers, on one machine or a cluster.

`RayExecutor` connects to a running cluster (``address: auto`` or ``HOST:PORT``) or starts a local
Ray instance for the sweep (no address: ``--workers N`` on one machine), then starts one actor per
worker. Each actor builds the sweep's backend on its node — models load there, by hub id, shared path
or specbench alias, resolved on that node — and runs pieces with a `PieceWorker`, returning records
as plain data. The driver (this process) holds the results folder's lock and writes everything
(`specbench.measure.executors.executor`).

Resources per worker (what each actor declares, so Ray places it):

* CUDA: GPUs = the backend's ``tensor_parallel_size`` × ``pipeline_parallel_size`` (1 for the own
  engine): one engine per GPU set, isolated; replay pieces (acceptance only, nothing timed) run on
  workers packed ``replay_per_gpu`` to a GPU;
* CPU: CPUs = the sweep's ``threads`` when a count, else the machine's cores ÷ ``--workers`` (one
  core each on a cluster without ``--workers``); the worker's torch uses that many threads.

Failures: a worker whose process, node or memory died loses the piece in flight; Ray restarts the
actor (up to ``retries`` times) and the piece runs again, up to ``retries`` more times, then it is
reported failed while the others go on. Closing kills every actor (their engines end with them) and,
for a local instance, Ray itself: no process of the sweep outlives it.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

import psutil

from specbench.engine.device import device_info
from specbench.errors import SpecbenchError
from specbench.measure.executors.executor import BUG, DIED, INPUT, Failure, Outcome, RecordWriter, dispatch
from specbench.measure.executors.pieces import GROUP, REPLAY, Piece
from specbench.measure.executors.worker import PieceWorker, SilentObserver, live_drafters, sweep_backend
from specbench.measure.grid.sweep import SweepSpec
from specbench.measure.grid.units import Unit, UnitOutput

INSTALL_HINT = "pip install 'specbench[ray]' (or make install-ray)"
LOCAL_START_ATTEMPTS = 3  # Ray gives a new local node 30 s to register; a busy machine can need more
CLOSE_WAIT_S = 30.0  # how long closing waits for the workers' backends to stop before killing the workers


def import_ray():
    """Ray, or a one-line error saying how to install it."""
    try:
        import ray  # lazy: an optional extra
    except ImportError:
        raise SpecbenchError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def start_local_instance(ray, attempts: int = LOCAL_START_ATTEMPTS, **init) -> None:
    """``ray.init`` of a new local instance. Ray waits a fixed 30 s for the new node to register, which a busy
    machine can outlast: then the half-started processes (this process's new descendants) are ended and it
    tries again, ``attempts`` times in all, before a one-line error."""
    for _attempt in range(1, attempts + 1):
        before = {child.pid for child in psutil.Process().children(recursive=True)}
        try:
            ray.init(address="local", **init)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception when its node is late
            if "timed out during startup" not in str(exc):
                raise
        late = [c for c in psutil.Process().children(recursive=True) if c.pid not in before]
        for child in late:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(late, timeout=10)
    raise SpecbenchError(
        f"the local Ray instance did not start: its node missed Ray's 30 s to register, "
        f"{attempts} times (is the machine very busy? see `uptime`); run the same command again"
    )


def parallel_gpus(spec) -> int:
    """GPUs one engine of the sweep spans: tensor parallel × pipeline stages (1 for the own engine)."""
    options = spec.backend_options
    return max(1, int(options.get("tensor_parallel_size", 1))) * max(1, int(options.get("pipeline_parallel_size", 1)))


@dataclass(frozen=True)
class Shape:
    """What one worker declares to Ray: CPUs, GPUs (a fraction when replay workers share a GPU), torch threads."""

    cpus: float
    gpus: float
    threads: int | None  # torch threads the worker sets (None: the backend's own setting)

    @property
    def cuda(self) -> bool:
        return self.gpus > 0


def worker_shapes(
    spec, workers: int | None, cpus: float, gpus: float, node_gpus: float | None = None
) -> tuple[int, Shape, int, Shape]:
    """(live workers, their shape, replay workers, theirs) for a cluster with ``cpus`` and ``gpus`` in all and at
    most ``node_gpus`` on one node (a worker, and so its engine, runs on one node)."""
    if str(spec.device).startswith("cuda"):
        per = parallel_gpus(spec)
        if node_gpus is not None and per > node_gpus:
            raise SpecbenchError(
                f"an engine of {per} GPUs (tensor × pipeline parallel) does not fit on one node of "
                f"the Ray cluster (the largest has {node_gpus:g}); an engine across nodes runs with "
                "the in-process executor and vLLM's own Ray executor (docs/backends.md)"
            )
        live_n = workers or int(gpus // per)
        if live_n < 1 or live_n * per > gpus:
            raise SpecbenchError(
                f"the Ray cluster has {gpus:g} GPU(s); {workers or 1} worker(s) × {per} GPU(s) each "
                "(tensor × pipeline parallel) do not fit"
            )
        pack = spec.executor.replay_per_gpu
        replay_n = live_n * per * pack if spec.replays else 0
        return live_n, Shape(1, per, None), replay_n, Shape(1 / pack, 1 / pack, None)
    threads = spec.threads if isinstance(spec.threads, int) else None
    if workers is None:
        each = threads or 1
        workers = max(1, int(cpus // each))
    else:
        each = threads or max(1, int(cpus // workers))
    if workers * each > cpus:
        raise SpecbenchError(
            f"the Ray cluster has {cpus:g} CPU(s); {workers} worker(s) × {each} CPU(s) each do not "
            "fit (fewer --workers, or fewer threads)"
        )
    shape = Shape(each, 0, None if spec.threads is not None else each)
    return workers, shape, workers, shape


class WorkerActor:
    """Runs inside a Ray actor: the sweep's backend on this node, pieces in, plain records out."""

    def __init__(self, spec, threads: int | None, drafters: list):
        if threads is not None:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        self.spec, self.drafters, self.threads = spec, drafters, threads
        # started on first use: after Ray restarts a dead actor, on its next piece
        self.worker: PieceWorker | None = None

    def where(self) -> dict:
        ray = import_ray()
        context = ray.get_runtime_context()
        gpus = [str(g) for g in context.get_accelerator_ids().get("GPU", [])]
        return {
            "node": ray.util.get_node_ip_address(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "node_device": f"GPU {','.join(gpus)}" if gpus else "cpu",
            "cpu": not gpus,
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
        }

    def _worker(self) -> PieceWorker:
        if self.worker is None:
            spec = self.spec
            backend = sweep_backend(spec)
            worker = PieceWorker(spec, backend, SilentObserver())
            worker.start(self.drafters)
            self.worker = worker
        return self.worker

    def _guard(self, work) -> dict:
        """``work()``'s value, or its failure as data: a user error names this node in one line."""
        if self.threads is not None:  # in the thread that computes (the actor runs calls on a small thread pool)
            import torch  # lazy: loads torch in the actor process only

            torch.set_num_threads(self.threads)
        try:
            return {"value": work()}
        except SpecbenchError as exc:
            return {"error": f"node {self.where()['node']}: {' '.join(str(exc).split())}", "kind": INPUT}
        except Exception:  # noqa: BLE001 - a bug in the worker: its traceback goes to the driver's log
            return {"error": f"node {self.where()['node']}:\n{traceback.format_exc()}", "kind": BUG}

    def prepare(self, todo) -> dict:
        """Load the models, check the units; the worker's report (hashes, device) and where it runs."""

        def work():
            report = self._worker().check(todo)
            return {**report, "device_info": device_info(self.spec.device), "where": self.where()}

        return self._guard(work)

    def run(self, piece: Piece) -> dict:
        """The piece's records (and moments) in unit order, what a serving engine ran, and where."""

        def work():
            worker = self._worker()
            index = {unit.unit_id: i for i, unit in enumerate(piece.units)}
            outputs = [(index[o.unit.unit_id], o.record, o.moments) for o in worker.run(piece)]
            return {"outputs": outputs, "described": worker.describe(), "where": self.where()}

        return self._guard(work)

    def close(self) -> None:
        """Stop the backend (a serving engine's processes with it); runs beside a piece still in flight."""
        if self.worker is not None:
            self.worker.close()


class RemoteMethod(Protocol):
    """A method of a Ray actor handle: ``.remote(...)`` sends the call and returns its object ref at once."""

    def remote(self, *args: object) -> object: ...


class WorkerHandle(Protocol):
    """The driver's handle of a `WorkerActor` in a Ray actor: each of its methods, called remotely."""

    prepare: RemoteMethod
    run: RemoteMethod
    where: RemoteMethod
    close: RemoteMethod


class RayInitOptions(TypedDict):
    """The ``ray.init`` keywords every connection passes (local instance or cluster)."""

    include_dashboard: bool
    log_to_driver: bool
    logging_level: str


@dataclass(eq=False)
class Slot:
    """One worker as the driver sees it."""

    actor: WorkerHandle
    where: dict = field(default_factory=dict)
    config: object = None  # the configuration its engine ran last (a serving engine may still run it)
    deaths: int = 0
    dead: bool = False
    recovering: object | None = None  # a ping sent to the actor Ray is restarting: the slot is free once it answers


class RayExecutor:
    """Pieces on Ray actors; the driver dispatches and writes (`specbench.measure.executors.executor.dispatch`)."""

    name = "ray"

    def __init__(self, spec: SweepSpec, observer) -> None:
        self.spec, self.observer, self.choice = spec, observer, spec.executor
        self.ray = import_ray()
        self.local = self.choice.address is None
        self.slots: list[Slot] = []
        self.shape: Shape | None = None
        self.runs = 0
        self.reports: list[dict] = []
        self._todo: list[Unit] = []  # the units `prepare` was given (each restarted worker checks them again)

    # ------------------------------------------------------------------ start and stop
    def _connect(self) -> tuple[float, float, float]:
        ray = self.ray
        options = RayInitOptions(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        if self.local:
            cores = os.cpu_count() or 1
            want = self.choice.workers or cores
            each = self.spec.threads if isinstance(self.spec.threads, int) else 1
            # address "local": a new instance for this sweep, even where a `ray start` cluster runs on this machine
            # worker_niceness 0: the workers keep the driver's priority (Ray's default adds 15, which starves them
            # beside other jobs; a driver started with `nice` passes its niceness on)
            start_local_instance(
                ray, num_cpus=max(cores, want * each), _system_config={"worker_niceness": 0}, **options
            )
        else:
            try:
                ray.init(address=self.choice.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise SpecbenchError(
                    f"cannot reach the Ray cluster at {self.choice.address}: {' '.join(str(exc).split())[:200]}"
                ) from None
        total = ray.cluster_resources()
        node_gpus = max((float(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n.get("Alive")), default=0.0)
        return float(total.get("CPU", 0)), float(total.get("GPU", 0)), node_gpus

    def _start(self, count: int, shape: Shape) -> None:
        # two calls at once: a piece, and `close` (or a ping) beside it; the driver sends one piece at a time
        remote = self.ray.remote(WorkerActor).options(
            num_cpus=shape.cpus, num_gpus=shape.gpus, max_restarts=self.choice.retries, max_concurrency=2
        )
        drafters = live_drafters(self._todo)
        self.slots = [Slot(remote.remote(self.spec, shape.threads, drafters)) for _ in range(count)]
        self.shape = shape

    def prepare(self, todo: list[Unit]) -> dict:
        """Start the workers and load the models on every node; their report (worker 0's, hashes checked)."""
        cpus, gpus, node_gpus = self._connect()
        live_n, live_shape, self.replay_n, self.replay_shape = worker_shapes(
            self.spec, self.choice.workers, cpus, gpus, node_gpus
        )
        self.live_n, self.live_shape = live_n, live_shape
        self._todo = todo
        self.observer.status(f"starting {live_n} Ray worker(s)")
        self._start(live_n, live_shape)
        self.reports = self._prepare_all(todo)
        self.observer.status("sweep")
        first = self.reports[0]
        self.spec.model_hashes = dict(first["model_hashes"])
        self.spec.dtype_used = first["dtype_used"]
        self.spec.weights_sha256 = self.spec.model_hashes.get(self.spec.target)
        return first

    def _prepare_all(self, todo) -> list[dict]:
        answers = self.ray.get([slot.actor.prepare.remote(todo) for slot in self.slots])
        reports = []
        for slot, answer in zip(self.slots, answers):
            if "error" in answer:
                if answer["kind"] == BUG:
                    raise RuntimeError(answer["error"])
                raise SpecbenchError(answer["error"])
            slot.where = answer["value"]["where"]
            reports.append(answer["value"])
        check_same_weights(reports)
        return reports

    def warm(self) -> None:
        """The driver runs no engine: a worker that ran a configuration last is preferred for it instead
        (`RayPool.choose`)."""
        return None

    def info(self) -> dict:
        """run.json's ``executor``: the choice and each worker's node, device and process."""
        return {
            **self.choice.to_dict(),
            "local": self.local,
            "workers": [dict(slot.where) for slot in self.slots if slot.where],
        }

    def close(self) -> None:
        """Stop every worker's backend (a serving engine's processes with it), kill the workers (pieces in flight
        are cancelled) and leave Ray; a local instance stops. Runs on every exit path, Ctrl-C included."""
        ray = self.ray
        try:
            stopping = [slot.actor.close.remote() for slot in self.slots if not slot.dead]
            if stopping:
                ray.wait(stopping, num_returns=len(stopping), timeout=CLOSE_WAIT_S)
        finally:
            for slot in self.slots:
                try:
                    ray.kill(slot.actor, no_restart=True)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            self.slots = []
            if ray.is_initialized():
                ray.shutdown()

    def _reshape(self, replay: bool) -> None:
        """Replay pieces on GPU workers packed several to a GPU, live pieces on whole GPU sets (on a CPU both
        are the same workers)."""
        count, shape = (self.replay_n, self.replay_shape) if replay else (self.live_n, self.live_shape)
        if shape == self.shape:
            return
        self.observer.status(f"starting {count} {'replay' if replay else 'live'} worker(s)")
        self.ray.get([slot.actor.close.remote() for slot in self.slots if not slot.dead])
        for slot in self.slots:
            self.ray.kill(slot.actor, no_restart=True)
        self._start(count, shape)
        self._prepare_all(self._todo)

    # ------------------------------------------------------------------ running
    def run(self, pieces: list[Piece], writer: RecordWriter) -> list[Failure]:
        self.runs += 1
        if pieces:
            self._reshape(pieces[0].kind == REPLAY)

        def retrying(outcome, tries):
            self.observer.status(
                f"{outcome.piece.label}: {outcome.error}; running it again "
                f"(attempt {tries + 1} of {self.choice.retries + 1})"
            )

        return dispatch(
            pieces,
            RayPool(self.slots, self.ray, self.choice.retries),
            writer,
            run=self.runs,
            retries=self.choice.retries,
            on_retry=retrying,
        )


def check_same_weights(reports: list[dict]) -> None:
    """Every node must load the same weights, in the same dtype: a sweep over nodes with different files (or a
    ``dtype: auto`` that chose differently on different CPUs) would mix models."""
    first = reports[0]
    for other in reports[1:]:
        if other.get("dtype_used") != first.get("dtype_used"):
            raise SpecbenchError(
                f"the target runs in {other.get('dtype_used')} on node {other['where']['node']} but in "
                f"{first.get('dtype_used')} on node {first['where']['node']} (dtype auto chooses per "
                "machine); set dtype: fp32 or bf16 for a sweep over these nodes"
            )
        for name, digest in other["model_hashes"].items():
            if first["model_hashes"].get(name, digest) != digest:
                raise SpecbenchError(
                    f"{name} has different weights on node {other['where']['node']} "
                    f"(sha256 {digest[:12]}…) than on node {first['where']['node']} "
                    f"({first['model_hashes'][name][:12]}…); give every node the same files"
                )


def _given(described: dict | None) -> Callable[[], dict | None]:
    """`Outcome.described` of a remote worker: what its serving engine ran, already read on its node."""
    return lambda: described


class RayPool:
    """The executor's workers as `specbench.measure.executors.executor.Pool`: one piece in flight per worker."""

    def __init__(self, slots: list[Slot], ray, retries: int):
        self.slots, self.ray, self.retries = slots, ray, retries  # the executor's workers, Ray, restarts allowed
        self.flight: dict = {}  # object ref -> (slot, piece, pieces that shared its node so far)

    def _idle(self) -> list[Slot]:
        busy = {id(slot) for slot, _, _ in self.flight.values()}
        return [s for s in self.slots if not s.dead and s.recovering is None and id(s) not in busy]

    def _recovering(self) -> dict:
        return {s.recovering: s for s in self.slots if s.recovering is not None}

    def free(self) -> bool:
        return bool(self._idle())

    def busy(self) -> bool:
        return bool(self.flight) or bool(self._recovering())

    def choose(self, ready: list[Piece]) -> Piece:
        """A group whose configuration a free worker's engine already runs, else the first ready piece."""
        warm = [s.config for s in self._idle() if s.config is not None]
        return next((p for p in ready if p.kind == GROUP and p.config in warm), ready[0])

    def submit(self, piece: Piece) -> None:
        idle = self._idle()
        slot = next((s for s in idle if piece.kind == GROUP and s.config == piece.config), idle[0])
        slot.config = piece.config
        ref = slot.actor.run.remote(piece)
        node = slot.where.get("node")
        self.flight[ref] = [slot, piece, 1]
        sharing = [entry for entry in self.flight.values() if entry[0].where.get("node") == node]
        for entry in sharing:  # every piece on the node has now shared it with this many
            entry[2] = max(entry[2], len(sharing))

    def wait(self) -> list[Outcome]:
        """Finished pieces (possibly none, when only a restarted worker answered)."""
        ray = self.ray
        pings = self._recovering()
        done, _ = ray.wait([*self.flight, *pings], num_returns=1)
        outcomes = []
        for ref in done:
            if ref in pings:
                self._recovered(pings[ref], ref)
                continue
            slot, piece, shared = self.flight.pop(ref)
            try:
                answer = ray.get(ref)
            except ray.exceptions.RayError as exc:
                outcomes.append(self._died(slot, piece, exc))
                continue
            if "error" in answer:
                outcomes.append(Outcome(piece, error=answer["error"], kind=answer["kind"]))
                continue
            value = answer["value"]
            slot.where = value["where"]
            placement = {**value["where"], "node_groups": shared}
            outputs = [UnitOutput(piece.units[i], record, moments) for i, record, moments in value["outputs"]]
            outcomes.append(Outcome(piece, outputs, placement=placement, described=_given(value["described"])))
        return outcomes

    def _died(self, slot: Slot, piece: Piece, exc) -> Outcome:
        """A worker process or node lost: Ray restarts the actor up to ``retries`` times (the slot takes pieces
        again once it answers a ping), then it is dead."""
        slot.deaths += 1
        slot.config = None
        slot.dead = slot.deaths > self.retries
        if not slot.dead:
            slot.recovering = slot.actor.where.remote()
        where = slot.where.get("node", "?")
        reason = f"the worker on node {where} (pid {slot.where.get('pid', '?')}) died: {type(exc).__name__}"
        return Outcome(piece, error=reason, kind=DIED)

    def _recovered(self, slot: Slot, ping) -> None:
        """A restarting worker's ping came back: free again (where it now runs), still restarting, or dead."""
        ray = self.ray
        try:
            slot.where = ray.get(ping)
            slot.recovering = None
        except ray.exceptions.ActorUnavailableError:  # not up yet: ask again in a moment
            time.sleep(0.5)
            slot.recovering = slot.actor.where.remote()
        except ray.exceptions.RayError:
            slot.recovering, slot.dead = None, True
