"""Speculation against load: the verdict at every load, where speculation stops paying, and a per-load γ
schedule for vLLM that says only what the verdicts say.

A serving sweep measures every configuration and its target-only baseline at several loads
(``concurrency: [1, 4, 16]`` or ``request_rates: [1, 2, 4]``; `specbench.analysis.load.table`). Here:

* **the verdict per load** is the recommender's (`specbench.analysis.recommendation.recommend`): one scenario per
  (workload, sampling, load), decided by `specbench.analysis.verdicts.decision` with its `VerdictRule` — the
  same machinery, the same adjustment for the best of K, the same refusal to be confident on disturbed
  timing as the main verdict. No γ is ever picked here from a point estimate.
* **the crossover** per (workload, configuration): the load where the speedup's interval crosses 1,
  per request and for the system's output tokens/s (`specbench.analysis.load.crossover`); one line per
  workload follows the configuration the verdict names at the lowest load (its choice, or its best
  estimate when it cannot tell), so the line, the verdicts and the table name the same configuration.

Every part reads the same records by the same rule: the per-load table's rows, the verdicts' options and
so the crossovers are built from the (configuration, baseline) pairs `specbench.records.timing.paired_timing`
selects. Each table row says whether it is the configuration its load's verdict names (``verdict_named``).
* **vLLM's per-batch-size schedule** (``num_speculative_tokens_per_batch_size``: ranges
  ``[first_batch, last_batch, K]``), for a concurrency axis only (a request rate sets no batch size).
  A drafter gets one when some load's verdict is a confident yes for it. A load enters with K = γ
  where its verdict is a confident yes for that drafter — the γ its choice names, within the tolerance ε
  of the best (`specbench.analysis.verdicts.choice`) —, K = 0 only where it is a confident no; every other
  load takes the ε-best γ of the prediction for that drafter, *marked as predicted* (the schedule's notes
  say which loads and why). Filling such loads with K = 0 cost 18–22 % against a static γ in the
  confirmation of docs/bench-confirm.md: "cannot tell" is not "does not pay". A level covers the batch sizes
  from itself to the next measured level − 1 (the first from 1), and vLLM applies the last range's K to every
  larger batch: when that K is above 0 it is unmeasured there, and the note says so.

The schedule's config is the main panel's (`specbench.analysis.settings.engine_settings`: the one drafter →
config mapping, models named as vLLM loads them — Hugging Face ids for specbench's aliases) with the
ranges given to that one builder (`engine_settings.schedule_setting`: the engine whose catalogue entry takes a
per-batch-size schedule); ``specbench recommend`` then builds it with vLLM's own ``SpeculativeConfig`` and checks
the ranges with vLLM's schedule validation (`specbench.cli.shell.engine_checks`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from specbench.analysis.load.crossover import Crossover, crossover, describe
from specbench.analysis.load.table import AXES, CLOSED_LOOP, axis_of, load_label, normalised, serving_table
from specbench.analysis.options import Option
from specbench.analysis.settings.engine_settings import EngineSetting, schedule_setting
from specbench.analysis.statistics.intervals import LEVEL, N_BOOT
from specbench.analysis.statistics.speedup_interval import speedup_words
from specbench.analysis.verdicts.verdict import Decision
from specbench.catalogue import engines as catalogue_engines
from specbench.records.summary import BASELINE_KEYS

GROUP_KEYS = [*BASELINE_KEYS, "backend"]  # a workload's scenario across loads
CONFIG = ["drafter", "drafter_label", "drafter_params", "tree", "gamma"]
UNITS = {"concurrency": "requests in flight", "request_rate": "requests/s"}


def _same(a, b) -> bool:
    """Equal, with missing values (None, NaN) equal to each other."""
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
    return all(missing) or (not any(missing) and a == b)


# ----------------------------------------------------------------------------- verdicts per load


@dataclass
class LoadVerdict:
    """The verdict at one load of one workload scenario: the recommender's `Decision` there, and the load."""

    keys: dict  # the scenario (`BASELINE_KEYS`)
    backend: str
    concurrency: int
    request_rate: float
    load: float  # the axis' value: the request rate or the requests in flight
    decision: Decision

    @property
    def workload(self) -> str:
        return str(self.keys.get("workload"))

    @property
    def confident(self) -> bool:
        return self.decision.confident

    @property
    def short(self) -> str:
        return self.decision.short()

    @property
    def headline(self) -> str:
        return self.decision.headline()

    @property
    def named(self) -> dict | None:
        """The configuration this load's verdict names (its choice, or its best estimate), or None."""
        return self.decision.named

    @property
    def option(self) -> Option | None:
        """The configuration a yes here names (`Option`), None otherwise."""
        return self.decision.option if self.decision.says_yes else None

    @property
    def scenario(self) -> tuple:
        return (*(self.keys[k] for k in BASELINE_KEYS), self.backend)

    def as_dict(self) -> dict:
        o = self.option
        return {
            **self.keys,
            "backend": self.backend,
            "concurrency": self.concurrency,
            "request_rate": self.request_rate,
            "load": self.load,
            "answer": self.decision.answer,
            "confident": self.confident,
            "text": self.decision.text,
            "short": self.short,
            "headline": self.headline,
            "named": self.named,
            "option": None
            if o is None
            else {
                "drafter": o.drafter,
                "drafter_label": o.drafter_label,
                "drafter_params": o.drafter_params,
                "tree": o.tree,
                "gamma": int(o.gamma),
                "speedup": o.speedup,
                "lo": o.lo,
                "hi": o.hi,
            },
        }


def verdicts(recs: list, axis: str, backend: str, concurrency: int = 1) -> list[LoadVerdict]:
    """One per recommendation (a load's scenario): its load and decision (``backend``, ``concurrency``: the
    records' own where the scenario keys leave them out)."""
    rows = []
    for rec in recs:
        if rec.decision is None:
            continue
        in_flight = int(rec.keys.get("concurrency", concurrency))
        rate = float(rec.keys.get("request_rate", CLOSED_LOOP))
        rows.append(
            LoadVerdict(
                {k: rec.keys[k] for k in BASELINE_KEYS},
                rec.keys.get("backend", backend),
                in_flight,
                rate,
                rate if axis == "request_rate" else in_flight,
                rec.decision,
            )
        )
    return rows


# ----------------------------------------------------------------------------- crossovers


def crossovers(table: pd.DataFrame, axis: str) -> list[dict]:
    """Per (scenario, backend, configuration) over load: where the per-request and the system speedup
    cross 1 (`specbench.analysis.load.crossover`). Configurations measured at fewer than two loads are left out."""
    spec = table[table["gamma"] > 0] if len(table) else table
    rows = []
    for key, group in spec.groupby(GROUP_KEYS + CONFIG, dropna=False, sort=True):
        group = group.sort_values(axis)
        if group[axis].nunique() < 2:
            continue
        per_request = crossover(group[axis], group["speedup"], group["speedup_lo"], group["speedup_hi"])
        system = crossover(group[axis], group["system_speedup"], group["system_speedup_lo"], group["system_speedup_hi"])
        rows.append({**dict(zip(GROUP_KEYS + CONFIG, key)), "per_request": per_request, "system": system})
    return rows


def _values(c: Crossover, axis: str) -> str:
    return ", ".join(
        f"{r:.2f}× at {load_label(axis, v).split(' ')[0]}" for v, r in zip(c.loads, c.ratios) if np.isfinite(r)
    )


def _named_first(rows: list[dict], verdicts: list[dict]) -> tuple[dict | None, str]:
    """The crossover row of the configuration the verdict at the lowest load names, and the words saying so."""
    scenario = rows[0]
    own = sorted(
        (v for v in verdicts if all(_same(v.get(k), scenario[k]) for k in GROUP_KEYS)), key=lambda v: v["load"]
    )
    for verdict in own:
        named = verdict.get("named")
        if named is None:
            continue
        for row in rows:
            if (row["drafter_label"], row["tree"], int(row["gamma"])) == (
                named["drafter_label"],
                named["tree"],
                named["gamma"],
            ):
                return row, f"the verdict's configuration at {load_label(verdict['axis'], verdict['load'])}"
        break
    return None, ""


def crossover_lines(found: list[dict], axis: str, verdict_rows: list[dict] | None = None) -> list[dict]:
    """One line per workload scenario: the configuration the verdict at the lowest load names (module docstring;
    without verdicts, or when it names none measured at two loads, the one fastest per request at the lowest
    load), where it stops paying per request and for the system, with its speedup at every load."""
    out = []
    by_scenario: dict[tuple, list[dict]] = {}
    for row in found:
        by_scenario.setdefault(tuple(row[k] for k in GROUP_KEYS), []).append(row)
    unit = UNITS[axis]
    verdict_rows = [{**v, "axis": axis} for v in verdict_rows or []]
    for key, rows in by_scenario.items():

        def first(row):
            value = row["per_request"].ratios[0] if row["per_request"].ratios else float("nan")
            return value if np.isfinite(value) else -np.inf

        best, why = _named_first(rows, verdict_rows)
        if best is None:
            best, why = max(rows, key=first), "the fastest per request at the lowest load"
        name = f"{best['drafter_label']} γ={int(best['gamma'])}"
        per_request, system = best["per_request"], best["system"]
        text = (
            f"{name} ({why}) {describe(per_request, unit)} per request ({_values(per_request, axis)}); "
            f"system output tokens/s: {describe(system, unit)}"
        )
        out.append(
            {
                **dict(zip(GROUP_KEYS, key)),
                "drafter_label": best["drafter_label"],
                "tree": best["tree"],
                "gamma": int(best["gamma"]),
                "text": text,
            }
        )
    return out


def mark_named(table: pd.DataFrame, rows: list[dict], axis: str) -> pd.DataFrame:
    """``verdict_named``: whether a table row is the configuration its load's verdict names."""
    if table.empty:
        return table
    named = set()
    for v in rows:
        if v.get("named") is not None:
            n = v["named"]
            named.add(
                (*(str(v[k]) for k in GROUP_KEYS), float(v["load"]), n["drafter_label"], n["tree"], int(n["gamma"]))
            )
    keys = [
        (*(str(r[k]) for k in GROUP_KEYS), float(r[axis]), r["drafter_label"], r["tree"], int(r["gamma"]))
        for _, r in table.iterrows()
    ]
    return table.assign(verdict_named=[k in named for k in keys])


# ----------------------------------------------------------------------------- vLLM's per-batch-size schedule


def _ranges(levels: list[int], ks: list[int]) -> list[list[int]]:
    """[[first_batch, last_batch, K], ...]: level i covers its batch sizes up to the next level − 1 (the first
    from batch 1, the last only itself); equal neighbours merge."""
    out: list[list[int]] = []
    for i, (level, k) in enumerate(zip(levels, ks)):
        start = 1 if i == 0 else level
        end = levels[i + 1] - 1 if i + 1 < len(levels) else level
        if out and out[-1][2] == k:
            out[-1][1] = end
        else:
            out.append([int(start), int(end), int(k)])
    return out


def schedules(rows: list[LoadVerdict], target: str, hub_ids: Mapping[str, str] | None) -> list[dict]:
    """Per (scenario, backend, drafter a confident yes chose): the levels, K or why absent, the ranges and
    the vLLM setting carrying them (module docstring)."""
    out = []
    by_scenario: dict[tuple, list[LoadVerdict]] = {}
    for row in rows:
        by_scenario.setdefault(row.scenario, []).append(row)
    for key, levels in by_scenario.items():
        levels = sorted(levels, key=lambda r: r.concurrency)
        chosen: dict[tuple[str, str, str], Option] = {}
        for r in levels:
            o = r.option
            if r.confident and o is not None and o.tree == "chain":
                chosen.setdefault((o.drafter, o.drafter_params, o.drafter_label), o)
        for (drafter, params, label), _ in chosen.items():
            entries = [_entry(r, label) for r in levels]
            ks = [int(e["K"]) for e in entries]
            ranges = _ranges([e["concurrency"] for e in entries], ks)
            setting = schedule_setting(drafter, params, ranges, target, hub_ids)
            out.append(
                {
                    **dict(zip(GROUP_KEYS, key)),
                    "drafter": drafter,
                    "drafter_label": label,
                    "drafter_params": params,
                    "levels": entries,
                    "ranges": ranges,
                    "setting": _with_ranges(setting, ranges, entries),
                }
            )
    return out


def _entry(row: LoadVerdict, label: str) -> dict:
    """A load's K for ``label``'s schedule (`level_entry`), with its concurrency."""
    return {"concurrency": row.concurrency, **level_entry(row.decision, label, "load")}


def level_entry(decision: Decision, label: str, level: str) -> dict:
    """One level's K for ``label``'s schedule along an axis (``level``: 'load' or 'context length'): the verdict's γ
    where it is a confident yes for this drafter (the choice within ε of the best,
    `specbench.analysis.verdicts.choice`), 0 where it is a confident no, and elsewhere the ε-best γ of the
    prediction for this drafter, marked ``predicted`` — never a silent "off". The load schedule and the context
    length setting (`specbench.analysis.context.setting`) both take their K here."""
    o = decision.option if decision.says_yes else None
    base = {"answer": decision.answer, "confident": decision.confident}
    if decision.confident and decision.says_no:
        return {**base, "K": 0, "predicted": False, "why": f"confident no: speculation does not pay at this {level}"}
    if decision.confident and o is not None and o.drafter_label == label and o.tree == "chain":
        choice = decision.choice
        settled = "" if choice is None or choice.settled else "; the choice between γ is not settled"
        return {
            **base,
            "K": int(o.gamma),
            "predicted": False,
            "why": f"confident yes: γ={o.gamma} at {speedup_words(o.speedup, o.lo, o.hi)} (adjusted){settled}",
        }
    best = best_for(decision, label)
    if best is None:
        return {**base, "K": 0, "predicted": True, "why": f"no estimate for {label} here ({decision.short()})"}
    why = (
        f"the verdict here chose {o.drafter_label} γ={o.gamma}"
        if decision.confident and o is not None
        else f"no confident verdict ({decision.short()})"
    )
    return {
        **base,
        "K": int(best.gamma),
        "predicted": True,
        "why": f"{why}: predicted, {label}'s best estimate γ={best.gamma} at {best.speedup:.2f}×",
    }


def level_line(entry: dict) -> str:
    """One load of a schedule in words: 'concurrency 4: K = 2 (predicted) — why'."""
    mark = " (predicted)" if entry.get("predicted") else ""
    return f"concurrency {entry['concurrency']}: K = {entry['K']}{mark} — {entry['why']}"


def best_for(decision: Decision, label: str):
    """``label``'s chain option a decision would pick: the choice's pick or leader when it is this drafter's, else
    this drafter's highest point estimate; None when the decision weighed none of its options."""
    mine = [
        c
        for c in decision.candidates
        if c.drafter_label == label and c.tree == "chain" and c.has_point and c.schedule in (None, "fixed")
    ]
    if not mine:
        return None
    choice = decision.choice
    if choice is not None:
        pick = choice.chosen if choice.settled else choice.leader
        for c in mine:
            if c.key == pick:
                return c
    return max(mine, key=lambda c: c.speedup)


def _with_ranges(setting: EngineSetting, ranges: list[list[int]], entries: list[dict]) -> EngineSetting:
    """The schedule's setting with what a reader must know about its ranges."""
    if not setting.config:
        return setting
    notes = list(setting.notes)
    predicted = [e for e in entries if e.get("predicted")]
    if predicted:
        notes.append(
            "predicted, not confirmed by a confident verdict (K is the model's best estimate there; only a "
            "confident no turns speculation off): "
            + "; ".join(f"concurrency {e['concurrency']}: K {e['K']} — {e['why']}" for e in predicted)
        )
    last = ranges[-1]
    if last[2] == 0:
        notes.append(
            f"the closing K = 0 range turns speculation off from batch {last[0]} on (vLLM applies the last "
            "range's K to every larger batch)"
        )
    else:
        notes.append(
            f"vLLM applies the last range's K = {last[2]} to every batch above {last[1]} too — unmeasured "
            "there; measure up to the largest batch you serve"
        )
    return replace(setting, notes=notes)


# ----------------------------------------------------------------------------- everything, as plain data


def summary(
    records: pd.DataFrame,
    recs: list,
    *,
    hub_ids: Mapping[str, str] | None = None,
    level: float = LEVEL,
    n_boot: int = N_BOOT,
    seed: int = 0,
    table: pd.DataFrame | None = None,
    engines: Sequence[str] | None = None,
) -> dict:
    """What `specbench recommend` prints about load: the per-load table (`specbench.analysis.load.table.serving_table`),
    the verdict at each load, the crossovers and their one-line statements, and vLLM's schedules when vLLM is among
    ``engines`` (None: every engine). ``schedule_asked`` says whether a schedule was looked for, so a reader can
    tell "no load had a confident yes" from "not asked"."""
    frame = normalised(records)
    axis = axis_of(frame)
    backend = str(frame["backend"].iloc[0]) if len(frame) else "own"
    table = serving_table(records, level=level, n_boot=n_boot, seed=seed) if table is None else table
    rows = verdicts(recs, axis, backend, int(frame["concurrency"].iloc[0]) if len(frame) else 1)
    table = mark_named(table, [r.as_dict() for r in rows], axis)
    found = crossovers(table, axis) if len(table) else []
    target = str(frame["target"].iloc[0]) if len(frame) else "<target>"
    notes = _short_batches(frame)
    plans = []
    asked = catalogue_engines.names() if engines is None else list(engines)
    schedule_asked = axis == "concurrency" and any(catalogue_engines.get(e).per_batch_schedule for e in asked)
    if schedule_asked:
        plans = schedules(rows, target, hub_ids)
    if axis == "concurrency" and engines is not None:
        notes.extend(catalogue_engines.get(e).load_note for e in engines if catalogue_engines.get(e).load_note)
    if axis != "concurrency":
        notes.append(
            "no per-batch-size schedule: request rates set no batch size (vLLM's "
            "num_speculative_tokens_per_batch_size needs a concurrency sweep)"
        )
    return {
        "axis": axis,
        "axis_label": AXES[axis],
        "table": table.replace({np.nan: None}).to_dict("records"),
        "verdicts": rows,
        "crossovers": [
            {
                **{k: v for k, v in r.items() if k not in ("per_request", "system")},
                "per_request": r["per_request"].as_dict(),
                "system": r["system"].as_dict(),
            }
            for r in found
        ],
        "lines": crossover_lines(found, axis, [r.as_dict() for r in rows]),
        "schedules": plans,
        "schedule_asked": schedule_asked,
        "notes": notes,
    }


def _short_batches(frame: pd.DataFrame) -> list[str]:
    """Closed-loop levels whose batches held fewer requests than the concurrency asked: those levels never had
    that many in flight (a batch is one workload turn's prompts), so they measure a lower load than named."""
    if "batch_requests" not in frame or frame["batch_requests"].isna().all():
        return []
    closed = frame[(frame["request_rate"] == CLOSED_LOOP) & frame["batch_requests"].notna()]
    notes = []
    for (workload, concurrency), part in closed.groupby(["workload", "concurrency"], sort=True):
        most = int(part["batch_requests"].max())
        if most < concurrency:
            notes.append(
                f"{workload}: concurrency {concurrency} had at most {most} requests in flight (a batch holds "
                f"one workload turn's {most} prompts): measure ≥ {concurrency} prompts per workload for that "
                "load to mean what it says"
            )
    return notes


def settings_of(summary_data: dict) -> list[EngineSetting]:
    """The schedules' vLLM settings (for `specbench.cli.shell.engine_checks`, which marks how each was checked)."""
    return [s["setting"] for s in summary_data["schedules"]]


def for_scenario(summary_data: dict, keys: dict) -> dict:
    """The part of `summary` that concerns one scenario (``keys``: a recommendation's scenario keys): every
    row whose shared keys all match; settings as plain data."""

    def matches(row: dict) -> bool:
        return all(_same(row[k], v) for k, v in keys.items() if k in row)

    plain = {**summary_data, "verdicts": [v.as_dict() for v in summary_data["verdicts"]]}
    part = {
        name: [row for row in rows if matches(row)] if isinstance(rows, list) and name != "notes" else rows
        for name, rows in plain.items()
    }
    part["schedules"] = [{**s, "setting": s["setting"].as_dict()} for s in part["schedules"]]
    return json.loads(json.dumps(part, default=str))
