"""What a configured drafter and a configured verify-length schedule share: a name and its
parameters as sorted (key, value) pairs, so that one configuration has one identity however it
is written, with the two views every record and unit id use."""

from __future__ import annotations

import json

from specbench.errors import SpecbenchError, did_you_mean, written


class NamedParams:
    """Mixin for frozen dataclasses with a ``params: tuple[tuple[str, value], ...]`` field."""

    params: tuple

    @property
    def params_dict(self) -> dict:
        return dict(self.params)

    @property
    def params_json(self) -> str:
        return json.dumps(self.params_dict, sort_keys=True)


def named_mapping(item, where: str, kind: str, names, form: str) -> tuple[str, dict]:
    """A sweep entry written as ``NAME`` or ``{name: NAME, ...}`` -> (its checked name, the mapping).

    ``kind`` names the entry in errors ("schedule", "strategy"), ``names`` are the known ones and
    ``form`` says how to write one when ``item`` is neither a name nor a mapping with ``name``."""
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict) or "name" not in item:
        raise SpecbenchError(f"{where}: {form}, got {written(item)}")
    name = str(item["name"])
    if name not in names:
        raise SpecbenchError(
            f"{where}: unknown {kind} '{name}'{did_you_mean(name, list(names))} (choose from: {', '.join(names)})"
        )
    return name, item
