"""Named kinds and the facts known about each: the one registry mechanism of specbench.

A `Registry` maps names to entries (frozen dataclasses with a ``name`` and a ``cls``) in
registration order. Drafter kinds (`specbench.catalogue.drafters`) and sweep backends
(`specbench.backends.registry`) are both kept in one. An entry's ``cls`` names the code that
implements the kind as ``"module:attribute"`` (imported the first time `load` asks for it, so
listing and checking names never imports torch or a serving engine) or is the object itself (a
kind registered at run time); None for a kind specbench only knows facts about.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from specbench.errors import SpecbenchError, did_you_mean


class Named(Protocol):
    """What a registry entry has: a name, and the code of its kind (``"module:attribute"``, the object, or None)."""

    @property
    def name(self) -> str: ...

    @property
    def cls(self) -> Any: ...


Entry = TypeVar("Entry", bound=Named)


class Registry(Generic[Entry]):
    """Entries by name; ``what`` names a kind in errors ("drafter", "backend")."""

    def __init__(self, what: str, entries: Iterable[Entry]):
        self.what = what
        self._entries: dict[str, Entry] = {}
        for entry in entries:
            self._entries[entry.name] = entry
        self._builtin = frozenset(self._entries)
        self._loaded: dict[str, tuple[Entry, object]] = {}  # name -> (the entry loaded, its object)

    def names(self, where: Callable[[Entry], bool] | None = None) -> list[str]:
        """Names in registration order; ``where``: only the entries it accepts."""
        return [name for name, entry in self._entries.items() if where is None or where(entry)]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str, where: Callable[[Entry], bool] | None = None, what: str | None = None) -> Entry:
        """The entry called ``name`` (among those ``where`` accepts); an unknown name is a one-line
        error with a did-you-mean and the choices, ``what`` naming the kind (default: the registry's)."""
        choices = self.names(where)
        if name not in choices:
            raise SpecbenchError(
                f"unknown {what or self.what} '{name}'{did_you_mean(str(name), choices)} "
                f"(choose from: {', '.join(choices)})"
            )
        return self._entries[name]

    def register(self, entry: Entry, *, replace: bool = False) -> Entry:
        """Add an entry (a plugin, a test); replacing one needs ``replace=True``. Returns it."""
        name = getattr(entry, "name", "")
        if not name:
            raise SpecbenchError(f"cannot register {entry!r}: an entry with a name is needed")
        if name in self._entries and not replace:
            raise SpecbenchError(f"{self.what} '{name}' is already registered (pass replace=True to replace it)")
        self._entries[name] = entry
        self._loaded.pop(name, None)
        return entry

    def unregister(self, name: str) -> None:
        """Remove an entry added with `register` (the built-in ones stay)."""
        if name not in self._builtin:
            self._entries.pop(name, None)
            self._loaded.pop(name, None)

    def load(self, name: str) -> object:
        """The object ``cls`` names for ``name`` (imported once); a missing module is a one-line error."""
        entry = self.get(name)
        cached = self._loaded.get(name)
        if cached is not None and cached[0] is entry:
            return cached[1]
        target = entry.cls
        if target is None:
            raise SpecbenchError(f"{self.what} {name} has no implementation in specbench")
        if isinstance(target, str):
            target = resolve(target, f"{self.what} {name}")
        self._loaded[name] = (entry, target)
        return target


def resolve(reference: str, who: str) -> object:
    """The object ``"module:attribute"`` names, imported now; a missing module is a one-line error about ``who``."""
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise SpecbenchError(f"{who} is not available (module {module_name} is missing)") from None
        raise
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SpecbenchError(f"{who} is not available ({module_name} has no {attribute})") from None
