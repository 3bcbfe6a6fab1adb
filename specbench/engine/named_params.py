"""What a configured drafter and a configured verify-length schedule share: a name and its
parameters as sorted (key, value) pairs, so that one configuration has one identity however it
is written, with the two views every record and unit id use."""

from __future__ import annotations

import json


class NamedParams:
    """Mixin for frozen dataclasses with a ``params: tuple[tuple[str, value], ...]`` field."""

    params: tuple

    @property
    def params_dict(self) -> dict:
        return dict(self.params)

    @property
    def params_json(self) -> str:
        return json.dumps(self.params_dict, sort_keys=True)
