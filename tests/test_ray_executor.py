"""The Ray executor on a local Ray instance (marker ``ray``: `make test-ray`, after `make install-ray`).

Every sweep here runs as its own ``specbench`` process, as a user would start it: a local Ray instance
with two one-CPU workers, tiny random models. What is checked: the records equal a serial sweep's in
every non-timing column, unit for unit (live and replayed); a worker killed mid-piece loses that piece
only and a rerun completes the folder without duplicates (or, with retries, the piece runs again at
once); Ctrl-C exits 130 and leaves no Ray or engine process behind (checked with ``ps``); a node that
cannot find the model says so in one line naming the node; an adaptive sweep's looks run on the workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from specbench.records.adaptive_history import read_history
from specbench.records.store import load_records, record_files
from tests.cli_helpers import jsonl_workload, tiny_sweep_yaml

pytest.importorskip("ray", reason="Ray is not installed: make install-ray")
pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[1]
SPECBENCH = [sys.executable, "-m", "specbench"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}


def sweep_cmd(spec, out, *extra):
    return [*SPECBENCH, "sweep", str(spec), "--out", str(out), *map(str, extra)]


def run(cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV, cwd=ROOT)


def compare(a, b) -> str:
    out = run([sys.executable, str(ROOT / "scripts" / "compare_records.py"), str(a), str(b)], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def worker_pids(out: Path) -> list[int]:
    try:
        info = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return []
    return [w["pid"] for w in info.get("executor", {}).get("workers", [])]


def unit_files(out: Path) -> int:
    return len(list((out / "records").glob("unit-*.parquet"))) if (out / "records").exists() else 0


def rows_on_disk(out: Path) -> int:
    return sum(pq.read_metadata(p).num_rows for p in record_files(out))


def test_ray_sweep_writes_the_serial_sweeps_records(tmp_path, prompts_file):
    """mode both: live blocks and replayed prompt turns, through two local workers."""
    spec = tiny_sweep_yaml(tmp_path, prompts_file, mode="both")
    serial = run(sweep_cmd(spec, tmp_path / "serial"))
    assert serial.returncode == 0, serial.stderr
    ray = run(sweep_cmd(spec, tmp_path / "ray", "--workers", 2))
    assert ray.returncode == 0, ray.stderr
    assert "units in both folders" in compare(tmp_path / "serial", tmp_path / "ray")
    a, b = load_records(tmp_path / "serial"), load_records(tmp_path / "ray")
    assert len(a) == len(b) and set(a["unit_id"]) == set(b["unit_id"]) and (b["mode"] == "replay").any()
    assert a["node"].isna().all() and b["node"].notna().all() and set(b["node_device"]) == {"cpu"}
    live = b[b["mode"] == "live"]
    shared = live[live["node_groups"] > 1]
    assert len(shared) and not shared["timing_ok"].any()  # timed beside another worker: flagged
    assert shared["timing_flag"].str.contains("pieces ran on this CPU machine at once").all()
    info = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert info["spec_hash"] == json.loads((tmp_path / "serial" / "run.json").read_text())["spec_hash"]
    assert info["executor"]["name"] == "ray" and len(info["executor"]["workers"]) == 2
    # the workers keep the driver's priority (Ray would add 15): a sweep started with `nice` passes it on
    assert {w["nice"] for w in info["executor"]["workers"]} == {os.getpriority(os.PRIO_PROCESS, 0)}


def _slow_sweep(tmp_path, prompts_file, retries: int):
    """Blocks that take seconds each (long generations), so that a worker is caught mid-piece."""
    return tiny_sweep_yaml(
        tmp_path,
        prompts_file,
        max_new_tokens=512,  # every engine is warmed before the first record: the rest must still take seconds
        gammas=[1, 3],
        workloads=[jsonl_workload(prompts_file, count=4)],
        timing={"order": "once", "warmup_s": 0, "retries": 0},
        executor={"name": "ray", "workers": 2, "retries": retries},
    )


BLOCK = 1 + 2 * 2  # units of one prompt turn in the slow sweep: the baseline, two drafters × two γ


def _start_slow_sweep(tmp_path, prompts_file, retries: int):
    """The slow sweep started as its own process; returns (its sweep file, its folder, the process) once its
    workers have started and written a first record, so that both are mid-piece."""
    spec = _slow_sweep(tmp_path, prompts_file, retries)
    out = tmp_path / "r"
    proc = subprocess.Popen(
        sweep_cmd(spec, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT
    )
    wait_for(lambda: worker_pids(out), 300, "the workers to start")
    wait_for(lambda: unit_files(out) or proc.poll() is not None, 300, "the first record")
    assert proc.poll() is None, "the sweep ended before it could be disturbed"
    return spec, out, proc


def _kill_a_worker(tmp_path, prompts_file, retries: int):
    spec, out, proc = _start_slow_sweep(tmp_path, prompts_file, retries)
    os.kill(worker_pids(out)[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=600)
    return spec, out, proc.returncode, stderr


def test_a_killed_worker_loses_only_its_piece_and_a_rerun_completes(tmp_path, prompts_file):
    spec, out, code, stderr = _kill_a_worker(tmp_path, prompts_file, retries=0)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "1 of 4 pieces of work failed" in lines[0] and "died" in lines[0], stderr
    assert "run the same command" in lines[0]
    partial = load_records(out)
    per_prompt = partial.groupby("prompt_id").size()
    assert len(per_prompt) == 3 and (per_prompt == BLOCK).all()  # one prompt's block lost, the others whole
    again = run(sweep_cmd(spec, out))
    assert again.returncode == 0, again.stderr
    done = load_records(out)
    assert len(done) == 4 * BLOCK and done["unit_id"].is_unique and rows_on_disk(out) == len(done)
    assert set(partial["unit_id"]) <= set(done["unit_id"])


def test_a_killed_workers_piece_runs_again(tmp_path, prompts_file):
    _, out, code, stderr = _kill_a_worker(tmp_path, prompts_file, retries=1)
    assert code == 0, stderr
    records = load_records(out)
    assert records["unit_id"].is_unique and rows_on_disk(out) == len(records)
    assert len(records) == 4 * BLOCK


def test_ctrl_c_exits_130_and_leaves_no_process(tmp_path, prompts_file):
    _, out, proc = _start_slow_sweep(tmp_path, prompts_file, retries=0)
    family = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert set(worker_pids(out)) <= set(family)  # Ray's processes and the workers descend from the sweep
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    time.sleep(1)
    listed = subprocess.run(
        ["ps", "-o", "pid=,stat=,args=", "-p", ",".join(map(str, family))], capture_output=True, text=True
    ).stdout
    alive = [line for line in listed.splitlines() if line.split()[1][0] != "Z"]
    assert not alive, f"left running after Ctrl-C:\n{listed}"
    kept = load_records(out)
    assert len(kept) >= 1 and kept["unit_id"].is_unique  # finished units kept


def test_a_missing_model_is_one_line_before_any_worker_starts(tmp_path, prompts_file):
    """The driver resolves the target as a dry run does (`measure.grid.validate.check_models`) before Ray starts a
    worker: a model missing here is one line naming it (a node missing it while the driver has it still names
    the node: `measure.executors.ray_executor`)."""
    spec = tiny_sweep_yaml(tmp_path, prompts_file, target=str(tmp_path / "no-such-model"))
    result = run(sweep_cmd(spec, tmp_path / "r", "--workers", 1))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specbench: error: ") and "no-such-model" in lines[0], lines
    assert not (tmp_path / "r" / "records").exists()  # refused before anything was measured


def test_an_adaptive_sweep_dispatches_each_look_to_the_workers(tmp_path, prompts_file):
    """Each look of an adaptive sweep goes through the Ray workers: every workload settles, each look's prompts
    are the first n, and every record names the node that computed it."""
    spec = tiny_sweep_yaml(
        tmp_path,
        prompts_file,
        workloads=[jsonl_workload(prompts_file, count=4)],
        drafters=[{"type": "ngram"}],
        gammas=[1, 3],
        mode="replay",
        calibration={"gammas": [1, 3], "prompts": 1},
        timing={"order": "once", "warmup_s": 0},
        max_new_tokens=16,
        adaptive={"first": 2, "batch": 1, "max_prompts": 4},
    )
    out = tmp_path / "r"
    result = run(sweep_cmd(spec, out, "--workers", 2))
    assert result.returncode == 0, result.stderr
    history = read_history(out)
    records = load_records(out)
    assert history["finished"] and records["unit_id"].is_unique and records["node"].notna().all()
    for name, entry in history["workloads"].items():
        assert entry["status"] != "open" and entry["looks"]
        mine = records[records["workload"] == name]
        assert int(mine["stage"].max()) == len(entry["looks"])
        for look in entry["looks"]:
            assert mine[mine["stage"] <= look["look"]]["prompt_id"].nunique() == look["prompts"]
