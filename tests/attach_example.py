"""The documented ``url:`` attach example of docs/backends-llamacpp.md, read from the page itself, as a sweep spec:
the page's YAML (the backend mapping) with its address replaced by the server a test runs, around the smallest
sweep that measures through it. The fake-server test (tests/test_attach_mode.py) and the real one
(tests/test_llamacpp_real.py) run the same example, so the page cannot drift from what works."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

DOC = Path(__file__).resolve().parents[1] / "docs" / "backends-llamacpp.md"
SECTION = "## `url:` — a server you run"
DOCUMENTED_URL = "http://127.0.0.1:8080"


def documented_backend() -> dict:
    """The ``backend:`` mapping of the section's first YAML block, as the page writes it."""
    text = DOC.read_text(encoding="utf-8")
    assert SECTION in text, f"{DOC.name} lost its section {SECTION!r}"
    block = re.search(r"```yaml\n(.*?)```", text[text.index(SECTION) :], re.S)
    assert block is not None, f"{DOC.name}: no YAML example under {SECTION!r}"
    backend = yaml.safe_load(block.group(1))["backend"]
    assert backend == {"name": "llamacpp-server", "url": DOCUMENTED_URL}, backend
    return backend


def attach_sweep(url: str, workload: dict, *, gamma: int = 2, concurrency: int = 2, max_new_tokens: int = 8) -> dict:
    """A sweep of SmolLM2-135M through the documented backend mapping, attached at ``url``: the target alone and
    llama.cpp's n-gram lookup at γ ``gamma``, ``concurrency`` requests in flight (above one, so the registry's
    launch default of slots would have been added before the attach fix)."""
    backend = {**documented_backend(), "url": url}
    return {
        "name": "attach-example",
        "target": "smollm2-135m",
        "drafters": [{"type": "ngram-simple", "params": {"size_n": 2}}],
        "gammas": [gamma],
        "max_new_tokens": max_new_tokens,
        "ignore_eos": True,
        "concurrency": [concurrency],
        "workloads": [workload],
        "backend": backend,
    }
