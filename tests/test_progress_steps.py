"""Progress on long commands and benchmarks (`specbench.cli.views.progress_lines.Steps`): a line per step when piped,
with a heartbeat while one step runs long; `profile` and `scripts/bench_engine.py` print progress while they run."""

from __future__ import annotations

import importlib.util
import io
import re
import sys
import time
from pathlib import Path

from specbench.cli.views.progress_lines import Steps
from tests.cli_helpers import invoke

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] (\S+): (\d+)(?:/(\d+))? · elapsed")


def test_steps_write_a_line_per_step_and_a_heartbeat_when_piped():
    stream = io.StringIO()
    with Steps("work", total=3, stream=stream, min_gap_s=0, heartbeat_s=0.2) as steps:
        steps.update(None, "first \x1b[2J step")
        time.sleep(1.5)  # one long step: the heartbeat speaks
        steps.update(None, "second")
        steps.update(None, "third")
    lines = stream.getvalue().splitlines()
    assert all(LINE.match(line) for line in lines), lines
    assert any("still working" in line for line in lines)
    assert any("3/3" in line and line.endswith("done") for line in lines)
    assert "\x1b" not in stream.getvalue()  # data reaches the line through the terminal sink


def test_profile_piped_prints_a_line_per_cell(tmp_path):
    result = invoke(
        "profile",
        "--target",
        "tiny-random-llama",
        "--batch",
        "1,2",
        "--context",
        "16",
        "--verify-tokens",
        "1,3",
        "--repeats",
        "2",
        "--warmup",
        "1",
        "--out",
        tmp_path / "p",
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if LINE.match(line)]
    assert len(lines) >= 3 and any("profile: 0/" in line for line in lines), result.stderr
    assert any("done" in line for line in lines)


def test_bench_engine_prints_progress_and_each_table_while_it_runs(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("bench_engine", ROOT / "scripts" / "bench_engine.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    printed: list[str] = []

    def fake_pair(name, gamma, new_tokens, prompts, repeats, dtype, profile_steps=False, steps=None):
        for call in range(repeats * prompts * 4):
            steps.update(None, f"{name} {dtype}: call {call}")
        return {"pair": name, "dtype": dtype}

    monkeypatch.setattr(bench, "bench_pair", fake_pair)
    monkeypatch.setattr(
        bench,
        "print_result",
        lambda result, repeats: printed.append(result["dtype"]) or print(f"TABLE {result['dtype']}"),
    )
    monkeypatch.setattr(sys, "argv", ["bench_engine.py", "--dtypes", "fp32,bf16", "--prompts", "1", "--repeats", "3"])
    bench.main()
    out = capsys.readouterr().out.splitlines()
    progress = [i for i, line in enumerate(out) if LINE.match(line)]
    assert progress and printed == ["fp32", "bf16"]
    first_table = out.index("TABLE fp32")
    assert any(i < first_table for i in progress), out  # progress before the first table, not all at the end
    assert out.index("TABLE bf16") < next(i for i, line in enumerate(out) if line.startswith("CPU:"))


# scripts whose long work shows its pace another way (each reason checked by reading the script once)
OWN_PACE = {
    "bench_kernels.py": "prints each kernel's row as soon as it is timed (needs CUDA)",
    "bench_product_forms.py": "prints each shape's row as soon as it is timed (flush=True)",
    "bench_scale.py": "prints a line per worker count; each sweep runs as its own `specbench sweep` process",
    "bench_strategies.py": "runs the other strategy scripts, each with its own progress, and heads each part",
}


def test_every_benchmark_script_shows_progress():
    """Every scripts/bench_*.py reports progress through `Steps` or `LineProgress`, or is listed with its reason."""
    silent = []
    for script in sorted((ROOT / "scripts").glob("bench_*.py")):
        text = script.read_text()
        if script.name not in OWN_PACE and not re.search(r"\b(Steps|LineProgress)\s*[()]", text):
            silent.append(script.name)
    assert not silent, f"benchmark scripts without progress: {silent}"
    assert all((ROOT / "scripts" / name).is_file() for name in OWN_PACE)
