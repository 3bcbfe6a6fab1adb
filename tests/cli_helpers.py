"""Running the CLI in-process and checking the one-line, exit-2 contract for user errors."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from specbench.cli import app

runner = CliRunner()


def invoke(*args):
    """`specbench ARGS...` through Typer's CliRunner (paths and numbers are stringified)."""
    return runner.invoke(app, [str(a) for a in args])


def assert_user_error(result, *needles: str) -> None:
    """Exit code 2, exactly one line on stderr starting 'specbench: error:', containing every needle."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specbench: error:"), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def write_sweep_yaml(folder, spec: dict, **overrides):
    """``spec`` updated with ``overrides``, written as ``folder/sweep.yaml``; returns the path."""
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({**spec, **overrides}))
    return path


TINY_SWEEP = {
    "name": "tiny",
    "target": "tiny-random-llama",
    "max_new_tokens": 24,
    "ignore_eos": True,
    "drafters": [{"type": "ngram"}, {"type": "draft-model", "params": {"model": "tiny-random-llama-draft"}}],
    "gammas": [1, 3],
    "temperatures": [0.0],
}


def jsonl_workload(prompts_file, count: int = 3) -> dict:
    """A sweep's workload entry for the `prompts_file` fixture's JSONL."""
    return {"name": f"jsonl:{prompts_file}:field=text:id=id", "count": count}


def one_prompt_sweep(prompts_file, drafter: int) -> dict:
    """The tiny sweep cut to one prompt, γ 2, 6 tokens and one of its drafters (0: ngram, 1: draft model),
    timed once without warm-up: the smallest sweep that runs every part of the own engine."""
    return {
        **TINY_SWEEP,
        "workloads": [jsonl_workload(prompts_file, 1)],
        "gammas": [2],
        "max_new_tokens": 6,
        "drafters": [TINY_SWEEP["drafters"][drafter]],
        "timing": {"warmup_s": 0, "order": "once", "retries": 0},
    }


def tiny_sweep_yaml(folder, prompts_file, **overrides):
    """A small sweep of the tiny random models over the `prompts_file` prompts, written as YAML."""
    return write_sweep_yaml(folder, {**TINY_SWEEP, "workloads": [jsonl_workload(prompts_file)]}, **overrides)
