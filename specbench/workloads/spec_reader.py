"""Typed access to one mapping of a workload YAML file, with one-line errors naming the file and key."""

from __future__ import annotations

from typing import Any

from specbench.bounds import violation
from specbench.errors import SpecbenchError, check_keys, check_text, written


class Reader:
    """Typed access to one YAML mapping, with one-line errors naming the file and key."""

    def __init__(self, data: dict, origin: str, where: str, allowed: tuple[str, ...]):
        self.data, self.origin, self.where = data, origin, where
        check_keys(data, allowed, f"workload {origin}: {where}unknown key '{{key}}'")

    def fail(self, message: str):
        raise SpecbenchError(f"workload {self.origin}: {self.where}{message}")

    def get(
        self,
        key: str,
        kind: type | tuple[type, ...],
        default: Any = None,
        *,
        required: bool = False,
        nullable: bool = False,
    ) -> Any:
        if key not in self.data:
            if required:
                self.fail(f"missing key '{key}'")
            return default
        value = self.data[key]
        if value is None and nullable:
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            if kind is str:  # YAML's 0x1F is the number 31: refused as written, never turned into text
                try:
                    check_text(value, key, "")
                except SpecbenchError as exc:
                    self.fail(str(exc))
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            self.fail(f"'{key}' must be {names}, got {written(value)}")
        return value

    def text_key(self, name, key: str) -> str:
        """A key of the mapping under ``key`` (a bin label, a task, a config name): text, or one line naming it as
        written (YAML reads ``0x10:`` as the number 16)."""
        if not isinstance(name, str):
            self.fail(
                f"the keys of '{key}' must be text, got {written(name)} (quote it for the text: '{written(name)}':)"
            )
        return name

    def int_in(
        self, key: str, default: int | None, low: int, high: int | None = None, *, nullable: bool = False
    ) -> int | None:
        value = self.get(key, int, default, nullable=nullable)
        if value is not None and (value < low or (high is not None and value > high)):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            self.fail(f"'{key}' must be {bounds}, got {value}")
        return value

    def bounded(self, key: str, default, row: str, *, nullable: bool = False):
        """``key``'s number checked against the bounds table's row ``row`` (`specbench.bounds`)."""
        if key not in self.data or (nullable and self.data[key] is None):
            return default
        problem = violation(row, self.data[key])
        if problem is not None:
            self.fail(f"'{key}' {problem}")
        value = self.data[key]
        return int(value) if isinstance(value, float) and value.is_integer() else value

    def mapping(self, key: str, allowed: tuple[str, ...]) -> Reader:
        value = self.get(key, dict, {})
        return Reader(value, self.origin, f"{self.where}{key}: ", allowed)


def workload_fields(top: Reader, default_max_new_tokens: int = 256) -> dict:
    """The fields every workload file has (name, description, chat, max_new_tokens, sampling's count and
    seed, train_percent), validated (numbers against the bounds table), as keyword arguments of its spec class."""
    name = str(top.get("name", str, required=True)).strip()
    if not name:
        top.fail("'name' is empty")
    sampling = top.mapping("sampling", ("count", "seed"))
    return {
        "name": name,
        "description": top.get("description", str, ""),
        "chat": top.get("chat", bool, True),
        "max_new_tokens": top.bounded("max_new_tokens", default_max_new_tokens, "max_new_tokens"),
        "count": sampling.bounded("count", None, "prompts", nullable=True),
        "seed": sampling.bounded("seed", 0, "seed"),
        "train_percent": top.int_in("train_percent", 0, 0, 100),
    }
