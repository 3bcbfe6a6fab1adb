"""Ready-to-paste serving-engine settings for a recommended (drafter, tree, γ).

Key names were checked against the engines' own source (each engine's ``checked_against`` in the engine
catalogue, `specbench.catalogue.engines`, which also names the builders below):

* vLLM 0.32.0 ``SpeculativeConfig`` (vllm/config/speculative.py): method, model,
  num_speculative_tokens, prompt_lookup_min/max — built by `analysis.settings.vllm_speculative`, the one
  mapping the vLLM backends run too. vLLM 0.32 has **no tree speculation** (the
  ``speculative_token_tree`` key is gone and its ``@config`` rejects unknown keys), so a tree
  is reported as not expressible on vLLM, with a chain of depth γ in the snippet.
* SGLang ``server_args.py`` (sgl-project/sglang main, read at commit 001067ff): flags
  ``--speculative-algorithm`` STANDALONE / EAGLE / EAGLE3 / NGRAM, ``--speculative-num-steps``,
  ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``; NGRAM's
  ``--speculative-ngram-{min,max}-bfs-breadth`` and ``--speculative-ngram-max-trie-depth``
  (the old ``--speculative-ngram-{min,max}-match-window-size`` flags no longer exist). SGLang
  verifies at most 1 + topk + (steps − 1)·topk² tokens per step, so the node budget is capped.
* transformers ``generate`` (5.19): assistant_model, num_assistant_tokens,
  num_assistant_tokens_schedule, assistant_confidence_threshold (read from the *assistant's*
  generation_config; its default 0.4 stops drafting early, so it is set to 0 to keep γ),
  prompt_lookup_num_tokens, max_matching_ngram_size.

* llama.cpp's ``llama-server`` (``common/arg.cpp`` of llama.cpp@0c1e57098, the tree the llama-cpp-python
  0.3.36 sdist vendors): ``--spec-type``, ``--model-draft``, ``--spec-draft-n-max`` / ``-n-min`` / ``-p-min``
  and the n-gram kinds' ``--spec-ngram-*`` flags — built by `analysis.settings.llamacpp_flags`, the one mapping the
  ``llamacpp-server`` backend runs too; models are named by their GGUF files (``hub_ids`` entries under
  `GGUF_KEY`), ``-np`` by the load the verdict holds for.

Engines move fast: `specbench.cli.shell.engine_checks` validates the vLLM configs in
``.venv-vllm`` and the SGLang command lines with SGLang's own parser where those are installed
(``specbench recommend`` does it); otherwise the output names the versions above.

What each engine calls a drafter kind (vLLM's method and where it loads the weights from, SGLang's
algorithm, transformers' assisted mode) is the kind's catalogue entry (`specbench.catalogue.drafters`).

Trees: a static branching spec ``AxBxC`` (top-A at depth 1, B children each at depth 2, ...) or
an explicit list of rank paths (Medusa "choices"), cut to depth γ, becomes SGLang's top-k,
steps and node budget; other tree specs are reported as not expressible.
"""

from __future__ import annotations

import itertools
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specbench.analysis.settings.llamacpp_flags import spec_flags as llamacpp_spec_flags
from specbench.analysis.settings.vllm_speculative import speculative_config as vllm_speculative_config
from specbench.catalogue import drafters as catalogue
from specbench.catalogue import engines as catalogue_engines
from specbench.errors import SpecbenchError

GGUF_KEY = "gguf:"  # ``hub_ids`` entries naming a model spec's GGUF file (specbench.models.gguf_files.gguf_names)
NGRAM = "NGRAM"  # SGLang's prompt-lookup algorithm: it takes BFS-breadth flags, no top-k tree


@dataclass
class EngineSetting:
    engine: str
    supported: bool
    config: dict  # structured settings (vLLM speculative_config, SGLang flags, generate kwargs)
    snippet: str  # ready-to-paste text
    notes: list[str] = field(default_factory=list)
    checked: str = ""  # how the keys were checked: a live validation, or the versions they were read from
    target_only: bool = False  # the engine serving the target alone (a confident no): no speculative setting

    def __post_init__(self):
        known = self.engine in catalogue_engines.ENGINES
        version = catalogue_engines.get(self.engine).checked_against if known else self.engine
        self.checked = self.checked or f"keys as in {version}; not validated here"

    def as_dict(self) -> dict:
        return {
            "engine": self.engine,
            "supported": self.supported,
            "config": self.config,
            "snippet": self.snippet,
            "notes": self.notes,
            "checked": self.checked,
            "target_only": self.target_only,
        }


def hub_name(spec: str | None, hub_ids: Mapping[str, str] | None = None) -> str:
    """A model spec → the name to paste: its Hugging Face id from ``hub_ids`` (the alias table,
    which the caller passes in: analysis never loads models), else the spec unchanged."""
    if not spec:
        return "<draft model>"
    return (hub_ids or {}).get(spec) or spec


def tree_paths(tree: str, gamma: int | None = None) -> list[tuple[int, ...]] | None:
    """Rank paths of a static tree spec ('3x2x1' or a JSON list of paths), cut to depth ``gamma``
    (a tree never drafts deeper than γ); None when not static."""
    text = tree.strip()
    if text.startswith("["):
        try:
            paths = [tuple(int(r) for r in path) for path in json.loads(text)]
        except (ValueError, TypeError):
            return None
    else:
        try:
            widths = [int(part) for part in text.lower().split("x")]
        except ValueError:
            return None
        if not widths or min(widths) < 1:
            return None
        paths = [
            path
            for depth in range(1, len(widths) + 1)
            for path in itertools.product(*(range(w) for w in widths[:depth]))
        ]
    if gamma is not None:
        paths = [path for path in paths if len(path) <= gamma]
    return paths


def _kind(drafter: str) -> catalogue.DrafterKind | None:
    """The catalogue entry of a recorded drafter (None: a name the catalogue does not know)."""
    return catalogue.get(drafter) if drafter in catalogue.DRAFTERS else None


def sglang_token_limit(topk: int, steps: int) -> int:
    """The most tokens SGLang verifies per step (root included): 1 + topk + (steps − 1)·topk²."""
    return 1 + topk + max(steps - 1, 0) * topk * topk


def vllm_settings(
    drafter: str,
    params: dict,
    tree: str,
    gamma: int,
    target: str,
    hub_ids: Mapping[str, str] | None,
    *,
    per_batch_size: Sequence[Sequence[int]] | None = None,
) -> EngineSetting:
    """vLLM's speculative_config (``per_batch_size``: ``[start, end, K]`` ranges, γ per batch size, with
    ``gamma`` their largest K) and its lines."""
    notes: list[str] = []
    kind = _kind(drafter)
    if kind is None or kind.vllm_method is None:
        return EngineSetting("vllm", False, {}, "", [f"vLLM has no method for drafter '{drafter}'"])
    # the one drafter -> speculative_config mapping (the backends run the same); models named for pasting
    config = vllm_speculative_config(
        drafter, params, gamma, model_name=lambda spec: hub_name(spec, hub_ids), per_batch_size=per_batch_size
    )
    if config is None:
        return EngineSetting("vllm", False, {}, "", ["γ = 0 is target-only decoding: leave speculative_config out"])
    if kind.vllm_weights == "model":
        notes.append("draft and target must share a tokenizer; older vLLM releases take the same keys without 'method'")
    elif kind.vllm_weights == "target":
        notes.append(
            f"'{drafter}' runs the multi-token-prediction layers inside the target's own checkpoint "
            "(DeepSeek-V3, Qwen3-Next, ...): only for targets that ship them"
        )
    elif kind.vllm_weights == "checkpoint":
        notes.append(
            f"'{drafter}' needs a checkpoint in the layout vLLM loads (a specbench-trained one may need converting)"
        )
    supported = True
    if tree != "chain":
        supported = False
        notes.append(
            f"tree '{tree}' is not expressible on vLLM (0.32 has no tree speculation: "
            f"speculative_token_tree was removed); the snippet is a chain of depth {gamma}"
        )
    return EngineSetting("vllm", supported, config, vllm_snippet(target, config), notes)


def vllm_snippet(target: str, config: dict | None) -> str:
    """The ready-to-paste vLLM lines for ``config`` (offline ``LLM`` and ``vllm serve``); None: the target alone
    (no speculative_config at all)."""
    if config is None:
        return (
            f"from vllm import LLM\nllm = LLM(model={target!r})\n# or: vllm serve {shlex.quote(target)}  "
            f"(python -m vllm.entrypoints.openai.api_server --model {shlex.quote(target)})"
        )
    return (
        f"from vllm import LLM\nllm = LLM(model={target!r}, speculative_config={json.dumps(config)})\n"
        f"# or: vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(json.dumps(config))}"
    )


def sglang_settings(
    drafter: str, params: dict, tree: str, gamma: int, target: str, hub_ids: Mapping[str, str] | None
) -> EngineSetting:
    notes: list[str] = []
    kind = _kind(drafter)
    if kind is None or kind.sglang_algorithm is None:
        return EngineSetting("sglang", False, {}, "", [f"SGLang has no speculative algorithm for '{drafter}'"])
    algorithm = kind.sglang_algorithm
    topk, steps, draft_tokens, supported = 1, gamma, gamma + 1, True
    if tree != "chain":
        paths = tree_paths(tree, gamma)
        if paths and algorithm != NGRAM:
            steps = max(len(path) for path in paths)
            topk = max(max(path) for path in paths) + 1
            limit = sglang_token_limit(topk, steps)
            draft_tokens = min(len(paths) + 1, limit)
            notes.append(
                f"SGLang grows its own tree from top-k {topk}, {steps} steps and a budget of "
                f"{draft_tokens} tokens (root included): the shape '{tree}' cut to depth {gamma} "
                "is approximated"
            )
            if len(paths) + 1 > limit:
                notes.append(
                    f"the tree has {len(paths)} nodes but SGLang verifies at most "
                    f"1 + topk + (steps − 1)·topk² = {limit} tokens: the budget is capped"
                )
        else:
            supported = False
            notes.append(f"tree '{tree}' not expressible: the flags use a chain of depth {gamma}")
    flags: dict[str, object]
    if algorithm == NGRAM:
        flags = {
            "--speculative-algorithm": NGRAM,
            "--speculative-num-draft-tokens": draft_tokens,
            "--speculative-ngram-min-bfs-breadth": 1,
            "--speculative-ngram-max-bfs-breadth": 1,
        }
        notes.append(
            "NGRAM is CUDA-only; SGLang counts the verified root token in --speculative-num-draft-tokens "
            "(γ + 1 here); BFS breadth 1 keeps the draft a chain"
        )
        n_min, n_max = int(params.get("n_min", kind.default("n_min"))), int(params.get("n_max", kind.default("n_max")))
        notes.append(
            "SGLang has no min/max match-window flags any more (its matcher looks up suffixes up to "
            f"--speculative-ngram-max-trie-depth, default 18): specbench's n_min={n_min}, "
            f"n_max={n_max} are not expressible, so acceptance can differ"
        )
    else:
        flags = {
            "--speculative-algorithm": algorithm,
            "--speculative-num-steps": steps,
            "--speculative-eagle-topk": topk,
            "--speculative-num-draft-tokens": draft_tokens,
        }
        if kind.vllm_weights != "target":
            flags["--speculative-draft-model-path"] = hub_name(params.get("model") or params.get("checkpoint"), hub_ids)
        else:
            notes.append(
                f"{drafter.upper()} runs through SGLang's {algorithm} path with the model's own "
                f"{drafter.upper()} weights"
            )
    return EngineSetting("sglang", supported, flags, sglang_command(target, flags), notes)


def sglang_command(target: str, flags: Mapping[str, object]) -> str:
    """SGLang's server command line for ``target`` with ``flags`` (none: the target alone)."""
    args = "".join(f" {k} {shlex.quote(str(v))}" for k, v in flags.items())
    return f"python -m sglang.launch_server --model-path {shlex.quote(target)}{args}"


def transformers_settings(
    drafter: str, params: dict, tree: str, gamma: int, target: str, hub_ids: Mapping[str, str] | None
) -> EngineSetting:
    notes: list[str] = []
    kind = _kind(drafter)
    mode = None if kind is None else kind.transformers
    prefix = ""
    kwargs: dict[str, object]
    if kind is not None and mode == "prompt-lookup":
        kwargs = {
            "prompt_lookup_num_tokens": gamma,
            "max_matching_ngram_size": int(params.get("n_max", kind.default("n_max"))),
        }
        call = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    elif mode == "assistant":
        draft = hub_name(params.get("model"), hub_ids)
        kwargs = {
            "assistant_model": draft,
            "num_assistant_tokens": gamma,
            "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0,
        }
        prefix = (
            f"assistant = AutoModelForCausalLM.from_pretrained({draft!r})\n"
            f"assistant.generation_config.num_assistant_tokens = {gamma}\n"
            "assistant.generation_config.num_assistant_tokens_schedule = 'constant'\n"
            "assistant.generation_config.assistant_confidence_threshold = 0.0\n"
        )
        call = "assistant_model=assistant"
        notes.append(
            "'constant' keeps γ fixed as measured (the default 'heuristic' schedule changes it per round), "
            "and assistant_confidence_threshold 0 stops the assistant from ending a draft early "
            "(default 0.4); transformers reads both from the assistant's generation_config"
        )
    else:
        return EngineSetting(
            "transformers", False, {}, "", [f"transformers generate has no assisted mode for '{drafter}'"]
        )
    supported = tree == "chain"
    if not supported:
        notes.append("transformers assisted generation drafts chains only: the kwargs use a chain")
    snippet = prefix + f"model.generate(**inputs, {call})"
    return EngineSetting("transformers", supported, kwargs, snippet, notes)


def gguf_name(spec: str | None, hub_ids: Mapping[str, str] | None = None) -> str:
    """A model spec → the GGUF file a pasted llama-server line names: the file ``hub_ids`` lists for it under
    `GGUF_KEY`, a ``.gguf`` path as given, else a placeholder naming the spec."""
    if not spec:
        return "<draft.gguf>"
    found = (hub_ids or {}).get(GGUF_KEY + spec)
    if found:
        return found
    return spec if spec.endswith(".gguf") else f"<{spec}.gguf>"


def llamacpp_settings(
    drafter: str, params: dict, tree: str, gamma: int, target: str, hub_ids: Mapping[str, str] | None
) -> EngineSetting:
    kind = _kind(drafter)
    try:
        flags = llamacpp_spec_flags(drafter, params, gamma, model_file=lambda spec: gguf_name(spec, hub_ids))
    except SpecbenchError as exc:
        return EngineSetting("llamacpp", False, {}, "", [str(exc)])
    if not flags or kind is None or kind.llamacpp_type is None:
        return EngineSetting(
            "llamacpp", False, {}, "", ["γ = 0 is target-only decoding: start llama-server without --spec-type"]
        )
    notes = []
    if kind.llamacpp_weights == "model":
        notes.append(
            "the draft GGUF must share the target's vocabulary; -np N serves N requests at once (the "
            "verdict at each load says where speculation pays)"
        )
    if kind.adapts is None and kind.llamacpp_type.startswith("draft-"):
        notes.append(
            "--spec-draft-p-min 0 and --spec-draft-n-min 0 keep every round at γ, as measured (llama.cpp's "
            "adaptive length is the drafter draft-simple: sweep its p_min to compare)"
        )
    supported = tree == "chain"
    if not supported:
        notes.append(
            f"tree '{tree}' is not expressible on llama.cpp (its speculation drafts chains): the flags use "
            f"a chain of depth {gamma}"
        )
    return EngineSetting("llamacpp", supported, {"flags": flags}, llamacpp_command(target, flags), notes)


def llamacpp_command(target: str, flags: list[str]) -> str:
    """llama-server's command line for the GGUF file ``target`` with ``flags`` (none: the target alone)."""
    target_file = target if target.endswith(".gguf") else "<target.gguf>"
    return " ".join(shlex.quote(word) for word in ["llama-server", "-m", target_file, "--metrics", *flags])


def model_name(engine: str, spec: str, hub_ids: Mapping[str, str] | None) -> str:
    """A model spec as engine ``engine``'s pasted lines name it (its entry's ``model_names``)."""
    return gguf_name(spec, hub_ids) if catalogue_engines.get(engine).model_names == "gguf" else hub_name(spec, hub_ids)


def engine_settings(
    drafter: str,
    params: dict | str,
    tree: str,
    gamma: int,
    *,
    target: str = "<target>",
    engines: Sequence[str] | None = None,
    hub_ids: Mapping[str, str] | None = None,
    per_batch_size: Sequence[Sequence[int]] | None = None,
) -> dict[str, EngineSetting]:
    """Settings for each engine in ``engines`` (None: every engine of the catalogue; drafter params as a dict or
    the records' JSON), each built by its catalogue entry's ``settings`` builder.

    ``hub_ids`` maps model specs (specbench aliases) to the Hugging Face ids the snippets name;
    ``per_batch_size`` (``[start, end, K]`` ranges, γ the largest K) goes to the engines whose entry takes a
    per-batch-size schedule, and only those may be asked for with it.
    """
    values = json.loads(params or "{}") if isinstance(params, str) else params
    out = {}
    for engine in catalogue_engines.names() if engines is None else engines:
        kind = catalogue_engines.get(engine)
        schedule = {}
        if per_batch_size is not None:
            if not kind.per_batch_schedule:
                raise SpecbenchError(f"{kind.title} takes no per-batch-size schedule")
            schedule = {"per_batch_size": per_batch_size}
        builder = catalogue_engines.settings_builder(engine)
        out[engine] = builder(
            drafter, values, tree, int(gamma), model_name(engine, target, hub_ids), hub_ids, **schedule
        )
    return out


def schedule_setting(
    drafter: str, params: dict | str, ranges: Sequence[Sequence[int]], target: str, hub_ids: Mapping[str, str] | None
) -> EngineSetting:
    """The settings, γ per batch size (``ranges``: ``[start, end, K]``; the largest K is the cap), of the engine
    whose catalogue entry takes a per-batch-size schedule (vLLM's ``num_speculative_tokens_per_batch_size``)."""
    engine = catalogue_engines.schedule_engine()
    top = max(int(row[2]) for row in ranges)
    return engine_settings(
        drafter, params, "chain", top, target=target, engines=(engine,), hub_ids=hub_ids, per_batch_size=ranges
    )[engine]


def target_only_settings(
    *, target: str = "<target>", engines: Sequence[str] | None = None, hub_ids: Mapping[str, str] | None = None
) -> dict[str, EngineSetting]:
    """For a confident no: each engine in ``engines`` (None: all) serving the target alone, built by its
    catalogue entry's ``target_only`` builder: a command line with no speculative flag in it."""
    return {
        engine: catalogue_engines.target_only_builder(engine)(model_name(engine, target, hub_ids))
        for engine in (catalogue_engines.names() if engines is None else engines)
    }
