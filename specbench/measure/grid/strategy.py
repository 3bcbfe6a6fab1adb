"""The round strategy axis of a sweep: sequential drafting, or nested speculation (docs/strategies.md).

In a sweep file::

    strategy: sequential                          # the default
    strategy: {name: nested, prepared: 2}         # draft the next round for 2 outcomes during verification
    strategy: [sequential, {name: nested, prepared: 2}]   # both, as an axis
    strategy: [sequential, {name: online, start: scratch}]  # a drafter that learns from its traffic

A nested configuration runs chains on the own engine, live, with a drafter that can draft ahead of
verification (the catalogue's nestable kinds, `specbench.catalogue.drafters.nestable`); an online one
trains its drafter on the traffic it serves (`specbench.measure.grid.online_strategy`, `specbench.engine.strategies.online_drafting`);
the target-only baseline is always sequential.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from specbench.backends import registry as backends
from specbench.catalogue import drafters as catalogue
from specbench.engine.named_params import named_mapping
from specbench.engine.strategies.nested import MAX_PREPARED
from specbench.engine.strategies.online_drafting import OnlinePlan
from specbench.errors import SpecbenchError
from specbench.measure.grid.online_strategy import parse_online, plan_dict, plan_label

NAMES = ("sequential", "nested", "online")


@dataclass(frozen=True)
class Strategy:
    name: str = "sequential"
    prepared: int = 0  # nested: next-round drafts prepared per round (P)
    online: OnlinePlan | None = None  # online: how the drafter learns

    @property
    def nested(self) -> bool:
        return self.name == "nested"

    @property
    def is_online(self) -> bool:
        return self.name == "online"

    @property
    def is_sequential(self) -> bool:
        return self.name == "sequential"

    @property
    def label(self) -> str:
        if self.nested:
            return f"nested(P={self.prepared})"
        return plan_label(self.online) if self.online is not None else self.name  # set for online only

    def to_dict(self) -> dict:
        if self.nested:
            return {"name": self.name, "prepared": self.prepared}
        return {"name": self.name, **plan_dict(self.online)} if self.online is not None else {"name": self.name}

    @property
    def params_json(self) -> str:
        """The strategy's parameters as sorted JSON (the records' ``strategy_params``; '{}' sequential)."""
        return json.dumps({k: v for k, v in self.to_dict().items() if k != "name"}, sort_keys=True)


SEQUENTIAL = Strategy()


def parse_strategy(value, where: str) -> Strategy:
    """``sequential``, ``nested`` (P = 1) or ``{name: nested, prepared: P}`` -> `Strategy`."""
    name, value = named_mapping(
        value,
        where,
        "strategy",
        NAMES,
        "a strategy is 'sequential', {name: nested, prepared: P} or {name: online, ...}",
    )
    if name == "online":
        return Strategy("online", online=parse_online(value, where))
    extra = set(value) - ({"name", "prepared"} if name == "nested" else {"name"})
    if extra:
        raise SpecbenchError(
            f"{where}: strategy {name} takes {'name and prepared' if name == 'nested' else 'no options'}, "
            f"not {sorted(map(str, extra))}"
        )
    if name == "sequential":
        return SEQUENTIAL
    prepared = value.get("prepared", 1)
    if isinstance(prepared, bool) or not isinstance(prepared, int) or not 1 <= prepared <= MAX_PREPARED:
        raise SpecbenchError(
            f"{where}: strategy nested: 'prepared' must be an integer 1..{MAX_PREPARED}, got {prepared!r}"
        )
    return Strategy("nested", prepared)


def parse_strategies(value, where: str) -> list[Strategy]:
    """The sweep's ``strategy`` key (one value or a list) -> distinct strategies, in the given order."""
    if value is None:  # the key left empty reads as its default, as every top-level sweep key does
        return [SEQUENTIAL]
    items = [value] if isinstance(value, (str, dict)) else value
    if not isinstance(items, list):
        raise SpecbenchError(f"{where}: 'strategy' must be a strategy or a list of them")
    strategies = list(dict.fromkeys(parse_strategy(v, where) for v in items))  # a null item is refused there
    if not strategies:
        raise SpecbenchError(f"{where}: 'strategy' needs at least one value")
    return strategies


def check_nested(spec, where: str) -> None:
    """Nested configurations need the own engine, live units and drafters that can draft ahead."""
    if not any(s.nested for s in spec.strategies):
        return
    if not backends.get(spec.backend).own_engine:
        raise SpecbenchError(f"{where}: strategy nested runs on specbench's own engine, not backend {spec.backend}")
    if spec.mode != "live":
        raise SpecbenchError(f"{where}: strategy nested cannot be replayed (its timing is the point): use mode: live")
    for d in spec.drafters:
        if not catalogue.get(d.type).nestable:
            raise SpecbenchError(
                f"{where}: strategy nested needs drafters that draft ahead of verification "
                f"({', '.join(catalogue.nestable())}); '{d.type}' cannot"
            )
    if "chain" not in spec.trees:
        raise SpecbenchError(f"{where}: strategy nested drafts chains only: add 'chain' to trees")
