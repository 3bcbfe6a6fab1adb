"""Which option: one within a tolerance ε of the best option's speedup, with probability at least 1 − δ.

A verdict answers two questions. The *direction* — does speculation pay here? — is `three_way`'s answer over
each option's speedup against the target alone. The *choice* — which option? — is settled here, by comparing
the options with each other, paired on the same prompts, never only each against the baseline.

**Paired ratios.** For options i and j on the prompts both ran, the ratio of their tokens/s

    R_ij = (Σ_p t_ip ÷ Σ_p s_ip) ÷ (Σ_p t_jp ÷ Σ_p s_jp)

(t: tokens, s: seconds of prompt p; the baseline cancels) has the log-scale t standard error of
`specbench.analysis.statistics.speedup_interval` with j as the reference (per-prompt log-ratio contributions, P − 1
degrees of freedom). With predicted evidence (acceptance replayed × a cost model) the cost part is added: the
spread of log R_ij when the cost model is refitted on each calibration prompt alone (se = sd ÷ √Q, Q − 1 df;
Welch–Satterthwaite). Replay gives every γ's acceptance on the same trajectory and a γ's cost moves smoothly
with γ, so the prompt-to-prompt spread that dominates each option's ratio against the baseline cancels in R_ij:
these intervals are several times narrower than the ones against the baseline.

**The rule** (multiple comparisons with the best, in its Bonferroni form). With K options, the one-sided level
p is the per-look level of a test of size δ ÷ (K − 1) over the planned looks (`LookPlan.nominal_level`: a Pocock
boundary, so every look uses the same rule), and the lower end of each ratio is

    L_ij = log R̂_ij − t_{ν_ij}(1 − p) · se_ij.

* option i is **certified** — within ε of the best — when L_ij > log(1 − ε) for every other option j in the race;
* option j **leaves the race** when L_ij > −log(1 − ε) for some option i: it is confidently more than ε behind i;
* the **choice is settled** when some option is certified. The certified options are the ε-equivalent set (the
  flat range: "γ 3–5 within 5 % of the best"), and the pick is the one whose weakest comparison is strongest,
  the largest min_j L_ij (ties: the highest point estimate). Any of them carries the guarantee; the margin is
  what a confirmation on fresh prompts tests again (its contenders against the pick), while inside a flat range
  the highest point estimate is mostly the noise of the prompts measured — on fresh prompts that argmax falls back
  towards its neighbours, and a pick at the edge of the range is the one a neighbour most often edges.

**Why it holds.** Let b be the truly best option and E the event that every comparison with b keeps its lower
end: log R_jb ≥ L_jb for all j ≠ b. Each of these K − 1 one-sided statements fails with probability at most p,
so P(E) ≥ 1 − δ, whichever option is best and however the options are correlated. On E:

* b never leaves the race: that needs L_ib > −log(1 − ε) ≥ 0 for some i, hence R_ib > 1, impossible for the best;
* a certified i ≠ b has L_ib > log(1 − ε) and log R_ib ≥ L_ib, so S_i ≥ (1 − ε) · S_b.

So every certified option, however it was picked and at whichever look, is within ε of the best with
probability ≥ 1 − δ; certifying against the options still in the race suffices, since b stays in it.
docs/fit.md ("The choice") shows the rates by simulation with known truths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from specbench.analysis.statistics.paired_ratio import Aligned, PerPrompt, Ratio
from specbench.analysis.statistics.sequential import LookPlan, prompts_to_settle
from specbench.analysis.statistics.speedup_interval import speedup_words

TOLERANCE = 0.05  # ε: the chosen option's speedup is at least (1 − ε) × the best option's
NAN = float("nan")


@dataclass
class Choice:
    """The settled (or open) choice among a scenario's options. Keys are `Candidate.key` tuples."""

    tolerance: float
    delta: float
    configurations: int  # K: the options compared
    level: float  # p: the one-sided level of each comparison
    settled: bool
    chosen: tuple | None  # the pick: the certified option with the largest margin min_j L_ij
    leader: tuple | None  # the highest point estimate in the race (the pick while the choice is open)
    equivalent: list[tuple] = field(default_factory=list)  # certified: within ε of the best
    race: list[tuple] = field(default_factory=list)  # not confidently more than ε behind any option
    behind: list[tuple] = field(default_factory=list)  # confidently more than ε behind some option
    prompts_needed: int | None = None  # prompts that would settle an open choice at the observed spread
    open_against: str | None = None  # the option whose comparison keeps the choice open
    n_prompts: int = 0
    text: str = ""

    def as_dict(self) -> dict:
        return {
            "tolerance": self.tolerance,
            "delta": self.delta,
            "configurations": self.configurations,
            "level": self.level,
            "settled": self.settled,
            "chosen": _key_dict(self.chosen),
            "leader": _key_dict(self.leader),
            "equivalent": [_key_dict(k) for k in self.equivalent],
            "race": [_key_dict(k) for k in self.race],
            "behind": [_key_dict(k) for k in self.behind],
            "prompts_needed": self.prompts_needed,
            "open_against": self.open_against,
            "n_prompts": self.n_prompts,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data) -> Choice | None:
        if not isinstance(data, dict):
            return None
        return cls(
            float(data.get("tolerance") or TOLERANCE),
            float(data.get("delta") or 0.05),
            int(data.get("configurations") or 0),
            float(data.get("level") or NAN),
            bool(data.get("settled")),
            _key_of(data.get("chosen")),
            _key_of(data.get("leader")),
            [k for k in map(_key_of, data.get("equivalent") or []) if k is not None],
            [k for k in map(_key_of, data.get("race") or []) if k is not None],
            [k for k in map(_key_of, data.get("behind") or []) if k is not None],
            data.get("prompts_needed"),
            data.get("open_against"),
            int(data.get("n_prompts") or 0),
            str(data.get("text") or ""),
        )


_KEY_FIELDS = ("drafter_label", "tree", "gamma", "schedule")


def _key_dict(key: tuple | None) -> dict | None:
    return None if key is None else dict(zip(_KEY_FIELDS, key))


def _key_of(data) -> tuple | None:
    if not isinstance(data, dict):
        return None
    return tuple(data.get(k) for k in _KEY_FIELDS)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def choose(
    candidates: list,
    samples: dict[tuple, PerPrompt],
    plan: LookPlan,
    tolerance: float = TOLERANCE,
    out_of_race: set[tuple] | None = None,
) -> Choice | None:
    """The choice among ``candidates`` (`Candidate`s with a point estimate; their ``key`` indexes ``samples``)
    under ``plan``'s looks: certified set, race, pick (module docstring). None without two options to compare
    (one option is its own choice). ``out_of_race``: options an earlier look took out of the race (kept out)."""
    named = {c.key: c for c in candidates if c.key in samples and c.has_point}
    keys = sorted(named, key=lambda k: -named[k].speedup)
    if len(keys) < 2:
        return None
    k = len(keys)
    delta = plan.alpha
    p = plan.nominal_level(delta / (k - 1))
    quantile = _quantile(p)
    aligned = Aligned.of([samples[key] for key in keys])
    ratios = {(i, j): aligned.ratio(a, b) for a, i in enumerate(keys) for b, j in enumerate(keys) if a != b}
    lower = {pair: r.lower(quantile) for pair, r in ratios.items()}
    far = -math.log(1.0 - tolerance)  # "more than ε behind": log R above this
    behind = [j for j in keys if any(lower[(i, j)] > far for i in keys if i != j)]
    behind += [j for j in keys if out_of_race and j in out_of_race and j not in behind]
    race = [j for j in keys if j not in behind]
    near = math.log(1.0 - tolerance)  # "within ε of": log R above this
    certified = [i for i in race if all(lower[(i, j)] > near for j in race if j != i)]
    leader = race[0] if race else keys[0]
    chosen = max(certified, key=lambda i: _margin(i, race, lower), default=None)  # max() keeps the first of ties
    n_prompts = max((r.n_prompts for r in ratios.values()), default=0)
    choice = Choice(
        tolerance, delta, k, p, bool(certified), chosen, leader, certified, race, behind, n_prompts=n_prompts
    )
    if not certified:
        choice.prompts_needed, choice.open_against = _to_settle(leader, race, ratios, lower, near, quantile, named)
    choice.text = choice_text(choice, named)
    return choice


def _margin(option: tuple, race: list[tuple], lower: dict) -> float:
    """min_j L_ij over the other options in the race: how surely ``option`` lies within reach of each of them (the
    pick maximises it; +inf when no other option is left in the race)."""
    return min((lower[(option, j)] for j in race if j != option), default=math.inf)


def _quantile(p: float):
    def at(dof: float) -> float:
        if not np.isfinite(dof) or dof > 1e6:
            return float(stats.norm.isf(p))
        return float(stats.t.isf(p, dof)) if dof > 0 else math.inf

    return at


def _to_settle(leader, race, ratios, lower, near, quantile, named) -> tuple[int | None, str | None]:
    """(prompts at which the leader would be certified against every option in the race at the observed
    per-prompt spreads, the option whose comparison is furthest from it)."""
    needed, worst, worst_gap = 0, None, math.inf
    for j in race:
        if j == leader:
            continue
        r = ratios[(leader, j)]
        gap = lower[(leader, j)] - near
        if gap < worst_gap:
            worst, worst_gap = j, gap
        if gap > 0:
            continue
        if not r.usable:
            return None, named[j].describe()
        effect = math.log(r.point) - near  # > 0: the leader's estimate is at least the others'
        n = prompts_to_settle(math.exp(effect), r.log_se, max(r.n_prompts, 2), quantile)
        if n is None:
            return None, named[j].describe()
        needed = max(needed, n)
    return (needed or None), (None if worst is None else named[worst].describe())


def choice_text(choice: Choice, named: dict) -> str:
    """'γ 3–5 within 5 % of the best (paired on 16 prompts, δ 5 %)', or what keeps the choice open."""
    eps = f"{choice.tolerance * 100:.0f} %"
    paired = f"paired on {choice.n_prompts} prompts, {choice.configurations} options, δ {choice.delta * 100:.0f} %"
    if choice.settled:
        return f"{span(choice.equivalent, named)} within {eps} of the best ({paired})"
    leader = named[choice.leader].describe() if choice.leader in named else "none"
    still = span(choice.race, named)
    settle = (
        f"about {choice.prompts_needed} prompts would settle it"
        if choice.prompts_needed
        else "no practical number of prompts would settle it"
    )
    against = f" (against {choice.open_against})" if choice.open_against else ""
    return f"choice not settled: {still} still in the race, best so far {leader}{against}; {settle} ({paired})"


def span(keys: list[tuple], named: dict) -> str:
    """The options as few words: 'γ 3–5' for one drafter's chain, else their names."""
    groups: dict[tuple, list[int]] = {}
    for key in keys:
        label, tree, gamma, schedule = key
        groups.setdefault((label, tree, schedule), []).append(int(gamma or 0))
    if len(groups) == 1:
        (label, tree, schedule), gammas = next(iter(groups.items()))
        head = named[keys[0]].describe().rsplit(" γ=", 1)[0] if keys and keys[0] in named else str(label)
        if schedule not in (None, "fixed"):
            return ", ".join(named[k].describe() for k in keys if k in named)
        return f"{head} {gamma_span(gammas)}"
    return ", ".join(named[k].describe() for k in keys if k in named)


def gamma_span(gammas: list[int]) -> str:
    """'γ 2–4' for a run, 'γ 2, 3, 5' otherwise, 'γ 2' for one."""
    gammas = sorted(set(int(g) for g in gammas))
    if len(gammas) > 1 and gammas == list(range(gammas[0], gammas[-1] + 1)):
        return f"γ {gammas[0]}–{gammas[-1]}"
    return "γ " + ", ".join(str(g) for g in gammas)


def ratio_words(ratio: Ratio, quantile) -> str:
    """'1.04× [0.99, 1.09]' for a paired ratio at ``quantile``'s two one-sided ends."""
    if not ratio.usable:
        return speedup_words(ratio.point, NAN, NAN)
    half = quantile(ratio.dof) * ratio.log_se
    return speedup_words(ratio.point, ratio.point * math.exp(-half), ratio.point * math.exp(half))
