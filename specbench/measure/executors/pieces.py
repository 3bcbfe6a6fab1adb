"""A sweep cut into pieces of work that can run apart: what an executor schedules.

A piece is the smallest set of units that must run together, on one backend, for the records to
be what a serial sweep writes:

* ``group`` — a serving backend's (configuration, load, workload, turn) group: one batch
  (`specbench.measure.serving.batches`), the requests in flight together (`specbench.measure.serving.groups`);
* ``block`` — the own engine's live units of one prompt turn: the timing protocol's block (baseline
  and configurations timed back to back, `specbench.measure.timing.timing_protocol`), which must share a
  machine and a moment to be compared;
* ``replay`` — the replayed units of one prompt turn (every drafter, tree and γ): they share the
  baseline's trajectory of that turn, whose target forwards are the expensive part
  (`specbench.measure.replay.units`).

Pieces depend on one another only through conversations: turn 2 of a prompt continues the
baseline's turn-1 answer (at the same load: `answer_key`), so a piece holding a turn-2 unit is ready
once that answer is known (`Piece.needs`). Replay pieces run after every live piece: their modelled timings come from the cost
model fitted on all the live units. A piece carries what its worker needs besides the models —
the answers its turn-2 prompts continue, a replay's trajectory and cost fits — so that a worker on
another machine never reads the results folder.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field, replace

from specbench.measure.grid.units import Unit
from specbench.measure.serving.groups import group_units, load_label, uses_groups, warm_first

GROUP, BLOCK, REPLAY = "group", "block", "replay"


def answer_key(unit: Unit) -> tuple:
    """Whose turn-1 answer a later turn of ``unit`` continues: the baseline's on the same conversation, at the
    same load — concurrency and request rate (a serving engine's answer may depend on the batch it ran in)."""
    return unit.group + (unit.concurrency, unit.request_rate)


@dataclass
class Piece:
    kind: str  # GROUP, BLOCK or REPLAY
    units: list[Unit]
    concurrency: int = 1  # GROUP: requests in flight (under a request rate: the cap)
    request_rate: float | None = None  # GROUP: open loop, requests per second (None: closed loop)
    answers: dict = field(default_factory=dict)  # `answer_key` -> [the baseline's turn-1 answer, token ids]
    trajectory: tuple | None = None  # REPLAY: the baseline's (output_ids, stop_reason) of this prompt turn
    costs: dict = field(default_factory=dict)  # REPLAY: cost-fit group key -> `replay_units.GroupCosts`
    run: int = 0  # which call of the executor it belongs to (a worker warms up once per call)
    catch_up: frozenset = frozenset()  # BLOCK: finished online units to run again first, untimed, unrecorded

    @property
    def config(self):
        """The configuration a group's engine runs (a worker that ran it last still has it warm)."""
        return self.units[0].config if self.kind == GROUP else None

    @property
    def needs(self) -> set[tuple]:
        """Conversations whose baseline turn-1 answer this piece's prompts continue."""
        return {answer_key(u) for u in self.units if u.turn > 1}

    def with_inputs(self, answers: dict, run: int) -> Piece:
        return replace(self, answers={key: answers[key] for key in self.needs}, run=run)

    @property
    def label(self) -> str:
        """One line for progress and failure messages."""
        first = self.units[0]
        if self.kind == GROUP:
            load = load_label(self.concurrency, self.request_rate)
            return (
                f"{first.config.label} · {load} · {first.workload.name} turn {first.turn} · {len(self.units)} requests"
            )
        what = "replays" if self.kind == REPLAY else "timing block"
        return f"{first.workload.name} {first.prompt.prompt_id} turn {first.turn} ({what}, {len(self.units)} units)"


def live_blocks(units: list[Unit]) -> list[list[Unit]]:
    """Consecutive live units of one prompt turn (baseline first): the timing protocol's blocks."""
    blocks: list[list[Unit]] = []
    for unit in units:
        key = unit.group + (unit.turn,)
        if blocks and blocks[-1][0].group + (blocks[-1][0].turn,) == key:
            blocks[-1].append(unit)
        else:
            blocks.append([unit])
    return blocks


def live_pieces(spec, units: list[Unit], is_warm=None, catch_up: Set[str] = frozenset()) -> list[Piece]:
    """The live ``units`` as pieces, in the order a serial sweep runs them; ``is_warm(config)``: whether a
    serving backend still runs that configuration's engine (`groups.warm_first`); ``catch_up``: ids of finished
    online units a block runs again, untimed and unrecorded, before its other units
    (`specbench.measure.run.online_resume`)."""
    live = [u for u in units if u.mode == "live"]
    if uses_groups(spec):
        return [
            Piece(GROUP, g.units, concurrency=g.concurrency, request_rate=g.request_rate)
            for g in warm_first(group_units(live), is_warm)
        ]
    return [
        Piece(BLOCK, block, catch_up=frozenset(u.unit_id for u in block) & frozenset(catch_up))
        for block in live_blocks(live)
    ]


def replay_pieces(units: list[Unit], trajectories: dict, costs: dict, cost_key) -> list[Piece]:
    """The replayed ``units`` as one piece per prompt turn, each with its trajectory and the cost fits of its
    groups (``cost_key(unit)``; a missing trajectory is left None: the worker says which one)."""
    pieces: dict[tuple, Piece] = {}
    for unit in units:
        key = unit.group + (unit.turn,)
        if key not in pieces:
            pieces[key] = Piece(REPLAY, [], trajectory=trajectories.get(key))
        piece = pieces[key]
        piece.units.append(unit)
        group = cost_key(unit)
        if group in costs:
            piece.costs[group] = costs[group]
    return list(pieces.values())
