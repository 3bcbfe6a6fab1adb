"""A sweep over several GGUF types of the target: one sweep per type (a *part*), then one folder of them all.

``quantization: {target: [F16, Q8_0], drafters: [Q8_0, Q4_K_M, Q2_K]}`` (or ``--target-quant F16,Q8_0``) names
two targets. A results folder measures one target (its baseline, its backend, its spec hash), so the sweep runs
each type as a sweep of its own into ``RESULTS/targets/<TYPE>/`` — resumable, with its own progress — and then
merges them into ``RESULTS``. The records' ``target`` column (``smollm2-135m@F16``, ``smollm2-135m@Q8_0``) keeps
the scenarios apart: every verdict is judged against its own target's baseline, and the quantization table
(`specbench.analysis.recommendation.quantization`) lists each (target type, drafter type) pair.

The parts carry one mark in their run.json (`specbench.records.identity.SET_KEY`: the sweep without its target
types, hashed), which is what lets `specbench results merge` combine folders of different spec hashes: only parts of one set.
A set is a fixed grid: an adaptive plan's looks are judged per target, and a merged stopping history would mix
them (`specbench.records.merge`), so ``adaptive`` with several target types is refused before anything runs.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from specbench.catalogue import gguf_types
from specbench.errors import SpecbenchError

PARTS_DIR = "targets"  # RESULTS/targets/<TYPE>/: the parts


@dataclass(frozen=True)
class TargetPart:
    """One target type of a set: its sweep mapping (``quantization.target`` one type) and its folder."""

    kind: str
    raw: dict
    mark: dict

    def folder(self, out: Path) -> Path:
        return Path(out) / PARTS_DIR / self.kind


def target_types(raw: dict, where: str) -> list[str]:
    """The target's GGUF types the mapping names (``quantization.target``: a type or a list of them), checked."""
    value = raw.get("quantization")
    if not isinstance(value, dict):
        return []
    return gguf_types.named_types(value.get("target"), f"{where}: quantization.target")


def target_parts(raw: dict, where: str) -> list[TargetPart]:
    """One part per target type when the mapping names two or more; [] otherwise (an ordinary sweep)."""
    kinds = target_types(raw, where)
    if len(kinds) < 2:
        return []
    if raw.get("adaptive"):
        raise SpecbenchError(
            f"{where}: a sweep over several target types ({', '.join(kinds)}) runs fixed grids, one per type: drop "
            "'adaptive' (and --until-decided), or give one target type per sweep"
        )
    mark = mark_for(raw, kinds)
    parts = []
    for kind in kinds:
        part = copy.deepcopy(raw)
        part["quantization"] = {**part["quantization"], "target": kind}
        parts.append(TargetPart(kind, part, mark))
    return parts


def mark_for(raw: dict, kinds: list[str]) -> dict:
    """What every part of the set carries: the sweep's name, its target types, and the hash of the sweep with
    its target types left out (equal for the parts of one set, different for any other sweep)."""
    rest = copy.deepcopy(raw)
    rest["quantization"] = {k: v for k, v in rest["quantization"].items() if k != "target"}
    digest = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return {"name": raw.get("name"), "types": list(kinds), "hash": digest}
