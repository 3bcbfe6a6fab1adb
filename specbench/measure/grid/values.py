"""Strict values for sweep specs and flags: safe names, real booleans, finite numbers, bounded axes.

Numbers are checked against the one bounds table, `specbench.bounds`. Imports nothing of specbench
but errors and the bounds table, so the spec parser can use it without a cycle.
"""

from __future__ import annotations

import math
import re

from specbench.bounds import GAMMA_LIMIT  # noqa: F401 - re-exported: the one γ limit
from specbench.errors import SpecbenchError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_CONFIGS = 20_000  # configurations (drafter × γ × tree × temperature): never more, even with --yes


def check_name(name: str, where: str) -> str:
    """A sweep name is a folder name: letters, digits, '.', '_', '-' (no '/', no '..', no leading dot)."""
    name = str(name)
    if not NAME_RE.match(name) or ".." in name:
        raise SpecbenchError(
            f"{where}: sweep name {name[:60]!r} is not allowed: use letters, digits, '.', '_' "
            "and '-' (at most 100, not starting with '.' or '-', no '..')"
        )
    return name


def strict_bool(value, where: str, key: str) -> bool:
    """true/false only: the string "false" is not true, 1 and 0 are not booleans."""
    if isinstance(value, bool):
        return value
    raise SpecbenchError(f"{where}: '{key}' must be true or false, got {value!r}")


def check_config_count(counts: dict, where: str) -> None:
    """Axis lengths multiplied, before the configurations are expanded."""
    total = math.prod(max(1, n) for n in counts.values())
    if total > MAX_CONFIGS:
        axes = " × ".join(f"{n} {k}" for k, n in counts.items())
        raise SpecbenchError(
            f"{where}: {axes} = {total:,} configurations, over the limit of {MAX_CONFIGS:,}; split the sweep"
        )
