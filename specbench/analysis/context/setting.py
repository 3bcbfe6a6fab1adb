"""A length-aware setting: γ per context range, and what each engine can take of it.

From a scenario's verdicts per bin (`specbench.analysis.context.verdicts`), for the drafter the first confident yes
names (shortest bin first): each bin's K by the load schedule's rule (`specbench.analysis.load.verdicts.level_entry`
— the verdict's γ where it is a confident yes for this drafter, 0 only where it is a confident no, elsewhere the
ε-best γ of the prediction, marked *predicted*: "cannot tell" is not "does not pay").

A bin covers the prompt lengths up to the threshold with the next bin, the midpoint between its longest prompt
and the next bin's shortest (the midpoint of their means where the two overlap); the first range starts at 0
tokens, the last is open-ended and unmeasured past the longest prompt measured (a note says so). Neighbouring
ranges with the same K merge.

Engines. specbench's own engine takes one ``--gamma`` per run, so the setting is one command line per range
(where no bin is a confident yes: one line for every length, the pooled verdict's γ).
No engine of the catalogue (`specbench.catalogue.engines`) takes γ per context length: each gets one line with
the nearest setting — the γ of the verdict over the bins pooled (the sweep's mix of lengths) and, where the
longest ranges are a confident no, a router rule: send prompts of N tokens or more to a pool without speculation.
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.analysis.context.verdicts import BinVerdict
from specbench.analysis.load.verdicts import level_entry
from specbench.analysis.statistics.speedup_interval import speedup_words
from specbench.analysis.verdicts.verdict import Decision
from specbench.catalogue import engines as catalogue_engines


def thresholds(verdicts: Sequence[BinVerdict]) -> list[int]:
    """The prompt length (tokens) where each bin hands over to the next (module docstring)."""
    out = []
    for shorter, longer in zip(verdicts, verdicts[1:]):
        if shorter.longest < longer.shortest:
            out.append(round((shorter.longest + longer.shortest) / 2))
        else:
            out.append(round((shorter.prompt_tokens + longer.prompt_tokens) / 2))
    return out


def ranges_of(cuts: Sequence[int], ks: Sequence[int]) -> list[list]:
    """[[first_tokens, last_tokens or None (open-ended), K], ...]: bin i from cut i − 1 (0 for the first) to
    cut i − 1; equal neighbours merge."""
    out: list[list] = []
    for i, k in enumerate(ks):
        start = 0 if i == 0 else int(cuts[i - 1])
        end = int(cuts[i]) - 1 if i < len(cuts) else None
        if out and out[-1][2] == k:
            out[-1][1] = end
        else:
            out.append([start, end, int(k)])
    return out


def _range_words(r: list) -> str:
    return f"{r[0]:,}–{r[1]:,} tokens" if r[1] is not None else f"{r[0]:,} tokens and over"


def _chosen(verdicts: Sequence[BinVerdict]):
    """The chain option of the first confident yes, shortest bin first (None: no bin has one)."""
    for v in verdicts:
        o = v.decision.option if v.decision.says_yes else None
        if v.decision.confident and o is not None and o.tree == "chain":
            return o
    return None


def length_setting(verdicts: Sequence[BinVerdict], mix: Decision | None, engines: Sequence[str] | None = None) -> dict:
    """γ per context range for one scenario (shortest bin first), the own engine's command lines and one line per
    engine of ``engines`` (None: every engine of the catalogue) with its nearest setting (module docstring)."""
    chosen = _chosen(verdicts)
    if chosen is None:
        every_no = all(v.decision.confident and v.decision.says_no for v in verdicts)
        why = "a confident no in every bin" if every_no else "no bin has a confident yes"
        lines = [f"no length-aware setting: {why}", _own_engine_pooled(mix)]
        lines += [_engine_line(name, [], mix) for name in (engines or catalogue_engines.names())]
        return {"drafter_label": None, "levels": [], "ranges": [], "lines": lines, "notes": []}
    label = chosen.drafter_label
    levels = [
        {"context_bin": v.bin, "prompt_tokens": v.prompt_tokens, **level_entry(v.decision, label, "context length")}
        for v in verdicts
    ]
    ranges = ranges_of(thresholds(verdicts), [e["K"] for e in levels])
    lines = [_own_engine_line(chosen, ranges)]
    lines += [_engine_line(name, ranges, mix) for name in (engines or catalogue_engines.names())]
    notes = [f"{e['context_bin']}: K = {e['K']} (predicted) — {e['why']}" for e in levels if e.get("predicted")]
    if ranges[-1][2] > 0:
        notes.append(
            f"K = {ranges[-1][2]} past {verdicts[-1].longest:,} prompt tokens is unmeasured: measure the longest "
            "contexts you serve"
        )
    return {
        "drafter": chosen.drafter,
        "drafter_label": label,
        "drafter_params": chosen.drafter_params,
        "levels": levels,
        "ranges": ranges,
        "lines": lines,
        "notes": notes,
    }


def _own_engine_line(chosen, ranges: list[list]) -> str:
    """specbench's own engine: one ``--gamma`` per run, so one command line per range."""
    params = "" if chosen.drafter_params in ("", "{}") else f" (drafter parameters {chosen.drafter_params})"
    parts = [
        f"{_range_words(r)}: --drafter {chosen.drafter} --gamma {r[2]}"
        if r[2] > 0
        else f"{_range_words(r)}: --gamma 0 (no speculation)"
        for r in ranges
    ]
    return "specbench's own engine (one --gamma per run, no per-length option): " + "; ".join(parts) + params


def _own_engine_pooled(mix: Decision | None) -> str:
    """specbench's own engine when no bin is a confident yes: one γ for every length, the pooled verdict's."""
    head = "specbench's own engine (one --gamma per run, no per-length option): "
    o = mix.option if mix is not None and mix.says_yes else None
    if mix is not None and mix.confident and o is not None:
        params = "" if o.drafter_params in ("", "{}") else f" (drafter parameters {o.drafter_params})"
        return (
            f"{head}every length: --drafter {o.drafter} --gamma {o.gamma}{params}, the verdict over the sweep's mix "
            f"of lengths ({speedup_words(o.speedup, o.lo, o.hi)} adjusted)"
        )
    if mix is not None and mix.confident and mix.says_no:
        return f"{head}every length: --gamma 0 (no speculation), the verdict over the sweep's mix of lengths"
    verdict = mix.short() if mix is not None else "no verdict"
    return f"{head}no setting until a verdict is confident (over the sweep's mix of lengths: {verdict})"


def _engine_line(name: str, ranges: list[list], mix: Decision | None) -> str:
    """One engine that takes one γ at every context length: the nearest setting, in one line."""
    o = mix.option if mix is not None and mix.says_yes else None
    if mix is not None and mix.confident and o is not None:
        nearest = (
            f"γ={o.gamma} ({o.drafter_label}), the verdict over the sweep's mix of lengths "
            f"({speedup_words(o.speedup, o.lo, o.hi)} adjusted)"
        )
    elif mix is not None:
        nearest = f"the verdict over the sweep's mix of lengths: {mix.short()}"
    else:
        nearest = "no verdict over the mix of lengths"
    router = ""
    if len(ranges) > 1 and ranges[-1][2] == 0:
        router = f"; or a router rule: send prompts of {ranges[-1][0]:,} tokens or more to a pool without speculation"
    return f"{catalogue_engines.title(name)}: cannot take γ per context length; nearest: {nearest}{router}"


def threshold_bins(setting: dict) -> list[str]:
    """The bins `specbench confirm` checks a length-aware setting in, shortest first (held or missed per bin): those
    on either side of every length threshold — where K changes from one bin to the next. When K is the same at
    every length, the shortest and the longest bin: the two ends of the claim "K pays at every length measured"
    (a sweep of one bin: [], the pooled verdict is then the one to confirm)."""
    levels = setting.get("levels") or []
    sides: list[str] = []
    for shorter, longer in zip(levels, levels[1:]):
        if shorter["K"] != longer["K"]:
            sides += [b for b in (shorter["context_bin"], longer["context_bin"]) if b not in sides]
    if not sides and len(levels) >= 2:
        sides = [levels[0]["context_bin"], levels[-1]["context_bin"]]
    return sides
