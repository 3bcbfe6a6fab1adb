"""Drafter parameter *values*, checked when parsed (so ``--dry-run`` catches what the run would).

Types come from the builder's signature in the registry (``n_min: int = 1``, ``model: str``);
ranges a type cannot say are listed in `RANGES`. Numbers given as text on the command line
(``n_min=3``) are already ints; ``n_min=abc`` stays a string and is refused here.
"""

from __future__ import annotations

import inspect
import math

from specbench.engine.drafters import registry
from specbench.errors import SpecbenchError

# drafter -> parameter -> (minimum, maximum) for integers
RANGES: dict[str, dict[str, tuple[int, int]]] = {
    "ngram": {"n_min": (1, 64), "n_max": (1, 64)},
}
_SKIP = ("target", "device", "dtype", "implementation")


def _kind(annotation) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    for name in ("bool", "int", "float", "str"):
        if name in text.split(" | ")[0] or text == name:
            return name
    return "any"


def check_param_values(drafter: str, params: dict, where: str = "drafter") -> dict:
    """``params`` with each value of the type the drafter takes (ints stay ints); else one-line error."""
    signature = inspect.signature(registry.get(drafter).build).parameters
    checked = {}
    for key, value in params.items():
        parameter = signature.get(key)
        kind = "any" if parameter is None or key in _SKIP else _kind(parameter.annotation)
        label = f"{where}: drafter '{drafter}' parameter '{key}'"
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise SpecbenchError(f"{label} must be an integer, got {value!r}")
            low, high = RANGES.get(drafter, {}).get(key, (-(2**63), 2**63 - 1))
            if not low <= value <= high:
                raise SpecbenchError(f"{label} must be in [{low}, {high}], got {value}")
        elif kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SpecbenchError(f"{label} must be a finite number, got {value!r}")
        elif kind == "str":
            if isinstance(value, (dict, list, bool)) or value is None or not str(value).strip():
                raise SpecbenchError(f"{label} must be a non-empty name, got {value!r}")
            value = str(value)
        checked[key] = value
    if drafter == "ngram":
        n_min, n_max = checked.get("n_min", 1), checked.get("n_max", 3)
        if n_min > n_max:
            raise SpecbenchError(f"{where}: drafter 'ngram' needs n_min <= n_max, got n_min={n_min} n_max={n_max}")
    return checked
