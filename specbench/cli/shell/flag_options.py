"""Typer options generated from a table of flag descriptors (`specbench.measure.grid.flags.Flag`).

`flag_command(flags, body)` returns the function Typer registers: its signature holds one
``typer.Option`` (or ``typer.Argument``) per descriptor, in table order, so the help lists the flags as
the table does, and calling it hands ``body`` the parsed values as one frozen object of the table's
`specbench.measure.grid.flags.values_class` (``values.gammas``, ``values.dry_run``: a field per descriptor). A
descriptor's ``path`` adds the empty-path check (`specbench.cli.shell.params.folder_path`), its ``min``
Typer's own lower limit; its bounds row is checked where its value is read (the sweep spec).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import typer

from specbench.cli.shell.params import folder_path
from specbench.measure.grid.flags import Flag, values_class


def typer_parameter(flag: Flag) -> inspect.Parameter:
    """The signature parameter Typer reads ``flag`` from."""
    if flag.argument:
        info = typer.Argument(flag.default, help=flag.help, metavar=flag.metavar)
    else:
        extra = {} if flag.min is None else {"min": flag.min}
        if flag.path:
            extra["parser"] = folder_path
        info = typer.Option(flag.default, *flag.decls, help=flag.help, metavar=flag.metavar, **extra)
    return inspect.Parameter(flag.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=flag.type)


def flag_command(flags: Sequence[Flag], body: Callable[[Any], object]) -> Callable:
    """A command taking the options of ``flags`` and calling ``body(values)``, ``values`` one instance of
    ``values_class(flags)``; its help text is ``body``'s docstring."""
    values_type = values_class(tuple(flags))

    @functools.wraps(body)
    def command(**values):
        return body(values_type(**values))

    del command.__wrapped__  # Typer reads the signature set below, not body's
    command.__signature__ = inspect.Signature([typer_parameter(flag) for flag in flags])
    command.__annotations__ = {}
    return command
