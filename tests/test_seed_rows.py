"""Bounds rows follow the flag's type: every seed flag of every command gets the seed row (0 to 2^63 - 1: numpy's
generators take no seed below 0) by construction (`specbench.cli.shell.params.flag_row` reads the flag's name), and every
seed key of every YAML file has it in `specbench.bounds.KEY_ROWS`. ``compare --seed=-1`` was an internal error: it
checked a signed row where the other commands checked the unsigned one."""

from __future__ import annotations

import typer

from specbench.bounds import BOUNDS, SEED_ROW, is_seed
from specbench.cli import app
from specbench.cli.shell.params import commands, flag_row
from specbench.measure.grid.flags import key_rows
from tests.cli_helpers import assert_user_error, invoke


def _seed_flags() -> list[tuple[str, str, object]]:
    group = typer.main.get_command(app)
    return [
        (path, opt, param)
        for path, command in commands(group)
        for param in command.params
        for opt in getattr(param, "opts", [])[:1]
        if opt.startswith("-") and is_seed(opt)
    ]


def test_every_seed_flag_and_key_has_the_seed_row():
    flags = _seed_flags()
    assert {path for path, _, _ in flags} >= {"compare", "fit", "recommend", "plot", "run", "sweep", "profile"}
    wrong = [
        f"{path} {opt}: {flag_row(path, param)}" for path, opt, param in flags if flag_row(path, param) != SEED_ROW
    ]
    assert not wrong, "seed flags with another row:\n" + "\n".join(wrong)
    rows = key_rows()  # the hand-written key rows joined with those the sweep flags declare
    keys = [key for key in rows if is_seed(key.split(": ", 1)[1])]
    assert len(keys) >= 4 and "sweep: seed" in keys
    assert all(rows[key] == SEED_ROW for key in keys), {key: rows[key] for key in keys}
    assert BOUNDS[SEED_ROW].low == 0 and BOUNDS[SEED_ROW].high == 2**63 - 1


def test_a_negative_seed_is_one_line_on_every_command_that_takes_one():
    for path, opt, _ in _seed_flags():
        result = invoke(*path.split(), f"{opt}=-1")
        assert_user_error(result, opt, "must be an integer from 0")
        assert "expected non-negative" not in result.stderr, path  # numpy's own words
