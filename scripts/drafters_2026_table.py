#!/usr/bin/env python
"""The comparison tables of `sweeps/drafters-2026.yaml` (docs/bench-drafters.md, "The 2026 drafters").

    specbench sweep sweeps/drafters-2026.yaml
    python scripts/drafters_2026_table.py results/drafters-2026

Per drafter, from the live records (greedy, chain γ = 3):

* short prompts (MT-Bench, HumanEval, ShareGPT eval) and each long-context bin: τ = Σ decode tokens ÷
  Σ rounds and α = Σ accepted ÷ Σ drafted;
* per-position acceptance on the short prompts: P(position i accepted | positions < i accepted) =
  Σ pos_accepts[i] ÷ Σ pos_attempts[i], i = 1..3;
* measured cost per round: drafter forwards per round, median draft ms and verify ms per round
  (over every round of the short prompts; drafts of serial drafters cost γ forwards, parallel ones 1).

Prints markdown; rows in the sweep's drafter order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    args = parser.parse_args()
    from specbench.records.store import load_records

    frame = load_records(args.results)
    frame = frame[frame["mode"] == "live"]
    frame = frame.assign(label=frame["drafter_label"].where(frame["gamma"] > 0, "target only"))
    short = frame[frame["context_bin"].isna()]
    long = frame[frame["context_bin"].notna()]
    bins = sorted(long["context_bin"].unique(), key=lambda b: float(b.rstrip("k")))
    order = list(dict.fromkeys(frame["label"]))

    def tau_alpha(group) -> str:
        if group.empty:
            return "–"
        tau = group["decode_tokens"].sum() / group["rounds"].sum()
        drafted = group["drafted"].sum()
        alpha = group["accepted"].sum() / drafted if drafted else float("nan")
        return f"{tau:.2f} ({alpha:.3f})" if drafted else f"{tau:.2f}"

    print("| drafter | short prompts τ (α) | " + " | ".join(f"{b} τ (α)" for b in bins) + " |")
    print("|---|---:|" + "---:|" * len(bins))
    for label in order:
        rows = frame[frame["label"] == label]
        cells = [tau_alpha(rows[rows["context_bin"].isna()])]
        cells += [tau_alpha(rows[rows["context_bin"] == b]) for b in bins]
        print(f"| `{label}` | " + " | ".join(cells) + " |")
    prompt_tokens = long.groupby("context_bin")["prompt_tokens"].first()
    print("\nprompt tokens per bin: " + ", ".join(f"{b} {int(prompt_tokens[b])}" for b in bins))

    print(
        "\n| drafter | accept pos 1 / 2 / 3 (short prompts) | drafter forwards per round | draft ms per round "
        "| verify ms per round | prompts (short / long) |"
    )
    print("|---|---|---:|---:|---:|---|")
    for label in order:
        rows = short[short["label"] == label]
        long_rows = long[long["label"] == label]
        if label == "target only":
            verify = np.median(np.concatenate([np.asarray(v, float) for v in rows["round_verify_s"]])) * 1e3
            print(f"| target only | – | 0 | – | {verify:.1f} | {len(rows)} / {len(long_rows)} |")
            continue
        attempts = np.sum(np.stack([np.asarray(a, float) for a in rows["pos_attempts"]]), axis=0)
        accepts = np.sum(np.stack([np.asarray(a, float) for a in rows["pos_accepts"]]), axis=0)
        rates = " / ".join(f"{a / t:.2f}" if t else "–" for a, t in zip(accepts, attempts))
        steps = rows["draft_steps"].sum() / rows["rounds"].sum()
        draft = np.median(np.concatenate([np.asarray(v, float) for v in rows["round_draft_s"]])) * 1e3
        verify = np.median(np.concatenate([np.asarray(v, float) for v in rows["round_verify_s"]])) * 1e3
        print(f"| `{label}` | {rates} | {steps:.2f} | {draft:.1f} | {verify:.1f} | {len(rows)} / {len(long_rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
