"""Energy per token on this machine: a small own-engine sweep whose records carry the energy columns.

    python scripts/energy_check.py --out OUT [--summary FILE] [--device cuda] [--target tiny-random-llama]

Writes a four-prompt JSONL workload and a sweep (the target-only baseline and n-gram lookup at γ 1, 2 and 4,
greedy) into OUT, runs ``specbench sweep`` into ``OUT/energy``, then prints and writes ``OUT/energy.json``:
the counters read (`specbench.measure.timing.energy`), the idle power subtracted, joules per output token and per
accepted draft token per configuration with 95 % intervals, and the energy-optimal γ beside the
throughput-optimal one (``--summary`` writes that JSON elsewhere) (`specbench.analysis.load.operating`). Exit 0 when every record has its energy; 1 when the
machine has no counter (the reason is printed: on a GPU without nvidia-ml-py, ``pip install
'specbench[energy]'``); 2 when the sweep fails. scripts/gpu_check.sh runs it as its ``energy`` step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

from specbench.analysis.load.operating import operating
from specbench.records.store import load_records, load_run_info

PROMPTS = [
    "Count from one to twenty, one number per line.",
    "Repeat the word apple ten times.",
    "List the days of the week twice.",
    "Write the alphabet in capitals, then in lower case.",
]


def sweep_spec(out: Path, device: str, target: str, tokens: int) -> Path:
    prompts = out / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS)))
    spec = {
        "name": "energy-check",
        "target": target,
        "device": device,
        "max_new_tokens": tokens,
        "ignore_eos": True,
        "drafters": [{"type": "ngram"}],
        "gammas": [1, 2, 4],
        "temperatures": [0.0],
        "workloads": [{"name": f"jsonl:{prompts}:field=text:id=id", "count": len(PROMPTS)}],
    }
    path = out / "energy-sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--target", default="tiny-random-llama")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--summary", type=Path, help="where the JSON summary goes (default OUT/energy.json)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "energy"
    command = [
        sys.executable,
        "-m",
        "specbench",
        "sweep",
        str(sweep_spec(args.out, args.device, args.target, args.tokens)),
        "--out",
        str(results),
        "--force",
    ]
    print("energy_check:", " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        print("energy_check: the sweep failed", file=sys.stderr)
        return 2
    info = load_run_info(results).get("energy") or {}
    records = load_records(results)
    filled = int(records["energy_j"].notna().sum())
    summary = {
        "counter": info.get("source"),
        "idle_w": info.get("idle_w"),
        "reason": info.get("reason"),
        "records": len(records),
        "records_with_energy": filled,
    }
    if filled:
        op = operating(records)
        columns = [
            "gamma",
            "drafter_label",
            "system_tokens_per_s",
            "joules_per_token",
            "joules_per_token_lo",
            "joules_per_token_hi",
            "joules_per_accepted",
        ]
        summary["per_configuration"] = op.table[columns].to_dict("records")
        summary["optimal"] = [e["text"] for e in op.optimal]
    (args.summary or args.out / "energy.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(
        f"energy_check: counter {summary['counter']}, idle {summary['idle_w']} W, "
        f"{filled}/{len(records)} records with energy"
    )
    for row in summary.get("per_configuration", []):
        print(
            f"  γ={row['gamma']} {row['drafter_label']}: {row['joules_per_token']:.4g} J/token "
            f"[{row['joules_per_token_lo']:.4g}, {row['joules_per_token_hi']:.4g}], "
            f"{row['system_tokens_per_s']:.1f} tok/s"
        )
    for line in summary.get("optimal", []):
        print(f"  {line}")
    if filled < len(records):
        print(f"energy_check: energy columns null: {summary['reason']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
