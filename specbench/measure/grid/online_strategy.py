"""The online-adaptation strategy of a sweep: ``{name: online, ...}`` → `OnlinePlan`, and the checks on a sweep.

In a sweep file (docs/strategies.md, "Online adaptation")::

    strategy:
      - sequential                                        # the static drafter
      - {name: online, start: checkpoint, loss: accepted}
      - {name: online, start: scratch, every_prompts: 2, steps: 4, lr: 0.0003}

Keys: ``start`` (checkpoint | scratch), ``loss`` (accepted | accepted+rejected), ``every_prompts`` or
``every_tokens`` (one of them; default every 2 prompts), ``steps``, ``lr``, ``reject_weight``, ``window``,
``batch_tokens``, ``seed`` (`specbench.engine.strategies.online_drafting.OnlinePlan`). An online configuration learns along
the order the sweep runs its prompts — a stream workload's order (docs/workloads.md, "Streams") — so it
runs on the own engine, live, unsharded and as a fixed grid, with trained drafters only.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from specbench.backends import registry as backends
from specbench.bounds import check as check_bound
from specbench.catalogue import drafters as catalogue
from specbench.engine.strategies.online_drafting import LOSSES, STARTS, OnlinePlan
from specbench.errors import SpecbenchError, check_keys, check_text, did_you_mean

DEFAULT = OnlinePlan()
KEYS = ("name",) + tuple(f.name for f in fields(OnlinePlan))
# key -> its row of the bounds table (specbench.bounds): seed 10^23 overflowed, steps 10^9 trained for ever
ROWS = {
    "every_prompts": "prompts",
    "every_tokens": "max_new_tokens",
    "steps": "online.steps",
    "window": "online.window",
    "batch_tokens": "train.batch_tokens",
    "seed": "seed",
    "lr": "train.lr",
    "reject_weight": "online.reject_weight",
}
SHORT_LOSS = {"accepted": "acc", "accepted+rejected": "acc+rej"}


def parse_online(value: dict, where: str) -> OnlinePlan:
    """The mapping of one ``{name: online, ...}`` strategy entry, checked, defaults filled in."""
    check_keys(value, KEYS, f"{where}: strategy online: unknown key '{{key}}'", listing="it takes")
    # field -> its checked value, typed by its choices or bounds row (a key string cannot tell mypy which field)
    changes: dict[str, Any] = {}
    for key, choices in (("start", STARTS), ("loss", LOSSES)):
        if key in value:
            text = check_text(value[key], key, f"{where}: strategy online")
            if text not in choices:
                raise SpecbenchError(
                    f"{where}: strategy online: unknown {key} '{text}'{did_you_mean(text, list(choices))}"
                    f" (choose from: {', '.join(choices)})"
                )
            changes[key] = text
    if "every_prompts" in value and "every_tokens" in value:
        raise SpecbenchError(f"{where}: strategy online: give every_prompts or every_tokens, not both")
    if "every_tokens" in value:
        changes["every_prompts"] = None
    for key, row in ROWS.items():  # every number against its row of the bounds table (upper bounds included)
        if key in value:
            number = check_bound(row, value[key], f"{where}: strategy online", key)
            changes[key] = float(number) if key in ("lr", "reject_weight") else number
    plan = replace(DEFAULT, **changes)
    if "reject_weight" in value and not plan.uses_rejections:
        raise SpecbenchError(
            f"{where}: strategy online: reject_weight weighs the rejected-draft term, which "
            "loss 'accepted' does not have (use loss: accepted+rejected)"
        )
    return plan


def plan_dict(plan: OnlinePlan) -> dict:
    """Every field of the plan (what the spec hash and the records' ``strategy_params`` hold)."""
    return {f.name: getattr(plan, f.name) for f in fields(OnlinePlan)}


def plan_label(plan: OnlinePlan) -> str:
    """``online(START,LOSS,TRIGGER)`` plus the knobs set away from their defaults, e.g. online(scratch,acc+rej,2p)."""
    parts = [plan.start, SHORT_LOSS[plan.loss], plan.trigger]
    parts += [
        f"{key}={getattr(plan, key):g}"
        for key in ("steps", "lr", "reject_weight", "window", "batch_tokens", "seed")
        if getattr(plan, key) != getattr(DEFAULT, key) and (key != "reject_weight" or plan.uses_rejections)
    ]
    return f"online({','.join(parts)})"


def check_online(spec, where: str) -> None:
    """Online configurations learn along the sweep's prompt order: own engine, live, a fixed grid, trained drafters."""
    if not any(s.is_online for s in spec.strategies):
        return
    if not backends.get(spec.backend).own_engine:
        raise SpecbenchError(
            f"{where}: strategy online trains the drafter inside specbench's own engine, not backend {spec.backend}"
        )
    if spec.mode != "live":
        raise SpecbenchError(
            f"{where}: strategy online cannot be replayed (its drafter changes with every update): use mode: live"
        )
    if spec.adaptive is not None:
        raise SpecbenchError(
            f"{where}: strategy online learns along the stream in its order; an adaptive sweep "
            "measures prompts in looks: use a fixed grid"
        )
    for d in spec.drafters:
        if not catalogue.get(d.type).trained:
            raise SpecbenchError(
                f"{where}: strategy online trains the drafter's network: '{d.type}' is not a trained "
                f"drafter ({', '.join(catalogue.names(trained=True))})"
            )


def check_shard(spec, shard: tuple[int, int]) -> None:
    """A shard, or a Ray worker, holds part of each stream: an online drafter would learn from part of the traffic."""
    if not any(s.is_online for s in spec.strategies):
        return
    if shard[1] > 1:
        raise SpecbenchError(
            "strategy online learns along the whole stream in its order: it cannot be split "
            "into shards (run it without --shard)"
        )
    if spec.executor.is_ray:
        raise SpecbenchError(
            "strategy online learns along the whole stream in its order, in one process: it cannot be spread "
            "over Ray workers (run it with the in-process executor: no --executor ray / --workers)"
        )
