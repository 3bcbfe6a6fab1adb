"""The one YAML loader (`specbench.safe_files.load_yaml_text`) refuses a key written twice in one mapping, at any
depth, naming the key and both lines — where PyYAML keeps the last value silently (``name: first`` /
``name: second`` ran as "second"). Hypothesis draws nested documents (mappings in mappings and in lists), picks
any mapping and writes one of its keys again; every file kind reads through the loader, so the sweep file's
refusal is shown through the CLI."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.errors import SpecbenchError
from specbench.safe_files import load_yaml_text
from tests.cli_helpers import assert_user_error, invoke

KEYS = st.from_regex(r"k_[a-z0-9]{1,5}", fullmatch=True)
SCALARS = st.integers(-1000, 1000) | st.from_regex(r"v_[a-z]{0,6}", fullmatch=True)


def mappings(children) -> st.SearchStrategy:
    return st.dictionaries(KEYS, children, min_size=1, max_size=4)


DOCUMENTS = st.recursive(
    mappings(SCALARS),
    lambda inner: mappings(SCALARS | inner | st.lists(inner | SCALARS, min_size=1, max_size=3)),
    max_leaves=20,
)


def _mapping_paths(node, path=()) -> list[tuple]:
    """Paths (keys and list indices) to every mapping in ``node``, the top one included."""
    found = [path] if isinstance(node, dict) else []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for step, child in children:
        found += _mapping_paths(child, (*path, step))
    return found


def emit(node, indent: int, lines: list[str], where: dict, path=(), duplicate=None) -> None:
    """Block YAML of ``node`` into ``lines``; ``where[path + (key,)]`` is the line of each key; ``duplicate``
    ((path, key, value)): that mapping gets ``key`` once more, after its own keys."""
    pad = " " * indent
    if isinstance(node, dict):
        pairs = list(node.items())
        if duplicate is not None and duplicate[0] == path:
            pairs.append((duplicate[1], duplicate[2]))
        for key, value in pairs:
            where.setdefault(("again",) if (*path, key) in where else (*path, key), len(lines) + 1)
            if isinstance(value, (dict, list)):
                lines.append(f"{pad}{key}:")
                emit(value, indent + 2, lines, where, (*path, key), duplicate)
            else:
                lines.append(f"{pad}{key}: {value}")
    else:
        for i, item in enumerate(node):
            if isinstance(item, (dict, list)):
                lines.append(f"{pad}-")
                emit(item, indent + 2, lines, where, (*path, i), duplicate)
            else:
                lines.append(f"{pad}- {item}")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(document=DOCUMENTS, data=st.data())
def test_a_key_written_twice_at_any_depth_is_refused_naming_it_and_both_lines(document, data):
    lines: list[str] = []
    emit(document, 0, lines, {})
    assert load_yaml_text("\n".join(lines) + "\n", "doc.yaml") == document  # the emitter writes what was drawn

    path = data.draw(st.sampled_from(_mapping_paths(document)), label="mapping")
    target = document
    for step in path:
        target = target[step]
    key = data.draw(st.sampled_from(sorted(target)), label="key")
    value = data.draw(SCALARS | mappings(SCALARS), label="second value")
    lines, where = [], {}
    emit(document, 0, lines, where, duplicate=(path, key, value))
    first, again = where[(*path, key)], where[("again",)]
    try:
        load_yaml_text("\n".join(lines) + "\n", "doc.yaml")
    except SpecbenchError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"key {key!r} written twice (lines {first} and {again}) was accepted")
    assert message == (
        f"doc.yaml: duplicate key '{key}' on lines {first} and {again}; a key may appear once per mapping"
    ), message


def test_keys_equal_as_values_are_the_same_key():
    """``1`` and ``true`` are one key once read (Python's 1 == True): refused, saying how each was written."""
    try:
        load_yaml_text("1: a\ntrue: b\n", "doc.yaml")
    except SpecbenchError as exc:
        assert re.search(r"duplicate key '1' on lines 1 and 2 \(written 'true' there: the same key\)", str(exc))
    else:
        raise AssertionError("1 and true were taken as two keys")
    assert load_yaml_text("'1': a\n1: b\n", "doc.yaml") == {"1": "a", 1: "b"}  # text and a number differ


def test_the_sweep_file_refuses_a_repeated_name(tmp_path, prompts_file):
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"name: first\ntarget: tiny-random-llama\nname: second\ndrafters: [ngram]\n"
        f"workloads: [{{name: 'jsonl:{prompts_file}:field=text:id=id', count: 1}}]\n"
    )
    assert_user_error(invoke("sweep", path, "--dry-run"), "duplicate key 'name' on lines 1 and 3")
