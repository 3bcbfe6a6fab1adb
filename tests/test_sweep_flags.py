"""The flag table of `specbench sweep` (`specbench.measure.grid.flags.FLAGS`): each flag declared once.

The table generates the command's options (in its order, with its spellings and help), the typed object the
command receives (`SweepValues`) and the overlay of the sweep file (`SweepFlags.over`); the spec reads a flagged key's bounds row from it. The worked example of
docs/architecture.md ("Adding a sweep flag") adds one descriptor and checks it reaches the spec.
"""

from __future__ import annotations

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from specbench.bounds import BOUNDS
from specbench.cli import app
from specbench.cli.shell.flag_options import flag_command
from specbench.errors import SpecbenchError
from specbench.measure.grid import flags as sweep_flags
from specbench.measure.grid.flags import FLAGS, Flag, SweepFlags, SweepValues, bound_of, values_class
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.sweep_spec import TOP_LEVEL_KEYS


def _sweep_command():
    return typer.main.get_command(app).commands["sweep"]


def test_the_command_has_exactly_the_tables_flags_in_its_order():
    params = _sweep_command().params
    assert [p.name for p in params] == [f.name for f in FLAGS]
    for param, flag in zip(params, FLAGS):
        if flag.argument:
            assert param.param_type_name == "argument"
            continue
        spelled = [*param.opts, *param.secondary_opts]
        assert spelled == [d for decl in flag.decls for d in decl.split("/")], flag.name
        assert (param.help or None) == flag.help, flag.name


def test_every_flag_sets_a_key_the_sweep_file_has_and_names_a_bounds_row_that_exists():
    for flag in FLAGS:
        if flag.key is not None:
            assert flag.top in TOP_LEVEL_KEYS, f"--{flag.name}: '{flag.top}' is no sweep-file key"
        if flag.bound is not None:
            assert flag.bound in BOUNDS, f"--{flag.name}: no bounds row '{flag.bound}'"
        numeric = flag.type in (int, float) or flag.items in (int, float)
        if numeric and flag.key is not None:
            # every number a sweep flag takes is checked: by its bounds row, or by Typer's own limit (--workers)
            assert flag.bound is not None or flag.min is not None, f"--{flag.name} has no bounds row"


def test_the_spec_checks_a_flagged_key_with_the_flags_bounds_row():
    assert bound_of("gammas") == "gamma" and bound_of("workloads[].count") == "prompts"
    with pytest.raises(SpecbenchError, match="'gammas' must be an integer from 0 to 128"):
        build_spec(SweepFlags(name="s", gammas=[999], drafters=["ngram"], workloads=["mt-bench"]).over({}))


def test_flags_go_over_the_file_and_the_merged_keys_keep_what_the_file_says_beside_them():
    raw = {
        "name": "f",
        "backend": {"name": "vllm", "max_model_len": 512},
        "workloads": ["mt-bench", {"name": "x"}],
        "adaptive": {"first": 4},
        "gammas": [1],
    }
    given = SweepFlags(gammas=[2, 3], backend="vllm", prompts=5, budget="3m", address="auto")
    merged = given.over(raw)
    assert merged["gammas"] == [2, 3] and raw["gammas"] == [1]  # the file's mapping is not changed
    assert merged["backend"] == {"name": "vllm", "max_model_len": 512}
    assert merged["workloads"] == [{"name": "mt-bench", "count": 5}, {"name": "x", "count": 5}]
    assert merged["adaptive"] == {"first": 4, "budget": "3m"}
    assert merged["executor"] == {"name": "ray", "address": "auto"}
    assert SweepFlags(backend="openai").over(raw)["backend"] == "openai"  # another backend: the options were vLLM's
    assert SweepFlags().over(raw) == raw
    with pytest.raises(TypeError, match="no sweep flag named gamma"):
        SweepFlags(gamma=[1])


def test_comma_lists_are_read_in_table_order_with_one_error():
    flags = SweepFlags.from_command(SweepValues(gammas="1,2,,4", temperatures="0,0.7", trees=None))
    assert flags.gammas == [1, 2, 4] and flags.temperatures == [0.0, 0.7] and flags.trees is None
    with pytest.raises(SpecbenchError, match="could not read 'a,b' as a comma-separated list"):
        SweepFlags.from_command(SweepValues(gammas="a,b"))


def test_the_command_gets_a_frozen_typed_object_with_a_field_per_flag():
    """The values of `specbench sweep` are a `SweepValues`, generated from the table: one field per flag, in its
    order, typed as the flag; a misspelt name is refused where it is written or read, never a silent None."""
    fields = dataclasses.fields(SweepValues)
    assert [f.name for f in fields] == [f.name for f in FLAGS]
    for got, flag in zip(fields, FLAGS):
        assert got.type == (flag.type if flag.default is not None else flag.type | None), flag.name
        assert got.default == flag.default, flag.name
    assert values_class(FLAGS) is values_class(FLAGS)  # one class per table
    values = SweepValues(gammas="1,2", dry_run=True)
    assert values.dry_run is True and values.out is None and values.force is False
    with pytest.raises(AttributeError):
        values.dry_runn  # noqa: B018 - the misspelt read is the test
    with pytest.raises(TypeError, match="dryrun"):
        SweepValues(dryrun=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        values.gammas = "4"

    seen = []
    sweep_app = typer.Typer()
    sweep_app.command("sweep")(flag_command(FLAGS, seen.append))
    sweep_app.command("other")(lambda: None)
    result = CliRunner().invoke(sweep_app, ["sweep", "--gamma", "1,2", "--dry-run", "--workers", "3"])
    assert result.exit_code == 0, result.output
    (got,) = seen
    assert type(got) is SweepValues and got.gammas == "1,2" and got.workers == 3 and got.dry_run is True


def test_adding_a_sweep_flag_is_one_descriptor_plus_its_use(monkeypatch):
    """The worked example of docs/architecture.md: two descriptors — one over a top-level key, one over a key
    inside a mapping — give options that Typer parses and whose values reach the spec, with nothing else
    written."""
    added = (
        Flag("description", ("--description",), str, "description", "What the sweep is for."),
        Flag(
            "warmup",
            ("--warmup",),
            float,
            "timing.warmup_s",
            "Untimed decoding first, seconds.",
            bound="timing.warmup_s",
        ),
    )
    monkeypatch.setattr(sweep_flags, "FLAGS", FLAGS + added)
    seen = []

    def body(values) -> None:
        """Capture the parsed values."""
        seen.append(values)

    test_app = typer.Typer()
    test_app.command("sweep")(flag_command(sweep_flags.FLAGS, body))
    test_app.command("other")(lambda: None)  # two commands: the app keeps the name `sweep`
    args = ["sweep", "--name", "s", "-d", "ngram", "-w", "mt-bench", "--description", "a test", "--warmup", "0.5"]
    result = CliRunner().invoke(test_app, args)
    assert result.exit_code == 0, result.output
    (values,) = seen
    assert values.description == "a test" and values.warmup == 0.5  # the added descriptors are fields
    spec = build_spec(SweepFlags.from_command(values).over({"timing": {"order": "once"}}))
    assert spec.description == "a test"
    assert spec.timing.warmup_s == 0.5 and spec.timing.order == "once"
    help_text = CliRunner().invoke(test_app, ["sweep", "--help"], env={"COLUMNS": "200"}).output
    assert "--description" in help_text and "What the sweep is for." in help_text


def test_flag_descriptors_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        FLAGS[0].help = "changed"
