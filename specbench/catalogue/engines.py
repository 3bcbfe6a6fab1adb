"""The engine catalogue: one entry per deployment engine that `specbench recommend` prints settings for.

An entry (`EngineKind`) holds every fact any layer asks about an engine: its name (``--engine NAME``, the
keys of a recommendation's settings) and title (what panels and the report call it), what it prints, the
version its keys were checked against, the builders of its settings (the speculative one for a confident
yes, the target-only one for a confident no: ``"module:function"``, imported the first time they are asked
for, as the drafter catalogue does), how a pasted line names a model (a Hugging Face id, or a GGUF file),
whether it takes a per-batch-size schedule, which field of a drafter's entry names the kind on it, and the
live check of its settings where it is installed (`specbench.cli.shell.engine_checks`).

Nothing else compares or tables engine names: the lists the CLI, the recommender, the load verdicts and the
report need are derived here (tests/test_catalogue.py scans for any other; docs/architecture.md, "Adding an
engine"). This module imports nothing of specbench but the registry mechanism and `errors`.

Builders' signatures (`specbench.analysis.settings.engine_settings` calls them):

* ``settings(drafter, params, tree, gamma, target, hub_ids) -> EngineSetting`` — the speculative settings;
* ``target_only(target) -> EngineSetting`` — the same engine serving the target alone (no speculative flag);
* ``check(pairs, vllm_python)`` — ``pairs``: ``[(EngineSetting, target folder or None)]``; it fills in
  ``checked`` (and turns ``supported`` off on a rejection).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.catalogue.registry import Registry, resolve
from specbench.errors import SpecbenchError

MODEL_NAMES = ("hub", "gguf")  # how a pasted line names a model: a Hugging Face id, or a GGUF file


@dataclass(frozen=True)
class EngineKind:
    """Everything specbench knows about one deployment engine."""

    name: str  # --engine NAME; the key of a recommendation's settings
    title: str  # what panels, notes and the report call it
    prints: str  # what its settings are, for help texts: "vLLM's speculative_config", "llama-server flags"
    checked_against: str  # the version whose source its keys were read from
    settings: str  # "module:function": the speculative settings (module docstring)
    target_only: str  # "module:function": the target-only command line, for a confident no
    model_names: str = "hub"  # MODEL_NAMES: how its pasted lines name the target and the draft model
    per_batch_schedule: bool = False  # takes γ per batch size (vLLM's num_speculative_tokens_per_batch_size)
    drafter_field: str = ""  # the `DrafterKind` field naming a drafter kind on this engine (None there: cannot)
    serving: bool = True  # a server (as opposed to a library call): `drafters.serving_engines` lists it
    load_note: str = ""  # said under a concurrency sweep's verdicts when its settings were asked for
    check: str | None = None  # "module:function": the live check where the engine is installed (None: none)

    def __post_init__(self):
        if self.model_names not in MODEL_NAMES:
            raise SpecbenchError(f"engine {self.name}: model_names '{self.model_names}' is not one of {MODEL_NAMES}")

    @property
    def cls(self) -> str:
        """The registry's implementation reference: the speculative settings builder."""
        return self.settings


_SETTINGS = "specbench.analysis.settings.engine_settings"
_TARGET_ONLY = "specbench.analysis.settings.target_only"
_CHECKS = "specbench.cli.shell.engine_checks"

BUILTIN: tuple[EngineKind, ...] = (
    EngineKind(
        "vllm",
        "vLLM",
        "vLLM's speculative_config",
        "vLLM 0.32.0 (SpeculativeConfig)",
        f"{_SETTINGS}:vllm_settings",
        f"{_TARGET_ONLY}:vllm_target_only",
        per_batch_schedule=True,
        drafter_field="vllm_method",
        check=f"{_CHECKS}:check_vllm_settings",
    ),
    EngineKind(
        "sglang",
        "SGLang",
        "SGLang's launch_server flags",
        "SGLang server_args.py at commit 001067ff",
        f"{_SETTINGS}:sglang_settings",
        f"{_TARGET_ONLY}:sglang_target_only",
        drafter_field="sglang_algorithm",
        check=f"{_CHECKS}:check_sglang_settings",
    ),
    EngineKind(
        "transformers",
        "transformers",
        "transformers generate's arguments",
        "transformers 5.19.0 (GenerationConfig)",
        f"{_SETTINGS}:transformers_settings",
        f"{_TARGET_ONLY}:transformers_target_only",
        drafter_field="transformers",
        serving=False,
    ),
    EngineKind(
        "llamacpp",
        "llama.cpp",
        "llama-server flags",
        "llama.cpp@0c1e57098 (common/arg.cpp, llama-cpp-python 0.3.36's vendored tree)",
        f"{_SETTINGS}:llamacpp_settings",
        f"{_TARGET_ONLY}:llamacpp_target_only",
        model_names="gguf",
        drafter_field="llamacpp_type",
        load_note="llama.cpp: one draft length at every slot count (llama-server has no per-batch-size γ); the "
        "verdicts above say at which loads its flags pay",
        check=f"{_CHECKS}:check_llamacpp_settings",
    ),
)

ENGINES: Registry[EngineKind] = Registry("engine", BUILTIN)


def get(name: str) -> EngineKind:
    """The entry of engine ``name``; unknown: one line with a did-you-mean and the choices."""
    return ENGINES.get(name)


def names(**facts) -> list[str]:
    """Engines in registration order whose facts equal ``facts`` (``names(per_batch_schedule=True)``)."""
    return ENGINES.names(lambda kind: all(getattr(kind, k) == v for k, v in facts.items()))


def title(name: str) -> str:
    """What panels call engine ``name`` (the name itself for an engine the catalogue does not know)."""
    return get(name).title if name in ENGINES else name


def schedule_engine() -> str:
    """The engine that takes a per-batch-size schedule (profiles' γ per batch size and the load schedules are
    written for it)."""
    return names(per_batch_schedule=True)[0]


def choices_help() -> str:
    """The engines and what each prints, for a help text: "vllm (vLLM's speculative_config), ..."."""
    return ", ".join(f"{kind.name} ({kind.prints})" for kind in map(get, names()))


def settings_builder(name: str):
    """The speculative settings builder of engine ``name`` (imported on first use)."""
    return ENGINES.load(name)


def target_only_builder(name: str):
    """The target-only builder of engine ``name`` (imported now)."""
    return resolve(get(name).target_only, f"engine {name}'s target-only settings")


def checker(name: str):
    """The live check of engine ``name``'s settings, or None when it has none."""
    kind = get(name)
    return None if kind.check is None else resolve(kind.check, f"engine {name}'s check")


def register(kind: EngineKind, *, replace: bool = False) -> EngineKind:
    """Add an engine at run time (a plugin, a test): its builders and its facts in one entry."""
    if not isinstance(kind, EngineKind):
        raise SpecbenchError(f"cannot register {kind!r}: an EngineKind entry is needed")
    return ENGINES.register(kind, replace=replace)


def unregister(name: str) -> None:
    """Remove an engine added with `register` (the built-in ones stay)."""
    ENGINES.unregister(name)
