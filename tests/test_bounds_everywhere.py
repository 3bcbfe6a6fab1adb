"""Every flag of every command and every key of every YAML file has a row in the bounds table
(`specbench.bounds`: `FLAG_ROWS`, `KEY_ROWS`, joined with the rows `specbench sweep`'s flag table declares:
`specbench.measure.grid.flags.flag_rows` / `key_rows`), each row is stated once, and the rows are enforced.

Nothing here lists a flag or a key by hand: the flags come from the command line itself (the Typer app's click
commands, so a flag another change adds without a row fails here), the sweep keys from the parser's own key
tuples, the workload-file keys from every `Reader` the workload parsers open while reading every shipped
workload. The properties then feed each numeric flag and each numeric sweep key a value outside its row and
expect one line naming it.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from pathlib import Path

import pytest
import typer
from hypothesis import strategies as st

from specbench import bounds
from specbench.bounds import BOUNDS, TEXT_BOUNDS, row_exists
from specbench.cli import app
from specbench.cli.shell.params import commands, flag_key, flag_row, row_name
from specbench.errors import SpecbenchError
from specbench.measure.grid.flags import FLAGS, declared_rows, flag_rows, key_rows
from tests.cli_helpers import invoke
from tests.test_fuzz import fuzz

ROOT = Path(__file__).resolve().parents[1]


def _cli_params() -> list[tuple[str, object, str]]:
    group = typer.main.get_command(app)
    return [(path, param, flag_key(path, param)) for path, command in commands(group) for param in command.params]


def _sweep_keys() -> set[str]:
    from specbench.engine.strategies.online_drafting import OnlinePlan
    from specbench.measure.grid import adaptive as adaptive_spec
    from specbench.measure.grid import executor as executor_spec
    from specbench.measure.grid import sweep_spec as spec
    from specbench.measure.grid.timing import DEFAULT as TIMING

    keys = {f"sweep: {k}" for k in spec.TOP_LEVEL_KEYS}
    sections = {
        "drafters": spec.DRAFTER_KEYS,
        "workloads": spec.WORKLOAD_KEYS,
        "calibration": spec.CALIBRATION_KEYS,
        "timing": tuple(TIMING.to_dict()),
        "adaptive": adaptive_spec.KEYS,
        "executor": executor_spec.KEYS,
        "quantization": spec.QUANTIZATION_KEYS,
        "strategy": ("name",) + tuple(f.name for f in fields(OnlinePlan)),
    }
    return keys | {f"sweep: {section}.{k}" for section, names in sections.items() for k in names}


def _normalised(where: str) -> str:
    """A Reader's ``where`` ('sources[0]: ', 'prepared: configs: mt: ') as a key prefix ('sources.', ...)."""
    parts = [re.sub(r"\[\d+\]$", "", p) for p in where.split(": ") if p]
    if "configs" in parts:  # the segment after 'configs' is a config's name, not a key
        i = parts.index("configs")
        parts = parts[: i + 1] + parts[i + 2 :]
    return "".join(f"{p}." for p in parts)


def _workload_keys(monkeypatch) -> set[str]:
    from specbench.workloads import spec as workload_spec
    from specbench.workloads import spec_reader

    seen: set[str] = set()
    real = spec_reader.Reader.__init__

    def recording(self, data, origin, where, allowed):
        seen.update(f"workload: {_normalised(where)}{k}" for k in allowed)
        real(self, data, origin, where, allowed)

    monkeypatch.setattr(spec_reader.Reader, "__init__", recording)
    for name in workload_spec.builtin_names():
        try:
            workload_spec.builtin_spec(name)
        except SpecbenchError:
            pass
    assert len(workload_spec.builtin_names()) >= 5
    return seen


def _unread_flag_rows(rows: dict[str, str]) -> list[str]:
    """Entries of the flag rows no flag of any command reads (each flag reads its command's own entry first)."""
    read = {row_name(path, param, rows) for path, param, _ in _cli_params()}
    return sorted(name for name in rows if name not in read)


def _yaml_keys(monkeypatch) -> set[str]:
    return _sweep_keys() | _workload_keys(monkeypatch) | {"tree: paths"}


def test_every_flag_of_every_command_has_a_row():
    missing = [f"{path}: {key}" for path, param, key in _cli_params() if flag_row(path, param) is None]
    assert not missing, "flags without a row in specbench.bounds.FLAG_ROWS:\n" + "\n".join(missing)
    wrong = [
        f"{path}: {key} -> {flag_row(path, param)}"
        for path, param, key in _cli_params()
        if not row_exists(flag_row(path, param))
    ]
    assert not wrong, "rows that are not in the bounds table:\n" + "\n".join(wrong)
    stale = _unread_flag_rows(flag_rows())
    assert not stale, f"FLAG_ROWS names rows no flag of any command reads: {stale}"


def test_every_key_of_every_yaml_file_has_a_row(monkeypatch):
    keys, rows = _yaml_keys(monkeypatch), key_rows()
    assert len(keys) > 80
    missing = sorted(k for k in keys if k not in rows)
    assert not missing, "YAML keys without a row in specbench.bounds.KEY_ROWS:\n" + "\n".join(missing)
    assert all(row_exists(rows[k]) for k in keys)
    stale = sorted(k for k in rows if k not in keys)
    assert not stale, f"KEY_ROWS names keys no parser reads: {stale}"


def test_a_sweep_flags_rows_come_from_its_bound_alone(monkeypatch):
    """A bounded sweep flag's rows (its own and its key's) are read from the flag table: the command reads the
    flag's ``bound``, and a row bounds.py writes besides is refused (planted offenders: the key's row, the
    command's row, and a shared row only the sweep flag would read)."""
    flags, keys = declared_rows()
    bounded = [flag for flag in FLAGS if flag.bound is not None and flag.key is not None]
    assert len(flags) == len(keys) == len(bounded) >= 10
    assert keys["sweep: gammas"] == "gamma" and keys["sweep: workloads.count"] == "prompts"
    sweep_params = {flag_key("sweep", p): p for path, p, _ in _cli_params() if path == "sweep"}
    for flag in bounded:
        assert flag_row("sweep", sweep_params[flag.decls[0]]) == flag.bound, flag.name
    assert not set(flags) & set(bounds.FLAG_ROWS) and not set(keys) & set(bounds.KEY_ROWS)

    for table, planted in (("KEY_ROWS", "sweep: gammas"), ("FLAG_ROWS", "sweep --batch")):
        monkeypatch.setattr(bounds, table, {**getattr(bounds, table), planted: "prompts"})
        with pytest.raises(ValueError, match=f"{table} writes rows a flag table declares already: {planted}"):
            key_rows() if table == "KEY_ROWS" else flag_rows()
        monkeypatch.undo()
    assert "--workers" not in bounds.FLAG_ROWS  # only sweep has --workers: its row is the flag's
    planted_shared = {**flag_rows(), "--workers": "parallel_size"}
    assert _unread_flag_rows(planted_shared) == ["--workers"]


def test_every_row_is_documented():
    text = (ROOT / "docs" / "bounds.md").read_text()
    for name in list(BOUNDS) + list(TEXT_BOUNDS):
        assert f"| `{name}` |" in text, f"docs/bounds.md has no row {name}"


# ----------------------------------------------------------------------------- the rows are enforced: flags

NUMERIC_FLAGS = sorted(
    {
        (path, key)
        for path, param, key in _cli_params()
        if flag_row(path, param) in BOUNDS and getattr(param.type_descriptor, "annotation", None) in (int, float)
    }
)
TEXT_FLAGS = sorted(
    {(path, key) for path, param, key in _cli_params() if flag_row(path, param) in TEXT_BOUNDS and key.startswith("--")}
)


def _beyond(row: str, side: int) -> float:
    bound = BOUNDS[row]
    if side == 0:
        return bound.high * 10 + 1 if bound.integer else bound.high * 10 + 1.5
    return (bound.low - 1) if bound.integer else (bound.low - 1.5 if not bound.open_low else bound.low)


@fuzz(st.tuples(st.sampled_from(NUMERIC_FLAGS), st.sampled_from([0, 1])), short=40, long=400)
def _numeric_flags(case):
    (path, key), side = case
    rows = flag_rows()
    row = rows.get(f"{path} {key}", rows.get(key))
    value = _beyond(row, side)
    if math.isinf(value) or (side == 1 and BOUNDS[row].low <= -(2**63)):
        value = BOUNDS[row].high * 10 + 1
    value = int(value) if BOUNDS[row].integer else value
    result = invoke(*path.split(), key, value, "/nonexistent-folder-for-bounds")
    assert result.exit_code == 2, (path, key, value, result.output[-2000:])
    line = result.stderr.strip().splitlines()
    assert len(line) == 1 and key in line[0] and "must be" in line[0], (path, key, value, result.stderr)


@fuzz(st.sampled_from(TEXT_FLAGS), short=20, long=200)
def _text_flags(case):
    path, key = case
    rows = flag_rows()
    row = rows.get(f"{path} {key}", rows.get(key))
    value = "x" * (TEXT_BOUNDS[row].max_chars + 1) if row != "prompt" else "x" * 10
    if row == "prompt":
        return
    result = invoke(*path.split(), key, value, "/nonexistent-folder-for-bounds")
    assert result.exit_code == 2, (path, key, result.output[-2000:])
    assert "at most" in result.stderr or "must be" in result.stderr or "Invalid value" in result.stderr, result.stderr


test_every_numeric_flag_refuses_a_value_beyond_its_row, test_numeric_flags_long = _numeric_flags
test_every_text_flag_refuses_text_beyond_its_row, test_text_flags_long = _text_flags


# ----------------------------------------------------------------------------- the rows are enforced: sweep keys

BASE = {"name": "b", "target": "tiny-random-llama", "drafters": ["ngram"], "gammas": [2], "workloads": ["mt-bench"]}
SECTION_DOCS = {
    "timing": lambda k, v: {"timing": {k: v}},
    "adaptive": lambda k, v: {"adaptive": {k: v}},
    "executor": lambda k, v: {"executor": {"name": "ray", k: v}},
    "strategy": lambda k, v: {"strategy": [{"name": "online", k: v}]},
    "calibration": lambda k, v: {"mode": "replay", "calibration": {k: [v] if k == "gammas" else v}},
    "workloads": lambda k, v: {"workloads": [{"name": "mt-bench", k: v}]},
}
NUMERIC_KEYS = sorted(k for k, row in key_rows().items() if k.startswith("sweep: ") and row in BOUNDS)


@fuzz(st.tuples(st.sampled_from(NUMERIC_KEYS), st.sampled_from([0, 1, 2])), short=40, long=400)
def _sweep_keys_enforced(case):
    from specbench.measure.grid.sweep import build_spec

    key, side = case
    row = key_rows()[key]
    bound = BOUNDS[row]
    name = key.removeprefix("sweep: ")
    value = [bound.high * 10 + 1, bound.low - 1 if bound.low > -(2**63) else bound.high * 10 + 1, math.nan][side]
    if bound.integer and side < 2:
        value = int(value)
    if row == "adaptive.budget_s":
        value = "99999999h" if side != 2 else "-5s"
    section, _, leaf = name.partition(".")
    raw = dict(BASE)
    if leaf:
        raw.update(SECTION_DOCS[section](leaf, value))
    else:
        raw[name] = [value] if name in ("gammas", "temperatures", "request_rates", "concurrency") else value
    if name == "request_rates":
        raw["backend"] = {"name": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"}
    with pytest.raises(SpecbenchError) as refused:
        build_spec(raw, where="sweep.yaml")
    message = str(refused.value)
    assert "\n" not in message and (leaf or name).split(".")[-1] in message, (key, value, message)


test_every_numeric_sweep_key_refuses_a_value_beyond_its_row, test_sweep_keys_long = _sweep_keys_enforced
