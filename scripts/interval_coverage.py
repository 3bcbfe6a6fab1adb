#!/usr/bin/env python
"""Coverage of speedup intervals on synthetic data with a known truth (the table in docs/fit.md).

    .venv/bin/python scripts/interval_coverage.py            # P = 3, 5, 10, 30; 2000 sweeps each
    .venv/bin/python scripts/interval_coverage.py --sims 500 # quicker

The model lives here, with its only users (this script and tests/test_timing_protocol.py), not in the package.
A synthetic prompt p has a length n_p (tokens, uniform 24…128), a baseline time per token
drawn log-normally (prompts differ: σ_b = 0.25), a per-prompt speedup exp(μ + σ_s e_p) with
e_p standard normal (acceptance differs from prompt to prompt), and timing noise on both sides
(log-normal, σ_n). Tokens are the same for both sides (greedy). The estimand is the
ratio-of-sums speedup of the population,

    S = E[baseline seconds] ÷ E[configuration seconds] = exp(μ − σ_s²/2 − σ_n²/2)

(baseline time and per-prompt speedup are independent, so the expectation factorises; the
noise on both sides has the same law). Each method's interval is computed on many simulated
sweeps; coverage is the share containing S.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from specbench.analysis.statistics.intervals import bootstrap_interval, bootstrap_weights, percentile_interval
from specbench.analysis.statistics.speedup_interval import log_ratio_contributions, speedup_interval


def simulate(
    n_prompts: int,
    rng: np.random.Generator,
    mu: float = np.log(1.5),
    sigma_s: float = 0.3,
    sigma_n: float = 0.05,
    sigma_b: float = 0.25,
):
    """One synthetic sweep: per-prompt (tokens, seconds, base tokens, base seconds), and the truth."""
    tokens = rng.integers(24, 129, n_prompts).astype(float)
    base = tokens * 0.05 * np.exp(sigma_b * rng.standard_normal(n_prompts))
    speedup = np.exp(mu + sigma_s * rng.standard_normal(n_prompts))
    noise_c, noise_b = np.exp(sigma_n * rng.standard_normal((2, n_prompts)))
    truth = float(np.exp(mu - sigma_s**2 / 2))  # noise of equal law on both sides cancels
    return (tokens, base / speedup * noise_c, tokens, base * noise_b), truth


def t_method(data, level):
    iv = speedup_interval(*data, level=level)
    return iv.lo, iv.hi


def z_method(data, level):
    """Deliberately wrong: the same linearisation with a normal quantile and no small-sample factor."""
    point, u = log_ratio_contributions(*data)
    se = float(np.sqrt(np.sum(u**2)))
    z = stats.norm.ppf((1 + level) / 2)
    return point * np.exp(-z * se), point * np.exp(z * se)


def _boot_reps(data, rng, n_boot):
    t, s, b, d = data
    w = bootstrap_weights(len(t), n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ((w @ t) / (w @ s)) / ((w @ b) / (w @ d))


def bootstrap_stretched(data, level, rng=None, n_boot=400):
    """specbench's former interval: percentile bootstrap over prompts, stretched by √(P/(P−1))·t/z."""
    rng = rng or np.random.default_rng(0)
    point, _ = log_ratio_contributions(*data)
    lo, hi = bootstrap_interval(point, _boot_reps(data, rng, n_boot), len(data[0]), level, positive=True)
    return float(lo), float(hi)


def bootstrap_plain(data, level, rng=None, n_boot=400):
    rng = rng or np.random.default_rng(0)
    lo, hi = percentile_interval(_boot_reps(data, rng, n_boot), level)
    return float(lo), float(hi)


METHODS = {
    "t (specbench)": t_method,
    "bootstrap, stretched (former)": bootstrap_stretched,
    "bootstrap, percentile": bootstrap_plain,
    "z, no small-sample factor (wrong)": z_method,
}


def coverage(method, n_prompts: int, sims: int = 2000, level: float = 0.95, seed: int = 0, **sim_args) -> dict:
    """Share of ``sims`` synthetic sweeps whose interval contains the truth, and interval shape."""
    rng = np.random.default_rng(seed)
    hits, upper_ratio, widths = 0, [], []
    for _ in range(sims):
        data, truth = simulate(n_prompts, rng, **sim_args)
        lo, hi = method(data, level)
        point, _ = log_ratio_contributions(*data)
        hits += bool(lo <= truth <= hi)
        upper_ratio.append(hi / point)
        widths.append(np.log(hi / lo))
    return {
        "coverage": hits / sims,
        "median_hi_over_point": float(np.median(upper_ratio)),
        "max_hi_over_point": float(np.max(upper_ratio)),
        "median_log_width": float(np.median(widths)),
    }


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
            cells.append(
                f"{100 * c['coverage']:.1f} % (hi/point {c['median_hi_over_point']:.2f}, "
                f"max {c['max_hi_over_point']:.1f})"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"\nnominal 95 %; {args.sims} synthetic sweeps per cell ({args.boot_sims} for the bootstrap rows); "
        "hi/point: median (and largest) upper end ÷ point estimate"
    )


if __name__ == "__main__":
    main()
