"""Flag values checked where Typer parses them: numbers against the bounds table, paths not empty.

``typer.Option(..., callback=bounded("gamma"))`` refuses a value outside `specbench.bounds.BOUNDS`
in click's one-line form (``Invalid value for '--gamma': must be an integer from 0 to 128, ...``,
exit 2) before the command body runs. ``typer.Option(..., parser=folder_path)`` refuses an empty
path: ``--out ''`` would otherwise become ``Path('')`` = the current directory.
"""

from __future__ import annotations

from pathlib import Path

import typer

from specbench.bounds import BOUNDS, KINDS, SEED_ROW, TEXT_BOUNDS, is_seed, text_violation, violation
from specbench.measure.grid.flags import flag_rows


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


def flag_key(command_path: str, param) -> str:
    """How the flag rows (`specbench.measure.grid.flags.flag_rows`) name ``param`` of the command ``command_path`` ('results show'): its
    first option ('--seed') or, for a positional argument, 'COMMAND NAME' ('plot RESULTS_DIR')."""
    if getattr(param, "param_type_name", "") == "argument" or not param.opts or not param.opts[0].startswith("-"):
        return f"{command_path} {param.name.upper()}"
    return param.opts[0]


def row_name(command_path: str, param, rows: dict[str, str] | None = None) -> str | None:
    """The entry of the flag rows that gives ``param`` its row: the command's own ('sweep --batch'), else the
    flag's ('--batch'); None when neither is there."""
    rows = flag_rows() if rows is None else rows
    key = flag_key(command_path, param)
    return next((name for name in (f"{command_path} {key}", key) if name in rows), None)


def flag_row(command_path: str, param, rows: dict[str, str] | None = None) -> str | None:
    """The bounds-table row of ``param``: a seed's row for every seed flag (by its name: the row follows the flag's
    type, never a hand's choice), else `row_name`'s entry, or None."""
    key = flag_key(command_path, param)
    if key.startswith("-") and is_seed(key):
        return SEED_ROW
    rows = flag_rows() if rows is None else rows
    name = row_name(command_path, param, rows)
    return None if name is None else rows[name]


def commands(group, path: tuple[str, ...] = ()):
    """(command path, command) for every command under the click ``group``."""
    for name, command in getattr(group, "commands", {}).items():
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def _row_check(row: str, value) -> str | None:
    """What is wrong with one value of a flag whose row is ``row`` (None: nothing)."""
    if value is None or isinstance(value, bool) or row in KINDS:
        return None
    if row in BOUNDS and isinstance(value, (int, float)):
        return violation(row, value)
    # text, paths, and the text of a list or range of numbers ("1,4,16": each number is checked where it is parsed)
    return text_violation(row if row in TEXT_BOUNDS else "text", value)


def bind_rows(group) -> None:
    """Every flag of every command under ``group`` checked against its row of the bounds table where click parses
    it (a one-line error naming the flag, exit 2), before the flag's own callback. The command line's one place
    for bounds: a flag without a row is a failing test (tests/test_bounds_everywhere.py), not an unchecked value."""
    rows = flag_rows()
    for path, command in commands(group):
        for param in command.params:
            row = flag_row(path, param, rows)
            if row is None or getattr(param, "_specbench_row", None) == row:
                continue
            original = param.callback

            def checked(ctx, param, value, _row=row, _original=original):
                for item in value if isinstance(value, (list, tuple)) else [value]:
                    problem = _row_check(_row, item)
                    if problem is not None:
                        raise typer.BadParameter(problem, ctx=ctx, param=param)
                return _original(ctx, param, value) if _original is not None else value

            param.callback = checked
            param._specbench_row = row
