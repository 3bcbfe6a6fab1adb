"""The executor seam without Ray: the dispatcher, retries, failures, the one writer, the executor's
settings, and the in-process executor writing what a serial sweep always wrote."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specbench.errors import SpecbenchError
from specbench.measure.executors.executor import (
    BUG,
    DIED,
    INPUT,
    Outcome,
    RecordWriter,
    WorkerBug,
    dispatch,
    placement_columns,
    raise_failures,
)
from specbench.measure.executors.pieces import BLOCK, GROUP, Piece, live_pieces
from specbench.measure.executors.ray_executor import (
    Shape,
    check_same_weights,
    parallel_gpus,
    start_local_instance,
    worker_shapes,
)
from specbench.measure.grid.executor import INPROCESS, executor_over, parse_executor
from specbench.measure.grid.flags import SweepFlags
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.units import UnitOutput, expand_units, load_workloads
from specbench.records.store import load_records
from tests.cli_helpers import TINY_SWEEP, assert_user_error, invoke, jsonl_workload, tiny_sweep_yaml


def tiny_spec(prompts_file, **overrides):
    return build_spec({**TINY_SWEEP, "workloads": [jsonl_workload(prompts_file)], **overrides})


# ----------------------------------------------------------------------------- settings


def test_executor_settings_parse_and_leave_the_spec_hash_alone(prompts_file):
    plain = tiny_spec(prompts_file)
    ray = tiny_spec(prompts_file, executor={"name": "ray", "address": "10.0.0.5:6379", "workers": 3, "retries": 1})
    assert plain.executor == INPROCESS
    assert (ray.executor.name, ray.executor.address, ray.executor.workers, ray.executor.retries) == (
        "ray",
        "10.0.0.5:6379",
        3,
        1,
    )
    assert ray.spec_hash == plain.spec_hash  # where units run is not what they measure
    assert ray.to_dict()["executor"]["workers"] == 3 and "executor" not in plain.to_dict()
    workloads = load_workloads(plain)
    assert [u.unit_id for u in expand_units(plain, workloads)] == [u.unit_id for u in expand_units(ray, workloads)]
    assert parse_executor("ray", "x").is_ray and parse_executor({"address": "auto"}, "x").address == "auto"


@pytest.mark.parametrize(
    "value, needle",
    [
        ("dask", "executor must be one of inprocess, ray"),
        ({"name": "ray", "workers": 0}, "workers takes a whole number"),
        ({"name": "ray", "workers": True}, "workers takes a whole number"),
        ({"name": "ray", "address": "nowhere"}, "HOST:PORT"),
        ({"name": "ray", "address": "host:70000"}, "port must be 1..65535"),
        ({"name": "ray", "wokers": 2}, "unknown executor key 'wokers'"),
        ({"name": "inprocess", "workers": 2}, "executor inprocess takes no workers"),
        ([1, 2], "'executor' is a name"),
    ],
)
def test_bad_executor_settings_are_one_line_errors(prompts_file, value, needle):
    with pytest.raises(SpecbenchError, match=needle):
        tiny_spec(prompts_file, executor=value)


def test_flags_choose_ray():
    assert executor_over(None, None, None, 2) == {"name": "ray", "workers": 2}
    assert executor_over({"name": "ray", "address": "auto"}, None, None, 4) == {
        "name": "ray",
        "address": "auto",
        "workers": 4,
    }
    assert executor_over("ray", "inprocess", None, None) == {"name": "inprocess"}
    assert executor_over({"name": "inprocess"}, None, "h:1", None) == {"name": "ray", "address": "h:1"}
    with pytest.raises(SpecbenchError, match="--executor inprocess takes no --address"):
        executor_over(None, "inprocess", None, 2)
    raw = SweepFlags(workers=2, address="auto").over({"name": "s"})
    assert raw["executor"] == {"name": "ray", "address": "auto", "workers": 2}


def test_cli_refuses_bad_executor_flags_in_one_line(tmp_path, prompts_file):
    spec = tiny_sweep_yaml(tmp_path, prompts_file)
    assert_user_error(
        invoke("sweep", spec, "--executor", "inprocess", "--workers", "2", "--out", tmp_path / "r"),
        "--executor inprocess takes no --address or --workers",
    )
    assert_user_error(invoke("sweep", spec, "--address", "nowhere", "--out", tmp_path / "r"), "HOST:PORT")
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------- resources


def test_worker_shapes_follow_the_device_and_parallelism(prompts_file):
    cpu = tiny_spec(prompts_file)
    assert worker_shapes(cpu, 2, cpus=2, gpus=0)[:2] == (2, Shape(1, 0, 1))
    assert worker_shapes(cpu, None, cpus=8, gpus=0)[:2] == (8, Shape(1, 0, 1))  # one core each on a cluster
    assert worker_shapes(tiny_spec(prompts_file, threads=2), 2, cpus=4, gpus=0)[:2] == (2, Shape(2, 0, None))
    with pytest.raises(SpecbenchError, match="do not fit"):
        worker_shapes(tiny_spec(prompts_file, threads=2), 3, cpus=4, gpus=0)
    gpu = tiny_spec(prompts_file, device="cuda", mode="replay")
    gpu.backend_options = {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}
    assert parallel_gpus(gpu) == 4
    live_n, live, replay_n, replay = worker_shapes(gpu, None, cpus=64, gpus=8)
    assert (live_n, live.gpus) == (2, 4)  # one engine per GPU set of TP × PP
    assert replay_n == 8 * 4 and replay.gpus == 0.25  # acceptance-only replays packed four to a GPU
    with pytest.raises(SpecbenchError, match="GPU"):
        worker_shapes(gpu, 3, cpus=64, gpus=8)
    with pytest.raises(SpecbenchError, match="does not fit on one node"):  # pipeline stages across nodes
        worker_shapes(gpu, None, cpus=64, gpus=8, node_gpus=2)


def test_nodes_with_different_weights_are_refused():
    a = {"model_hashes": {"t": "a" * 64}, "where": {"node": "10.0.0.1"}}
    b = {"model_hashes": {"t": "b" * 64}, "where": {"node": "10.0.0.2"}}
    check_same_weights([a, dict(a)])
    with pytest.raises(SpecbenchError, match="t has different weights on node 10.0.0.2"):
        check_same_weights([a, b])
    with pytest.raises(SpecbenchError, match="runs in bf16 on node 10.0.0.2 but in fp32 on node 10.0.0.1"):
        check_same_weights([{**a, "dtype_used": "fp32"}, {**a, "dtype_used": "bf16", "where": {"node": "10.0.0.2"}}])


# ----------------------------------------------------------------------------- the dispatcher


class Unit:
    """A stand-in unit: a conversation (group), a turn, and enough for the writer."""

    def __init__(self, name, turn=1, baseline=False):
        self.name, self.turn, self.mode, self.concurrency, self.request_rate = name, turn, "live", 1, None
        self.group = (name.split("/")[0],)
        self.config = type("C", (), {"drafter": None if baseline else "d", "is_baseline": baseline})()
        self.workload = type("W", (), {"name": "w"})()
        self.prompt = type("P", (), {"prompt_id": name})()


class FakeStore:
    def __init__(self, folder):
        self.folder, self.records = folder, []

    def write_unit(self, record):
        self.records.append(record)


class Silent:
    def unit_done(self, unit, record):
        pass


class FakePool:
    """``slots`` workers; ``fate(piece, attempt)`` says how a piece ends: None (done) or (kind, reason)."""

    def __init__(self, slots, fate=lambda piece, attempt: None):
        self.slots, self.fate, self.flight, self.order, self.tries = slots, fate, [], [], {}

    def free(self):
        return len(self.flight) < self.slots

    def busy(self):
        return bool(self.flight)

    def choose(self, ready):
        return ready[0]

    def submit(self, piece):
        self.flight.append(piece)
        self.order.append(piece.units[0].name)

    def wait(self):
        piece = self.flight.pop(0)
        name = piece.units[0].name
        self.tries[name] = self.tries.get(name, 0) + 1
        ending = self.fate(piece, self.tries[name])
        if ending is not None:
            return [Outcome(piece, error=ending[1], kind=ending[0])]
        outputs = [
            UnitOutput(
                u,
                {
                    "unit_id": u.name,
                    "drafter": "none" if u.config.drafter is None else "d",
                    "output_ids": [1, 2],
                    "mode": "live",
                },
            )
            for u in piece.units
        ]
        return [Outcome(piece, outputs, placement={"node": "n1", "node_device": "cpu", "node_groups": 2, "cpu": True})]


def pieces_of(*specs):
    return [Piece(BLOCK, [Unit(name, turn, baseline)]) for name, turn, baseline in specs]


def writer_for(tmp_path):
    return RecordWriter(FakeStore(tmp_path), Silent(), {})


def test_turn_two_waits_for_its_baseline_answer(tmp_path):
    writer = writer_for(tmp_path)
    pieces = pieces_of(("a/2", 2, True), ("a/1", 1, True), ("b/1", 1, True))
    pool = FakePool(slots=1)
    assert dispatch(pieces, pool, writer) == []
    assert pool.order == ["a/1", "a/2", "b/1"]  # turn 2 held back until a's turn-1 answer is written, then in order
    assert writer.answers[("a", 1, None)] == [[1, 2]]  # conversation, concurrency, request rate
    assert [r["node"] for r in writer.store.records] == ["n1"] * 3


def test_a_dead_worker_loses_one_piece_which_is_retried_then_reported(tmp_path):
    dies_twice = lambda piece, attempt: (DIED, "worker died") if piece.units[0].name == "b/1" and attempt <= 2 else None  # noqa: E731
    writer = writer_for(tmp_path)
    assert (
        dispatch(
            pieces_of(("a/1", 1, True), ("b/1", 1, True), ("c/1", 1, True)), FakePool(2, dies_twice), writer, retries=2
        )
        == []
    )
    assert sorted(r["unit_id"] for r in writer.store.records) == ["a/1", "b/1", "c/1"]  # third attempt ran it

    writer = writer_for(tmp_path)
    failures = dispatch(
        pieces_of(("a/1", 1, True), ("b/1", 1, True), ("c/1", 1, True), ("b/2", 2, True)),
        FakePool(2, dies_twice),
        writer,
        retries=1,
    )
    assert sorted(r["unit_id"] for r in writer.store.records) == ["a/1", "c/1"]  # the others went on
    assert [(f.piece.units[0].name, f.kind, f.attempts) for f in failures] == [("b/1", DIED, 2), ("b/2", INPUT, 0)]
    assert "baseline answer whose piece failed" in failures[1].reason


def test_user_errors_and_bugs_are_not_retried(tmp_path):
    fate = lambda piece, attempt: {"a/1": (INPUT, "node n1: model not found"), "b/1": (BUG, "Traceback ...")}.get(  # noqa: E731
        piece.units[0].name
    )
    pool = FakePool(1, fate)
    failures = dispatch(
        pieces_of(("a/1", 1, True), ("b/1", 1, True), ("c/1", 1, True)), pool, writer_for(tmp_path), retries=3
    )
    assert pool.tries == {"a/1": 1, "b/1": 1, "c/1": 1}
    assert [f.kind for f in failures] == [INPUT, BUG]
    with pytest.raises(WorkerBug, match="Traceback"):
        raise_failures(failures, 3, tmp_path)
    with pytest.raises(SpecbenchError) as err:
        raise_failures(failures[:1], 3, tmp_path, waiting=4)
    message = str(err.value)
    assert "1 of 3 pieces of work failed" in message and "node n1: model not found" in message
    assert "4 replayed unit(s) wait" in message and "run the same command" in message and "\n" not in message


def test_timed_units_sharing_a_cpu_node_are_flagged():
    shared = {"node": "n", "node_device": "cpu", "node_groups": 2, "cpu": True}
    flagged = placement_columns(shared, {"mode": "live", "timing_flag": ""})
    assert flagged["timing_ok"] is False and "2 pieces ran on this CPU machine" in flagged["timing_flag"]
    assert "timing_ok" not in placement_columns(shared, {"mode": "replay"})  # modelled timings: nothing to flag
    assert "timing_ok" not in placement_columns({**shared, "node_groups": 1}, {"mode": "live"})
    assert "timing_ok" not in placement_columns({**shared, "cpu": False, "node_device": "GPU 0"}, {"mode": "live"})
    assert placement_columns(None, {"mode": "live"}) == {"node": None, "node_device": None, "node_groups": None}


def test_serving_groups_are_pieces_in_the_serial_order(prompts_file):
    spec = tiny_spec(prompts_file, backend="vllm", drafters=["ngram"], gammas=[2], concurrency=[1, 4])
    units = expand_units(spec, load_workloads(spec))
    pieces = live_pieces(spec, units)
    assert {p.kind for p in pieces} == {GROUP} and sum(len(p.units) for p in pieces) == len(units)
    assert [(p.config.gamma, p.concurrency) for p in pieces] == [(0, 1), (0, 4), (2, 1), (2, 4)]  # baselines first


# ----------------------------------------------------------------------------- in-process: today's records


def test_inprocess_sweep_writes_null_placement(tmp_path, prompts_file):
    spec = tiny_sweep_yaml(tmp_path, prompts_file, gammas=[2], drafters=[{"type": "ngram"}])
    result = invoke("sweep", spec, "--out", tmp_path / "r", "--prompts", "2")
    assert result.exit_code == 0, result.output
    records = load_records(tmp_path / "r")
    assert records["node"].isna().all() and records["node_groups"].isna().all()
    assert "executor" not in json.loads((tmp_path / "r" / "run.json").read_text())


def test_ray_executor_without_ray_says_how_to_install_it(tmp_path, prompts_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is not installed
    result = invoke("sweep", tiny_sweep_yaml(tmp_path, prompts_file), "--workers", "2", "--out", tmp_path / "r")
    assert_user_error(result, "--executor ray needs Ray", "make install-ray")
    assert not (tmp_path / "r" / "run.json").exists()


class LateRay:
    """A stand-in for ``ray`` whose new node misses Ray's startup wait ``late`` times: each attempt leaves a
    process behind, as a half-started instance does."""

    def __init__(self, late: int):
        self.late, self.calls, self.left = late, [], []

    def init(self, **options):
        self.calls.append(options)
        if len(self.calls) <= self.late:
            self.left.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
            raise Exception("The current node timed out during startup. This could happen because ...")


def test_a_late_local_instance_is_cleaned_up_and_started_again():
    ray = LateRay(late=2)
    start_local_instance(ray, attempts=3, num_cpus=2)
    assert len(ray.calls) == 3 and ray.calls[-1] == {"address": "local", "num_cpus": 2}
    assert all(p.poll() is not None for p in ray.left)  # the half-started processes were ended

    never = LateRay(late=5)
    with pytest.raises(SpecbenchError, match="did not start.*3 times.*run the same command again"):
        start_local_instance(never, attempts=3)
    assert len(never.calls) == 3 and all(p.poll() is not None for p in never.left)
