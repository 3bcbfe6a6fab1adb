"""Flag values checked where Typer parses them: numbers against the bounds table, paths not empty.

``typer.Option(..., callback=bounded("gamma"))`` refuses a value outside `specbench.bounds.BOUNDS`
in click's one-line form (``Invalid value for '--gamma': must be an integer from 0 to 128, ...``,
exit 2) before the command body runs. ``typer.Option(..., parser=folder_path)`` refuses an empty
path: ``--out ''`` would otherwise become ``Path('')`` = the current directory.
"""

from __future__ import annotations

from pathlib import Path

import typer

from specbench.bounds import violation


def bounded(name: str):
    """A Typer callback checking a flag's value against the bounds table row ``name`` (None passes)."""

    def callback(value):
        if value is None:
            return value
        problem = violation(name, value)
        if problem is not None:
            raise typer.BadParameter(problem)
        return value

    return callback


def folder_path(text: str) -> Path:
    """A path flag's value: refused when empty or blank (never the current directory by accident)."""
    if not str(text).strip():
        raise typer.BadParameter(
            "an empty path is not allowed: name a folder or file (use . for the current directory)"
        )
    if "\x00" in str(text):
        raise typer.BadParameter("a path cannot contain a NUL character")
    return Path(text)
