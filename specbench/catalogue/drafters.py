"""The drafter catalogue: one entry per drafter kind, holding every fact any layer asks about it.

An entry (`DrafterKind`) says what the kind is (summary, the engine class that drafts with it,
its parameters), how it costs (model-free, forwards per round), what specbench can do with it
(trees, replay, nested speculation, training, export to vLLM) and how serving engines name it
(vLLM's ``method`` and where vLLM loads its weights from, SGLang's algorithm, transformers'
assisted mode). The engine builds drafters from it (`specbench.engine.drafters.registry`),
replay and nesting ask it, the vLLM config, the recommended engine settings and the exporter
answer from it, and records/analysis read it without torch: this module imports nothing of
specbench but the registry mechanism and `errors`.

Adding a drafter is one class (its `DrafterType`, in ``specbench/engine/drafters/``) plus one
entry: a line in `BUILTIN` below, or `register` at run time (docs/architecture.md,
docs/drafters.md "Adding a drafter"). Kinds that only serving engines run (vLLM's ``suffix``)
have an entry without a class: their facts are known, the engine cannot build them.

A drafter's forwards per round are ``fixed + per_token·γ`` (`DrafterKind.forwards`): 0 for a
model-free kind, γ for one forward per drafted token, 1 for all heads in one forward, 1 + γ for a
parallel backbone plus a serial head per depth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from specbench.catalogue import engines
from specbench.catalogue.registry import Registry
from specbench.errors import SpecbenchError

TARGET_ONLY = "none"  # the records' drafter for target-only decoding (γ = 0): no kind

REPLAY_METHODS = (
    "prompt-lookup",
    "teacher-forced",
)  # specbench.measure.replay.replayer: how a kind's rounds are derived
VLLM_WEIGHTS = ("model", "checkpoint", "target")  # where vLLM loads the drafter from (see DrafterKind)
TRANSFORMERS_MODES = ("prompt-lookup", "assistant")  # transformers generate's assisted modes
PARAM_KINDS = ("int", "float", "str")


@dataclass(frozen=True)
class Param:
    """One drafter parameter: its type, its default (None: none), a range (ints and floats) and an order."""

    kind: str
    default: object = None
    low: int | None = None
    high: int | None = None
    at_most: str | None = None  # another parameter this one may not exceed (ngram: n_min <= n_max)

    def __post_init__(self):
        if self.kind not in PARAM_KINDS:
            raise SpecbenchError(f"parameter kind '{self.kind}' is not one of {', '.join(PARAM_KINDS)}")


@dataclass(frozen=True)
class DrafterKind:
    """Everything specbench knows about one drafter kind."""

    name: str
    summary: str
    cls: str | type | None  # the engine's DrafterType: "module:Class" (or the class); None: serving engines only
    params: Mapping[str, Param] = field(default_factory=dict)  # what --drafter-param / params: take
    model_free: bool = False  # proposes without a forward pass of its own (no drafter weights)
    trained: bool = False  # a network with checkpoints and a training objective (engine: TrainedType)
    confident: bool = False  # its drafts carry probabilities (confidence-reading schedules can cut them)
    forwards: tuple[int, int] = (0, 1)  # drafter forwards per round = fixed + per_token·γ
    trees: bool = True  # the own engine drafts static and dynamic trees with it
    replay: str | None = None  # how replay derives its rounds (REPLAY_METHODS); None: not replayable
    nestable: bool = False  # drafts ahead of verification (propose_ahead): strategy nested
    vllm_method: str | None = None  # vLLM SpeculativeConfig.method; None: vLLM cannot run it
    # where vLLM's drafter comes from: "model" (a draft LM, param model), "checkpoint" (a folder in vLLM's
    # layout, param checkpoint or model), "target" (layers inside the target's own checkpoint), None (no weights)
    vllm_weights: str | None = None
    vllm_params: Mapping[str, str] = field(default_factory=dict)  # specbench param -> speculative_config key
    sglang_algorithm: str | None = None  # SGLang --speculative-algorithm; None: SGLang cannot run it
    transformers: str | None = None  # transformers generate's assisted mode (TRANSFORMERS_MODES)
    export: str | None = None  # `export-drafter --format vllm`: its exporter "module:function" (None: none)
    not_exportable: str = ""  # why it cannot be exported, when there is more to say than "no exporter"
    # the speculators format (vllm-project/speculators): the ``speculators_model_type`` of this kind's checkpoints
    # there (read by checkpoint=, written by `export-drafter --format speculators`), and the config flags that tell
    # it from another kind of the same type (EAGLE-3.1 is speculators' eagle3 with fc_norm and norm_output set)
    speculators: str | None = None
    speculators_flags: Mapping[str, bool] = field(default_factory=dict)
    # llama.cpp's llama-server (`specbench.analysis.settings.llamacpp_flags`): its ``--spec-type``; where its drafter comes
    # from (the VLLM_WEIGHTS words: "model" a draft GGUF, "checkpoint" a head's GGUF, both --model-draft; "target"
    # layers inside the target's GGUF); the flag γ sets; specbench param -> llama-server flag
    llamacpp_type: str | None = None
    llamacpp_weights: str | None = None
    llamacpp_gamma: str = "--spec-draft-n-max"
    llamacpp_params: Mapping[str, str] = field(default_factory=dict)
    llamacpp_note: str = ""  # for a kind llama.cpp cannot run: what comes closest
    # a parameter γ must reach for llama.cpp to draft at all (ngram-simple keeps a draft only when it is at least
    # size_n tokens long: common/ngram-map.cpp, common_ngram_simple_draft, llama.cpp@0c1e57098)
    llamacpp_gamma_at_least: str | None = None
    # the kind whose fixed draft length this kind's engine adapts round by round (llama.cpp's draft-simple adapts
    # draft-model's with p_min): the contender a confirmation runs against a verdict for that kind
    adapts: str | None = None

    def __post_init__(self):
        for value, allowed, what in (
            (self.replay, REPLAY_METHODS, "replay"),
            (self.vllm_weights, VLLM_WEIGHTS, "vllm_weights"),
            (self.llamacpp_weights, VLLM_WEIGHTS, "llamacpp_weights"),
            (self.transformers, TRANSFORMERS_MODES, "transformers"),
        ):
            if value is not None and value not in allowed:
                raise SpecbenchError(f"drafter kind '{self.name}': {what} '{value}' is not one of {', '.join(allowed)}")
        for name, param in self.params.items():
            if param.at_most is not None and param.at_most not in self.params:
                raise SpecbenchError(
                    f"drafter kind '{self.name}': parameter {name} is bounded by an unknown parameter {param.at_most}"
                )

    @property
    def buildable(self) -> bool:
        """The own engine can build it (it has a class)."""
        return self.cls is not None

    def forwards_per_round(self, gamma: int) -> int:
        """Drafter forwards of a round drafting ``gamma`` tokens."""
        fixed, per_token = self.forwards
        return fixed + per_token * int(gamma)

    def default(self, param: str):
        return self.params[param].default


_NGRAM = {"n_min": Param("int", 1, 1, 64, at_most="n_max"), "n_max": Param("int", 3, 1, 64)}
_SIZE_N = Param("int", 12, 1, 1024)  # llama.cpp's n-gram lookup length (its default 12)
_MIN_HITS = Param("int", 1, 1, 65535)  # llama.cpp's hits before an n-gram is proposed (its default 1)
_TRAINED = {"checkpoint": Param("str"), "seed": Param("int", 0)}
_ENGINE = "specbench.engine.drafters."
_EXPORT = "specbench.training.vllm_export:"


def _trained(name: str, summary: str, cls: str, **facts) -> DrafterKind:
    """A trained kind: checkpoint + seed parameters, probabilities, one forward per drafted token unless said."""
    return DrafterKind(name, summary, _ENGINE + cls, params=_TRAINED, trained=True, confident=True, **facts)


BUILTIN: tuple[DrafterKind, ...] = (
    DrafterKind(
        "ngram",
        "prompt lookup: continue a match of the last n tokens (params n_min, n_max)",
        _ENGINE + "ngram:NgramType",
        params=_NGRAM,
        model_free=True,
        forwards=(0, 0),
        replay="prompt-lookup",
        vllm_method="ngram",
        vllm_params={"n_min": "prompt_lookup_min", "n_max": "prompt_lookup_max"},
        sglang_algorithm="NGRAM",
        transformers="prompt-lookup",
        llamacpp_note="its closest is ngram-simple (llama.cpp's prompt lookup of one n-gram length: params size_n)",
    ),
    DrafterKind(
        "draft-model",
        "a smaller causal LM with the same tokenizer (param model)",
        _ENGINE + "draft_model:DraftModelType",
        params={"model": Param("str")},
        confident=True,
        replay="teacher-forced",
        nestable=True,
        vllm_method="draft_model",
        vllm_weights="model",
        sglang_algorithm="STANDALONE",
        transformers="assistant",
        llamacpp_type="draft-simple",
        llamacpp_weights="model",
    ),
    _trained(
        "medusa",
        "Medusa heads on the target's last hidden state (param checkpoint)",
        "networks.medusa:MedusaType",
        forwards=(1, 0),
        vllm_method="medusa",
        vllm_weights="checkpoint",
        export=_EXPORT + "export_medusa",
    ),
    _trained(
        "eagle",
        "EAGLE feature-space drafter, one layer on [hidden; next embedding] (param checkpoint)",
        "networks.eagle:EagleType",
        nestable=True,
        vllm_method="eagle",
        vllm_weights="checkpoint",
        sglang_algorithm="EAGLE",
        export=_EXPORT + "export_eagle",
    ),
    _trained(
        "eagle3",
        "EAGLE-3 drafter fusing low/mid/high target layers (param checkpoint)",
        "networks.eagle:Eagle3Type",
        nestable=True,
        vllm_method="eagle3",
        vllm_weights="checkpoint",
        sglang_algorithm="EAGLE3",
        export=_EXPORT + "export_eagle3",
        speculators="eagle3",
        speculators_flags={"fc_norm": False, "norm_output": False},
        llamacpp_type="draft-eagle3",
        llamacpp_weights="checkpoint",
    ),
    _trained(
        "mtp",
        "DeepSeek-V3-style multi-token prediction modules (param checkpoint)",
        "networks.mtp:MTPType",
        vllm_method="mtp",
        vllm_weights="target",
        sglang_algorithm="EAGLE",
        not_exportable="vLLM's MTP runs the multi-token-prediction layers shipped inside the target's own "
        "checkpoint (DeepSeek, Qwen3-Next, GLM-4.5, MiMo, ...); a Llama target has no MTP path "
        "and vLLM reads no separate MTP checkpoint",
        llamacpp_type="draft-mtp",
        llamacpp_weights="target",
    ),
    _trained(
        "eagle3.1",
        "EAGLE-3.1: EAGLE-3 with RMSNorm on each fused layer and a post-norm step output (param checkpoint)",
        "networks.eagle:Eagle31Type",
        vllm_method="eagle3",  # vLLM runs it as EAGLE-3 with fc_norm / norm_output, from the speculators format
        vllm_weights="checkpoint",
        speculators="eagle3",
        speculators_flags={"fc_norm": True, "norm_output": True},
    ),
    _trained(
        "semi-ar",
        "DSpark-style semi-autoregressive: parallel block heads + a one-layer serial head (param checkpoint)",
        "networks.semi_ar:SemiARType",
        forwards=(1, 1),
        llamacpp_type="draft-dspark",
        llamacpp_weights="checkpoint",
    ),
    _trained(
        "parallel-tree",
        "JetSpec-style parallel tree: mask-token slots, tree-causal mask, one forward per tree (param checkpoint)",
        "networks.parallel_tree:ParallelTreeType",
        forwards=(1, 0),
    ),
    DrafterKind(
        "suffix",
        "suffix decoding over the prompt and earlier outputs (vLLM's method suffix; served only)",
        None,
        model_free=True,
        forwards=(0, 0),
        trees=False,
        vllm_method="suffix",
    ),
    # llama.cpp's own kinds (llama-server --spec-type NAME; served only): its adaptive draft model and its n-gram
    # matchers, each with llama.cpp's parameters under llama.cpp's defaults (common/common.h)
    DrafterKind(
        "draft-simple",
        "llama.cpp's draft model with an adaptive length: drafting stops before a token whose draft probability is "
        "below p_min, and a draft shorter than n_min is dropped (params model, p_min, n_min; llama.cpp only)",
        None,
        params={"model": Param("str"), "p_min": Param("float", 0.0, 0, 1), "n_min": Param("int", 0, 0, 1024)},
        confident=True,
        trees=False,
        llamacpp_type="draft-simple",
        llamacpp_weights="model",
        llamacpp_params={"p_min": "--spec-draft-p-min", "n_min": "--spec-draft-n-min"},
        adapts="draft-model",
    ),
    *(
        DrafterKind(
            name,
            f"llama.cpp's {name} lookup: {summary} (γ: the m-gram drafted; llama.cpp only)",
            None,
            params=params,
            model_free=True,
            forwards=(0, 0),
            trees=False,
            llamacpp_type=name,
            llamacpp_gamma=f"--spec-{name}-size-m",
            llamacpp_params={p: f"--spec-{name}-{p.replace('_', '-')}" for p in params},
            llamacpp_gamma_at_least="size_n" if name == "ngram-simple" else None,
        )
        for name, summary, params in (
            ("ngram-simple", "continue the last earlier match of the last size_n tokens", {"size_n": _SIZE_N}),
            (
                "ngram-map-k",
                "a map of size_n-grams to what followed them, used after min_hits hits",
                {"size_n": _SIZE_N, "min_hits": _MIN_HITS},
            ),
            (
                "ngram-map-k4v",
                "as ngram-map-k, keeping 4 continuations per key",
                {"size_n": _SIZE_N, "min_hits": _MIN_HITS},
            ),
        )
    ),
    DrafterKind(
        "ngram-mod",
        "llama.cpp's ngram-mod lookup: a hashed pool of n_match-grams shared by all requests; a draft shorter than "
        "n_min is dropped (γ: the longest draft; llama.cpp only)",
        None,
        params={"n_match": Param("int", 24, 1, 1024), "n_min": Param("int", 0, 0, 1024)},
        model_free=True,
        forwards=(0, 0),
        trees=False,
        llamacpp_type="ngram-mod",
        llamacpp_gamma="--spec-ngram-mod-n-max",
        llamacpp_params={"n_match": "--spec-ngram-mod-n-match", "n_min": "--spec-ngram-mod-n-min"},
    ),
)

DRAFTERS: Registry[DrafterKind] = Registry("drafter", BUILTIN)


def get(name: str) -> DrafterKind:
    """The entry of drafter kind ``name`` (any kind, buildable or not); unknown: one line with a did-you-mean."""
    return DRAFTERS.get(name)


def buildable(name: str, *, trained: bool = False) -> DrafterKind:
    """The entry of a kind the own engine builds (``trained``: trained kinds only); otherwise one line."""
    where = (lambda k: k.buildable and k.trained) if trained else (lambda k: k.buildable)
    return DRAFTERS.get(name, where, what="drafter type" if trained else "drafter")


def names(*, buildable: bool = True, **facts) -> list[str]:
    """Kinds in registration order: the ones the engine builds (``buildable=False``: every kind), whose
    facts equal ``facts`` (``names(trained=True)``, ``names(model_free=True)``, ...)."""

    def keep(kind: DrafterKind) -> bool:
        return (kind.buildable or not buildable) and all(getattr(kind, k) == v for k, v in facts.items())

    return DRAFTERS.names(keep)


def replayable() -> list[str]:
    return [name for name in names() if get(name).replay is not None]


def nestable() -> list[str]:
    return names(nestable=True)


def exportable() -> list[str]:
    return [name for name in names() if get(name).export is not None]


def speculators_kinds() -> list[str]:
    """Kinds with a speculators format (``export-drafter --format speculators`` writes them)."""
    return [name for name in names() if get(name).speculators is not None]


def from_speculators(config: Mapping) -> str:
    """The kind of a speculators-format checkpoint, from its config.json (``speculators_model_type`` and the
    flags that tell kinds of one type apart, absent = false); otherwise one line naming the field."""
    model_type = config.get("speculators_model_type")
    known = sorted({str(get(name).speculators) for name in speculators_kinds()})
    candidates = [name for name in speculators_kinds() if get(name).speculators == model_type]
    if not candidates:
        raise SpecbenchError(
            f"speculators_model_type '{model_type}' has no drafter kind in specbench (it reads: {', '.join(known)})"
        )
    for name in candidates:
        if all(bool(config.get(flag) or False) == value for flag, value in get(name).speculators_flags.items()):
            return name
    flags = sorted({flag for name in candidates for flag in get(name).speculators_flags})
    have = ", ".join(f"{flag}={str(bool(config.get(flag))).lower()}" for flag in flags)
    wanted = "; ".join(
        f"{name}: " + ", ".join(f"{f}={str(v).lower()}" for f, v in get(name).speculators_flags.items())
        for name in candidates
    )
    raise SpecbenchError(f"speculators {model_type} with {have} matches no drafter kind ({wanted})")


def serving_engines(name: str) -> list[str]:
    """The serving engines that run kind ``name``: those of the engine catalogue whose ``drafter_field`` this
    kind's entry fills (vllm_method, sglang_algorithm, llamacpp_type)."""
    kind = get(name)
    serving = map(engines.get, engines.names(serving=True))
    return [engine.title for engine in serving if getattr(kind, engine.drafter_field)]


def is_model_free(name: str) -> bool:
    """Whether ``name`` is a model-free kind (False for anything else, target-only included)."""
    return name in DRAFTERS and DRAFTERS.get(name).model_free


def is_target_only(name: str | None) -> bool:
    """Whether a records' drafter value means target-only decoding."""
    return name in (None, "", TARGET_ONLY)


def register(kind: DrafterKind, *, replace: bool = False) -> DrafterKind:
    """Add a drafter kind at run time (a plugin, a test): its class and its facts in one entry."""
    if not isinstance(kind, DrafterKind):
        raise SpecbenchError(f"cannot register {kind!r}: a DrafterKind entry is needed")
    return DRAFTERS.register(kind, replace=replace)


def unregister(name: str) -> None:
    """Remove a kind added with `register` (the built-in ones stay)."""
    DRAFTERS.unregister(name)
