"""The `specbench` command line. Rich output lives only in this package.

Every user error — a bad flag, an unknown drafter, a broken file — ends as one line on
stderr and exit code 2; Ctrl-C gives 130, a bug 1 with its traceback in a log file (see
`SpecbenchGroup` and `specbench.cli.shell.exit_codes`).
"""

from __future__ import annotations

import sys
import warnings

import click
import typer
import typer.core

from specbench.cli import (
    compare_cmd,
    confirm_cmd,
    fit_cmd,
    models_cmd,
    plot_cmd,
    profile_cmd,
    recommend_cmd,
    results_cmd,
    run_cmd,
    sweep_cmd,
    tune_cmd,
    workloads_cmd,
)
from specbench.cli.drafters import export_cmd, train_cmd
from specbench.cli.shell import exit_codes
from specbench.cli.shell.params import bind_rows
from specbench.errors import SpecbenchError, take_notes

# Typer vendors its own copy of click; accept both its exceptions and plain click's.
_EXIT = (typer.Exit, click.exceptions.Exit)
_ABORT = (typer.Abort, click.Abort, KeyboardInterrupt)
_CLICK_ERRORS = (typer.TyperException, click.ClickException)


def quiet_numpy_warnings() -> None:
    """numpy's reductions over groups that are all missing (a serving backend's NaN round timings, say) are
    handled where they are read (unknown stays unknown); their warnings would only clutter the tables."""
    for message in ("All-NaN slice encountered", "Mean of empty slice", "Degrees of freedom <= 0"):
        warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)


class SpecbenchGroup(typer.core.TyperGroup):
    """Top-level group: every outcome becomes the exit code `specbench.cli.shell.exit_codes` documents."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        take_notes()  # notes of an earlier command in this process (tests) are not this one's
        quiet_numpy_warnings()  # here, not in main(): a command run in-process (the tests) prints what a user sees
        bind_rows(self)  # every flag checked against its row of the bounds table (measure.grid.flags.flag_rows)
        try:
            returned = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            # with standalone_mode=False click *returns* the code of a typer.Exit raised in a command
            code = returned if isinstance(returned, int) and not isinstance(returned, bool) else exit_codes.OK
        except _EXIT as exc:
            code = exc.exit_code
        except (exit_codes.Terminated, exit_codes.Interrupted) as exc:
            terminated = isinstance(exc, exit_codes.Terminated) or bool(getattr(exc, "terminated", False))
            exit_codes.say("specbench: terminated" if terminated else "specbench: interrupted")
            code = exit_codes.TERMINATED if terminated else exit_codes.INTERRUPTED
        except _ABORT:
            exit_codes.say("specbench: interrupted")
            code = exit_codes.INTERRUPTED
        except SpecbenchError as exc:
            _fail(str(exc))
        except _CLICK_ERRORS as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            _fail(f"{exc.format_message()}{hint}")
        except OSError as exc:  # a path the user named: missing, read-only, a directory, a loop, a full disk
            _fail(exit_codes.os_error_message(exc))
        except UnicodeError as exc:
            _fail(exit_codes.unicode_error_message(exc))
        except Exception as exc:  # noqa: BLE001 - a bug: traceback to a log file, one line here
            code = exit_codes.internal_error(exc, args)
        notes = take_notes()
        if code == exit_codes.OK:  # a command that ended well says what it set aside; a failed one says only
            for line in notes:  # its error line
                exit_codes.say(f"specbench: note: {line}")
        sys.exit(code)

    def invoke(self, ctx):
        # Typer turns Ctrl-C into a silent Exit(130); keep it an interruption the user is told about.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise exit_codes.Interrupted(isinstance(exc, exit_codes.Terminated)) from None


def _fail(message: str) -> None:
    message = exit_codes.one_line(message)  # one line, whatever the source wrote; no control characters
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
    confirm_cmd.register(app)
    tune_cmd.register(app)
    plot_cmd.register(app)
    compare_cmd.register(app)
    profile_cmd.register(app)
    train_cmd.register(app)
    export_cmd.register(app)


_register()


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    exit_codes.install_signal_handlers()
    try:
        app(args=argv, prog_name="specbench")
    except SystemExit as exc:
        if exc.code in (exit_codes.INTERRUPTED, exit_codes.TERMINATED):
            exit_codes.exit_now(exc.code)  # every finally ran: skip the interpreter's slow teardown
        raise
    return 0
