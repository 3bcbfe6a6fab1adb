"""Rules the code keeps that an import contract cannot state, checked by scanning the syntax tree.

* No private member of another class is called across modules: ``obj._name`` where ``_name`` is a
  private member (method or attribute) of one of specbench's classes is read only in a module that
  defines a member of that name (``self._name`` and ``cls._name`` are always the object's own).
* A verdict's answer words ("confident yes", ...) are spelled only in `specbench.analysis.verdicts.verdict`, and a
  verdict's keys ("answer", "candidates", ...) are read from a mapping only in the module that writes that
  verdict (its ``as_dict`` / ``from_dict``): everything else reads the typed verdict's attributes.
* One look engine: rounds of looks (`choose_round`) and their time (`share_time`) are run only by
  `specbench.measure.run.looks`, and the status words of an item measured in looks ("prompts exhausted",
  "budget", ...) are defined only in `specbench.analysis.verdicts.status` — no second look loop.
* One JSON layer: a JSON file is read and written only by `specbench.safe_files.read_json` / `write_json` (size
  bounded, atomic, never through a symlink, numpy values made JSON-ready). Outside safe_files.py no module
  imports ``dump``/``load``/``dumps``/``loads`` from json, calls ``json.dump`` or ``json.load`` (they take a
  file), hands a whole-file writer (`write_atomic`, `atomic_write_bytes`, `create_new`, ``.write_text``,
  ``.write_bytes``) ``json.dumps(...)`` as its data (alone, with text added, or ``.encode()``d), or calls
  ``json.loads`` on a file's text (``.read_text()``, ``.read_bytes()`` — ``.decode()``d or not —,
  `read_text_file`, `read_bytes`). JSON over a pipe or socket (``stream.write(json.dumps(m))``, ``json.loads(line)``),
  JSON Lines files and JSON text in memory (hash keys, stdout) are not JSON files; text kept in a variable first is
  not traced.

Each rule's scanner is checked on a planted offender too, so that a rule that can no longer fail is noticed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specbench.analysis.verdicts.verdict import Answer

PACKAGE = Path(__file__).resolve().parents[1] / "specbench"

ANSWER_WORDS = {a.value for a in Answer if a is not Answer.MIXED}
VERDICT_KEYS = {"answer", "candidates", "prompts_needed", "lo_adj", "hi_adj", "hi_sim", "confident"}
# the modules that write a verdict (and so may read its keys back)
VERDICT_MODULES = {
    "specbench/analysis/verdicts/verdict.py",  # Answer, Candidate, Decision
    "specbench/analysis/verdicts/stopping_history.py",  # the adaptive look (adaptive.json)
    "specbench/analysis/stream_adaptation.py",  # online adaptation's verdict per deployment
    "specbench/analysis/recommendation/schedule_comparison.py",  # best dynamic schedule vs best fixed γ
    "specbench/analysis/recommendation/confirmation.py",  # a recommendation confirmed on fresh prompts (confirm.json)
    "specbench/analysis/recommendation/confirm_targets.py",  # its prediction and targets
    "specbench/analysis/recommendation/confirm_compare.py",  # its paired ratios
    "specbench/analysis/recommendation/confirm_report.py",  # its looks (confirm.json)
    "specbench/records/merge.py",  # merged shards' adaptive.json (a look's answer, or "shards differ")
    "specbench/analysis/verdicts/choice.py",  # the choice among the options (its prompts_needed)
}
LOOK_VERBS = {"choose_round", "share_time"}  # a round of looks and its time: the look engine's alone
LOOK_ENGINE = "specbench/measure/run/looks.py"
STATUS_MODULE = "specbench/analysis/verdicts/status.py"
STATUS_WORDS = {"open", "decided", "prompts exhausted", "budget", "futile"}


JSON_LAYER = "specbench/safe_files.py"
JSON_FILE_WRITERS = {"write_atomic", "atomic_write_bytes", "create_new", "write_text", "write_bytes"}
JSON_FILE_READERS = {"read_text", "read_bytes", "read_text_file"}

# the packages that see verdicts (the engine, models, training and the catalogue never do)
VERDICT_READERS = ("analysis", "cli", "figures", "measure", "records", "backends")


def _modules(packages: tuple[str, ...] | None = None) -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE.parent)): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if packages is None or path.relative_to(PACKAGE).parts[0] in packages
    }


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def class_private_members(tree: ast.Module) -> set[str]:
    """Private names a module's classes define: methods, class attributes and ``self._x = ...`` attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in ast.walk(node):
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name):
                names.add(item.name)
            elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store) and _private(item.attr):
                names.add(item.attr)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name) and _private(t.id))
    return names


def foreign_private_uses(tree: ast.Module, ours: set[str], theirs: set[str]) -> list[tuple[int, str]]:
    """(line, name) of ``obj._name`` reads where ``_name`` is a private member of some class of the package
    (``theirs``) that this module's own classes do not define (``ours``), and ``obj`` is not self or cls."""
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr) or node.attr not in theirs:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        if node.attr in ours:
            continue
        hits.append((node.lineno, node.attr))
    return hits


def answer_word_uses(tree: ast.Module) -> list[tuple[int, str]]:
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ANSWER_WORDS
    ]


def verdict_key_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """``x["answer"]`` (read) and ``x.get("answer")`` for the verdict keys."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value in VERDICT_KEYS:
                hits.append((node.lineno, key.value))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in VERDICT_KEYS
        ):
            hits.append((node.lineno, node.args[0].value))
    return hits


def look_loop_calls(tree: ast.Module) -> list[tuple[int, str]]:
    """Calls of the look engine's verbs (``choose_round(...)``, ``policy.share_time(...)``)."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in LOOK_VERBS:
                hits.append((node.lineno, name))
    return hits


def status_definitions(tree: ast.Module) -> list[tuple[int, str]]:
    """Module-level names bound to a status word (``OPEN = "open"``, ``A, B = "budget", "futile"``); a tuple of
    words bound to one name (a list of keys) is no definition."""
    hits = []
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name):
            values = [node.value]
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            values = node.value.elts
        else:
            continue
        for value in values:
            if isinstance(value, ast.Constant) and value.value in STATUS_WORDS:
                hits.append((node.lineno, value.value))
    return hits


def self_handoffs(tree: ast.Module) -> list[tuple[int, str]]:
    """Calls that hand ``self`` to another function (``group_outputs(self, piece)``): an object passing itself as an
    untyped context. ``super().__init__(...)``, ``self.method(...)`` and ``type(self)`` are not hand-offs."""
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not any(isinstance(a, ast.Name) and a.id == "self" for a in node.args):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            continue
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "?")
        if name in {
            "type",
            "id",
            "isinstance",
            "getattr",
            "setattr",
            "hasattr",
            "repr",
            "str",
            "super",
            "vars",
            "replace",
        }:
            continue
        hits.append((node.lineno, name))
    return hits


def test_no_measure_object_hands_itself_to_another_function():
    """measure/ passes typed values (the work context, a policy's rule), never an object itself."""
    found = [
        f"{name}:{line}: {call}(self, ...)"
        for name, tree in _modules(("measure",)).items()
        for line, call in self_handoffs(tree)
    ]
    assert not found, "objects handing themselves on:\n" + "\n".join(found)


def _called(node: ast.AST) -> str | None:
    """The name a call calls (``f(...)`` → f, ``x.f(...)`` → f), None for anything else."""
    if not isinstance(node, ast.Call):
        return None
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)


def _json_call(node: ast.AST, names: set[str]) -> bool:
    """``json.NAME(...)`` for a NAME of ``names``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "json"
        and node.func.attr in names
    )


def _dumped(expr: ast.AST) -> bool:
    """``json.dumps(x)``, ``json.dumps(x) + "\\n"``, ``(json.dumps(x) + "\\n").encode()``."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _dumped(expr.left) or _dumped(expr.right)
    if _called(expr) == "encode" and isinstance(expr.func, ast.Attribute):
        return _dumped(expr.func.value)
    return _json_call(expr, {"dumps"})


def _file_text(expr: ast.AST) -> bool:
    """``p.read_text()``, ``p.read_bytes()``, ``p.read_bytes().decode()``, ``read_text_file(p)``, ``read_bytes(p)``."""
    if _called(expr) == "decode" and isinstance(expr.func, ast.Attribute):
        return _file_text(expr.func.value)
    return _called(expr) in JSON_FILE_READERS


def json_file_uses(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) of each JSON file read or written around `specbench.safe_files` (the rule above)."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "json":
            names = [a.name for a in node.names if a.name in ("dump", "load", "dumps", "loads")]
            hits += [(node.lineno, f"from json import {name}") for name in names]
        elif _json_call(node, {"dump", "load"}):
            hits.append((node.lineno, f"json.{node.func.attr}"))
        elif _json_call(node, {"loads"}) and node.args and _file_text(node.args[0]):
            hits.append((node.lineno, "json.loads of a file's text"))
        elif _called(node) in JSON_FILE_WRITERS and any(
            _dumped(arg) for arg in [*node.args, *(k.value for k in node.keywords)]
        ):
            hits.append((node.lineno, f"json.dumps into {_called(node)}"))
    return hits


def test_json_files_are_read_and_written_only_through_safe_files():
    found = [
        f"{name}:{line}: {what}"
        for name, tree in _modules().items()
        if name != JSON_LAYER
        for line, what in json_file_uses(tree)
    ]
    assert not found, f"JSON files outside {JSON_LAYER} (use read_json / write_json):\n" + "\n".join(found)


def test_one_look_engine_runs_every_look_loop():
    found = [
        f"{name}:{line}: {verb}()"
        for name, tree in _modules().items()
        if name != LOOK_ENGINE
        for line, verb in look_loop_calls(tree)
    ]
    assert not found, f"a look loop outside {LOOK_ENGINE}:\n" + "\n".join(found)


def test_status_words_are_defined_once():
    found = [
        f"{name}:{line}: {word!r}"
        for name, tree in _modules().items()
        if name != STATUS_MODULE
        for line, word in status_definitions(tree)
    ]
    assert not found, f"status words defined outside {STATUS_MODULE}:\n" + "\n".join(found)


def test_no_private_member_of_another_class_is_used_across_modules():
    modules = _modules()
    defined = {name: class_private_members(tree) for name, tree in modules.items()}
    everywhere = set().union(*defined.values())
    found = [
        f"{name}:{line}: .{attr}"
        for name, tree in modules.items()
        for line, attr in foreign_private_uses(tree, defined[name], everywhere)
    ]
    assert not found, "private members of another module's class used:\n" + "\n".join(found)


def test_answer_words_are_spelled_only_where_the_verdict_is_defined():
    found = [
        f"{name}:{line}: {word!r}"
        for name, tree in _modules().items()
        if name != "specbench/analysis/verdicts/verdict.py"
        for line, word in answer_word_uses(tree)
    ]
    assert not found, "verdict answer words outside specbench/analysis/verdicts/verdict.py:\n" + "\n".join(found)


def test_verdict_keys_are_read_only_by_the_modules_that_write_them():
    found = [
        f"{name}:{line}: [{key!r}]"
        for name, tree in _modules(VERDICT_READERS).items()
        if name not in VERDICT_MODULES
        for line, key in verdict_key_reads(tree)
    ]
    assert not found, "verdict keys read outside the verdicts' own modules:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source,scanner,expected",
    [
        ("def f(runner):\n    return runner._run_units([])\n", "private", [(2, "_run_units")]),
        ("class A:\n    def _run_units(self):\n        return other._run_units()\n", "private", []),
        ("def f(v):\n    return v['answer'] == 'confident yes'\n", "keys", [(2, "answer")]),
        ("def f(v):\n    return v.get('prompts_needed')\n", "keys", [(2, "prompts_needed")]),
        ("def f(v):\n    return v.answer == 'cannot tell'\n", "words", [(2, "cannot tell")]),
        ("def f(v):\n    return f'cannot tell: {v}'\n", "words", []),  # prose, not a compared word
        ("def f(c, s, n, b):\n    return choose_round(c, s, n, b)\n", "loops", [(2, "choose_round")]),
        ("def f(p, r):\n    return p.share_time(r, 1.0)\n", "loops", [(2, "share_time")]),
        ('OPEN, DONE = "open", "decided"\n', "status", [(1, "open"), (1, "decided")]),
        ('WORDS = {"budget": "ran out"}\n', "status", []),  # a mapping of words is no definition
        ('KEYS = ("first", "budget")\n', "status", []),  # nor a tuple of keys
        ("class W:\n    def run(self, p):\n        return group_outputs(self, p)\n", "handoff", [(3, "group_outputs")]),
        ("class W:\n    def run(self, p):\n        return self.go(self.context, p)\n", "handoff", []),
        ("def f(p, d):\n    json.dump(d, p.open('w'))\n", "json", [(2, "json.dump")]),
        ("def f(h):\n    return json.load(h)\n", "json", [(2, "json.load")]),
        ("def f(p):\n    return json.loads(p.read_text())\n", "json", [(2, "json.loads of a file's text")]),
        ("def f(p):\n    return json.loads(p.read_bytes().decode())\n", "json", [(2, "json.loads of a file's text")]),
        ("def f(p, d):\n    write_atomic(p, json.dumps(d) + '\\n')\n", "json", [(2, "json.dumps into write_atomic")]),
        ("def f(p, d):\n    p.write_text(json.dumps(d, indent=2))\n", "json", [(2, "json.dumps into write_text")]),
        ("def f(p, d):\n    p.write_bytes(json.dumps(d).encode())\n", "json", [(2, "json.dumps into write_bytes")]),
        ("from json import load\n", "json", [(1, "from json import load")]),
        ("def f(pipe, m):\n    pipe.write(json.dumps(m) + '\\n')\n", "json", []),  # a pipe, not a file
        ("def f(line):\n    return json.loads(line)\n", "json", []),  # a line of a stream
        ("def f(k):\n    return sha1(json.dumps(k).encode())\n", "json", []),  # text in memory
    ],
)
def test_each_scanner_finds_a_planted_offender(source, scanner, expected):
    tree = ast.parse(source)
    if scanner == "private":
        found = foreign_private_uses(tree, class_private_members(tree), {"_run_units"})
    elif scanner == "keys":
        found = verdict_key_reads(tree)
    elif scanner == "loops":
        found = look_loop_calls(tree)
    elif scanner == "status":
        found = status_definitions(tree)
    elif scanner == "handoff":
        found = self_handoffs(tree)

    elif scanner == "json":
        found = json_file_uses(tree)
    else:
        found = answer_word_uses(tree)
    assert found == expected
