"""Speculation against context length: the verdict in every bin, and the length where it stops paying.

A long-context sweep asks the same (document, task) pairs at several lengths (bins '1k', '2k', '4k', '7k';
records carry ``context_bin`` and ``prompt_tokens``). Here, per workload scenario (target, workload, sampling):

* **the verdict per bin** is the recommender's, one scenario per (workload, sampling, bin)
  (`specbench.analysis.recommendation.recommend` with ``by_context``): the same `Decision` machinery, the same
  adjustment for the best of K and the same refusal to be confident on disturbed timing as the load verdicts.
  With it, the configuration it names (its choice, or its best estimate), that configuration's α̂ and τ with
  their prompt-bootstrap intervals in the bin (`specbench.analysis.context_bins`), and its cost per round:
  Σ decode seconds ÷ Σ rounds of its records in the bin, *measured* (the sweep's own timings, which carry
  verification, attention and the drafter's KV at that length), beside the target-only step.
* **the crossover length**: the mean prompt tokens of each bin is the axis, and the speedup of the
  configuration the verdict at the shortest bin names, with its 95 % interval per bin, crosses 1 by the load
  axis' rule (`specbench.analysis.load.crossover`: log–log interpolation, [lo, hi] from the intervals' ends).
  Its words say "pays at every length measured" or "at none" only where the intervals support it.
* **beyond the crossover**: when a shorter γ of the same drafter keeps paying longer, the length where *it*
  stops (the same rule on its own speedups); past the last such length (``none_beyond``: the shorter γ's crossing,
  else the named configuration's own) no speculation with this drafter is better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from specbench.analysis.context_bins import BIN, binned_records
from specbench.analysis.load.crossover import Crossover, crossover, describe
from specbench.analysis.verdicts.verdict import Decision
from specbench.records.summary import BASELINE_KEYS, is_baseline

UNIT = "prompt tokens"


def base_workload(name) -> str:
    """A workload's name without its options (``long-context:bin=4k`` → ``long-context``)."""
    return str(name).split(":")[0]


def scenario_of(keys: dict) -> tuple:
    """A recommendation's scenario across bins: its `BASELINE_KEYS`, the workload without its options."""
    return tuple(base_workload(keys[k]) if k == "workload" else keys[k] for k in BASELINE_KEYS)


@dataclass
class BinVerdict:
    """One bin of one workload scenario: its lengths, the recommender's `Decision` there, and the named
    configuration's α̂, τ and cost per round in the bin."""

    scenario: tuple  # `scenario_of`
    bin: str
    prompt_tokens: float  # mean prompt length of the bin's records, tokens
    shortest: int  # the bin's shortest and longest prompt, tokens
    longest: int
    decision: Decision
    fit: dict = field(default_factory=dict)  # alpha, alpha_lo, alpha_hi, tau, tau_lo, tau_hi (NaN: no fit)
    round_s: float = math.nan  # the named configuration's measured seconds per round in the bin
    baseline_round_s: float = math.nan  # the target alone: seconds per forward in the bin
    cost_source: str = "measured"
    options: pd.DataFrame = field(default_factory=pd.DataFrame)  # the bin recommendation's measured options

    @property
    def named(self) -> dict | None:
        """The configuration this bin's verdict names (its choice, or its best estimate), or None."""
        return self.decision.named

    def as_dict(self) -> dict:
        keys = dict(zip(BASELINE_KEYS, self.scenario))
        return {
            **keys,
            "context_bin": self.bin,
            "prompt_tokens": self.prompt_tokens,
            "shortest": self.shortest,
            "longest": self.longest,
            "answer": self.decision.answer,
            "confident": self.decision.confident,
            "short": self.decision.short(),
            "named": self.named,
            **self.fit,
            "round_s": self.round_s,
            "baseline_round_s": self.baseline_round_s,
            "cost_source": self.cost_source,
        }


def _lengths(records: pd.DataFrame) -> pd.DataFrame:
    """Per (workload without options, bin): mean, shortest and longest prompt tokens."""
    binned = binned_records(records)
    return binned.groupby(["workload", BIN])["prompt_tokens"].agg(["mean", "min", "max"]).reset_index()


def _seconds_per_round(records: pd.DataFrame) -> float:
    rounds = float(records["rounds"].sum()) if len(records) else 0.0
    return float(records["decode_s"].sum()) / rounds if rounds > 0 else math.nan


def _bin_records(records: pd.DataFrame, scenario: tuple, label: str) -> pd.DataFrame:
    binned = binned_records(records)
    binned = binned[(binned[BIN].astype(str) == label) & (binned["mode"] == "live")]
    for key, value in zip(BASELINE_KEYS, scenario):
        binned = binned[binned[key].astype(str) == str(value)]
    return binned


def bin_verdicts(records: pd.DataFrame, recs: list, fits: pd.DataFrame) -> list[BinVerdict]:
    """One per recommendation that carries a bin (``recommend(..., by_context=True)``), shortest bin first within
    each scenario; ``fits``: `specbench.analysis.context_bins.fit_by_context_bin` of the same records."""
    lengths = _lengths(records)
    out = []
    for rec in recs:
        label = rec.keys.get(BIN)
        if rec.decision is None or not isinstance(label, str):
            continue
        scenario = scenario_of(rec.keys)
        row = lengths[(lengths["workload"] == scenario[BASELINE_KEYS.index("workload")]) & (lengths[BIN] == label)]
        if row.empty:
            continue
        verdict = BinVerdict(
            scenario,
            label,
            float(row["mean"].iloc[0]),
            int(row["min"].iloc[0]),
            int(row["max"].iloc[0]),
            rec.decision,
            options=rec.options,
        )
        in_bin = _bin_records(records, scenario, label)
        verdict.baseline_round_s = _seconds_per_round(in_bin[is_baseline(in_bin)])
        named = verdict.named
        if named is not None:
            mine = in_bin[
                (in_bin["drafter_label"] == named["drafter_label"])
                & (in_bin["tree"] == named["tree"])
                & (in_bin["gamma"] == named["gamma"])
            ]
            verdict.round_s = _seconds_per_round(mine)
            verdict.fit = _fit_of(fits, scenario, label, named)
        out.append(verdict)
    return sorted(out, key=lambda v: (tuple(map(str, v.scenario)), v.prompt_tokens))


def _fit_of(fits: pd.DataFrame, scenario: tuple, label: str, named: dict) -> dict:
    """α̂ and τ with their intervals of the named configuration in one bin (NaN where it has no fit)."""
    columns = ["alpha", "alpha_lo", "alpha_hi", "tau", "tau_lo", "tau_hi"]
    empty = dict.fromkeys(columns, math.nan)
    if fits.empty:
        return empty
    keys = dict(zip(BASELINE_KEYS, scenario))
    mask = (
        (fits[BIN].astype(str) == label)
        & (fits["workload"] == keys["workload"])
        & (fits["temperature"] == keys["temperature"])
        & (fits["drafter_label"] == named["drafter_label"])
        & (fits["tree"] == named["tree"])
        & (fits["gamma"] == named["gamma"])
    )
    if not mask.any():
        return empty
    row = fits[mask].iloc[0]
    return {c: float(row[c]) if row[c] is not None and pd.notna(row[c]) else math.nan for c in columns}


# ----------------------------------------------------------------------------- crossover length


def _curve(verdicts: list[BinVerdict], label: str, tree: str, gamma: int) -> tuple[list, ...]:
    """(lengths, speedups, lows, highs) of one configuration across a scenario's bins, from each bin's measured
    options (unadjusted 95 % intervals, as the load table's)."""
    xs, ratios, lows, highs = [], [], [], []
    for v in verdicts:
        options = v.options
        if options.empty:
            continue
        row = options[
            (options["drafter_label"] == label)
            & (options["tree"] == tree)
            & (options["gamma"] == gamma)
            & (options["schedule"].fillna("fixed") == "fixed")
        ]
        if row.empty:
            continue
        xs.append(v.prompt_tokens)
        ratios.append(float(row["speedup"].iloc[0]))
        lows.append(float(row["lo"].iloc[0]))
        highs.append(float(row["hi"].iloc[0]))
    return xs, ratios, lows, highs


def length_crossover(verdicts: list[BinVerdict]) -> dict | None:
    """The crossover length of one scenario (module docstring): the configuration named at the shortest bin, its
    `Crossover` along the bins' mean prompt tokens and its words; with ``shorter``, the shorter γ of the same
    drafter that keeps paying longest past it (its own crossover and words). None when no bin names a
    configuration measured in two or more bins."""
    first = next((v for v in verdicts if v.named is not None), None)
    if first is None or first.named is None:
        return None
    named = first.named
    label, tree, gamma = named["drafter_label"], named["tree"], named["gamma"]
    xs, ratios, lows, highs = _curve(verdicts, label, tree, gamma)
    if len(xs) < 2:
        return None
    found = crossover(xs, ratios, lows, highs)
    out = {
        "drafter_label": label,
        "tree": tree,
        "gamma": gamma,
        "why": f"the verdict's configuration at the {first.bin} bin",
        "crossover": found,
        "text": f"{label} γ={gamma} {describe(found, UNIT, level='length')}",
        "shorter": None,
    }
    if found.point is not None and tree == "chain":
        out["shorter"] = _shorter(verdicts, label, gamma, found)
    # past this length no speculation with this drafter is better: the shorter γ's crossing, else this one's
    out["none_beyond"] = out["shorter"]["none_beyond"] if out["shorter"] is not None else found.point
    return out


def _reach(c: Crossover) -> float:
    """How far along the lengths a curve pays on its point estimates (inf: at every length measured)."""
    if c.below_all:
        return -math.inf
    return math.inf if c.point is None else c.point


def _shorter(verdicts: list[BinVerdict], label: str, gamma: int, found: Crossover) -> dict | None:
    """The shorter γ of ``label`` whose speedup stays above 1 furthest past ``found``'s crossing, with its words
    and the length past which no speculation is better; None when none pays longer."""
    best: tuple[float, int, Crossover] | None = None
    for shorter in range(gamma - 1, 0, -1):
        xs, ratios, lows, highs = _curve(verdicts, label, "chain", shorter)
        if len(xs) < 2:
            continue
        c = crossover(xs, ratios, lows, highs)
        if _reach(c) > _reach(found) and (best is None or _reach(c) > best[0]):
            best = (_reach(c), shorter, c)
    if best is None:
        return None
    _, shorter, c = best
    none_beyond = None if c.point is None else c.point
    return {
        "gamma": shorter,
        "crossover": c,
        "none_beyond": none_beyond,
        "text": f"{label} γ={shorter} {describe(c, UNIT, level='length')}",
    }


def speedups(verdicts: list[BinVerdict]) -> list[dict]:
    """Every measured fixed-γ configuration's speedup with its unadjusted 95 % interval in every bin of a
    scenario (the figure's points): context_bin, prompt_tokens, drafter_label, tree, gamma, speedup, lo, hi."""
    out = []
    for v in verdicts:
        if v.options.empty:
            continue
        fixed = v.options[v.options["schedule"].fillna("fixed") == "fixed"]
        for _, row in fixed.iterrows():
            out.append(
                {
                    "context_bin": v.bin,
                    "prompt_tokens": v.prompt_tokens,
                    **{k: row[k] for k in ("drafter_label", "tree")},
                    "gamma": int(row["gamma"]),
                    **{k: float(row[k]) for k in ("speedup", "lo", "hi")},
                }
            )
    return out


def as_plain(line: dict | None) -> dict | None:
    """A crossover line as plain data (its `Crossover` values as dicts)."""
    if line is None:
        return None
    out = {**line, "crossover": line["crossover"].as_dict()}
    if line.get("shorter") is not None:
        out["shorter"] = {**line["shorter"], "crossover": line["shorter"]["crossover"].as_dict()}
    return out
