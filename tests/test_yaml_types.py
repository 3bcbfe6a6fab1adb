"""YAML scalars are read by the YAML 1.2 core schema, and every text-typed key is checked to be text.

The root fixes: one loader (`specbench.safe_files.load_yaml_text`, `CoreSchemaLoader`) for every YAML file
specbench reads, whose implicit types are the 1.2 core schema's (``yes``/``no``/``on``/``off``, dates, ``0b101``,
``1_000`` and ``12:30`` stay text; a number keeps the text it was written as), and one check of a text key
(`specbench.errors.check_text`, `Reader.get(key, str)`, `Reader.text_key`): anything else is refused in one line
that names the key and the value as written, never turned back into text by ``str()``.

The properties run over every text value and every mapping key of every YAML file specbench ships (sweeps,
workloads, streams, trees) and of a sweep that sets every key: Hypothesis picks a position and writes a scalar
there unquoted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from specbench.errors import SpecbenchError
from specbench.safe_files import load_yaml_text
from tests.cli_helpers import assert_user_error, invoke, write_sweep_yaml
from tests.test_fuzz import fuzz

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = "specbench_placeholder_value"
# text in YAML 1.2 (the core schema), something else in YAML 1.1 (PyYAML's SafeLoader)
YAML11_ONLY = [
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Yes",
    "NO",
    "On",
    "OFF",
    "2024-01-01",
    "2024-01-01 12:30:00",
    "0b101",
    "1_000",
    "12:30",
    "190:20:30",
    "=",
    "<<",
]
# not text in YAML 1.2, each with the value it is read as
CORE_NON_TEXT = {
    "0x1F": 31,
    "0o17": 15,
    "017": 17,
    "+5": 5,
    "-7": -7,
    "1e3": 1000.0,
    ".5": 0.5,
    "1.": 1.0,
    "true": True,
    "True": True,
    "FALSE": False,
    "null": None,
    "~": None,
}
# a sweep that sets every text key the sweep parser reads
EVERY_KEY_SWEEP = {
    "name": "every-key",
    "description": "all keys",
    "target": "tiny-random-llama",
    "device": "cpu",
    "dtype": "fp32",
    "kernels": "auto",
    "mode": "live",
    "layout": "auto",
    "threads": "auto",
    "trees": ["chain"],
    "drafters": [{"type": "draft-model", "params": {"model": "tiny-random-llama-draft"}}, "ngram"],
    "workloads": [{"name": "mt-bench", "split": "eval", "count": 2}, "humaneval"],
    "gammas": [1, 2],
    "strategy": [{"name": "online", "start": "fresh", "loss": "accepted"}],
    "executor": {"name": "ray", "address": "10.0.0.5:6379"},
}


def _documents() -> list[tuple[str, Path, object]]:
    """(kind, path, data) for every YAML file the project ships, and the every-key sweep."""
    docs = []
    for kind, folder in (("sweep", "sweeps"), ("workload", "workloads"), ("tree", "trees")):
        for path in sorted((ROOT / folder).glob("*.yaml")):
            docs.append((kind, path, load_yaml_text(path.read_text(), str(path))))
    docs.append(("sweep", ROOT / "sweeps" / "every-key.yaml", EVERY_KEY_SWEEP))
    return docs


DOCUMENTS = _documents()


def _positions(data, path=()) -> list[tuple]:
    """Paths to every text value (("v", ...keys)) and every text mapping key (("k", ...keys)) of ``data``."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str):
                found.append(("k", *path, key))
            found.extend(_positions(value, (*path, key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found.extend(_positions(value, (*path, i)))
    elif isinstance(data, str):
        found.append(("v", *path))
    return found


POSITIONS = [(i, position) for i, (_, _, data) in enumerate(DOCUMENTS) for position in _positions(data)]


def _with_placeholder(data, position):
    """A copy of ``data`` with the value (or the key) at ``position`` replaced by `PLACEHOLDER`."""
    what, *path = position
    if not path:
        return PLACEHOLDER
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        if not rest and what == "k":
            return {(PLACEHOLDER if k == head else k): v for k, v in data.items()}
        return {k: (_with_placeholder(v, (what, *rest)) if k == head else v) for k, v in data.items()}
    return [(_with_placeholder(v, (what, *rest)) if i == head else v) for i, v in enumerate(data)]


def _written_at(data, position, scalar: str, tmp: Path, kind: str) -> Path:
    """The document with ``scalar`` written unquoted at ``position``, as a file of its kind."""
    text = yaml.safe_dump(_with_placeholder(data, position), sort_keys=False, width=10_000)
    assert text.count(PLACEHOLDER) == 1, text
    path = tmp / f"doc-{kind}.yaml"
    path.write_text(text.replace(PLACEHOLDER, scalar))
    return path


def _parse(kind: str, path: Path):
    if kind == "sweep":
        from specbench.measure.grid.sweep import build_spec, load_spec_file

        return build_spec(load_spec_file(path), where=str(path))
    if kind == "workload":
        from specbench.workloads.spec import read_spec_file

        return read_spec_file(path)
    from specbench.engine.tree import parse_tree

    return parse_tree(f"paths:{path}")


def _value_at(data, position):
    what, *path = position
    for key in path[:-1] if what == "k" else path:
        data = data[key]
    return data


# ----------------------------------------------------------------------------- the loader


@given(st.sampled_from(YAML11_ONLY), st.sampled_from(["{s}", "[{s}]", "a: {s}", "a: [x, {s}]", "{s}: 1"]))
def test_yaml_11_only_scalars_stay_text(scalar, template):
    """What YAML 1.1 reads as a boolean, a date, a sexagesimal or an underscored number is text in 1.2."""
    data = load_yaml_text(template.format(s=scalar), "t")
    flat = data if not isinstance(data, dict) else ([*data.values(), *data.keys()])
    flat = flat if isinstance(flat, list) else [flat]
    assert scalar in [x for item in flat for x in (item if isinstance(item, list) else [item])], data


@given(st.sampled_from(sorted(CORE_NON_TEXT)))
def test_core_schema_numbers_keep_the_text_they_were_written_as(scalar):
    value = load_yaml_text(f"a: {scalar}", "t")["a"]
    expected = CORE_NON_TEXT[scalar]
    assert value == expected and type(value) is not str
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        assert value.written == scalar


def test_tags_beyond_the_core_schema_are_refused():
    for text in ("a: !!binary aGk=", "a: !!timestamp 2024-01-01", "a: !!set {x}", "a: !!python/name:os.system"):
        with pytest.raises(SpecbenchError, match="is not allowed"):
            load_yaml_text(text, "t")


# ----------------------------------------------------------------------------- every text key of every file kind


def _check_text_position(doc_index: int, position, scalar: str, tmp: Path) -> None:
    kind, origin, data = DOCUMENTS[doc_index]
    path = _written_at(data, position, scalar, tmp, kind)
    loaded = load_yaml_text(path.read_text(), str(path))
    if scalar in YAML11_ONLY:  # stays text, exactly as written, wherever it is
        if position[0] == "v":
            assert _value_at(loaded, position) == scalar, (origin, position)
        return
    try:
        _parse(kind, path)
    except SpecbenchError as exc:
        message = str(exc)
        assert "\n" not in message
        if "must be text" in message or "keys of" in message:
            # the value as written, never str() of it (true/false/null in YAML's own lower-case words)
            shown = {"~": "null"}.get(
                scalar, scalar.lower() if CORE_NON_TEXT[scalar] in (True, False, None) else scalar
            )
            assert f"got {shown}" in message, (origin, position, message)
        return
    # accepted: only where the key takes a number, a boolean or nothing as well as text
    key = [k for k in position[1:] if isinstance(k, str)]
    if kind == "sweep" and CORE_NON_TEXT[scalar] is None and position[0] == "v" and len(position) == 2:
        return  # a top-level sweep key left null reads as its default (docs/sweeps: absent or null, the same)
    if CORE_NON_TEXT[scalar] is None and position[0] == "v" and tuple(key[-2:]) in NULLABLE_TEXT:
        return  # a text key whose null is documented: "no such field"
    assert key and key[-1] in ACCEPTS_NON_TEXT and position[0] == "v", (origin, position, scalar)


# text keys that take null as well, with a meaning (a workload file's `fields: {id: null}`: the rows have no id field)
NULLABLE_TEXT = {("fields", "id"), ("fields", "category")}


# keys whose value may be text or something else (a number of tokens, a duration, a count, off)
ACCEPTS_NON_TEXT = {
    "budget",
    "threads",
    "layout",
    "description",
    "arrivals",
    "max_new_tokens",
    "label",
    "gammas",
    "backend",
    "workload",
    "bin",  # a prepared set's bin: null means every bin
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("yaml-types")


def _property(scratch_dir):
    @fuzz(
        st.tuples(st.sampled_from(range(len(POSITIONS))), st.sampled_from(sorted(CORE_NON_TEXT) + YAML11_ONLY)),
        short=60,
        long=3000,
    )
    def prop(case):
        index, scalar = case
        doc_index, position = POSITIONS[index]
        _check_text_position(doc_index, position, scalar, scratch_dir)

    return prop


_SCRATCH = Path(__import__("tempfile").mkdtemp(prefix="specbench-yaml-types-"))
test_every_text_key_of_every_file_kind_is_text_or_refused_as_written, test_every_text_key_long = _property(_SCRATCH)


def test_every_file_kind_and_many_keys_are_covered():
    """The property's positions reach every file kind and the text keys the issue named."""
    kinds = {DOCUMENTS[i][0] for i, _ in POSITIONS}
    assert kinds == {"sweep", "workload", "tree"} or kinds == {"sweep", "workload"}
    keys = {position[-1] for _, position in POSITIONS if isinstance(position[-1], str)}
    assert {"name", "description", "target", "type", "model", "split", "workload", "mode"} <= keys


# ----------------------------------------------------------------------------- the cases through the CLI


@pytest.mark.parametrize("written,name", [("yes", "yes"), ("on", "on"), ("no", "no"), ("off", "off")])
def test_a_sweep_named_yes_on_no_or_off_is_called_so(tmp_path, written, name):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"name: {written}\ntarget: tiny-random-llama\ndrafters: [ngram]\ngammas: [2]\nworkloads: [mt-bench]\n"
    )
    result = invoke("sweep", sweep, "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"results/{name}" in result.output or f"sweep '{name}'" in result.output or name in result.output


@pytest.mark.parametrize("written", ["0x1F", "true", "1e3", "017"])
def test_a_sweep_name_that_is_not_text_is_refused_as_written(tmp_path, written):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"name: {written}\ntarget: tiny-random-llama\ndrafters: [ngram]\ngammas: [2]\nworkloads: [mt-bench]\n"
    )
    assert_user_error(invoke("sweep", sweep, "--dry-run"), "'name' must be text", f"got {written}")


def test_a_drafter_model_written_as_a_number_is_refused_and_its_flag_text_kept(tmp_path):
    path = write_sweep_yaml(
        tmp_path, {"name": "n", "target": "tiny-random-llama", "gammas": [2], "workloads": ["mt-bench"]}
    )
    path.write_text(path.read_text() + "drafters:\n- type: draft-model\n  params: {model: 0x1F}\n")
    assert_user_error(invoke("sweep", path, "--dry-run"), "must be text", "got 0x1F")
