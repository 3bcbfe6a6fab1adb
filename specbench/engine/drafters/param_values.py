"""Drafter parameter *values*, checked when parsed (so ``--dry-run`` catches what the run would).

Each parameter's type, integer range and order (``n_min <= n_max``) come from the drafter's
catalogue entry (`specbench.catalogue.drafters.Param`), so checking loads no drafter module. Numbers
given as text on the command line (``n_min=3``) are already ints; ``n_min=abc`` stays a string and is
refused here.
"""

from __future__ import annotations

import math

from specbench.catalogue import drafters as catalogue
from specbench.errors import SpecbenchError, written

INT64 = (-(2**63), 2**63 - 1)


def _checked(value, param: catalogue.Param, label: str):
    """``value`` as the parameter's kind, or a one-line error naming it."""
    if param.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecbenchError(f"{label} must be an integer, got {value!r}")
        low = INT64[0] if param.low is None else param.low
        high = INT64[1] if param.high is None else param.high
        if not low <= value <= high:
            raise SpecbenchError(f"{label} must be in [{low}, {high}], got {value}")
    elif param.kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecbenchError(f"{label} must be a finite number, got {value!r}")
        low = -math.inf if param.low is None else param.low
        high = math.inf if param.high is None else param.high
        if not low <= value <= high:
            raise SpecbenchError(f"{label} must be in [{low:g}, {high:g}], got {value!r}")
        value = float(value)
    elif param.kind == "str":
        if not isinstance(value, str):  # YAML's 0x1F is the number 31: refused as written, never turned into text
            raise SpecbenchError(f"{label} must be text, got {written(value)}")
        if not value.strip():
            raise SpecbenchError(f"{label} must be a non-empty name, got {value!r}")
    return value


def check_param_values(drafter: str, params: dict, where: str = "drafter") -> dict:
    """``params`` with each value of the type the drafter takes (ints stay ints); else one-line error."""
    declared = catalogue.get(drafter).params
    checked = {
        key: value
        if key not in declared
        else _checked(value, declared[key], f"{where}: drafter '{drafter}' parameter '{key}'")
        for key, value in params.items()
    }
    for key, param in declared.items():
        if param.at_most is None:
            continue
        low, high = checked.get(key, param.default), checked.get(param.at_most, declared[param.at_most].default)
        if low is not None and high is not None and low > high:
            raise SpecbenchError(
                f"{where}: drafter '{drafter}' needs {key} <= {param.at_most}, got {key}={low} {param.at_most}={high}"
            )
    return checked
