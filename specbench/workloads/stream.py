"""Stream workloads: prompts of other workloads in a fixed order whose domain changes part-way.

A stream is a workload YAML with a ``stream:`` list of segments instead of sources
(``workloads/stream-code-chat-mtbench.yaml``)::

    name: stream-code-chat-mtbench
    max_new_tokens: 64
    sampling: {seed: 0}            # each segment's prompts are that workload's sample (docs/workloads.md)
    stream:
      - {workload: humaneval, count: 24}
      - {workload: sharegpt, count: 24}
      - {workload: mt-bench, count: 16, label: mt-bench}

Its prompts are the segments' in order: segment k holds the first ``count`` prompts of its workload's
sample order (in the sweep's split) that no earlier segment of the same workload took, so a workload
may come back later in a stream with fresh prompts. Each prompt carries its position in the stream
(0, 1, ...), its segment's label and its own workload's chat setting; records carry the first two
(``stream_position``, ``stream_segment``), and a *shift point* is a position whose segment differs from
the previous one's. A sweep's ``count`` for a stream keeps every segment, each cut to its share of the
count (largest remainders, at least one prompt each), and keeps the order.

What a stream is for: strategies whose state carries from prompt to prompt — a drafter that learns
online (`specbench.engine.strategies.online_drafting`) — measured before and after a change of traffic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.workloads.prompt import Prompt
from specbench.workloads.spec_reader import Reader, workload_fields

_TOP_KEYS = ("name", "description", "max_new_tokens", "sampling", "stream")
_SEGMENT_KEYS = ("workload", "count", "label")


@dataclass(frozen=True)
class Segment:
    workload: str  # a workload name or YAML path (not another stream)
    count: int
    label: str


@dataclass(frozen=True)
class StreamSpec:
    """A validated stream workload; the attributes before ``segments`` are those of every workload."""

    name: str
    description: str
    max_new_tokens: int
    seed: int
    segments: tuple[Segment, ...]
    origin: str = ""
    chat: bool = True  # a stream's prompts say their own (their workload's) chat setting
    train_percent: int = 0  # a stream is for evaluation; its segments keep their own splits

    @property
    def count(self) -> int:
        return sum(s.count for s in self.segments)


def is_stream(data: dict) -> bool:
    """Whether a parsed workload YAML mapping defines a stream."""
    return isinstance(data, dict) and "stream" in data


def parse_stream(data: dict, *, origin: str, base_dir: Path | None = None) -> StreamSpec:
    top = Reader(data, origin, "", _TOP_KEYS)
    common = workload_fields(top)  # a stream's file has no chat or train_percent key: _TOP_KEYS refuses them
    if common["count"] is not None:
        top.fail("sampling: a stream takes no 'count' (its segments give theirs; a sweep's count cuts the stream)")
    entries = top.get("stream", list, required=True)
    if not entries:
        top.fail("'stream' is empty: give its segments, e.g. [{workload: humaneval, count: 20}, ...]")
    segments = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            top.fail(f"stream[{i}] must be a mapping {{workload, count, label}}, got {entry!r}")
        seg = Reader(entry, origin, f"stream[{i}]: ", _SEGMENT_KEYS)
        workload = str(seg.get("workload", str, required=True)).strip()
        if base_dir is not None and workload.endswith((".yaml", ".yml")) and not Path(workload).is_absolute():
            workload = str(base_dir / workload)
        label = str(seg.get("label", str, Path(workload).stem if workload.endswith((".yaml", ".yml")) else workload))
        count = seg.int_in("count", None, 1)
        if count is None:
            seg.fail("missing key 'count'")
        segments.append(Segment(workload, count, label))
    return StreamSpec(
        name=common["name"],
        description=common["description"],
        max_new_tokens=common["max_new_tokens"],
        seed=common["seed"],
        segments=tuple(segments),
        origin=origin,
    )


def refuse_inner_streams(spec: StreamSpec, resolve: Callable) -> StreamSpec:
    """``spec`` when none of its segments is a stream (by name or file, this one or another), else one line naming
    the segment — asked when the stream is resolved, before any count is shared out or anything loads, so the
    cause is named whatever the count. ``resolve(name)`` is a segment's spec, read without this check (a stream
    naming itself would otherwise be resolved for ever)."""
    for segment in spec.segments:
        inner = resolve(segment.workload)
        if isinstance(inner, StreamSpec):
            itself = bool(inner.origin and spec.origin) and Path(inner.origin).resolve() == Path(spec.origin).resolve()
            raise SpecbenchError(
                f"workload {spec.name}: segment '{segment.label}' is "
                + ("this stream itself" if itself else f"a stream itself ({segment.workload})")
                + "; streams hold workloads, not streams"
            )
    return spec


def segment_counts(spec: StreamSpec, count: int | None) -> list[int]:
    """Prompts per segment for a stream cut to ``count`` prompts: each its share (largest remainders), ≥ 1."""
    full = [s.count for s in spec.segments]
    if count is None or count >= sum(full):
        return full
    if count < len(full):
        raise SpecbenchError(
            f"workload {spec.name}: a count of {count} cannot keep its {len(full)} segments (give at least {len(full)})"
        )
    shares = [count * c / sum(full) for c in full]
    counts = [max(1, int(x)) for x in shares]
    order = sorted(range(len(full)), key=lambda i: (-(shares[i] - int(shares[i])), i))
    i = 0
    while sum(counts) < count:
        counts[order[i % len(order)]] += 1
        i += 1
    while sum(counts) > count:  # the minimum of one took more than the shares had
        biggest = max(range(len(counts)), key=lambda j: counts[j])
        counts[biggest] -= 1
    return counts


def stream_prompts(
    spec: StreamSpec, count: int | None, seed: int | None, split: str, load: Callable
) -> tuple[list[Prompt], str]:
    """The stream's prompts in order, each with its position, segment and chat setting, and a source text.

    ``load(name, count=, seed=, split=)`` loads a segment's workload (`specbench.workloads.catalog.load_workload`).
    """
    taken: dict[str, int] = {}
    prompts: list[Prompt] = []
    sources = []
    for segment, n in zip(spec.segments, segment_counts(spec, count)):
        start = taken.get(segment.workload, 0)
        workload = load(segment.workload, count=start + n, seed=spec.seed if seed is None else seed, split=split)
        chosen = workload.prompts[start : start + n]
        if len(chosen) < n:
            raise SpecbenchError(
                f"workload {spec.name}: segment '{segment.label}' asks for {n} prompts of "
                f"{segment.workload} after {start} taken, but its split '{split}' has "
                f"{len(workload.prompts)}"
            )
        taken[segment.workload] = start + n
        first = len(prompts)
        prompts.extend(
            replace(p, stream_position=first + i, segment=segment.label, chat=workload.chat)
            for i, p in enumerate(chosen)
        )
        sources.append(f"{segment.label} ×{n}: {workload.source}")
    ids = [p.prompt_id for p in prompts]
    if len(set(ids)) != len(ids):
        raise SpecbenchError(
            f"workload {spec.name}: two segments hold the same prompt id; give them workloads whose prompt ids differ"
        )
    return prompts, "stream: " + "; ".join(sources)
