"""Coverage of speedup intervals on synthetic data with a known truth (the table in docs/fit.md).

    .venv/bin/python scripts/interval_coverage.py            # P = 2, 3, 5, 10, 30; 2000 sweeps each
    .venv/bin/python scripts/interval_coverage.py --sims 500 # quicker

Model and estimand: `specbench.analysis.interval_coverage`.
"""

from __future__ import annotations

import argparse

from specbench.analysis.interval_coverage import METHODS, coverage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--boot-sims", type=int, default=500, help="sweeps for the (slower) bootstrap methods")
    parser.add_argument("--prompts", default="3,5,10,30")
    args = parser.parse_args()
    sizes = [int(p) for p in args.prompts.split(",")]
    print("| method | " + " | ".join(f"P = {p}" for p in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name, method in METHODS.items():
        sims = args.boot_sims if "bootstrap" in name else args.sims
        cells = []
        for p in sizes:
            c = coverage(method, p, sims=sims, seed=p)
            cells.append(f"{100 * c['coverage']:.1f} % (hi/point {c['median_hi_over_point']:.2f}, "
                         f"max {c['max_hi_over_point']:.1f})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nnominal 95 %; {args.sims} synthetic sweeps per cell ({args.boot_sims} for the bootstrap rows); "
          "hi/point: median (and largest) upper end ÷ point estimate")


if __name__ == "__main__":
    main()
