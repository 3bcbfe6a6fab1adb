"""Error rates of verdicts with a known truth: the adaptive rule vs fixed grids (the table in docs/fit.md).

    .venv/bin/python scripts/adaptive_simulation.py                 # 2000 sweeps per cell (~15 min on 2 cores)
    .venv/bin/python scripts/adaptive_simulation.py --sims 300      # quicker
    .venv/bin/python scripts/adaptive_simulation.py --confirm --sims 500   # held / missed of `specbench confirm`
    .venv/bin/python scripts/adaptive_simulation.py --choice --sims 500    # the ε-choice against today's rule
    make simulate-stopping                                          # the documented run

Model, truths and scoring: `specbench.analysis.simulation`. Every row judges the same kind of
synthetic workload (6 configurations, per-prompt spread of log speedup 0.25, correlation 0.8 across
configurations); "confidently wrong" is a yes when no configuration beats 1 (or for one that does not),
or a no when one does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specbench.analysis.choice_simulation import choice_table
from specbench.analysis.simulation import TRUTHS, confirmation_table, error_table
from specbench.safe_files import load_yaml_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=2000, help="synthetic sweeps per (truth, method)")
    parser.add_argument("--looks", default="8,16,24,32,40,48,56,64", help="the adaptive plan: prompts per look")
    parser.add_argument("--fixed", default="12,64", help="fixed-grid sizes to compare with")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confirm", action="store_true", help="the confirmation's held / missed rates instead")
    parser.add_argument("--choice", action="store_true", help="the choice's error rates (scripts/choice_truths.yaml)")
    args = parser.parse_args()
    if args.confirm:
        print_confirmation_table(args.sims, args.seed)
        return
    if args.choice:
        print_choice_table(args.sims, args.seed, tuple(int(x) for x in args.looks.split(",")))
        return
    looks = tuple(int(x) for x in args.looks.split(","))
    fixed = tuple(int(x) for x in args.fixed.split(",") if x)
    table = error_table(TRUTHS, planned=looks, fixed_sizes=fixed, sims=args.sims, seed=args.seed)
    print(
        "| truth | method | confidently wrong | yes | no | picked the best (its speedup ÷ the best's) | "
        "prompts used (mean) | yes-interval covers the truth |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        cover = (
            "-"
            if r.yes_interval_covers_truth != r.yes_interval_covers_truth
            else f"{100 * r.yes_interval_covers_truth:.1f} %"
        )
        share = "" if r.pick_of_best != r.pick_of_best else f" ({r.pick_of_best:.3f})"
        print(
            f"| {r.truth} | {r.method} | {100 * r.confidently_wrong:.1f} % | {100 * r.yes:.1f} % | "
            f"{100 * r.no:.1f} % | {100 * r.chose_best:.1f} %{share} | {r.mean_prompts:.1f} | {cover} |"
        )
    print(
        f"\n{args.sims} synthetic sweeps per row; truths (true speedups of the 6 configurations): "
        + "; ".join(f"{k}: {', '.join(f'{v:g}' for v in t)}" for k, t in TRUTHS.items())
    )


def print_confirmation_table(sims: int, seed: int) -> None:
    """Of the synthetic sweeps that said yes, what `specbench confirm` says on fresh prompts (looks 4, 8, ... 24)."""
    table = confirmation_table(sims=sims, seed=seed)

    def pct(x: float) -> str:
        return "-" if x != x else f"{100 * x:.1f} %"

    print(
        "| truth | how the sweep picked | confirmed | held | missed | not settled | prediction right: missed | "
        "direction wrong: held | size wrong: missed | fresh prompts (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        print(
            f"| {r.truth} | {r.sweep} | {r.confirmed} | {pct(r.held)} | {pct(r.missed)} | {pct(r.open)} | "
            f"{pct(r.missed_when_right)} ({pct(r.right)} of them) | {pct(r.held_when_direction_wrong)} "
            f"({pct(r.direction_wrong)}) | {pct(r.missed_when_size_wrong)} ({pct(r.size_wrong)}) | "
            f"{r.mean_prompts:.1f} |"
        )
    print(f"\n{sims} synthetic sweeps per row; only those that said a confident yes are confirmed.")


def print_choice_table(sims: int, seed: int, looks: tuple[int, ...]) -> None:
    """The ε-choice against today's rule on the truths of scripts/choice_truths.yaml (docs/fit.md, "The choice")."""
    truths = {str(k): tuple(float(x) for x in v) for k, v in load_yaml_file(TRUTHS_FILE).items()}
    table = choice_table(truths, planned=looks, sims=sims, seed=seed)

    def pct(x: float) -> str:
        return "-" if x != x else f"{100 * x:.1f} %"

    print(
        "| truth | rule | falsely confident | named > ε behind the best | > ε behind, settled only | settled | "
        "prompts used (mean) | named ÷ best (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        print(
            f"| {r.truth} | {r.rule} | {pct(r.falsely_confident)} | {pct(r.more_than_eps_behind)} | "
            f"{pct(r.behind_when_settled)} | {pct(r.settled)} | {r.mean_prompts:.1f} | "
            + ("-" if r.named_of_best != r.named_of_best else f"{r.named_of_best:.3f}")
            + " |"
        )
    print(
        f"\n{sims} synthetic sweeps per row, looks {','.join(map(str, looks))}; ε = 5 %, δ = 5 %; per-prompt spread "
        "of log speedup 0.25, correlation 0.9 across options, timing noise 0.05 per run"
    )


TRUTHS_FILE = Path(__file__).with_name("choice_truths.yaml")


if __name__ == "__main__":
    main()
