"""Quantization on llama.cpp: per GGUF type of the draft model, α, τ, tokens/s and the verdict, and the drop
detector — where one type's acceptance is confidently lower than another's.

A drafter's GGUF type is read from its model spec (``smollm2-135m@Q4_K_M``, `specbench.catalogue.gguf_types`);
drafters that differ only in that type, at the same γ, on the same scenario (target, workload, sampling) form a
*family*. For two members a and b of a family, on the prompts both ran (a prompt's turns and repeats summed):

    α_t = Σ_p accepted_tp ÷ Σ_p drafted_tp          (acceptance rate: accepted ÷ drafted draft tokens)
    R   = α_b ÷ α_a                                  (the α ratio, paired on the prompts)

Its 95 % interval is the prompt-cluster bootstrap of R (the same multinomial prompt weights for both members, so
the pairing is kept), stretched for few prompts on the log scale (`specbench.analysis.statistics.intervals`).
A *drop* is a pair whose whole interval lies below 1: b accepts 1 − R fewer of its draft tokens than a. Pairs
whose interval holds 1 say nothing. With the verdicts (`Recommendation.options`: the measured speedup's interval
per configuration) a drop also says with which of the two types speculation pays (lower end above 1).

τ = Σ emitted tokens ÷ Σ target forwards (bonus tokens and rounds without a draft included; docs' definition).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.statistics.intervals import LEVEL, N_BOOT, bootstrap_interval, bootstrap_weights
from specbench.analysis.verdicts.verdict import UNSURE
from specbench.catalogue import gguf_types

FAMILY_KEYS = ("target", "workload", "temperature", "top_p", "top_k", "drafter", "family", "gamma")


@dataclass(frozen=True)
class Drop:
    """Drafter type ``lower`` accepts confidently fewer tokens than ``higher`` (same family)."""

    workload: str
    family: str  # the drafter with its model at no type, e.g. "draft-model(model=smollm2-135m)"
    gamma: int
    lower: str
    higher: str
    ratio: float  # α_lower ÷ α_higher
    lo: float
    hi: float
    n_prompts: int
    pays: tuple[str, ...] | None = None  # the family's types whose speedup's lower end is above 1 (None: unknown)
    target_type: str | None = None  # the target's GGUF type when the sweep names one (several: a target set)

    def words(self) -> str:
        """ "the Q4_K_M drafter accepts 31 % fewer tokens than its Q8_0 [22 %, 40 %] ...; speculation pays ..."."""
        text = (
            f"the {self.lower} drafter accepts {1 - self.ratio:.0%} fewer tokens than its {self.higher} "
            f"[{1 - self.hi:.0%}, {1 - self.lo:.0%}] (α ratio {self.ratio:.2f} [{self.lo:.2f}, {self.hi:.2f}], "
            f"{self.workload}, {self.family} γ={self.gamma}, {self.n_prompts} prompts"
            + ("" if self.target_type is None else f", {self.target_type} target")
            + ")"
        )
        if self.pays is None:
            return text
        if not self.pays:
            return text + "; speculation pays with none of its types"
        only = " only" if self.higher in self.pays and self.lower not in self.pays else ""
        return (
            text
            + f"; speculation pays with the {' and '.join(self.pays)} drafter{'s' if len(self.pays) > 1 else ''}{only}"
        )


@dataclass(frozen=True)
class Quantization:
    """One recommendation's quantization view: the per-type table and the drops."""

    table: pd.DataFrame
    drops: list[Drop]

    def as_dict(self) -> dict:
        """For ``recommend --json`` (under each recommendation's ``quantization``): the rows and the drops, each
        drop with its words."""
        return {
            "table": self.table.to_dict("records"),
            "drops": [{**{k: getattr(d, k) for k in d.__dataclass_fields__}, "words": d.words()} for d in self.drops],
        }


def for_recommendation(records: pd.DataFrame, rec, *, n_boot: int = N_BOOT, seed: int = 0) -> Quantization | None:
    """The quantization view of recommendation ``rec`` (its scenario's records, its measured options); None where no
    draft model of the scenario names a GGUF type."""
    scenario = for_scenario(records, rec.keys)
    table = type_table(scenario, rec.options)
    if table.empty:
        return None
    return Quantization(table, drops(scenario, rec.options, n_boot=n_boot, seed=seed))


def for_scenario(records: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """The records of one recommendation's scenario (its keys that are record columns: target, workload, ...)."""
    mask = np.ones(len(records), dtype=bool)
    for name, value in keys.items():
        if name in records.columns:
            mask &= (records[name] == value).to_numpy()
    return records[mask]


def typed(records: pd.DataFrame) -> pd.DataFrame:
    """The speculative records whose draft model names a GGUF type, with columns ``quant`` (the type) and
    ``family`` (the drafter's label with its model at no type)."""
    if records.empty or "drafter_params" not in records:
        return records.iloc[0:0].assign(quant=[], family=[])
    rows = records[records["gamma"] > 0]
    parsed = [_split_params(text) for text in rows["drafter_params"]]
    out = rows.assign(quant=[p[0] for p in parsed], family=[f"{d}({p[1]})" for d, p in zip(rows["drafter"], parsed)])
    return out[out["quant"].notna()]


def _split_params(text) -> tuple[str | None, str]:
    params = json.loads(text or "{}")
    model = params.get("model")
    if not isinstance(model, str):
        return None, ""
    base, kind = gguf_types.split(model)
    rest = {**params, "model": base}
    return kind, ", ".join(f"{k}={v}" for k, v in sorted(rest.items()))


def type_table(records: pd.DataFrame, options: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (scenario, drafter type, γ): target, workload, drafter type, γ, α, τ, prompts, and from
    ``options`` (a recommendation's measured options) tokens/s, speedup [lo, hi] and the verdict."""
    data = typed(records)
    if data.empty:
        return pd.DataFrame()
    rows = []
    for key, part in data.groupby([*FAMILY_KEYS, "quant", "drafter_label"], sort=False, dropna=False):
        row = dict(zip([*FAMILY_KEYS, "quant", "drafter_label"], key))
        drafted, accepted = part["drafted"].sum(), part["accepted"].sum()
        row["alpha"] = accepted / drafted if drafted else float("nan")
        row["tau"] = part["decode_tokens"].sum() / part["rounds"].sum() if part["rounds"].sum() else float("nan")
        row["n_prompts"] = part["prompt_id"].nunique()
        row.update(_verdict(options, row["drafter_label"], row["gamma"]))
        rows.append(row)
    table = pd.DataFrame(rows)
    table["rank"] = [gguf_types.rank(q) for q in table["quant"]]
    return table.sort_values(["workload", "family", "gamma", "rank"]).drop(columns="rank").reset_index(drop=True)


def _verdict(options: pd.DataFrame | None, label: str, gamma: int) -> dict:
    """tokens/s, speedup and its interval and the words of a measured option (NaN/"" when not measured)."""
    empty = {"tokens_per_s": float("nan"), "speedup": float("nan"), "lo": float("nan"), "hi": float("nan")}
    if options is None or options.empty:
        return {**empty, "verdict": ""}
    match = options[(options["drafter_label"] == label) & (options["gamma"] == gamma)]
    if match.empty:
        return {**empty, "verdict": ""}
    o = match.iloc[0]
    verdict = "pays" if o["lo"] > 1 else "does not pay" if o["hi"] < 1 else str(UNSURE)
    return {
        "tokens_per_s": o["tokens_per_s"],
        "speedup": o["speedup"],
        "lo": o["lo"],
        "hi": o["hi"],
        "verdict": verdict,
    }


def drops(
    records: pd.DataFrame,
    options: pd.DataFrame | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    level: float = LEVEL,
) -> list[Drop]:
    """Every pair of one family's drafter types whose α ratio's interval lies wholly below 1 (module docstring);
    the wider type first in the pair's words when both orders could be read."""
    data = typed(records)
    if data.empty:
        return []
    table = type_table(records, options)
    found = []
    for key, family in data.groupby(list(FAMILY_KEYS), sort=False, dropna=False):
        kinds = sorted(family["quant"].unique(), key=gguf_types.rank)
        if len(kinds) < 2:
            continue
        per = family.groupby(["quant", "prompt_id"])[["drafted", "accepted"]].sum()
        prompts = sorted(set.intersection(*(set(per.loc[k].index) for k in kinds)))
        if len(prompts) < 2:
            continue
        drafted = np.array([per.loc[k].loc[prompts, "drafted"].to_numpy(float) for k in kinds])  # [K, P]
        accepted = np.array([per.loc[k].loc[prompts, "accepted"].to_numpy(float) for k in kinds])  # [K, P]
        weights = bootstrap_weights(len(prompts), n_boot, np.random.default_rng(seed))  # [B, P]
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = accepted.sum(1) / drafted.sum(1)  # [K]
            reps = (weights @ accepted.T) / (weights @ drafted.T)  # [B, K]
        keys = dict(zip(FAMILY_KEYS, key))
        pays = _pays(table, keys, kinds) if options is not None and not options.empty else None
        for i, high in enumerate(kinds):
            for j, low in enumerate(kinds):
                if i == j:
                    continue
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio, rep_ratio = alpha[j] / alpha[i], reps[:, j] / reps[:, i]
                lo, hi = bootstrap_interval(ratio, rep_ratio, len(prompts), level, positive=True)
                if np.isfinite(hi) and hi < 1:
                    found.append(
                        Drop(
                            str(keys["workload"]),
                            str(keys["family"]),
                            int(keys["gamma"]),
                            low,
                            high,
                            float(ratio),
                            float(lo),
                            float(hi),
                            len(prompts),
                            pays,
                            gguf_types.split(str(keys["target"]))[1],
                        )
                    )
    return found


def _pays(table: pd.DataFrame, keys: dict, kinds: list[str]) -> tuple[str, ...]:
    """The family's types whose measured speedup's lower end is above 1, widest first."""
    mine = table
    for name in FAMILY_KEYS:
        mine = mine[mine[name] == keys[name]]
    return tuple(k for k in kinds if ((mine["quant"] == k) & (mine["lo"] > 1)).any())
