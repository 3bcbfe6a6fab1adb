"""Ready-to-paste serving-engine settings for a recommended (drafter, tree, γ).

Key names checked against the engines' documentation (vLLM ``speculative_config``: method,
model, num_speculative_tokens, prompt_lookup_min/max, speculative_token_tree; SGLang server flags
``--speculative-algorithm`` STANDALONE / EAGLE / EAGLE3 / NGRAM, ``--speculative-num-steps``,
``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``, ``--speculative-ngram-{min,max}-
match-window-size``; transformers ``generate``: assistant_model, num_assistant_tokens,
num_assistant_tokens_schedule, prompt_lookup_num_tokens, max_matching_ngram_size). Engines move
fast: every snippet names what to check, and anything an engine cannot express is said, not
silently dropped.

Trees: a static branching spec ``AxBxC`` (top-A at depth 1, B children each at depth 2, ...) or
an explicit list of rank paths (Medusa "choices") becomes vLLM's ``speculative_token_tree``
(EAGLE-family methods only) and SGLang's top-k / node budget; other tree specs are reported as
not expressible.
"""

from __future__ import annotations

import itertools
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

ENGINES = ("vllm", "sglang", "transformers")
FEATURE_DRAFTERS = {"eagle": ("eagle", "EAGLE"), "eagle3": ("eagle3", "EAGLE3"), "medusa": ("medusa", None),
                    "mtp": ("mtp", "EAGLE")}


@dataclass
class EngineSetting:
    engine: str
    supported: bool
    config: dict  # structured settings (vLLM speculative_config, SGLang flags, generate kwargs)
    snippet: str  # ready-to-paste text
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"engine": self.engine, "supported": self.supported, "config": self.config,
                "snippet": self.snippet, "notes": self.notes}


def hub_name(spec: str | None, hub_ids: Mapping[str, str] | None = None) -> str:
    """A model spec → the name to paste: its Hugging Face id from ``hub_ids`` (the alias table,
    which the caller passes in: analysis never loads models), else the spec unchanged."""
    if not spec:
        return "<draft model>"
    return (hub_ids or {}).get(spec) or spec


def tree_paths(tree: str) -> list[tuple[int, ...]] | None:
    """Rank paths of a static tree spec ('3x2x1' or a JSON list of paths); None when not static."""
    text = tree.strip()
    if text.startswith("["):
        try:
            return [tuple(int(r) for r in path) for path in json.loads(text)]
        except (ValueError, TypeError):
            return None
    try:
        widths = [int(part) for part in text.lower().split("x")]
    except ValueError:
        return None
    if not widths or min(widths) < 1:
        return None
    return [path for depth in range(1, len(widths) + 1)
            for path in itertools.product(*(range(w) for w in widths[:depth]))]


def _vllm(drafter: str, params: dict, tree: str, gamma: int, target: str,
          hub_ids: Mapping[str, str] | None) -> EngineSetting:
    notes: list[str] = []
    if drafter == "ngram":
        config = {"method": "ngram", "num_speculative_tokens": gamma,
                  "prompt_lookup_min": int(params.get("n_min", 1)), "prompt_lookup_max": int(params.get("n_max", 3))}
    elif drafter == "draft-model":
        config = {"method": "draft_model", "model": hub_name(params.get("model"), hub_ids), "num_speculative_tokens": gamma}
        notes.append("draft and target must share a tokenizer; older vLLM releases take the same keys without 'method'")
    elif drafter in FEATURE_DRAFTERS:
        config = {"method": FEATURE_DRAFTERS[drafter][0], "num_speculative_tokens": gamma}
        if drafter != "mtp":
            config["model"] = hub_name(params.get("model") or params.get("checkpoint"), hub_ids)
        notes.append(f"'{drafter}' needs a checkpoint in the layout vLLM loads "
                     "(a specbench-trained one may need converting)")
    else:
        return EngineSetting("vllm", False, {}, "", [f"vLLM has no method for drafter '{drafter}'"])
    supported = True
    if tree != "chain":
        paths = tree_paths(tree)
        if drafter in ("eagle", "eagle3") and paths:
            config["speculative_token_tree"] = str(paths)
            config["num_speculative_tokens"] = len(paths)
            notes.append("tree decoding in vLLM is EAGLE-only and needs the tree attention backend")
        else:
            supported = False
            notes.append(f"vLLM cannot express tree '{tree}' for '{drafter}': "
                         f"the snippet uses a chain of depth {gamma}")
    snippet = (f"from vllm import LLM\nllm = LLM(model={target!r}, speculative_config={json.dumps(config)})\n"
               f"# or: vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(json.dumps(config))}")
    return EngineSetting("vllm", supported, config, snippet, notes)


def _sglang(drafter: str, params: dict, tree: str, gamma: int, target: str,
            hub_ids: Mapping[str, str] | None) -> EngineSetting:
    notes: list[str] = []
    topk, draft_tokens, supported = 1, gamma + 1, True
    if tree != "chain":
        paths = tree_paths(tree)
        if paths and drafter != "ngram":
            topk = max(path[0] for path in paths if len(path) == 1) + 1
            draft_tokens = len(paths) + 1
            notes.append("SGLang grows its own tree from top-k and a node budget: the shape is approximated")
        else:
            supported = False
            notes.append(f"tree '{tree}' not expressible: the flags use a chain of depth {gamma}")
    if drafter == "ngram":
        flags = {"--speculative-algorithm": "NGRAM", "--speculative-num-draft-tokens": draft_tokens,
                 "--speculative-ngram-min-match-window-size": int(params.get("n_min", 1)),
                 "--speculative-ngram-max-match-window-size": int(params.get("n_max", 3))}
        notes.append("NGRAM is CUDA-only; SGLang counts the verified root token in --speculative-num-draft-tokens "
                     "(γ + 1 here) — check your version")
    elif drafter == "draft-model" or drafter in FEATURE_DRAFTERS:
        algorithm = "STANDALONE" if drafter == "draft-model" else FEATURE_DRAFTERS[drafter][1]
        if algorithm is None:
            return EngineSetting("sglang", False, {}, "", [f"SGLang has no speculative algorithm for '{drafter}'"])
        flags = {"--speculative-algorithm": algorithm, "--speculative-num-steps": gamma,
                 "--speculative-eagle-topk": topk, "--speculative-num-draft-tokens": draft_tokens}
        if drafter != "mtp":
            flags["--speculative-draft-model-path"] = hub_name(params.get("model") or params.get("checkpoint"), hub_ids)
        else:
            notes.append("MTP runs through SGLang's EAGLE path with the model's own MTP weights")
    else:
        return EngineSetting("sglang", False, {}, "", [f"SGLang has no speculative algorithm for '{drafter}'"])
    args = " ".join(f"{k} {shlex.quote(str(v))}" for k, v in flags.items())
    snippet = f"python -m sglang.launch_server --model-path {shlex.quote(target)} {args}"
    return EngineSetting("sglang", supported, flags, snippet, notes)


def _transformers(drafter: str, params: dict, tree: str, gamma: int, target: str,
                  hub_ids: Mapping[str, str] | None) -> EngineSetting:
    notes: list[str] = []
    if drafter == "ngram":
        kwargs = {"prompt_lookup_num_tokens": gamma, "max_matching_ngram_size": int(params.get("n_max", 3))}
        call = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    elif drafter == "draft-model":
        draft = hub_name(params.get("model"), hub_ids)
        kwargs = {"assistant_model": draft, "num_assistant_tokens": gamma, "num_assistant_tokens_schedule": "constant"}
        call = (f"assistant_model=AutoModelForCausalLM.from_pretrained({draft!r}), num_assistant_tokens={gamma}, "
                "num_assistant_tokens_schedule='constant'")
        notes.append("'constant' keeps γ fixed as measured (the default 'heuristic' schedule changes it per round)")
    else:
        return EngineSetting("transformers", False, {}, "",
                             [f"transformers generate has no assisted mode for '{drafter}'"])
    supported = tree == "chain"
    if not supported:
        notes.append("transformers assisted generation drafts chains only: the kwargs use a chain")
    snippet = f"model.generate(**inputs, {call})"
    return EngineSetting("transformers", supported, kwargs, snippet, notes)


_BUILDERS = {"vllm": _vllm, "sglang": _sglang, "transformers": _transformers}


def engine_settings(drafter: str, params: dict | str, tree: str, gamma: int, *, target: str = "<target>",
                    engines=ENGINES, hub_ids: Mapping[str, str] | None = None) -> dict[str, EngineSetting]:
    """Settings for each engine in ``engines`` (drafter params as a dict or the records' JSON).

    ``hub_ids`` maps model specs (specbench aliases) to the Hugging Face ids the snippets name.
    """
    if isinstance(params, str):
        params = json.loads(params or "{}")
    return {engine: _BUILDERS[engine](drafter, params, tree, int(gamma), hub_name(target, hub_ids), hub_ids)
            for engine in engines}
