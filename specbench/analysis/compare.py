"""Two results folders of the same sweep, OLD and NEW, compared configuration by configuration: a regression
gate for an engine upgrade, a new machine, a new drafter checkpoint or a new specbench.

The folders must be of one kind (`specbench.records.identity.check_together`: two sweeps, or two confirmations;
never a cost profile) and generated alike: every spec key that changes what is generated (target, dtype, seed,
max_new_tokens, ignore_eos, sampling, workloads, backend and engine settings) is equal, or the keys that differ
are named in one line. They must hold the same workloads, sampling, loads and configurations. A configuration is matched by
its drafter *kind*, tree, γ, verify-length schedule and round strategy — not by the drafter's parameters, so
that a new checkpoint or a changed setting (an n-gram's ``n_min``) is compared with the one it replaces and
named as a change; where one side holds several parameter sets of one kind, the full label matches them.
Prompts are paired by (prompt, turn, repeat); only the prompts both folders measured are used.

Per configuration, at each load, three ratios NEW ÷ OLD:

* **τ** = Σ decode tokens ÷ Σ target forwards, and **α** = Σ accepted ÷ Σ drafted (observed). Under greedy
  decoding on the *same engine* (the same backend and engine version, the same weights: run.json's
  ``models``) acceptance is deterministic, so the two must be *identical* unit by unit, and are checked so;
  otherwise they get the equivalence test below;
* **speedup** = decode tokens/s ÷ the target-only baseline's on the same prompts of the same folder (per
  request; each folder against its own baseline, so a faster machine alone does not move it).

The equivalence test (two one-sided tests, each at 5 %: the 90 % interval of the ratio from a prompt
bootstrap, replicates drawing the common prompts with the same weights on both sides, small-sample
stretched as everywhere, and none from fewer replicates than the level needs: `specbench.analysis.statistics.intervals`)
with a stated margin m (default 5 %) gives one of

* ``equivalent``: the interval lies inside [1 − m, 1 + m];
* ``regressed``: it lies wholly below 1 − m (NEW worse by more than the margin, with confidence);
* ``improved``: it lies wholly above 1 + m;
* ``inconclusive``: anything else — the data cannot say on which side of the margin the change lies (more
  prompts narrow the interval). A speedup timed under interference on either side (``timing_ok`` false) is
  inconclusive whatever its interval: disturbed timing never yields a confident answer.

The folder's verdict, over the quantities gated (all three by default; ``--quantities tau,alpha`` leaves the
speedup shown but out of the verdict — for machines too busy to time): ``regressed`` when any gated quantity
of any configuration regressed, else ``inconclusive`` when any is inconclusive, else ``equivalent``
(improvements included). `specbench compare` turns it into its exit code (docs/compare.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specbench.analysis.load.table import normalised
from specbench.analysis.statistics.intervals import bootstrap_interval, bootstrap_weights, replicate_shortfall
from specbench.bounds import violation
from specbench.errors import SpecbenchError
from specbench.records.identity import check_together, identify
from specbench.records.summary import UNIT_KEYS

LEVEL = 0.90  # two one-sided tests at 5 % each
MARGIN = 0.05
SCENARIO = ["workload", "temperature", "top_p", "top_k", "concurrency", "request_rate"]
KIND = ["drafter", "tree", "gamma", "schedule", "strategy"]  # what a configuration is, whatever its parameters
QUANTITIES = ("tau", "alpha", "speedup")
EQUIVALENT, REGRESSED, IMPROVED, INCONCLUSIVE, IDENTICAL = (
    "equivalent",
    "regressed",
    "improved",
    "inconclusive",
    "identical",
)
ACCEPTANCE = ["accepted", "drafted", "rounds", "decode_tokens"]


@dataclass
class Side:
    """One folder: its live records (normalised, a ``match`` key per configuration) and what it ran on."""

    folder: str
    records: pd.DataFrame
    run_info: dict
    backend_info: dict


@dataclass
class Comparison:
    margin: float
    level: float
    changes: list[str]  # what differs between the folders' environments (engine, weights, machine, specbench)
    same_engine: bool
    gated: tuple[str, ...] = QUANTITIES  # the quantities the verdict reads
    environments: dict = field(default_factory=dict)  # "old", "new": what each ran on (`environment`)
    rows: list[dict] = field(default_factory=list)  # one per (scenario, configuration)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        states = [q["state"] for r in self.rows for name, q in r["quantities"].items() if name in self.gated]
        if REGRESSED in states:
            return REGRESSED
        if INCONCLUSIVE in states:
            return INCONCLUSIVE
        return EQUIVALENT

    @property
    def regressions(self) -> list[str]:
        """One line per regressed quantity of a configuration."""
        return [
            f"{r['name']}: {name} {q['text']}"
            for r in self.rows
            for name, q in r["quantities"].items()
            if q["state"] == REGRESSED and name in self.gated
        ]

    def as_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            **self.environments,
            "margin": self.margin,
            "level": self.level,
            "gated": list(self.gated),
            "same_engine": self.same_engine,
            "changes": self.changes,
            "regressions": self.regressions,
            "configurations": self.rows,
            "notes": self.notes,
        }


# ----------------------------------------------------------------------------- what changed


def _engine(side: Side) -> dict:
    """Who generated: the backend, its engine version, specbench and torch versions, the device, the weights."""
    info, backend = side.run_info, side.backend_info
    versions = info.get("versions") or {}
    name = str(side.records["backend"].iloc[0]) if len(side.records) else "own"
    engine_version = backend.get("vllm_version") or backend.get("version") or backend.get("server_version")
    if not backend:  # no backend.json: specbench's own engine ran in process
        engine_version = f"specbench {versions.get('specbench')} / torch {versions.get('torch')}"
    return {
        "backend": name,
        "engine_version": engine_version,
        "specbench": versions.get("specbench"),
        "git_commit": info.get("git_commit"),
        "device": info.get("device_name") or info.get("device"),
        "models": dict(info.get("models") or {}),
    }


def changes(old: Side, new: Side) -> tuple[list[str], bool]:
    """Lines naming what differs, OLD → NEW; and whether both ran the same engine on the same weights."""
    a, b = _engine(old), _engine(new)
    lines = []
    for key, what in (
        ("backend", "backend"),
        ("engine_version", "engine"),
        ("specbench", "specbench"),
        ("git_commit", "specbench commit"),
        ("device", "machine"),
    ):
        if a[key] != b[key]:
            lines.append(f"{what}: {a[key]} → {b[key]}")
    for model in sorted(set(a["models"]) | set(b["models"])):
        before, after = a["models"].get(model), b["models"].get(model)
        if before != after:
            lines.append(f"weights of {model}: {_short(before)} → {_short(after)}")
    same = (a["backend"], a["engine_version"]) == (b["backend"], b["engine_version"]) and a["models"] == b["models"]
    return lines, same


def environment(side: Side) -> dict:
    """What one folder ran on: backend, engine version, machine, specbench, weights; and a one-line summary."""
    env = _engine(side)
    text = (
        f"{env['backend']} ({env['engine_version'] or 'engine version not recorded'}) on {env['device']}, "
        f"specbench {env['specbench']}"
    )
    return {**env, "text": text}


def _short(digest) -> str:
    return "absent" if not digest else str(digest)[:12]


# ----------------------------------------------------------------------------- matching


def _kind_key(frame: pd.DataFrame) -> pd.Series:
    columns = [c for c in KIND if c in frame]
    key = frame[columns[0]].astype(str)
    for column in columns[1:]:
        key = key + "|" + frame[column].astype(str)
    return key


def _with_match(frame: pd.DataFrame, full_label: set[str]) -> pd.DataFrame:
    """A ``match`` column: the configuration's kind key, or its full label where the kind is ambiguous."""
    kind = _kind_key(frame)
    label = kind + "|" + frame["drafter_label"].astype(str) + "|" + frame["drafter_params"].astype(str)
    return frame.assign(match=np.where(kind.isin(full_label), label, kind))


def _ambiguous(frame: pd.DataFrame) -> set[str]:
    """Kind keys with more than one parameter set in ``frame``."""
    kinds = frame.assign(kind=_kind_key(frame)).groupby("kind")["drafter_label"].nunique()
    return set(kinds[kinds > 1].index)


def prepare(old: Side, new: Side) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both sides' records with their ``match`` keys; a one-line error unless they hold the same workloads,
    sampling, loads and configurations."""
    full = _ambiguous(old.records) | _ambiguous(new.records)
    a, b = _with_match(old.records, full), _with_match(new.records, full)
    keys = SCENARIO + ["match"]

    def described(frame) -> set[tuple]:
        return {tuple(r) for r in frame[keys].drop_duplicates().astype(str).itertuples(index=False)}

    only_old, only_new = described(a) - described(b), described(b) - described(a)
    if only_old or only_new:

        def show(items) -> str:
            first = sorted(items)[:3]
            text = "; ".join(
                f"{w} T={t} c={c} rate={r} {m.split('|')[0]} γ={m.split('|')[2]}" for w, t, _, _, c, r, m in first
            )
            return text + (f" and {len(items) - 3} more" if len(items) > 3 else "")

        parts = ([f"only in OLD: {show(only_old)}"] if only_old else []) + (
            [f"only in NEW: {show(only_new)}"] if only_new else []
        )
        raise SpecbenchError(
            f"{old.folder} and {new.folder} do not hold the same workloads, sampling, loads and "
            f"configurations ({'; '.join(parts)}): compare runs of one sweep spec"
        )
    return a, b


# ----------------------------------------------------------------------------- the test


def _state(lo: float, hi: float, margin: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return INCONCLUSIVE
    if lo >= 1 - margin and hi <= 1 + margin:
        return EQUIVALENT
    if hi < 1 - margin:
        return REGRESSED
    if lo > 1 + margin:
        return IMPROVED
    return INCONCLUSIVE


def _ratio_text(q: dict) -> str:
    if not np.isfinite(q["old"]) or not np.isfinite(q["new"]):
        return f"{q['old']:.4g} → {q['new']:.4g}: not defined on both sides — {q['state']}"
    interval = "" if q["lo"] is None else f" [{q['lo']:.3f}, {q['hi']:.3f}]"
    return f"{q['old']:.4g} → {q['new']:.4g}: NEW ÷ OLD {q['ratio']:.3f}{interval} — {q['state']}" + (
        f" ({q['why']})" if q.get("why") else ""
    )


def _per_prompt(frame: pd.DataFrame, base: pd.DataFrame, clusters: pd.Index) -> np.ndarray:
    """[P, 7] per-prompt sums: accepted, drafted, rounds, decode tokens, decode s, and the paired baseline's
    decode tokens and decode s over the same units."""
    paired = frame.merge(base[UNIT_KEYS + ["decode_tokens", "decode_s"]], on=UNIT_KEYS, suffixes=("", "_base"))
    codes = clusters.get_indexer(paired["prompt_id"].astype(str))
    values = paired[
        ["accepted", "drafted", "rounds", "decode_tokens", "decode_s", "decode_tokens_base", "decode_s_base"]
    ].to_numpy(float)
    sums = np.zeros((len(clusters), values.shape[1]))
    keep = codes >= 0
    np.add.at(sums, codes[keep], values[keep])
    return sums


def quotient(num, den) -> np.ndarray:
    """num ÷ den elementwise, NaN wherever den is not a positive finite number or num is not finite: a ratio that is
    not defined (0 ÷ 0, x ÷ 0, anything with NaN) is NaN, computed without a floating-point warning, so none
    reaches the terminal (numpy's RuntimeWarnings name source lines and install paths)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    defined = np.isfinite(num) & np.isfinite(den) & (den > 0)
    return np.divide(num, den, out=np.full(np.broadcast(num, den).shape, np.nan), where=defined)


def _estimates(sums: np.ndarray) -> np.ndarray:
    """[..., 3] τ, α, speedup from per-prompt sums [..., 7] (a point: summed over prompts; a replicate:
    weighted sums); NaN where one is not defined (no round, no draft, no time)."""
    tau = quotient(sums[..., 3], sums[..., 2])
    alpha = quotient(sums[..., 0], sums[..., 1])
    speedup = quotient(quotient(sums[..., 3], sums[..., 4]), quotient(sums[..., 5], sums[..., 6]))
    return np.stack([tau, alpha, speedup], axis=-1)


def _differing(a: pd.DataFrame, b: pd.DataFrame) -> tuple[int, int]:
    """(units whose acceptance counts differ, units compared): greedy on the same engine should give none."""
    merged = a[UNIT_KEYS + ACCEPTANCE].merge(b[UNIT_KEYS + ACCEPTANCE], on=UNIT_KEYS, suffixes=("_old", "_new"))
    differ = np.zeros(len(merged), dtype=bool)
    for c in ACCEPTANCE:
        differ |= (merged[f"{c}_old"] != merged[f"{c}_new"]).to_numpy()
    return int(differ.sum()), len(merged)


def _name(row: pd.Series) -> str:
    load = (
        f" · {int(row['concurrency'])} in flight" if row["request_rate"] == 0 else f" · {row['request_rate']:g} req/s"
    )
    tree = "" if row["tree"] == "chain" else f" tree {row['tree']}"
    return f"{row['workload']}{load} · {row['drafter']}{tree} γ={int(row['gamma'])}"


def compare(
    old: Side,
    new: Side,
    *,
    margin: float = MARGIN,
    n_boot: int = 1000,
    seed: int = 0,
    gated: tuple[str, ...] = QUANTITIES,
) -> Comparison:
    """OLD against NEW, configuration by configuration (module docstring); the verdict reads ``gated``."""
    problem = violation("margin", margin)  # the row --margin is checked against: one range, stated once
    if problem is not None:
        raise SpecbenchError(f"--margin {problem}")
    unknown = [q for q in gated if q not in QUANTITIES]
    if unknown or not gated:
        raise SpecbenchError(f"--quantities takes some of {', '.join(QUANTITIES)}, got {', '.join(gated) or 'none'}")
    check_together("compare", identify(old.folder, old.run_info), identify(new.folder, new.run_info))
    a, b = prepare(old, new)
    lines, same_engine = changes(old, new)
    result = Comparison(
        margin=margin,
        level=LEVEL,
        changes=lines,
        same_engine=same_engine,
        gated=tuple(gated),
        environments={"old": environment(old), "new": environment(new)},
    )
    rng = np.random.default_rng(seed)
    for key, scenario_a in a.groupby(SCENARIO, dropna=False, sort=True):
        scenario_b = b[(b[SCENARIO].astype(str) == pd.Series(key, index=SCENARIO).astype(str)).all(axis=1)]
        base_a, base_b = (s[s["gamma"] == 0] for s in (scenario_a, scenario_b))
        common = set(map(str, scenario_a["prompt_id"])) & set(map(str, scenario_b["prompt_id"]))
        if not common:
            raise SpecbenchError(
                f"{old.folder} and {new.folder} share no prompt of workload {key[0]}: compare runs of one sweep spec"
            )
        clusters = pd.Index(sorted(common))
        weights = bootstrap_weights(len(clusters), n_boot if len(clusters) >= 2 else 0, rng)  # [B, P]
        greedy = float(key[1]) == 0.0
        for match, config_a in scenario_a[scenario_a["gamma"] > 0].groupby("match", sort=True):
            config_b = scenario_b[scenario_b["match"] == match]
            sums_a, sums_b = _per_prompt(config_a, base_a, clusters), _per_prompt(config_b, base_b, clusters)
            point_a, point_b = _estimates(sums_a.sum(0)), _estimates(sums_b.sum(0))
            reps = quotient(_estimates(weights @ sums_b), _estimates(weights @ sums_a))  # [B, 3], NaN: undefined
            first = config_a.iloc[0]
            labels = (str(first["drafter_label"]), str(config_b.iloc[0]["drafter_label"]))
            # a unit timed under interference says timing_ok false; unknown (null) is not a disturbance
            disturbed = any(s["timing_ok"].eq(False).any() for s in (config_a, config_b, base_a, base_b))
            quantities = {}
            differ, compared = _differing(config_a, config_b)
            for i, name in enumerate(QUANTITIES):
                ratio = float(quotient(point_b[i], point_a[i]))
                lo = hi = math.nan
                if len(weights) and np.isfinite(ratio) and ratio > 0:
                    lo, hi = (
                        float(v) for v in bootstrap_interval(ratio, reps[:, i], len(clusters), LEVEL, positive=True)
                    )
                q = {
                    "old": float(point_a[i]),
                    "new": float(point_b[i]),
                    "ratio": ratio,
                    "lo": lo if np.isfinite(lo) else None,
                    "hi": hi if np.isfinite(hi) else None,
                    "state": _state(lo, hi, margin),
                    "why": "",
                }
                if name != "speedup" and greedy and same_engine and compared and not differ:
                    q["state"], q["why"] = IDENTICAL, "greedy on the same engine and weights: identical unit by unit"
                elif name != "speedup" and greedy and same_engine and differ:
                    cause = (
                        "the drafter's settings changed"
                        if labels[0] != labels[1]
                        else "with the same settings this means the engine is not deterministic here (batching, "
                        "threads) or the verification changed"
                    )
                    q["why"] = f"greedy on the same engine and weights, {differ} of {compared} units differ: {cause}"
                elif name == "speedup" and disturbed and q["state"] != INCONCLUSIVE:
                    q["state"], q["why"] = (
                        INCONCLUSIVE,
                        "timed under interference on one side: rerun on a quiet machine",
                    )
                elif q["lo"] is None:
                    q["why"] = (
                        "no interval: fewer than two common prompts"
                        if len(clusters) < 2
                        else f"no interval: {replicate_shortfall(n_boot, LEVEL) or 'the replicates are not finite'}"
                    )
                q["text"] = _ratio_text(q)
                quantities[name] = q
            result.rows.append(
                {
                    **{k: _plain(first[k]) for k in SCENARIO},
                    "drafter": first["drafter"],
                    "tree": first["tree"],
                    "gamma": int(first["gamma"]),
                    "old_label": labels[0],
                    "new_label": labels[1],
                    "prompts": len(clusters),
                    "name": _name(first),
                    "quantities": quantities,
                    "timing_disturbed": disturbed,
                }
            )
            if labels[0] != labels[1]:
                result.changes.append(f"drafter: {labels[0]} → {labels[1]}")
    result.changes = list(dict.fromkeys(result.changes))
    return result


def _plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def side(folder, records: pd.DataFrame, run_info: dict, backend_info: dict) -> Side:
    """A `Side` from a folder's loaded records (live only, normalised)."""
    live = normalised(records)
    if live.empty:
        raise SpecbenchError(f"{folder} holds no live records: compare needs measured units")
    for column, default in (("schedule", "fixed"), ("strategy", "sequential")):
        live[column] = live[column].fillna(default) if column in live else default
    return Side(str(folder), live, run_info, backend_info)


def to_json(result: Comparison) -> str:
    return json.dumps(result.as_dict(), indent=2, default=str)
