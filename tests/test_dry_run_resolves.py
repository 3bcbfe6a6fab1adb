"""A dry run resolves like the run: a model name that resolves nowhere — an unknown name, ``target: yes``, a hub id
with the hub out of reach — is refused by ``sweep --dry-run`` in the run's own one line, exit 2, within 5 s and
without huggingface_hub's retries; the hub is probed once, at the endpoint the environment names."""

from __future__ import annotations

import socket
import time

import pytest
import yaml

from specbench.models import hub
from tests.cli_helpers import assert_user_error, invoke, jsonl_workload

UNREACHABLE_HUB = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(params=["endpoint", "offline"])
def no_hub(request, monkeypatch):
    """No hub: an endpoint where nothing listens (probed), or offline mode set (not probed)."""
    monkeypatch.delenv("SPECBENCH_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE_HUB)
    if request.param == "offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


CASES = {
    "a bare word": ({"target": "yes"}, "target: model 'yes' is not an alias, a .gguf file or a model folder"),
    "an unknown hub id": (
        {"target": "no-such-org/no-such-model"},
        "target: model 'no-such-org/no-such-model' is not a local folder and the Hugging Face hub is not reachable",
    ),
    "an unknown draft model": (
        {"drafters": [{"type": "draft-model", "params": {"model": "no-such-org/no-such-drafter"}}]},
        "drafter draft-model: model 'no-such-org/no-such-drafter' is not a local folder",
    ),
    "a missing GGUF": ({"target": "missing/model.gguf"}, "target: GGUF file not found"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_dry_run_refuses_what_the_run_refuses_in_one_line_within_5_s(tmp_path, prompts_file, no_hub, case):
    overrides, needle = CASES[case]
    spec = {
        "name": "unresolvable",
        "target": "tiny-random-llama",
        "drafters": ["ngram"],
        "gammas": [2],
        "max_new_tokens": 4,
        "workloads": [jsonl_workload(prompts_file, 1)],
        **overrides,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    started = time.monotonic()
    dry = invoke("sweep", path, "--dry-run")
    took = time.monotonic() - started
    assert_user_error(dry, needle)
    assert "Retry" not in dry.output and "huggingface.co" not in dry.output
    assert took < 5, f"the dry run took {took:.1f} s"
    run = invoke("sweep", path, "--out", tmp_path / "out")
    assert_user_error(run)
    assert run.stderr == dry.stderr  # the run refuses it in the same line
    assert not (tmp_path / "out" / "run.json").exists()


def test_the_hub_probe_follows_the_environment(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "SPECBENCH_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listener.getsockname()[1]}")
        assert hub.hub_reachable()
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            monkeypatch.setenv(name, "1")
            assert not hub.hub_reachable(), f"{name}=1 must not probe"
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE_HUB)
    assert not hub.hub_reachable()
