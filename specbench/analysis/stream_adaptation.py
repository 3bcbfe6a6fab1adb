"""Online adaptation over a stream: acceptance, τ and speedup against the stream position, the time to
recover after a shift, and whether online adaptation pays (docs/strategies.md, "Online adaptation").

The unit of evidence is a *prompt* of the stream (all its turns summed). For a configuration c and
prompt p: accepted a_p, drafted d_p, target forwards r_p, decode tokens t_p and seconds s_p, the
seconds u_p of the drafter updates made during or right after it (``online_train_s``; 0 for a static
drafter), and the target-only baseline's tokens b_p and seconds e_p on the same prompt. Per window W of
prompts (the last ``window`` prompts of the same segment ending at a position: a window never straddles
a shift point)

    α_W = Σ a_p / Σ d_p,        τ_W = Σ t_p / Σ r_p,
    S_W = (Σ t_p / Σ s_p) / (Σ b_p / Σ e_p),     S⁺_W = (Σ t_p / Σ (s_p + u_p)) / (Σ b_p / Σ e_p)

S_W is the speedup when training runs on hardware of its own (Aurora's training server: serving pays
nothing for it), S⁺_W when it shares the machine (every update's seconds are serving seconds lost).
Intervals are over the prompts of the window: α and τ are ratios of sums, with the linearised
(delta-method) t-interval R ± t_{n−1} · se, se² = Σ_p ((x_p − R y_p) / ȳ)² / (n (n − 1)); speedups use
the paired log-ratio t-interval of every measured speedup (`specbench.analysis.statistics.speedup_interval`).

Time to recover after a shift at position k (the first prompt of a new segment), per configuration:

* ``recover_prompts`` — prompts from k until the windowed α first reaches 90 % of the level the
  configuration ends the segment at (α over the segment's last ``window`` prompts);
* ``beats_static_at`` — prompts from k until an online configuration's windowed α first exceeds its
  static twin's (the same drafter, sequential) on the same window; None when it never does.

Both count prompts, so they do not depend on timing; ``recover_s`` adds the seconds those prompts took
(decode and training).

Does it pay (`online_verdict`)? Per stream scenario, each online configuration against its static twin,
paired by prompt over the whole stream: R = tokens/s(online) ÷ tokens/s(static), once without and once
with the training seconds, judged with the rule every verdict uses (`specbench.analysis.statistics.sequential.
VerdictRule`: the best of the K online configurations, Bonferroni-adjusted for "yes"; one-sided for "no"):
confident yes, confident no, or cannot tell with the prompts that would settle it. The ratios use the
prompts timed without interference on both sides (``timing_ok``); where fewer than three such prompts
remain for a pair, every prompt is used and the answer is never confident. The timing-free τ ratio (tokens per target forward, online ÷ static,
with the same interval) says whether the drafter itself got better.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from scipy import stats

from specbench.analysis.statistics.intervals import LEVEL
from specbench.analysis.statistics.sequential import LookPlan, VerdictRule, prompts_to_settle
from specbench.analysis.statistics.speedup_interval import MIN_PROMPTS, speedup_interval
from specbench.analysis.verdicts.verdict import NO, TOO_FEW, UNSURE, YES
from specbench.records.summary import BASELINE_KEYS, is_baseline

WINDOW = 8  # prompts per window
RECOVERED = 0.9  # share of the end-of-segment level that counts as recovered
CONFIG = ["drafter", "drafter_params", "drafter_label", "tree", "gamma", "schedule", "strategy", "strategy_params"]
DEPLOYMENTS = (
    ("separate", "training on hardware of its own", False),
    ("shared", "training on the serving machine", True),
)
SUMS = ["accepted", "drafted", "rounds", "decode_tokens", "decode_s", "online_train_s", "online_train_tokens"]


def has_online(records: pd.DataFrame) -> bool:
    return "strategy" in records and bool((records["strategy"] == "online").any())


def _start_and_loss(params: str) -> tuple[str, str]:
    try:
        plan = json.loads(params) if isinstance(params, str) else {}
    except ValueError:
        plan = {}
    return str(plan.get("start", "")), str(plan.get("loss", ""))


def per_prompt(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (scenario, configuration, prompt) of the scenarios that ran an online configuration: the
    sums above, the stream position and segment, the drafter's versions, and the baseline's sums."""
    live = records[records["mode"] == "live"].copy()
    if live.empty or not has_online(live):
        return pd.DataFrame()
    for column, default in (
        ("strategy_params", "{}"),
        ("stream_position", np.nan),
        ("stream_segment", None),
        ("drafter_version", np.nan),
        ("online_train_s", np.nan),
        ("online_train_tokens", np.nan),
    ):
        if column not in live:
            live[column] = default
    scenarios = live.loc[live["strategy"] == "online", BASELINE_KEYS].drop_duplicates()
    live = live.merge(scenarios, on=BASELINE_KEYS)
    live["position"] = _positions(live)
    live["online_train_s"] = live["online_train_s"].fillna(0.0)
    live["online_train_tokens"] = live["online_train_tokens"].fillna(0)
    live["stream_segment"] = live["stream_segment"].fillna(live["workload"])
    live["timing_ok"] = live["timing_ok"].fillna(True) if "timing_ok" in live else True
    updates = (
        live["update_s"].map(lambda u: len(u) if u is not None and not isinstance(u, float) else 0)
        if "update_s" in live
        else 0
    )
    live["version_after"] = live["drafter_version"] + updates  # the version the unit left the drafter at
    keys = BASELINE_KEYS + ["prompt_id", "position", "stream_segment"]
    base = live[is_baseline(live)].groupby(keys, dropna=False)[["decode_tokens", "decode_s"]].sum()
    base = base.rename(columns={"decode_tokens": "base_tokens", "decode_s": "base_s"}).reset_index()
    spec = live[~is_baseline(live)]
    grouped = spec.groupby(keys + CONFIG, dropna=False)
    table = grouped[SUMS].sum()
    table["version"] = grouped["drafter_version"].min()
    table["version_end"] = grouped["version_after"].max()
    table["timing_ok"] = grouped["timing_ok"].all()
    table = table.reset_index().merge(base, on=keys, how="left")
    starts = table["strategy_params"].map(_start_and_loss)
    table["start"] = [s for s, _ in starts]
    table["loss"] = [loss for _, loss in starts]
    with np.errstate(divide="ignore", invalid="ignore"):
        table["alpha"] = table["accepted"] / table["drafted"]
        table["tau"] = table["decode_tokens"] / table["rounds"]
        base_rate = table["base_tokens"] / table["base_s"]
        table["speedup"] = table["decode_tokens"] / table["decode_s"] / base_rate
        table["speedup_with_training"] = (
            table["decode_tokens"] / (table["decode_s"] + table["online_train_s"]) / base_rate
        )
    return table.sort_values(BASELINE_KEYS + ["drafter_label", "position"]).reset_index(drop=True)


def _positions(live: pd.DataFrame) -> pd.Series:
    """The stream position of each record; records of a workload that is no stream: their prompts' run order
    (the first timestamp of each prompt, per scenario)."""
    position = live["stream_position"].astype(float)
    missing = position.isna()
    if missing.any():
        first = live[missing].groupby(BASELINE_KEYS + ["prompt_id"])["timestamp"].transform("min")
        rank = first.groupby([live.loc[missing, k] for k in BASELINE_KEYS]).rank(method="dense") - 1
        position[missing] = rank
    return position.astype(int)


def shift_points(prompts: pd.DataFrame) -> list[tuple[int, str]]:
    """(position, new segment) where the segment changes, in order (the stream's first segment is no shift)."""
    order = prompts[["position", "stream_segment"]].drop_duplicates().sort_values("position")
    points, previous = [], None
    for position, segment in order.itertuples(index=False):
        if previous is not None and segment != previous:
            points.append((int(position), str(segment)))
        previous = segment
    return points


# ----------------------------------------------------------------------------- windows


def ratio_interval(num: np.ndarray, den: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """(R, lo, hi) for R = Σ num / Σ den over n prompts: the linearised t-interval (NaN ends below 2 prompts)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    total = den.sum()
    if total <= 0:
        return float("nan"), float("nan"), float("nan")
    point = float(num.sum() / total)
    n = len(num)
    if n < 2:
        return point, float("nan"), float("nan")
    residual = (num - point * den) / (total / n)
    se = float(np.sqrt(np.sum(residual**2) / (n * (n - 1))))
    half = float(stats.t.ppf((1 + level) / 2, n - 1)) * se
    return point, point - half, point + half


def window_rows(prompts: pd.DataFrame, window: int = WINDOW, level: float = LEVEL) -> pd.DataFrame:
    """At every position of every configuration, the statistics of its trailing window (module docstring)."""
    rows = []
    for key, part in prompts.groupby(BASELINE_KEYS + ["drafter_label"], sort=False):
        part = part.sort_values("position").reset_index(drop=True)
        for i, row in part.iterrows():
            same = part.iloc[max(0, i - window + 1) : i + 1]
            w = same[same["stream_segment"] == row["stream_segment"]]
            rows.append(
                {
                    **dict(zip(BASELINE_KEYS + ["drafter_label"], key)),
                    **_window_stats(w, level),
                    "position": int(row["position"]),
                    "stream_segment": row["stream_segment"],
                    "strategy": row["strategy"],
                    "start": row["start"],
                    "loss": row["loss"],
                    "version": row["version"],
                }
            )
    return pd.DataFrame(rows)


def _window_stats(w: pd.DataFrame, level: float) -> dict:
    alpha, alpha_lo, alpha_hi = ratio_interval(w["accepted"], w["drafted"], level)
    tau, tau_lo, tau_hi = ratio_interval(w["decode_tokens"], w["rounds"], level)
    has_base = w["base_s"].notna().all() and len(w)
    out = {
        "prompts": len(w),
        "first": int(w["position"].min()),
        "last": int(w["position"].max()),
        "alpha": alpha,
        "alpha_lo": max(alpha_lo, 0.0) if alpha_lo == alpha_lo else alpha_lo,
        "alpha_hi": min(alpha_hi, 1.0) if alpha_hi == alpha_hi else alpha_hi,
        "tau": tau,
        "tau_lo": max(tau_lo, 1.0) if tau_lo == tau_lo else tau_lo,  # every target forward emits a token: τ ≥ 1
        "tau_hi": tau_hi,
    }
    for name, seconds in (("speedup", w["decode_s"]), ("speedup_with_training", w["decode_s"] + w["online_train_s"])):
        if has_base:
            interval = speedup_interval(w["decode_tokens"], seconds, w["base_tokens"], w["base_s"], level=level)
            out.update({name: interval.point, f"{name}_lo": interval.lo, f"{name}_hi": interval.hi})
        else:
            out.update({name: float("nan"), f"{name}_lo": float("nan"), f"{name}_hi": float("nan")})
    out["train_s"] = float(w["online_train_s"].sum())
    out["timing_ok"] = bool(w["timing_ok"].all())
    return out


def window_table(prompts: pd.DataFrame, window: int = WINDOW, level: float = LEVEL) -> pd.DataFrame:
    """Non-overlapping windows (``window`` prompts, cut at shift points) per configuration: `fit`'s table."""
    rows = []
    for key, part in prompts.groupby(BASELINE_KEYS + ["drafter_label"], sort=False):
        part = part.sort_values("position")
        block = (part["stream_segment"] != part["stream_segment"].shift()).cumsum()
        for _, segment in part.groupby(block, sort=False):
            for start in range(0, len(segment), window):
                w = segment.iloc[start : start + window]
                rows.append(
                    {
                        **dict(zip(BASELINE_KEYS + ["drafter_label"], key)),
                        **_window_stats(w, level),
                        "stream_segment": w["stream_segment"].iloc[0],
                        "strategy": w["strategy"].iloc[0],
                        "versions": f"{int(w['version'].min())}–{int(w['version_end'].max())}"
                        if w["version"].notna().any()
                        else "-",
                    }
                )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- recovery


def static_twin(prompts: pd.DataFrame, row) -> str | None:
    """The drafter label of the sequential configuration with the same drafter, γ, tree and schedule."""
    same = prompts[
        (prompts["strategy"] == "sequential")
        & (prompts["drafter"] == row["drafter"])
        & (prompts["drafter_params"] == row["drafter_params"])
        & (prompts["gamma"] == row["gamma"])
        & (prompts["tree"] == row["tree"])
        & (prompts["schedule"] == row["schedule"])
    ]
    for key in BASELINE_KEYS:
        same = same[same[key] == row[key]]
    labels = same["drafter_label"].unique()
    return str(labels[0]) if len(labels) else None


def recovery_table(prompts: pd.DataFrame, window: int = WINDOW) -> pd.DataFrame:
    """Per shift point and configuration: α before and after, prompts to recover, prompts to beat static."""
    if prompts.empty:
        return pd.DataFrame()
    windows = window_rows(prompts, window)
    rows = []
    for scenario, part in prompts.groupby(BASELINE_KEYS, sort=False):
        keys = dict(zip(BASELINE_KEYS, scenario))
        shifts = shift_points(part)
        for label, config in part.groupby("drafter_label", sort=False):
            first = config.iloc[0]
            twin = static_twin(part, first) if first["strategy"] == "online" else None
            mine = _select(windows, keys, label)
            theirs = _select(windows, keys, twin) if twin else None
            for position, segment in shifts:
                rows.append(
                    {
                        **keys,
                        "drafter_label": label,
                        "strategy": first["strategy"],
                        "shift_at": position,
                        "segment": segment,
                        **_recovery(config, mine, theirs, position, window),
                    }
                )
    return pd.DataFrame(rows)


def _select(windows: pd.DataFrame, keys: dict, label: str) -> pd.DataFrame:
    mask = windows["drafter_label"] == label
    for k, v in keys.items():
        mask &= windows[k] == v
    return windows[mask].set_index("position")


def _recovery(config: pd.DataFrame, mine: pd.DataFrame, theirs: pd.DataFrame | None, shift: int, window: int) -> dict:
    before = config[config["position"] < shift].tail(window)
    segment = (
        config.loc[config["position"] >= shift, "stream_segment"].iloc[0]
        if (config["position"] >= shift).any()
        else None
    )
    after = config[(config["position"] >= shift) & (config["stream_segment"] == segment)]
    nan = float("nan")
    if after.empty:
        return {
            "alpha_before": nan,
            "alpha_first": nan,
            "alpha_end": nan,
            "recover_prompts": None,
            "recover_tokens": None,
            "recover_s": nan,
            "beats_static_at": None,
        }
    alpha_before = ratio_interval(before["accepted"], before["drafted"])[0] if len(before) else nan
    first = after.head(min(window, len(after)))
    alpha_first = ratio_interval(first["accepted"], first["drafted"])[0]
    end = after.tail(window)
    alpha_end = ratio_interval(end["accepted"], end["drafted"])[0]
    positions = list(after["position"])
    recovered = next(
        (i for i, p in enumerate(positions) if p in mine.index and mine.loc[p, "alpha"] >= RECOVERED * alpha_end), None
    )
    beats = None
    if theirs is not None:
        beats = next(
            (
                i
                for i, p in enumerate(positions)
                if p in mine.index and p in theirs.index and mine.loc[p, "alpha"] > theirs.loc[p, "alpha"]
            ),
            None,
        )
    spent = after.iloc[: (recovered or 0) + 1]
    return {
        "alpha_before": alpha_before,
        "alpha_first": alpha_first,
        "alpha_end": alpha_end,
        "recover_prompts": recovered,
        "recover_tokens": int(spent["decode_tokens"].sum()) if recovered is not None else None,
        "recover_s": float((spent["decode_s"] + spent["online_train_s"]).sum()) if recovered is not None else nan,
        "beats_static_at": beats,
    }


# ----------------------------------------------------------------------------- the verdict


def online_verdict(prompts: pd.DataFrame, scenario: dict, level: float = LEVEL) -> dict | None:
    """Does online adaptation pay in ``scenario`` (a stream), without and with its training cost? (module
    docstring) None when the scenario has no online configuration with a static twin."""
    part = prompts
    for key, value in scenario.items():
        if key in part:
            part = part[part[key] == value]
    online = part[part["strategy"] == "online"]
    pairs = []
    for label, config in online.groupby("drafter_label", sort=True):
        twin = static_twin(part, config.iloc[0])
        if twin is None:
            continue
        static = part[part["drafter_label"] == twin].set_index("prompt_id")
        config = config.set_index("prompt_id")
        common = config.index.intersection(static.index)
        pairs.append((label, twin, config.loc[common], static.loc[common]))
    if not pairs:
        return None
    timed = all(bool(c["timing_ok"].all() and s["timing_ok"].all()) for _, _, c, s in pairs)
    clean = [_undisturbed(label, twin, mine, theirs) for label, twin, mine, theirs in pairs]
    disturbed = any(c is None for c in clean)
    timed_pairs = pairs if disturbed else [c for c in clean if c is not None]
    verdicts = []
    for name, what, with_training in DEPLOYMENTS:
        candidates = []
        for label, twin, mine, theirs in timed_pairs:
            seconds = mine["decode_s"] + (mine["online_train_s"] if with_training else 0.0)
            interval = speedup_interval(
                mine["decode_tokens"], seconds, theirs["decode_tokens"], theirs["decode_s"], level=level
            )
            candidates.append((label, twin, interval))
        verdicts.append(_verdict(name, what, candidates, level, disturbed))
    tau = []
    for label, twin, mine, theirs in pairs:
        interval = speedup_interval(
            mine["decode_tokens"], mine["rounds"], theirs["decode_tokens"], theirs["rounds"], level=level
        )
        tau.append(
            {
                "configuration": label,
                "static": twin,
                "ratio": interval.point,
                "lo": interval.lo,
                "hi": interval.hi,
                "n_prompts": interval.n_prompts,
            }
        )
    lines = [v["text"] for v in verdicts]
    return {
        "deployments": verdicts,
        "tau_ratio": tau,
        "timing_disturbed": disturbed,
        "timing_clean": timed,
        "text": " / ".join(lines),
    }


def _undisturbed(label: str, twin: str, mine: pd.DataFrame, theirs: pd.DataFrame) -> tuple | None:
    """The pair cut to the prompts timed without interference on both sides (as every timing fit leaves
    disturbed units out); None when fewer than `MIN_PROMPTS` remain (the verdict then uses every prompt and
    is never confident)."""
    ok = mine["timing_ok"].to_numpy(bool) & theirs["timing_ok"].to_numpy(bool)
    if ok.sum() < MIN_PROMPTS:
        return None
    return label, twin, mine[ok], theirs[ok]


def _verdict(name: str, what: str, candidates: list, level: float, disturbed: bool) -> dict:
    """The three-way answer over the online configurations' ratios to their static twins."""
    with_interval = [c for c in candidates if c[2].has_interval]
    rule = VerdictRule(LookPlan((), 1.0 - level), max(len(with_interval), 1))
    rows = [
        {
            "configuration": label,
            "static": twin,
            "ratio": iv.point,
            "lo": iv.lo,
            "hi": iv.hi,
            "lo_adj": rule.lower(iv.point, iv.log_se, iv.dof),
            "hi_adj": rule.upper(iv.point, iv.log_se, iv.dof),
            "log_se": iv.log_se,
            "dof": iv.dof,
            "n_prompts": iv.n_prompts,
        }
        for label, twin, iv in candidates
    ]
    best = max(rows, key=lambda r: r["ratio"] if np.isfinite(r["ratio"]) else -np.inf)
    n = max((r["n_prompts"] for r in rows), default=0)
    head = f"online adaptation ({what})"
    if not with_interval or n < MIN_PROMPTS:
        answer = TOO_FEW
        text = f"{head}: too few prompts to tell (P = {n}); best {best['configuration']} at {best['ratio']:.2f}× the static drafter"
        needed = None
    else:
        usable = [r for r in rows if np.isfinite(r["lo_adj"])]
        above = [r for r in usable if r["lo_adj"] > 1.0]
        needed = None
        if above:
            pick = max(above, key=lambda r: r["ratio"])
            answer, best = YES, pick
            text = (
                f"{head}: confident yes — {pick['configuration']} is {pick['ratio']:.2f}× the static drafter's "
                f"tokens/s [{pick['lo_adj']:.2f}, {pick['ratio'] ** 2 / pick['lo_adj']:.2f}] ({rule.describe()})"
            )
        elif all(r["hi_adj"] < 1.0 for r in usable):
            answer = NO
            text = (
                f"{head}: confident no — every online configuration is slower than the static drafter; best "
                f"{best['configuration']} at {best['ratio']:.2f}× [{best['ratio'] ** 2 / best['hi_adj']:.2f}, "
                f"{best['hi_adj']:.2f}]"
            )
        else:
            answer = UNSURE
            side = "yes" if best["ratio"] > 1 else "no"
            needed = prompts_to_settle(
                best["ratio"], best["log_se"], best["n_prompts"], lambda dof: rule.quantile(dof, side)
            )
            settle = (
                f"about {needed} prompts would settle it at the observed per-prompt spread"
                if needed
                else "no practical number of prompts would settle it"
            )
            text = (
                f"{head}: cannot tell — best {best['configuration']} at {best['ratio']:.2f}× the static drafter "
                f"[{best['lo']:.2f}, {best['hi']:.2f}]; {settle}"
            )
    if disturbed and answer.decided:
        text += (
            f" — but fewer than {MIN_PROMPTS} prompts were timed without interference: rerun on a quiet machine "
            "before acting on it"
        )
    return {
        "deployment": name,
        "what": what,
        "answer": answer,
        "confident": answer.decided and not disturbed,
        "best": best["configuration"],
        "ratio": best["ratio"],
        "prompts_needed": needed,
        "text": text,
        "candidates": rows,
    }


def answer_label(deployment: dict) -> str:
    """A deployment verdict's answer (`online_verdict`'s ``deployments``), flagged when it came from disturbed timing
    (never confident then)."""
    answer = deployment["answer"]
    return f"{answer} (timing disturbed)" if answer in (YES, NO) and not deployment["confident"] else str(answer)


def is_confident(deployment: dict) -> bool:
    return bool(deployment["confident"])
