"""Resuming a sweep with online configurations: their drafters' state is rebuilt by running the stream again.

An online drafter's weights at a prompt are the product of every prompt before it. A resumed sweep skips
the units already on disk, so an online configuration with finished and unfinished units would start its
unfinished ones from the initial weights. Instead its finished units are *caught up*: generated again in
their order, untimed and unrecorded, so that the drafter learns from them as it did and reaches the state
the first run left it in (the same traffic — greedy outputs and seeded sampling repeat — and the same
updates; up to the floating-point nondeterminism of a different thread count). Their records stay as they
were measured.
"""

from __future__ import annotations


def catch_up_units(units: list, finished: set[str]) -> set[str]:
    """Ids of the finished live units of online configurations that still have unfinished units: they run
    again, in order, before the configuration's first unfinished unit."""
    pending = {
        u.config for u in units if u.mode == "live" and u.config.strategy.is_online and u.unit_id not in finished
    }
    return {u.unit_id for u in units if u.mode == "live" and u.config in pending and u.unit_id in finished}
