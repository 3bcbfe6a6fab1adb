"""One memory estimate before every allocation (`specbench.models.memory`).

Drafter builders of every checkpoint format (specbench's own, the published layouts, the speculators format)
build the network on the meta device first, compare its shapes with the checkpoint's tensors and check its bytes
against the limit (``SPECBENCH_MAX_MEMORY_GIB``); KV caches, profile's grid and the replayer ask the same
`require`. Before, an own-format checkpoint whose config said intermediate 10^7 allocated 3 GB in 15 s before the
shapes were compared, and `profile --batch 4096 --context 3900 --verify-tokens 129` reached 3 GB and was an
internal error under a memory cap.

The property draws configs and flags within their bounds and checks that the process's peak resident memory
grows by at most the estimate plus a margin, or that the request is refused in one line. Peak memory is the
kernel's high-water mark (VmHWM, reset through /proc/self/clear_refs), read around the call in this process.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.engine.drafters import make_drafter, registry
from specbench.engine.kv_cache import StaticKVCache
from specbench.errors import SpecbenchError
from specbench.models.limits import MEMORY_VARIABLE
from specbench.models.memory import kv_cache_bytes
from tests.cli_helpers import assert_user_error, invoke

MARGIN = 96 * 2**20  # allocator slack, Python objects, first-call caches
CLEAR_REFS = Path("/proc/self/clear_refs")

pytestmark = pytest.mark.skipif(not CLEAR_REFS.exists(), reason="peak memory needs Linux's /proc/self/clear_refs")


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(key)


def peak_growth(call):
    """(what ``call()`` returned or the SpecbenchError it raised, peak resident bytes above the start)."""
    gc.collect()
    try:
        CLEAR_REFS.write_text("5")  # resets VmHWM to the current resident size
    except OSError:
        pytest.skip("cannot reset the peak resident size here")
    before = _status("VmRSS")
    try:
        outcome = call()
    except SpecbenchError as exc:
        outcome = exc
    return outcome, _status("VmHWM") - before


@pytest.fixture(scope="module")
def tiny():
    from specbench.models.resolve import load_model

    return load_model("tiny-random-llama")


def _own_checkpoint(folder: Path, tiny, intermediate: int) -> Path:
    """An own-format EAGLE checkpoint of the tiny target whose layer has ``intermediate`` MLP rows."""
    kind = registry.get("eagle")
    net = kind.new_net(kind.architecture(tiny.model.config, intermediate=intermediate))
    kind.save(folder, net, tiny, None, dtype=torch.float32)
    return folder


def _say_intermediate(folder: Path, intermediate: int) -> None:
    config = json.loads((folder / "config.json").read_text())
    config["architecture"]["layer"]["intermediate"] = intermediate
    (folder / "config.json").write_text(json.dumps(config))


def test_an_own_format_config_of_intermediate_ten_million_is_refused_before_allocating(tmp_path, tiny):
    folder = _own_checkpoint(tmp_path / "ckpt", tiny, 32)
    _say_intermediate(folder, 10**7)  # the weights stay 32 rows wide
    outcome, growth = peak_growth(lambda: make_drafter("eagle", tiny, {"checkpoint": str(folder)}))
    assert isinstance(outcome, SpecbenchError), outcome
    assert "\n" not in str(outcome) and "weights do not fit its config" in str(outcome)
    assert growth < MARGIN, f"grew {growth / 2**20:.0f} MiB before refusing"


def test_the_profile_grid_of_the_issue_is_refused_in_one_line_before_allocating(monkeypatch):
    monkeypatch.setenv(MEMORY_VARIABLE, "12")  # above the KV cache alone (7.9 GiB): the attention scores decide
    args = ["profile", "--target", "tiny-random-llama", "--batch", "4096", "--context", "3900"]
    result, growth = peak_growth(lambda: invoke(*args, "--verify-tokens", "129", "--out", "/nonexistent/p"))
    assert_user_error(result, "--batch 4096 --context 3900 --verify-tokens 129", MEMORY_VARIABLE)
    assert growth < MARGIN, f"grew {growth / 2**20:.0f} MiB before refusing"


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    intermediate=st.integers(1, 262_144),
    consistent=st.booleans(),
    cap_gib=st.sampled_from([None, 0.05, 0.5]),
)
def test_drafter_checkpoints_stay_under_the_estimate_or_are_refused(
    tmp_path_factory, tiny, intermediate, consistent, cap_gib
):
    """An own-format checkpoint of any MLP width within its bound: its weights as saved, or its config saying
    another width; under no cap or a drawn one."""
    import os

    folder = tmp_path_factory.mktemp("ckpt")
    saved = intermediate if consistent else 16
    _own_checkpoint(folder, tiny, saved)
    _say_intermediate(folder, intermediate)
    layer = json.loads((folder / "config.json").read_text())["architecture"]["layer"]
    hidden, attn_in = layer["hidden"], layer["attn_in"]
    estimate = 4 * (3 * hidden * intermediate + 4 * attn_in * hidden) + (folder / "model.safetensors").stat().st_size
    old = os.environ.get(MEMORY_VARIABLE)
    if cap_gib is not None:
        os.environ[MEMORY_VARIABLE] = str(cap_gib)
    try:
        outcome, growth = peak_growth(lambda: make_drafter("eagle", tiny, {"checkpoint": str(folder)}))
    finally:
        if old is None:
            os.environ.pop(MEMORY_VARIABLE, None)
        else:
            os.environ[MEMORY_VARIABLE] = old
    if isinstance(outcome, SpecbenchError):
        assert "\n" not in str(outcome)
        assert growth < MARGIN, f"grew {growth / 2**20:.0f} MiB before refusing"
        assert not consistent or (cap_gib is not None and estimate > 0.5 * cap_gib * 2**30), outcome
    else:
        assert consistent or saved == intermediate, "a config that disagrees with its weights was built"
        assert growth <= estimate * 1.5 + MARGIN, (growth, estimate)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    batch=st.integers(1, 4096),
    context=st.integers(1, 4000),
    verify=st.integers(1, 129),
)
def test_profile_grids_stay_under_the_estimate_or_are_refused(batch, context, verify):
    """A one-cell profile of the tiny target under a 0.5 GiB cap: refused in one line at the plan, or measured
    within the estimate of its largest cell."""
    import os

    from specbench.profile.profiler import ProfileGrid, grid_memory_bytes, measure_profile, plan_profile

    grid = ProfileGrid(batches=(batch,), contexts=(context,), verify_tokens=(verify,), warmup=0, repeats=1)
    old = os.environ.get(MEMORY_VARIABLE)
    os.environ[MEMORY_VARIABLE] = "0.5"
    try:
        try:
            plan = plan_profile("tiny-random-llama", grid=grid)
        except SpecbenchError as exc:
            assert "\n" not in str(exc) and MEMORY_VARIABLE in str(exc)
            return
        estimate = sum(grid_memory_bytes(plan.target, grid, 4).values())
        _, growth = peak_growth(lambda: measure_profile(plan))
    finally:
        if old is None:
            os.environ.pop(MEMORY_VARIABLE, None)
        else:
            os.environ[MEMORY_VARIABLE] = old
    assert growth <= estimate + MARGIN, (growth / 2**20, estimate / 2**20)


def test_a_kv_cache_beyond_the_limit_is_refused_before_it_is_made(monkeypatch):
    monkeypatch.setenv(MEMORY_VARIABLE, "0.01")
    with pytest.raises(SpecbenchError, match="KV cache"):
        StaticKVCache(30, 4096, 8, 128, 4096, torch.float32, "cpu")
    assert kv_cache_bytes(30, 4096, 8, 128, 4096, 4) == 2 * 30 * 4096 * 8 * 128 * 4096 * 4
    cache = StaticKVCache(1, 1, 1, 4, 16, torch.float32, "cpu")
    cache.length = 16
    with pytest.raises(SpecbenchError, match="growing a KV cache"):
        cache.reserve(2**24)
