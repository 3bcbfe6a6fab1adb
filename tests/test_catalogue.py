"""The drafter catalogue (`specbench.catalogue.drafters`): one complete entry per drafter kind, the only
place drafter names are compared or tabled, and the worked example of docs/architecture.md ("Adding a
drafter"): a kind registered at run time is replayed, given a vLLM config and refused or exported by
its entry alone."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import subprocess
from pathlib import Path

import pytest

from specbench.analysis.settings.engine_settings import engine_settings
from specbench.analysis.settings.vllm_speculative import speculative_config
from specbench.backends import registry as backends
from specbench.catalogue import drafters as catalogue
from specbench.catalogue import engines
from specbench.catalogue.drafters import DrafterKind, Param
from specbench.engine.drafters import make_drafter, registry
from specbench.engine.drafters.networks.eagle import Eagle3Type
from specbench.engine.drafters.ngram import NgramType
from specbench.engine.drafters.registry import BUILD_ARGUMENTS
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep import build_spec
from specbench.measure.replay.replayer import Replayer, replay_chain
from specbench.training.vllm_export import exporter, write_export

ROOT = Path(__file__).resolve().parents[1]
# where drafter names may be compared or tabled: the catalogue and the drafters' own modules
OWNERS = ("specbench/catalogue/", "specbench/engine/drafters/")


# ----------------------------------------------------------------------------- completeness


@pytest.mark.parametrize("name", catalogue.names())
def test_every_buildable_kind_has_a_complete_entry_that_its_class_agrees_with(name):
    kind = catalogue.get(name)
    assert kind.summary and kind.name == name
    drafter_type = registry.get(name)
    assert drafter_type.name == name, "the class's name is the entry's"
    signature = inspect.signature(type(drafter_type).build).parameters
    declared = {
        p: (s.default if s.default is not inspect.Parameter.empty else None)
        for p, s in signature.items()
        if p not in BUILD_ARGUMENTS
    }
    assert declared == {p: param.default for p, param in kind.params.items()}, "parameters and defaults"
    for p, param in kind.params.items():
        assert param.kind in str(signature[p].annotation), f"{p}: {param.kind} vs {signature[p].annotation}"
    from specbench.engine.drafters.networks.trained import TrainedType

    assert kind.trained == isinstance(drafter_type, TrainedType)
    assert kind.model_free == (kind.forwards == (0, 0))
    assert (kind.replay is not None) <= (not kind.trained), "replay covers prompt lookup and draft models"
    assert (kind.vllm_weights is None) == (kind.model_free or kind.vllm_method is None)
    assert set(kind.vllm_params) <= set(kind.params)
    if kind.export is not None:
        assert kind.vllm_method is not None and kind.trained and callable(_resolve(kind.export))


def test_every_drafter_class_has_an_entry():
    """A `DrafterType` subclass in the drafters' package without a catalogue entry (or whose entry names
    another class) would be a drafter the rest of specbench knows nothing about."""
    import importlib
    import pkgutil

    import specbench.engine.drafters as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    classes = {c for c in subclasses(registry.DrafterType) if c.name and c.__module__.startswith(package.__name__)}
    assert classes, "no drafter classes found"
    for cls in classes:
        assert cls.name in catalogue.names(), f"{cls.__qualname__} ({cls.name}) has no catalogue entry"
        assert catalogue.DRAFTERS.load(cls.name) is cls, f"{cls.name}'s entry names another class"


def _resolve(reference):
    from specbench.catalogue.registry import resolve

    return resolve(reference, "test")


def test_every_kind_is_an_entry_with_its_facts_and_only_served_kinds_lack_a_class():
    every = catalogue.names(buildable=False)
    assert set(catalogue.names()) < set(every) and "suffix" in every
    for name in every:
        kind = catalogue.get(name)
        assert isinstance(kind, DrafterKind) and kind.summary
        assert kind.buildable or kind.vllm_method or kind.sglang_algorithm or kind.llamacpp_type, (
            f"{name}: no one runs it"
        )
    assert catalogue.replayable() == ["ngram", "draft-model"]
    assert catalogue.nestable() == ["draft-model", "eagle", "eagle3"]
    assert catalogue.names(trained=True) == registry.names(trained=True)


def test_a_registered_kind_with_an_incomplete_entry_fails(tmp_path):
    """The completeness test can fail: an entry whose parameters disagree with its class's is caught."""
    bad = dataclasses.replace(
        catalogue.get("ngram"),
        name="ngram-bad",
        cls="specbench.engine.drafters.ngram:NgramType",
        params={"n_min": Param("int", 1)},
    )
    catalogue.register(bad)
    try:
        with pytest.raises(AssertionError):
            test_every_buildable_kind_has_a_complete_entry_that_its_class_agrees_with("ngram-bad")
    finally:
        catalogue.unregister("ngram-bad")
    with pytest.raises(SpecbenchError, match="replay 'magic' is not one of"):
        DrafterKind("x", "x", None, replay="magic")


def test_unknown_kinds_are_one_line_errors_and_builtins_stay():
    with pytest.raises(SpecbenchError, match=r"unknown drafter 'eagel' \(did you mean 'eagle'\?\)"):
        catalogue.get("eagel")
    with pytest.raises(SpecbenchError, match=r"unknown drafter 'suffix'.*choose from: ngram,"):
        catalogue.buildable("suffix")  # known, but the own engine cannot build it
    with pytest.raises(SpecbenchError, match="already registered"):
        catalogue.register(catalogue.get("ngram"))
    catalogue.unregister("ngram")
    assert "ngram" in catalogue.names()


# ----------------------------------------------------------------------------- no other table


def _kind_names() -> set[str]:
    return set(catalogue.names(buildable=False))


def _strings(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for element in node.elts for s in _strings(element)]
    return []


def name_comparisons(
    path: Path, names: set[str], only_with: dict[str, str] | None = None, not_with: dict[str, str] | None = None
) -> list[str]:
    """Lines of ``path`` that compare something with a name literal (``==``, ``in``, ...), table two or more of
    them (a tuple, list or set of names only) or key a dict by one. ``only_with`` maps names that also mean
    something else to a word: such a name counts only where the expression's text holds the word (drafters:
    target-only 'none' where it names a drafter; backends: 'vllm', also an engine whose settings a recommendation
    prints, where it names a backend); ``not_with`` the other way round: such a name counts only where the text
    lacks the word (engines: 'vllm' unless it names a backend). So each use of 'vllm' is counted by exactly one
    of the backend and engine scans."""
    only_with = {catalogue.TARGET_ONLY: "drafter"} if only_with is None else dict(only_with)
    only_with.update({name: "\0" + word for name, word in (not_with or {}).items()})
    source = path.read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        hits = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            hits = [s for operand in operands for s in _strings(operand) if s in names or s in only_with]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            named = [s for s in strings if s in names or s in only_with]
            if len(named) >= 2:  # a table of two or more names (beside other words: `("vllm", "sglang", "all")`)
                hits = named
        elif isinstance(node, ast.Dict):
            hits = [s for key in node.keys if key is not None for s in _strings(key) if s in names or s in only_with]
        if any(s in only_with for s in hits):  # (the segment's text only then: reading it costs a pass over the file)
            text = ast.get_source_segment(source, node) or ""
            hits = [s for s in hits if s not in only_with or _holds(text, only_with[s])]
        if hits:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(set(hits))}")
    return found


def _holds(text: str, word: str) -> bool:
    """Whether ``text`` holds ``word``; a word marked with a leading NUL (``not_with``): whether it lacks it."""
    return word[1:] not in text if word.startswith("\0") else word in text


def _package_files(*patterns: str) -> list[str]:
    return subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def test_no_drafter_name_is_compared_or_tabled_outside_the_catalogue_and_the_drafters():
    names = _kind_names()
    files = _package_files("specbench/*.py", "scripts/*.py")
    offenders = [hit for f in files if not f.startswith(OWNERS) for hit in name_comparisons(ROOT / f, names)]
    assert not offenders, "drafter names compared or tabled outside the catalogue:\n" + "\n".join(offenders)


# where backend names may be compared or tabled: the backends themselves (their registry entry holds every fact
# measure/ and the CLI ask; docs/architecture.md, "Adding a backend")
BACKEND_OWNERS = ("specbench/backends/",)


def _backend_only_with() -> dict[str, str]:
    """Backend names that are also engine names (the engines a recommendation prints settings for) count only
    where the expression names a backend."""
    return {name: "backend" for name in backends.names() if name in engines.ENGINES}


def test_no_backend_name_is_compared_or_tabled_outside_the_backends():
    """Facts about a backend (own engine settings, concurrency, engine starts, ...) come from its
    `backends.registry.BackendKind` entry, never from comparing its name. Scripts are left out: a benchmark of
    named backends is a plan of runs."""
    only_with = _backend_only_with()
    names = set(backends.names()) - set(only_with)
    offenders = [
        hit
        for f in _package_files("specbench/*.py")
        if not f.startswith(BACKEND_OWNERS)
        for hit in name_comparisons(ROOT / f, names, only_with)
    ]
    assert not offenders, "backend names compared or tabled outside the backends:\n" + "\n".join(offenders)


def test_the_name_check_finds_a_comparison_and_a_table(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'if kind == "medusa":\n    pass\nSTEPS = {"ngram": 0}\nREPLAYABLE = ("ngram", "draft-model")\n'
        'ok = kind in ("chain",)\nbase = row["drafter"] == "none"\nlogits = mode == "none"\n'
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        hits = name_comparisons(planted, _kind_names())
    finally:
        ROOT = saved
    assert [h.split(":")[1] for h in hits] == ["1", "3", "4", "6"], hits


def test_the_backend_name_check_finds_a_comparison_a_table_and_a_backend_vllm(tmp_path):
    """Planted offenders: each kind of use the backend scan must catch (lines 1, 3, 4, 5), beside uses of the
    same literals it must leave alone (an engine's settings keyed by 'vllm', a plan naming one backend)."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        'if spec.backend != "own":\n    pass\nSTART_S = {"vllm-server": 40.0}\nKEPT = ("vllm", "vllm-server")\n'
        'served = records["backend"] == "vllm"\nsettings = {"vllm": config}\nok = "vllm" in engines\n'
        'spec = {"backend": "openai"}\n'
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        only_with = _backend_only_with()
        hits = name_comparisons(planted, set(backends.names()) - set(only_with), only_with)
    finally:
        ROOT = saved
    assert [h.split(":")[1] for h in hits] == ["1", "3", "4", "5"], hits


# where engine names may be compared or tabled: the engine catalogue alone (docs/architecture.md, "Adding an engine")
ENGINE_OWNERS = ("specbench/catalogue/",)


def _engine_not_with() -> dict[str, str]:
    """Engine names that are also backend names count unless the expression names a backend (the backend scan
    counts those)."""
    return {name: "backend" for name in engines.names() if name in backends.BACKENDS}


def engine_name_uses(path: Path) -> list[str]:
    not_with = _engine_not_with()
    return name_comparisons(path, set(engines.names()) - set(not_with), {}, not_with)


def test_no_engine_name_is_compared_or_tabled_outside_the_engine_catalogue():
    """Every list of engines (the recommender's, `--engine`'s choices, the report's titles, which engine takes a
    per-batch-size schedule, which one has a load note, which one a live check) comes from the engine catalogue.
    Scripts are left out, as for backends: a benchmark of named engines is a plan of runs."""
    offenders = [
        hit
        for f in _package_files("specbench/*.py")
        if not f.startswith(ENGINE_OWNERS)
        for hit in engine_name_uses(ROOT / f)
    ]
    assert not offenders, "engine names compared or tabled outside the engine catalogue:\n" + "\n".join(offenders)


def test_the_engine_name_check_finds_a_comparison_a_table_and_an_engine_vllm(tmp_path):
    """Planted offenders: each kind of use the engine scan must catch (lines 1, 3, 4, 5, 6), beside uses it must
    leave alone (a backend named 'vllm', a builder call naming its own engine, one engine asked for)."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        'if "vllm" in engines:\n    pass\nENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}\n'
        'CHOICES = ("vllm", "sglang", "transformers", "llamacpp", "all")\nok = engine == "llamacpp"\n'
        'pairs = [({"vllm": s}, target) for s in schedules]\nserved = spec.backend == "vllm"\n'
        'setting = EngineSetting("vllm", True, {}, "", [])\nsettings = engine_settings(d, p, t, g, engines=("vllm",))\n'
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        hits = engine_name_uses(planted)
    finally:
        ROOT = saved
    assert sorted({int(h.split(":")[1]) for h in hits}) == [1, 3, 4, 5, 6], hits


def test_every_engine_entry_is_complete_and_its_builders_answer():
    """Each entry's builders import and build: a yes names the engine's speculation, a no does not."""
    for name in engines.names():
        kind = engines.get(name)
        assert kind.title and kind.prints and kind.checked_against and kind.drafter_field
        assert kind.drafter_field in {f.name for f in dataclasses.fields(DrafterKind)}
        assert callable(engines.settings_builder(name)) and callable(engines.target_only_builder(name))
        assert kind.check is None or callable(engines.checker(name))
    assert engines.names(per_batch_schedule=True) == ["vllm"]
    with pytest.raises(SpecbenchError, match=r"unknown engine 'vlm' \(did you mean 'vllm'\?\)"):
        engines.get("vlm")


# ----------------------------------------------------------------------------- add a drafter: one class + one entry


class _WideLookupType(NgramType):
    """The worked example's class: prompt lookup that matches longer n-grams by default."""

    name = "wide-lookup"

    def build(self, target, *, device, dtype, implementation, n_min: int = 2, n_max: int = 5):
        return super().build(
            target, device=device, dtype=dtype, implementation=implementation, n_min=n_min, n_max=n_max
        )


class _Eagle3CopyType(Eagle3Type):
    name = "eagle3-copy"


WIDE_LOOKUP = DrafterKind(
    "wide-lookup",
    "prompt lookup over 2-5-token matches (params n_min, n_max)",
    _WideLookupType,
    params={"n_min": Param("int", 2, 1, 64, at_most="n_max"), "n_max": Param("int", 5, 1, 64)},
    model_free=True,
    forwards=(0, 0),
    replay="prompt-lookup",
    vllm_method="ngram",
    vllm_params={"n_min": "prompt_lookup_min", "n_max": "prompt_lookup_max"},
)
EAGLE3_COPY = dataclasses.replace(catalogue.get("eagle3"), name="eagle3-copy", cls=_Eagle3CopyType)


@pytest.fixture()
def added_kinds():
    for kind in (WIDE_LOOKUP, EAGLE3_COPY):
        catalogue.register(kind)
    yield
    for kind in (WIDE_LOOKUP, EAGLE3_COPY):
        catalogue.unregister(kind.name)


def test_adding_a_drafter_is_one_class_and_one_entry(added_kinds, tiny_v8, smollm2, tmp_path):
    """docs/architecture.md: kinds registered at run time are checked, replayed, configured for vLLM and
    exported (or refused) by what their entries say, with no other table to edit."""
    test_every_buildable_kind_has_a_complete_entry_that_its_class_agrees_with("wide-lookup")
    test_every_buildable_kind_has_a_complete_entry_that_its_class_agrees_with("eagle3-copy")
    # the sweep spec: parameters and replay from the entry
    spec = build_spec(
        {
            "name": "x",
            "drafters": ["wide-lookup:n_max=4"],
            "gammas": [1, 3],
            "mode": "replay",
            "workloads": ["mt-bench"],
        }
    )
    assert spec.drafters[0].params_dict == {"n_max": 4}
    with pytest.raises(SpecbenchError, match="needs n_min <= n_max, got n_min=2 n_max=1"):
        build_spec({"name": "x", "drafters": ["wide-lookup:n_max=1"], "workloads": ["mt-bench"]})
    with pytest.raises(SpecbenchError, match="'eagle3-copy' cannot be replayed yet"):
        build_spec({"name": "x", "drafters": ["eagle3-copy"], "mode": "replay", "workloads": ["mt-bench"]})
    # replay: the entry's method (prompt lookup re-run) gives exactly the live rounds
    target, _ = tiny_v8
    drafter = make_drafter("wide-lookup", target, {"n_min": 1})
    prompt = [3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 3, 6, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    live = SpeculativeEngine(target, drafter, gamma=3).generate(prompt, 24, stop_at_eos=False)
    replayer = Replayer(target)
    trajectory = replayer.trajectory(
        prompt, live.tokens, stop_reason="length", max_new_tokens=24, max_gamma=3, sampling=SamplingParams(), seed=0
    )
    trace = replayer.trace(drafter, trajectory, 3, SamplingParams(), kind="wide-lookup")
    replayed = replay_chain(trace, trajectory, [3])[0].rounds
    assert trace.drafter == "wide-lookup" and replayed.accepted == live.rounds.accepted
    # vLLM: method and parameter keys from the entry, defaults from its parameters
    assert speculative_config("wide-lookup", {"n_max": 4}, 3) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 4,
    }
    assert speculative_config("eagle3-copy", {"checkpoint": "/x"}, 2)["method"] == "eagle3"
    settings = engine_settings("eagle3-copy", {"checkpoint": "/x"}, "chain", 2)  # SGLang, transformers: the entry's
    assert settings["sglang"].config["--speculative-algorithm"] == "EAGLE3" and not settings["transformers"].supported
    # export: refused by the one entry, written by the other's exporter
    with pytest.raises(SpecbenchError, match=r"'wide-lookup' has no vLLM export \(exportable: .*eagle3-copy"):
        exporter("wide-lookup")
    report = write_export(
        "eagle3-copy", make_drafter("eagle3-copy", smollm2, {"checkpoint": "random"}), smollm2, tmp_path / "export"
    )
    assert report["speculative_config"]["method"] == "eagle3"
    assert json.loads((tmp_path / "export" / "config.json").read_text())["architectures"] == ["LlamaForCausalLMEagle3"]
