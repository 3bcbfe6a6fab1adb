"""Shared fixtures: real SmolLM2-135M (converted once into the user cache) and tiny models."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch

# Under pytest-xdist (`make test` runs two workers on CI's two cores) each worker gets one torch
# thread: two workers with two threads each oversubscribe the cores and run several times slower,
# and the timing protocol would see the other worker as interference.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"  # and so does every specbench command a test starts
else:
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
# xdist's workers ignore SIGINT, and so does a pytest started in the background by a non-interactive shell
# (`nohup make test-ray &`); a process started with SIGINT ignored keeps ignoring it, and so do its children.
# The tests that interrupt a sweep or a launcher need their children to see it as a user's Ctrl-C would.
signal.signal(signal.SIGINT, signal.default_int_handler)
# `specbench recommend` checks engine settings with .venv-vllm when it exists (half a minute per new
# config); the default suite tests that check with a stand-in (tests/test_engine_checks.py) instead.
os.environ.setdefault("SPECBENCH_NO_ENGINE_CHECK", "1")

# Per-test time limits (pytest-timeout; pyproject.toml sets the default, `timeout = 900`): the default suite runs
# in about 12 minutes on CI's two cores, so no test of it should come near 15 minutes unless it hangs. Tests behind
# these markers are long by design — big models, real vLLM engines, local Ray clusters, the long fuzz run — and get
# an hour each. On a machine busy with other work, `--timeout 0` (or PYTEST_TIMEOUT=0) turns the limits off.
LONG_MARKERS = ("heavy", "vllm", "ray", "fuzz", "llamacpp")
LONG_TEST_TIMEOUT_S = 3600


def pytest_collection_modifyitems(config, items):
    """The known long tests (`LONG_MARKERS`) get `LONG_TEST_TIMEOUT_S` unless they set their own limit."""
    for item in items:
        if item.get_closest_marker("timeout") is None and any(item.get_closest_marker(m) for m in LONG_MARKERS):
            item.add_marker(pytest.mark.timeout(LONG_TEST_TIMEOUT_S))


REAL_PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number, then explain it.",
    "List three tips for staying focused while studying.",
    "What is the capital of France? Answer in one sentence and then repeat the answer.",
    "Summarize in two sentences: The quick brown fox jumps over the lazy dog. The dog sleeps.",
    "Write a short poem about the sea.",
]


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module (use with `pytestmark = pytest.mark.usefixtures(...)`): on a
    busy 2-core machine two threads contend and run many times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smollm2():
    from specbench.models.resolve import load_model

    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_prompt_ids(smollm2):
    from specbench.models.prompting import encode_conversation

    return [encode_conversation(smollm2.tokenizer, [p]) for p in REAL_PROMPTS]


@pytest.fixture(scope="session")
def early_exit_drafter(smollm2):
    from specbench.engine.drafters import make_drafter

    return make_drafter("draft-model", smollm2, {"model": "smollm2-135m-exit8"})


@pytest.fixture(scope="session")
def tiny_v8():
    from specbench.models.resolve import load_model

    return load_model("tiny-random-v8"), load_model("tiny-random-v8-draft")


PROMPTS = ["Tell me about tea.", "Count to ten please.", "Why is the sky blue?", "Name a prime number."]


@pytest.fixture()
def prompts_file(tmp_path) -> Path:
    """A JSONL prompt file (``id``, ``text``) of four short prompts, for `jsonl:` workloads."""
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS)))
    return path
