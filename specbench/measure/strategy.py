"""The round strategy axis of a sweep: sequential drafting, or nested speculation (docs/strategies.md).

In a sweep file::

    strategy: sequential                          # the default
    strategy: {name: nested, prepared: 2}         # draft the next round for 2 outcomes during verification
    strategy: [sequential, {name: nested, prepared: 2}]   # both, as an axis

A nested configuration runs chains on the own engine, live, with a drafter that can draft ahead of
verification (the catalogue's nestable kinds, `specbench.catalogue.drafters.nestable`); the target-only
baseline is always sequential.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.catalogue import drafters as catalogue
from specbench.engine.nested import MAX_PREPARED
from specbench.engine.named_params import named_mapping
from specbench.errors import SpecbenchError

NAMES = ("sequential", "nested")


@dataclass(frozen=True)
class Strategy:
    name: str = "sequential"
    prepared: int = 0  # nested: next-round drafts prepared per round (P)

    @property
    def nested(self) -> bool:
        return self.name == "nested"

    @property
    def label(self) -> str:
        return f"nested(P={self.prepared})" if self.nested else self.name

    def to_dict(self) -> dict:
        return {"name": self.name, "prepared": self.prepared} if self.nested else {"name": self.name}


SEQUENTIAL = Strategy()


def parse_strategy(value, where: str) -> Strategy:
    """``sequential``, ``nested`` (P = 1) or ``{name: nested, prepared: P}`` -> `Strategy`."""
    name, value = named_mapping(value, where, "strategy", NAMES,
                                "a strategy is 'sequential' or {name: nested, prepared: P}")
    extra = set(value) - ({"name", "prepared"} if name == "nested" else {"name"})
    if extra:
        raise SpecbenchError(f"{where}: strategy {name} takes {'name and prepared' if name == 'nested' else 'no options'}, "
                             f"not {sorted(extra)}")
    if name == "sequential":
        return SEQUENTIAL
    prepared = value.get("prepared", 1)
    if isinstance(prepared, bool) or not isinstance(prepared, int) or not 1 <= prepared <= MAX_PREPARED:
        raise SpecbenchError(f"{where}: strategy nested: 'prepared' must be an integer 1..{MAX_PREPARED}, "
                             f"got {prepared!r}")
    return Strategy("nested", prepared)


def parse_strategies(value, where: str) -> list[Strategy]:
    """The sweep's ``strategy`` key (one value or a list) -> distinct strategies, in the given order."""
    items = [value] if value is None or isinstance(value, (str, dict)) else value
    if not isinstance(items, list):
        raise SpecbenchError(f"{where}: 'strategy' must be a strategy or a list of them")
    strategies = list(dict.fromkeys(SEQUENTIAL if v is None else parse_strategy(v, where) for v in items))
    if not strategies:
        raise SpecbenchError(f"{where}: 'strategy' needs at least one value")
    return strategies


def check_nested(spec, where: str) -> None:
    """Nested configurations need the own engine, live units and drafters that can draft ahead."""
    if not any(s.nested for s in spec.strategies):
        return
    if spec.backend != "own":
        raise SpecbenchError(f"{where}: strategy nested runs on specbench's own engine, not backend {spec.backend}")
    if spec.mode != "live":
        raise SpecbenchError(f"{where}: strategy nested cannot be replayed (its timing is the point): use mode: live")
    for d in spec.drafters:
        if not catalogue.get(d.type).nestable:
            raise SpecbenchError(f"{where}: strategy nested needs drafters that draft ahead of verification "
                                 f"({', '.join(catalogue.nestable())}); '{d.type}' cannot")
    if "chain" not in spec.trees:
        raise SpecbenchError(f"{where}: strategy nested drafts chains only: add 'chain' to trees")
