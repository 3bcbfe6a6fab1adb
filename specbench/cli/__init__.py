"""The `specbench` command line. Rich output lives only in this package.

Every user error — a bad flag, an unknown drafter, a broken file — ends as one line on
stderr and exit code 2 (see `SpecbenchGroup`).
"""

from __future__ import annotations

import sys

import click
import typer
import typer.core

from specbench.cli import (
    export_cmd,
    fit_cmd,
    models_cmd,
    plot_cmd,
    profile_cmd,
    recommend_cmd,
    results_cmd,
    run_cmd,
    sweep_cmd,
    train_cmd,
    workloads_cmd,
)
from specbench.errors import SpecbenchError

# Typer vendors its own copy of click; accept both its exceptions and plain click's.
_EXIT = (typer.Exit, click.exceptions.Exit)
_ABORT = (typer.Abort, click.Abort, KeyboardInterrupt)
_CLICK_ERRORS = (typer.TyperException, click.ClickException)


class SpecbenchGroup(typer.core.TyperGroup):
    """Top-level group that reports usage and user errors in one line, exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _EXIT as exc:
            sys.exit(exc.exit_code)
        except _ABORT:
            click.echo("specbench: interrupted", err=True)
            sys.exit(130)
        except SpecbenchError as exc:
            _fail(str(exc))
        except _CLICK_ERRORS as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            _fail(f"{exc.format_message()}{hint}")
        if standalone_mode:
            sys.exit(0)


def _fail(message: str) -> None:
    message = " ".join(str(message).split())  # one line, whatever the source wrote
    click.echo(f"specbench: error: {message}", err=True)
    sys.exit(2)


app = typer.Typer(
    cls=SpecbenchGroup,
    name="specbench",
    help="Benchmark and tune speculative decoding: measure drafters, draft lengths and trees, "
    "fit acceptance and cost, recommend settings.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    run_cmd.register(app)
    sweep_cmd.register(app)
    results_cmd.register(app)
    models_cmd.register(app)
    workloads_cmd.register(app)
    fit_cmd.register(app)
    recommend_cmd.register(app)
    plot_cmd.register(app)
    profile_cmd.register(app)
    train_cmd.register(app)
    export_cmd.register(app)


_register()


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    app(args=argv, prog_name="specbench")
    return 0
