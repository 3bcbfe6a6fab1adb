"""`specbench confirm RESULTS`: the recommendation run again, as a deployment would run it, on prompts the sweep
never used — a second policy the runner drives (`specbench.measure.run.policy`).

Planning (`plan_confirmation`, no model loaded):

1. the sweep's verdicts are recomputed from RESULTS the way `recommend` computes them (its planned looks
   included); every scenario with a confident verdict becomes a *target*: its prediction
   (`specbench.analysis.recommendation.confirmation.Prediction`) and its arms — the baseline, the configuration the verdict
   named (a *no* names its best one, to be measured below 1), and the contenders: the adaptive mechanisms
   the backend's registry entry declares for that drafter and γ (`specbench.backends.registry.Mechanism`;
   an absent one is a line saying why), and the other static γ the sweep's measured and model paths named;
2. each target's workload gets *fresh prompts*: every prompt of its split that is neither in the sweep's
   records nor in the sweep's own sample (its pool), in an order seeded by ``--seed`` (their ids are kept
   in ``confirm.json``); a workload with none left is one line with the counts;
3. the arms become the confirmation's configurations: the sweep's own `RunConfig` for the verdict's
   configuration, with the mechanism's schedule (γ its cap) or the other γ, on the same backend, model and
   engine settings, mode live, under the sweep's timing protocol.

Running (`ConfirmPolicy`): looks of fresh prompts per target (``first``, then ``batch`` more, up to
``max_prompts``, planned before any data), all open targets' looks in one round of the runner; after each
look the target is judged on its records so far (`specbench.analysis.recommendation.confirmation.judge`); it stops when
its prediction is settled (held or missed) and its regret is settled, when its fresh prompts run out, or
when the budget is spent; contenders confidently behind the reference leave the race. Records go to
``RESULTS/confirm/`` (a results folder of its own, with ``confirm.json`` beside its records); a killed
confirmation resumes with the same command: the plan is a function of RESULTS and the settings, the
looks' verdicts a function of the records.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.analysis.context.setting import threshold_bins
from specbench.analysis.context.summary import context_summary, has_context_axis
from specbench.analysis.context.verdicts import base_workload, scenario_of
from specbench.analysis.context_bins import BIN
from specbench.analysis.load.table import axis_of, has_load_axis, load_label, normalised, serving_table
from specbench.analysis.load.verdicts import summary as load_summary
from specbench.analysis.recommendation.confirm_compare import threshold_loads
from specbench.analysis.recommendation.confirm_report import (
    CONFIRM_DIR,
    LookResult,
    Report,
    TargetLooks,
    load_report,
    write_report,
)
from specbench.analysis.recommendation.confirm_targets import (
    BASELINE,
    CONTENDER,
    PREDICTED,
    RECOMMENDED,
    Arm,
    Prediction,
    Target,
    plan_hash,
)
from specbench.analysis.recommendation.confirmation import STATIC, judge
from specbench.analysis.recommendation.recommend import recommend
from specbench.analysis.verdicts.status import DECIDED, EXHAUSTED
from specbench.analysis.verdicts.stopping_history import load_history
from specbench.backends.registry import adaptive_mechanisms
from specbench.bounds import MAX_PROMPTS
from specbench.engine.strategies.schedule import ScheduleSpec, batch_size_schedule
from specbench.errors import SpecbenchError
from specbench.measure.grid.adaptive import AdaptivePlan
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.sweep_spec import RunConfig, SweepSpec
from specbench.measure.grid.units import Unit, load_workloads
from specbench.measure.run.looks import LookEngine
from specbench.records.store import load_records, load_run_info
from specbench.records.summary import BASELINE_KEYS
from specbench.workloads.catalog import Workload, load_workload, resolve_spec
from specbench.workloads.stream import StreamSpec, stream_prompts


@dataclass(frozen=True)
class ConfirmSettings:
    """How a confirmation measures: its looks (prompts per target), budget and the seed of the fresh draw."""

    first: int = 4
    batch: int = 4
    max_prompts: int = 48
    budget_s: float | None = 900.0
    seed: int = 0
    workloads: tuple[str, ...] = ()  # only these workloads (empty: every decided one)
    tolerance: float | None = None  # ε of the regret (None: the sweep's own tolerance)

    def looks(self, available: int, in_flight: int = 1) -> tuple[int, ...]:
        """Prompts per look, planned before any data: first, first + batch, ... up to the cap (or what there is).
        At ``in_flight`` requests a look takes at least that many new prompts (a serving batch is one look's
        prompts of a workload turn: fewer would never reach the load)."""
        cap = min(max(self.max_prompts, in_flight), available)
        if cap < 1:
            return ()
        first, batch = max(self.first, in_flight), max(self.batch, in_flight)
        out = list(range(min(first, cap), cap + 1, batch))
        if out[-1] != cap:
            out.append(cap)
        return tuple(out)

    def as_dict(self) -> dict:
        return {
            "first": self.first,
            "batch": self.batch,
            "max_prompts": self.max_prompts,
            "budget_s": self.budget_s,
            "seed": self.seed,
            "workloads": list(self.workloads),
            "tolerance": self.tolerance,
        }


@dataclass
class ConfirmationPlan:
    """What `specbench confirm` runs, decided before any model loads (`--dry-run` prints it)."""

    results: Path
    spec: SweepSpec  # the confirmation's spec: the sweep's, live, with the arms as its configurations
    targets: list[Target]
    configs: dict[tuple[str, str], RunConfig]  # (target name, arm name) → the configuration that runs it
    workloads: dict[str, Workload]  # workload → its fresh prompts
    settings: ConfirmSettings
    notes: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.results / CONFIRM_DIR

    @property
    def tolerance(self) -> float:
        """ε of the regret: the flag's, else the sweep's (what its choice was settled with)."""
        return self.spec.tolerance if self.settings.tolerance is None else self.settings.tolerance

    @property
    def prompt_ids(self) -> dict[str, list[str]]:
        return {name: [p.prompt_id for p in w.prompts] for name, w in self.workloads.items()}

    @property
    def hash(self) -> str:
        """What is measured, not for how long: the same command with a larger ``--budget`` continues the looks."""
        what = {k: v for k, v in self.settings.as_dict().items() if k not in ("budget_s", "tolerance")}
        return plan_hash(self.targets, self.prompt_ids, what)

    def looks(self, target: Target) -> tuple[int, ...]:
        """A target's planned looks; a stream runs whole, in one look (its shifts need every segment)."""
        prompts = self.workloads[target.workload].prompts
        if prompts and prompts[0].stream_position is not None:
            return (len(prompts),)
        return self.settings.looks(len(prompts), target.concurrency)

    def report(self) -> Report:
        """The empty report this plan starts from."""
        info = {"folder": str(self.results), "name": self.spec.name, "spec_hash": self.spec.spec_hash}
        targets = {t.name: TargetLooks(t, self.prompt_ids[t.workload], self.looks(t)) for t in self.targets}
        return Report(info, self.settings.as_dict(), self.hash, targets, list(self.notes), list(self.absent))


# ----------------------------------------------------------------------------- planning


def plan_confirmation(results: str | Path, settings: ConfirmSettings = ConfirmSettings()) -> ConfirmationPlan:
    """The targets, arms and fresh prompts that confirm RESULTS' recommendation (module docstring)."""
    results = Path(results)
    info = load_run_info(results)
    if info.get("kind") not in (None, "sweep") or not isinstance(info.get("sweep"), dict):
        raise SpecbenchError(f"{results} holds no sweep to confirm (run.json kind {info.get('kind')!r})")
    # the sweep as it ran (an adaptive sweep's pool is its first max_prompts of each workload: prompts a resumed
    # sweep would still take, never fresh) and as the confirmation runs it (live, looks of its own)
    sweep = build_spec(
        {k: v for k, v in info["sweep"].items() if k not in ("adaptive", "calibration", "mode")}, f"{results}/run.json"
    )
    stored = info["sweep"].get("adaptive")  # run.json keeps the plan as resolved (to_dict)
    swept = replace(sweep, adaptive=AdaptivePlan.from_dict(stored) if stored else None)
    records = load_records(results)
    if records.empty:
        raise SpecbenchError(f"{results} has no records: run the sweep first")
    history = load_history(results)
    recs = recommend(records, n_boot=0, plans=history.plans() if history else None, tolerance=sweep.tolerance)
    notes: list[str] = []
    absent: list[str] = []
    configs: dict[tuple, RunConfig] = {}
    targets: list[Target] = []
    axis = axis_of(normalised(records)) if has_load_axis(records) else None
    for rec in recs:
        workload = str(rec.keys["workload"])
        if settings.workloads and workload not in settings.workloads:
            continue
        if rec.decision is None:
            continue
        prediction = Prediction.of(rec.decision)
        if prediction is None:
            where = workload if axis is None else f"{workload} at {load_label(axis, float(rec.keys[axis]))}"
            notes.append(f"{where}: nothing to confirm — the sweep's verdict is not confident ({rec.decision.short()})")
            continue
        target = _target(rec, prediction, sweep, configs, absent)
        if target is not None:
            targets.append(target)
    loads = _load_targets(records, recs, sweep, configs, absent)
    targets = [t for t in targets if t.workload not in {x.workload for x in loads}] + loads
    lengths = _context_targets(records, recs, sweep, configs, absent, history, settings)
    targets = [t for t in targets if t.workload not in {base_workload(x.workload) for x in lengths}] + lengths
    unknown = set(settings.workloads) - {str(r.keys["workload"]) for r in recs}
    if unknown:
        raise SpecbenchError(
            f"--workload {', '.join(sorted(unknown))}: not in {results} "
            f"(its workloads: {', '.join(sorted({str(r.keys['workload']) for r in recs}))})"
        )
    workloads = fresh_workloads(swept, records, {t.workload for t in targets}, settings, notes)
    targets = [t for t in targets if t.workload in workloads]
    spec = replace(
        sweep,
        name=f"{sweep.name}-confirm",
        mode="live",
        calibration=None,
        adaptive=None,
        configs=list(dict.fromkeys(configs[(t.name, arm.name)] for t in targets for arm in t.arms)),
    )
    return ConfirmationPlan(results, spec, targets, configs, workloads, settings, notes, list(dict.fromkeys(absent)))


def _target(
    rec, prediction: Prediction | None, sweep: SweepSpec, configs: dict, absent: list[str], workload: str | None = None
) -> Target | None:
    """The arms of one verdict: baseline, its configuration, the contenders (``workload``: the name its fresh
    prompts come under, default the verdict's workload)."""
    decision = rec.decision
    keys = rec.keys
    sampled = [
        c
        for c in sweep.configs
        if (c.temperature, c.top_p, c.top_k) == (keys["temperature"], keys["top_p"], keys["top_k"])
    ]
    baseline = next((c for c in sampled if c.is_baseline), None)
    best = decision.best
    chosen = _config_for(sampled, best.drafter_label, best.tree, best.gamma, best.schedule)
    if baseline is None or chosen is None:
        return None
    role = RECOMMENDED if decision.says_yes else PREDICTED
    arms = [_arm(baseline, BASELINE), _arm(chosen, role)]
    if chosen.tree == "chain" and chosen.schedule.is_fixed and chosen.drafter is not None:
        for mechanism in adaptive_mechanisms(sweep.backend, sweep.backend_options, chosen.drafter.type, chosen.gamma):
            if mechanism.schedule is None:  # absent here: its line says why
                absent.append(f"{mechanism.name}: {mechanism.absent}")
                continue
            config = replace(chosen, schedule=ScheduleSpec(mechanism.schedule, mechanism.params))
            arms.append(_arm(config, CONTENDER, f"the engine's {mechanism.name}"))
        for path, pick in (("measured", rec.measured), ("model", rec.model)):
            option = None if pick is None else pick.best
            if option is None or option.drafter_label != chosen.drafter_label or option.tree != "chain":
                continue
            if option.gamma == chosen.gamma or any(a.gamma == option.gamma and a.schedule == "fixed" for a, _ in arms):
                continue
            config = replace(chosen, gamma=int(option.gamma))
            arms.append(_arm(config, CONTENDER, f"the sweep's {path} path's best γ"))
    target = Target(
        workload or str(keys["workload"]),
        int(keys.get("concurrency", 1) or 1),
        prediction,
        tuple(arm for arm, _ in arms),
        float(keys["temperature"]),
    )
    configs.update({(target.name, arm.name): config for arm, config in arms})
    return target


def _load_targets(records: pd.DataFrame, recs: list, sweep: SweepSpec, configs: dict, absent: list[str]) -> list:
    """A serving sweep over requests in flight whose verdicts built vLLM's per-batch-size schedule: per schedule, one
    target per load on either side of each threshold (`threshold_loads`), running the schedule (the
    recommendation), the best static γ, and the engine's adaptive K alone and with the schedule where it has one.
    Empty without such a schedule (each load is then a target of its own, as its verdict says)."""
    if not has_load_axis(records) or axis_of(normalised(records)) != "concurrency":
        return []
    summary = load_summary(records, recs, n_boot=0)
    table = serving_table(records, n_boot=0)
    by_load = {(v.workload, v.keys["temperature"], v.concurrency): v for v in summary["verdicts"]}
    out = []
    for plan in summary["schedules"]:
        ranges = [(int(lo), int(hi), int(k)) for lo, hi, k in plan["ranges"]]
        sampled = [c for c in sweep.configs if c.temperature == plan["temperature"]]
        baseline = next((c for c in sampled if c.is_baseline), None)
        drafter = next(
            (
                c
                for c in sampled
                if c.drafter_label == plan["drafter_label"] and c.tree == "chain" and c.schedule.is_fixed
            ),
            None,
        )
        top = max(k for _, _, k in ranges)
        if baseline is None or drafter is None or drafter.drafter is None or top < 1:  # drafter: a drafter's label
            continue
        schedule = replace(drafter, gamma=top, schedule=batch_size_schedule(ranges))
        static = replace(drafter, gamma=best_static_gamma(table, plan["workload"], plan["drafter_label"]))
        arms = [
            _arm(baseline, BASELINE),
            _arm(schedule, RECOMMENDED, "the per-batch-size schedule the verdicts built"),
            _arm(static, CONTENDER, STATIC),
        ]
        for mechanism in adaptive_mechanisms(sweep.backend, sweep.backend_options, drafter.drafter.type, top):
            if mechanism.schedule is None:  # absent here: its line says why
                absent.append(f"{mechanism.name}: {mechanism.absent}")
                absent.append(f"{mechanism.name} with the per-batch-size schedule: absent with it")
                continue
            alone = replace(drafter, gamma=top, schedule=ScheduleSpec(mechanism.schedule, mechanism.params))
            both = replace(drafter, gamma=top, schedule=batch_size_schedule(ranges, adaptive=True))
            arms += [
                _arm(alone, CONTENDER, f"the engine's {mechanism.name}"),
                _arm(both, CONTENDER, f"the schedule with the engine's {mechanism.name}"),
            ]
        for load in threshold_loads(ranges):
            verdict = by_load.get((plan["workload"], plan["temperature"], load))
            prediction = Prediction.of(verdict.decision) if verdict is not None and verdict.option is not None else None
            target = Target(
                str(plan["workload"]),
                load,
                prediction,
                tuple(a for a, _ in arms),
                float(plan["temperature"]),
                tuple(ranges),
            )
            configs.update({(target.name, arm.name): config for arm, config in arms})
            out.append(target)
    return out


def _context_targets(records, recs, sweep, configs, absent, history, settings) -> list[Target]:
    """Records spanning two or more context-length bins (`specbench.analysis.context.setting`): one target per bin
    on either side of each length threshold of the length-aware setting — or, where one K holds at every length,
    the shortest and the longest bin (`threshold_bins`) — its prediction that bin's verdict, its fresh prompts
    that bin's (the workload named ``<workload>:bin=<bin>``). Empty for one bin (the pooled verdict is then the
    target, as for one length)."""
    if not has_context_axis(records):
        return []
    plans = history.plans() if history else None
    by_bin = recommend(records, n_boot=0, plans=plans, tolerance=sweep.tolerance, by_context=True)
    out = []
    for entry in context_summary(records, by_bin, recs, n_boot=0):
        if settings.workloads and entry["workload"] not in settings.workloads:
            continue
        sides = threshold_bins(entry["setting"])
        for rec in by_bin:
            if rec.decision is None or rec.keys.get(BIN) not in sides:
                continue
            if [str(v) for v in scenario_of(rec.keys)] != [str(entry[k]) for k in BASELINE_KEYS]:
                continue
            where = f"{entry['workload']}:bin={rec.keys[BIN]}"
            target = _target(rec, Prediction.of(rec.decision), sweep, configs, absent, workload=where)
            if target is not None:
                out.append(target)
    return out


def best_static_gamma(table: pd.DataFrame, workload: str, label: str) -> int:
    """The static γ a deployment without a schedule would pick: the highest geometric-mean system speedup over the
    sweep's loads (ties: the smaller γ)."""
    rows = table[(table["workload"] == workload) & (table["drafter_label"] == label) & (table["gamma"] > 0)]
    rows = rows[rows["system_speedup"] > 0]
    if rows.empty:
        return int(table[(table["drafter_label"] == label)]["gamma"].max())
    score = rows.groupby("gamma")["system_speedup"].apply(lambda x: float(np.exp(np.log(x).mean())))
    return int(score.sort_index().idxmax())


def _config_for(configs: list[RunConfig], label, tree, gamma, schedule) -> RunConfig | None:
    """The sweep's configuration with this drafter label, tree, γ and schedule — or, for a γ the sweep did not
    run (the model path predicts beyond the grid), its drafter's at that γ."""
    schedule = schedule if isinstance(schedule, str) else "fixed"
    same = [c for c in configs if not c.is_baseline and c.drafter_label == label and c.tree == tree]
    exact = [c for c in same if c.gamma == gamma and c.schedule.label == schedule]
    if exact:
        return exact[0]
    fixed = [c for c in same if c.schedule.is_fixed]
    return replace(fixed[0], gamma=int(gamma)) if fixed and gamma else None


def _name(config: RunConfig) -> str:
    if config.is_baseline:
        return "target only"
    tree = "" if config.tree == "chain" else f" tree {config.tree}"
    if config.schedule.is_fixed:
        return f"{config.drafter_label}{tree} γ={config.gamma}"
    return f"{config.drafter_label}{tree} {config.schedule.label} γ≤{config.gamma}"


def _arm(config: RunConfig, role: str, why: str = "") -> tuple[Arm, RunConfig]:
    arm = Arm(
        _name(config),
        role,
        config.drafter.type if config.drafter else "none",
        config.drafter.params_json if config.drafter else "{}",
        config.drafter_label,
        config.tree,
        int(config.gamma),
        config.schedule.label,
        why,
    )
    return arm, config


# ----------------------------------------------------------------------------- fresh prompts


def fresh_workloads(
    sweep: SweepSpec, records: pd.DataFrame, names: set[str], settings: ConfirmSettings, notes: list[str]
) -> dict[str, Workload]:
    """Per workload: the prompts of its split the sweep never used — neither measured (``records``) nor in the pool
    ``sweep`` draws from (its ``count``; an adaptive sweep's first ``max_prompts``) — in the confirmation's seeded
    order, cut to ``max_prompts``; a workload with none left is a note with the counts (and is not confirmed)."""
    out: dict[str, Workload] = {}
    for choice, pool in zip(sweep.workloads, load_workloads(sweep)):  # a choice may name a source: its pool, the name
        # the pool's own name, and the bins of it a length threshold confirms (`_context_targets`: '<workload>:bin=4k')
        base = base_workload(pool.name)
        for name in [pool.name] + sorted(n for n in names if n.startswith(f"{base}:bin=") and n != pool.name):
            if name not in names or name in out:
                continue
            if name == pool.name:
                source, used = choice.name, records["workload"] == name
            else:  # the bin's fresh prompts: never in the sweep under any of the workload's names
                source, used = (
                    f"{base_workload(choice.name)}{name[len(base) :]}",
                    records["workload"].map(base_workload) == base,
                )
            used_ids = set(records.loc[used, "prompt_id"].astype(str)) | {p.prompt_id for p in pool.prompts}
            _fresh_one(out, name, source, choice.split, used_ids, settings, notes)
    return out


def _fresh_one(out: dict, name: str, source: str, split: str, used: set[str], settings, notes: list[str]) -> None:
    """``out[name]``: the fresh prompts of workload ``source`` never in ``used``; a note when none or few are left."""
    workload, total = fresh_prompts(source, split, used, settings.seed, settings.max_prompts)
    if not workload.prompts:
        notes.append(
            f"{name}: no fresh prompts left — all {total} prompts of its '{split}' split "
            f"were in the sweep ({len(used)} used); nothing to confirm"
        )
        return
    if len(workload.prompts) < settings.max_prompts and workload.prompts[0].stream_position is None:
        notes.append(
            f"{name}: {len(workload.prompts)} fresh prompts of {total} in its '{split}' split ({len(used)} were in the sweep)"
        )
    out[name] = workload


def draw_fresh(prompts: list, used: set[str], seed: int, limit: int) -> list:
    """At most ``limit`` of ``prompts`` whose ids are not in ``used``, in an order seeded by ``seed`` and
    independent of the sweep's sample order (a seeded hash of each id): growing ``limit`` extends the draw."""
    fresh = {p.prompt_id: p for p in prompts if p.prompt_id not in used}
    order = sorted(fresh, key=lambda i: hashlib.sha256(f"confirm:{seed}:{i}".encode()).digest())
    return [fresh[i] for i in order[: max(limit, 0)]]


def fresh_prompts(name: str, split: str, used: set[str], seed: int, limit: int) -> tuple[Workload, int]:
    """(the workload cut to at most ``limit`` prompts never in ``used``, the split's prompt count). A stream
    workload keeps its segments, each drawn fresh from its own workload."""
    spec = resolve_spec(name)
    if isinstance(spec, StreamSpec):
        return _fresh_stream(spec, split, used, seed)
    whole = load_workload(name, count=MAX_PROMPTS, seed=seed, split=split)
    return replace(whole, prompts=draw_fresh(whole.prompts, used, seed, limit)), len(whole.prompts)


def _fresh_stream(spec: StreamSpec, split: str, used: set[str], seed: int) -> tuple[Workload, int]:
    """A stream of the same segments, each segment's prompts fresh from its workload (in stream order)."""
    totals: dict[str, int] = {}

    def load(segment: str, *, count: int, seed: int | None, split: str) -> Workload:
        whole = load_workload(segment, count=MAX_PROMPTS, seed=seed, split=split)
        totals[segment] = len(whole.prompts)
        return replace(whole, prompts=draw_fresh(whole.prompts, used, seed or 0, count))

    try:
        prompts, source = stream_prompts(spec, None, seed, split, load)
    except SpecbenchError:  # a segment's workload has too few fresh prompts
        return Workload(spec.name, spec.description, "stream", True, spec.max_new_tokens, []), sum(totals.values())
    return (Workload(spec.name, spec.description, source, True, spec.max_new_tokens, prompts), sum(totals.values()))


# ----------------------------------------------------------------------------- running


class ConfirmLooks:
    """The confirmation's rule for the look engine (`specbench.measure.run.looks.LookRule`): a target's looks of
    fresh prompts and their units, its judgement after each look (held / missed, regret), ``confirm.json``."""

    def __init__(self, plan: ConfirmationPlan, folder: Path):
        self.plan, self.folder = plan, Path(folder)
        self.report = plan.report()
        previous = load_report(plan.results)
        if previous is not None and previous.plan_hash == self.report.plan_hash:
            self.report.elapsed_s = previous.elapsed_s
            for name, state in self.report.targets.items():
                if name in previous.targets:
                    state.seconds = previous.targets[name].seconds
        self.elapsed_s = self.report.elapsed_s
        self.budget_s = plan.settings.budget_s
        self.states = self.report.targets
        self.units = [u for state in self.states.values() for u in self.units_for(state, len(state.planned))]

    def units_for(self, state: TargetLooks, look: int) -> list[Unit]:
        """Every unit of ``state``'s looks up to ``look`` (earlier looks' are finished: the runner skips them),
        prompt by prompt, the baseline first in each prompt turn; contenders out of the race are left out."""
        if look < 1:
            return []
        target = state.target
        workload = self.plan.workloads[target.workload]
        spec = self.plan.spec
        arms = [a for a in target.arms if a.name not in state.dropped]
        units: list[Unit] = []
        for position, prompt in enumerate(workload.prompts[: state.planned[look - 1]]):
            stage = next(k for k, n in enumerate(state.planned, start=1) if position < n)
            for turn in range(1, len(prompt.turns) + 1):
                units.extend(
                    Unit(
                        self.plan.configs[(target.name, arm.name)],
                        workload,
                        prompt,
                        turn,
                        0,
                        spec.max_new_tokens_for(workload),
                        spec.seed,
                        concurrency=target.concurrency,
                        backend=spec.backend,
                        stage=stage,
                    )
                    for arm in arms
                )
        return units

    def resumed(self, budget_spent: bool) -> None:
        """Nothing beyond the looks: the seconds came back with the saved report."""

    def judge(self, state: TargetLooks, records: pd.DataFrame, elapsed_s: float) -> None:
        look = state.look + 1
        mine = records[records["stage"].notna() & (records["stage"].astype(int) <= look)]
        mine = mine[mine["prompt_id"].astype(str).isin(set(state.prompts[: state.planned[look - 1]]))]
        result = judge(mine, state.target, state.plan, self.plan.tolerance)
        state.looks.append(LookResult(look, state.planned[look - 1], state.seconds, elapsed_s, result))
        behind = [c.arm for c in result.regret.contenders if c.has_interval and not c.disturbed and c.hi < 1.0]
        state.dropped = list(dict.fromkeys([*state.dropped, *behind]))
        if result.settled:
            state.status = DECIDED
        elif look >= len(state.planned):
            state.status = EXHAUSTED

    def save(self, elapsed_s: float, finished: bool) -> None:
        self.elapsed_s = self.report.elapsed_s = elapsed_s
        self.report.finished = self.report.finished or finished
        write_report(self.folder, self.report)

    def lines(self) -> list[str]:
        return self.report.lines()

    def title(self, name: str, state: TargetLooks) -> str:
        return f"confirm: {name} look {state.look + 1} ({state.planned[state.look]} fresh prompts)"


class ConfirmPolicy(LookEngine):
    """Looks of fresh prompts per target until each is settled: the look engine running `ConfirmLooks`."""

    def __init__(self, plan: ConfirmationPlan, folder: Path):
        looks = ConfirmLooks(plan, folder)
        super().__init__(looks)
        self.report = looks.report


def policy_for(plan: ConfirmationPlan):
    """The runner's ``policy`` argument for ``plan`` (built once the runner has its folder)."""
    return lambda spec, workloads, shard, folder: ConfirmPolicy(plan, folder)


__all__ = [
    "draw_fresh",
    "ConfirmLooks",
    "ConfirmPolicy",
    "ConfirmSettings",
    "ConfirmationPlan",
    "fresh_prompts",
    "fresh_workloads",
    "plan_confirmation",
    "policy_for",
]
