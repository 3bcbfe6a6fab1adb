"""What a results folder is, and whether two folders may be combined or compared: asked in one place.

Every results folder says what it is in its run.json: ``role`` (one of `ROLES`) and ``spec_hash``.

* ``sweep``: a sweep's results, every shard of it (``specbench sweep``);
* ``shard``: some shards of a sharded sweep (``--shard I/N``), not all of them yet;
* ``confirmation``: ``RESULTS/confirm``, the recommendation run again on fresh prompts (``specbench confirm``).
  It carries the sweep's spec hash, yet its prompts are not the sweep's: it is never a shard;
* ``profile``: a cost profile (``specbench profile``);
* ``merged``: the union of folders of one sweep (``results merge``).

`identify` reads the role, and infers it for folders written before the key existed: a cost profile by its
``kind``; a confirmation by its state file (``confirm.json``, which `specbench confirm` writes into its folder,
``RESULTS/confirm``, and which moves with it to ``confirm-old-PLAN``); a merge by ``merged_from``; a shard by
``shards`` that do not cover every index of their count. A confirmation's state file outranks any recorded role.

`check_together` answers whether folders may go together, for each command that reads two:

* ``merge`` (`results merge`): sweeps, shards and merges of one spec hash, on one device (``force``: any
  device); never a confirmation or a profile. Folders of different spec hashes merge only as the parts of one
  sweep over several target types (all carry one ``target_set`` mark, `specbench.measure.run.target_set`);
* ``compare`` (`specbench compare`): two folders of one role family (sweeps, shards and merges; or two
  confirmations), never a profile, generated alike: every key of the spec that changes what is generated
  (`generation_keys`) must be equal, and the keys that differ are named. The drafter's parameters may differ
  (comparing two checkpoints is what compare is for), and so may the prompt counts (prompts are paired);
* ``confirm`` (`specbench confirm --force`): the folder confirmed is a sweep, a shard or a merge (not the merge
  of a target set: its targets differ, each part is confirmed on its own), and the folder its confirmation goes
  to (``RESULTS/confirm``), when it holds results, is a confirmation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.records.profile_file import PROFILE_KIND
from specbench.records.store import load_run_info

SWEEP, SHARD, CONFIRMATION, PROFILE, MERGED = "sweep", "shard", "confirmation", "profile", "merged"
ROLES = (SWEEP, SHARD, CONFIRMATION, PROFILE, MERGED)
SWEEP_FAMILY = (SWEEP, SHARD, MERGED)  # records of one sweep's prompts
CONFIRMATION_STATE = "confirm.json"  # what `specbench confirm` writes into its own folder
WHAT = {
    SWEEP: "a sweep's results",
    SHARD: "a sweep shard",
    CONFIRMATION: "a confirmation (specbench confirm: the recommendation run again on fresh prompts)",
    PROFILE: "a cost profile (specbench profile)",
    MERGED: "a merge of sweep results",
}
PURPOSES = ("merge", "compare", "confirm")
SET_KEY = "target_set"  # run.json: the mark every part of a sweep over several target types carries

# spec keys (run.json "sweep") that change what is generated, with the value a spec written before the key existed
# means; the workloads count by name, split and new tokens (their prompt counts may differ: prompts are paired)
GENERATION_KEYS: dict[str, object] = {
    "target": None,
    "dtype": None,
    "seed": None,
    "max_new_tokens": None,
    "ignore_eos": False,
    "temperatures": None,
    "top_p": 1.0,
    "top_k": 0,
    "compile": False,
    "kernels": "auto",
    "layout": None,
    "workloads": None,
    "backend": {"name": "own"},
}
# backend options (backends/options.py) that change what a backend generates: its model, tokenizer, precision,
# context, kernels, passed-through engine flags; every other option says where or how long it runs
GENERATION_OPTIONS = (
    "name",
    "model",
    "tokenizer",
    "weights",
    "dtype",
    "max_model_len",
    "ctx_size",
    "enforce_eager",
    "cache_prompt",
    "engine_args",
    "extra_args",
    "kernels",
    "compile",
    "layout",
)


@dataclass(frozen=True)
class Identity:
    """A results folder: its role (`ROLES`), spec hash, and run.json; ``inferred``: the role was not recorded."""

    folder: Path
    role: str
    spec_hash: str | None
    info: dict
    inferred: bool = False

    def describe(self) -> str:
        return f"{self.folder} holds {WHAT[self.role]}"


def role_of_shards(shards) -> str:
    """``shard`` when the run.json's shards leave some index of their count out, else ``sweep``."""
    pairs = {(int(p[0]), int(p[1])) for p in shards or () if isinstance(p, (list, tuple)) and len(p) == 2}
    for count in {c for _, c in pairs}:
        if count > 1 and {i for i, c in pairs if c == count} != set(range(count)):
            return SHARD
    return SWEEP


def identify(folder: str | Path, info: dict | None = None) -> Identity:
    """What ``folder`` is (module docstring); ``info``: its run.json when already read."""
    folder = Path(folder)
    info = load_run_info(folder) if info is None else info
    spec_hash = info.get("spec_hash") if isinstance(info.get("spec_hash"), str) else None
    recorded = info.get("role")
    if recorded is not None and recorded not in ROLES:
        raise SpecbenchError(
            f"{folder}/run.json: 'role' must be one of {', '.join(ROLES)}, got {str(recorded)[:40]!r}; "
            "remove the key or rerun"
        )
    if info.get("kind") == PROFILE_KIND:
        role = PROFILE
    elif (folder / CONFIRMATION_STATE).is_file():
        role = CONFIRMATION  # whatever run.json says: a confirmation is never a shard or a sweep
    elif recorded is not None:
        role = str(recorded)
    elif info.get("merged_from"):
        role = MERGED
    else:
        role = role_of_shards(info.get("shards"))
    return Identity(folder, role, spec_hash, info, inferred=recorded != role)


def identified_if_any(folder: str | Path) -> list[Identity]:
    """``[identify(folder)]`` when ``folder`` holds a run.json, else ``[]`` (a folder not written yet)."""
    return [identify(folder)] if (Path(folder) / "run.json").is_file() else []


def generation_keys(info: dict) -> dict:
    """The spec keys of a run.json that change what is generated (`GENERATION_KEYS`, `GENERATION_OPTIONS`)."""
    sweep = info.get("sweep")
    sweep = sweep if isinstance(sweep, dict) else {}
    keys = {key: sweep.get(key, default) for key, default in GENERATION_KEYS.items()}
    backend = keys["backend"] if isinstance(keys["backend"], dict) else {"name": keys["backend"]}
    keys["backend"] = {k: v for k, v in backend.items() if k in GENERATION_OPTIONS}
    workloads = keys["workloads"] if isinstance(keys["workloads"], list) else []
    keys["workloads"] = sorted(
        (str(w.get("name")), str(w.get("split", "eval")), w.get("max_new_tokens"))
        for w in workloads
        if isinstance(w, dict)
    )
    if not workloads:
        keys["workloads"] = None
    return keys


def differing_generation_keys(a: dict, b: dict) -> list[str]:
    """``key (A → B)`` for every generation key whose values differ between run.jsons ``a`` and ``b``; a backend
    option is named as ``backend.OPTION``."""
    ka, kb = generation_keys(a), generation_keys(b)
    lines = []
    for key in GENERATION_KEYS:
        if key == "backend":
            for option in sorted(set(ka[key]) | set(kb[key])):
                before, after = ka[key].get(option), kb[key].get(option)
                if before != after:
                    lines.append(f"backend.{option} ({_short(before)} → {_short(after)})")
        elif _canonical(ka[key]) != _canonical(kb[key]):
            lines.append(f"{key} ({_short(ka[key])} → {_short(kb[key])})")
    return lines


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _short(value) -> str:
    text = "absent" if value is None else _canonical(value) if isinstance(value, (list, dict)) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_together(purpose: str, first: Identity, *others: Identity, force: bool = False) -> None:
    """Whether ``first`` and ``others`` may go together for ``purpose`` (`PURPOSES`; module docstring), or a
    one-line `SpecbenchError` naming what each folder is and why not."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose {purpose!r} is not one of {PURPOSES}")
    folders = (first, *others)
    for one in folders:
        if one.role == PROFILE:
            raise SpecbenchError(
                f"{one.describe()}, not sweep results: {_what_reads(purpose)} the results folders of one sweep"
            )
    if purpose == "merge":
        _check_merge(folders, force)
    elif purpose == "compare":
        _check_compare(first, others)
    else:
        _check_confirm(first, others)


def _what_reads(purpose: str) -> str:
    return {"merge": "results merge combines", "compare": "compare reads", "confirm": "confirm runs again"}[purpose]


def _check_merge(folders: tuple[Identity, ...], force: bool) -> None:
    for one in folders:
        if one.role == CONFIRMATION:
            raise SpecbenchError(
                f"{one.describe()}; its prompts are not the sweep's, so it is never a shard: results merge combines "
                "the results folders of one sweep (recommend and plot read RESULTS/confirm beside its sweep)"
            )
    hashes = sorted({str(one.spec_hash) for one in folders})
    if len(hashes) > 1 and not _one_target_set(folders):
        raise SpecbenchError(f"cannot merge results of different sweep specs ({', '.join(hashes)})")
    devices = sorted({str(one.info.get("device_name")) for one in folders})
    if len(devices) > 1 and not force:
        raise SpecbenchError(
            f"results were measured on different devices ({', '.join(devices)}); "
            "their timings do not compare (use --force to merge anyway)"
        )


def set_mark(info: dict | None) -> dict | None:
    """A folder's target-set mark from its run.json (``{name, types, hash}``), or None (an ordinary sweep)."""
    value = (info or {}).get(SET_KEY)
    return value if isinstance(value, dict) and isinstance(value.get("hash"), str) else None


def _one_target_set(folders: tuple[Identity, ...]) -> bool:
    """Every folder is a part (or the merge) of one sweep over several target types."""
    marks = [set_mark(one.info) for one in folders]
    return all(m is not None for m in marks) and len({m["hash"] for m in marks if m is not None}) == 1


def _check_compare(old: Identity, others: tuple[Identity, ...]) -> None:
    for new in others:
        if (old.role == CONFIRMATION) != (new.role == CONFIRMATION):
            confirmation, sweep = (old, new) if old.role == CONFIRMATION else (new, old)
            raise SpecbenchError(
                f"{confirmation.describe()} and {sweep.describe()}: compare runs of one sweep spec "
                "(two sweeps, or two confirmations)"
            )
        differ = differing_generation_keys(old.info, new.info)
        if differ:
            raise SpecbenchError(
                f"{old.folder} and {new.folder} were generated differently: {'; '.join(differ)}: compare runs of one "
                "sweep spec (the same target, sampling, new tokens, workloads, backend and engine settings)"
            )


def _check_confirm(results: Identity, others: tuple[Identity, ...]) -> None:
    if results.role not in SWEEP_FAMILY:
        raise SpecbenchError(f"{results.describe()}: confirm runs again the recommendation of a sweep's folder")
    mark = set_mark(results.info)
    if mark is not None and results.role == MERGED:
        kinds = [str(k) for k in mark.get("types") or []]
        raise SpecbenchError(
            f"{results.folder} merges a sweep over the target types {', '.join(kinds)}: confirm each target's own "
            f"part, e.g. specbench confirm {results.folder}/targets/{kinds[0] if kinds else 'TYPE'}"
        )
    for folder in others:
        if folder.role != CONFIRMATION:
            raise SpecbenchError(
                f"{folder.describe()}, not a confirmation: confirm writes its records there; move it away first "
                "(--force only sets aside a confirmation of another plan)"
            )
