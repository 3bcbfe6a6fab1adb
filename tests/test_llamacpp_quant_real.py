"""Real llama.cpp tools (marker ``llamacpp``; `make test-llamacpp` builds them first): the GGUF types a
quantization sweep runs, written by llama.cpp's own ``llama-quantize`` from SmolLM2-135M's shipped Q4_1 weights.

* the variants: ``smollm2-135m@F16`` and ``@Q4_K_M`` are built into a fresh cache (``SPECBENCH_CACHE``), hold the
  type they are named for (their GGUF header's ``general.file_type``) and the shipped file's vocabulary, and a
  second ask finds the cached file without building it again;
* the sweep: sweeps/llamacpp-smollm2-quant.yaml, two prompts, two drafter types and the file's two target types
  (one sweep per target type, merged), then ``recommend`` prints the table (α, τ, tokens/s, verdict) of every
  (target type, drafter type) pair.

Skipped with the reason when llama-server or llama-quantize is not built (`make install-llamacpp`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.backends.llamacpp.env import server_binary, tool_binary
from specbench.errors import SpecbenchError

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.llamacpp


@pytest.fixture(scope="module")
def tools() -> None:
    try:
        server_binary()
        tool_binary("llama-quantize")
    except SpecbenchError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def test_llama_quantize_writes_each_type_once_into_the_cache(tools, cache, monkeypatch):
    from specbench.backends.llamacpp.quantized import model_gguf
    from specbench.models.gguf_files import GGUF_KEY, gguf_facts, gguf_file, gguf_names

    monkeypatch.setenv("SPECBENCH_CACHE", str(cache))
    said: list[str] = []
    shipped = gguf_facts(gguf_file("smollm2-135m"))
    for kind in ("F16", "Q4_K_M"):
        path = model_gguf(f"smollm2-135m@{kind}", status=said.append)
        assert path.is_relative_to(cache / "gguf" / "quantized") and path.name.endswith(f"-{kind}.gguf")
        facts = gguf_facts(path)
        assert facts["file_type"] == kind
        assert facts["tokens_sha256"] == shipped["tokens_sha256"]  # one vocabulary: a draft model for the target
        built = path.stat().st_mtime_ns
        assert model_gguf(f"smollm2-135m@{kind}") == path and path.stat().st_mtime_ns == built  # cached
        assert gguf_names()[GGUF_KEY + f"smollm2-135m@{kind}"] == str(path)  # what a pasted command line names
    assert sum("llama-quantize" in line for line in said) == 2
    assert not list((cache / "gguf" / "quantized").glob("*.part"))


def test_the_quantization_sweep_over_two_target_types_prints_one_pair_table(tools, cache, tmp_path):
    env = {**os.environ, "SPECBENCH_CACHE": str(cache), "SPECBENCH_NO_ENGINE_CHECK": ""}
    cli = [sys.executable, "-m", "specbench"]
    out = tmp_path / "quant"
    spec = str(ROOT / "sweeps/llamacpp-smollm2-quant.yaml")
    flags = ["--fixed-grid", "--prompts", "2", "-n", "16", "--drafter-quant", "Q8_0,Q2_K", "--out", str(out)]
    done = subprocess.run([*cli, "sweep", spec, *flags], capture_output=True, text=True, env=env, timeout=1800)
    print(done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0
    answer = subprocess.run(
        [*cli, "recommend", str(out), "--engine", "llamacpp"],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "250"},
        timeout=600,
    )
    assert answer.returncode == 0, answer.stderr
    assert "Quantization: per (target type, drafter type)" in answer.stdout
    rows = [line for line in answer.stdout.splitlines() if "draft-model(model=smollm2-135m) at" in line]
    assert len(rows) == 4, answer.stdout  # 2 target types × 2 drafter types, in one table
    targets = sorted(next(c.strip() for c in r.split("│") if c.strip() in ("F16", "Q8_0")) for r in rows)
    assert targets == ["F16", "F16", "Q8_0", "Q8_0"], answer.stdout
    assert sum("at Q8_0" in r for r in rows) == 2 and sum("at Q2_K" in r for r in rows) == 2, answer.stdout
    assert (out / "targets" / "F16" / "run.json").is_file() and (out / "targets" / "Q8_0" / "run.json").is_file()
