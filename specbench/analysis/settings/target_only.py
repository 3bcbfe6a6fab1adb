"""Each engine serving the target alone: the paste-ready line a confident "no speculation" ends with.

A confident no is an answer to act on, as a yes is: the engine's panel gives the command line without any
speculative setting — llama-server without ``--spec-type`` / ``--model-draft``, vLLM without
``speculative_config``, SGLang without ``--speculative-*`` flags, transformers ``generate`` without an
assistant or prompt lookup. Each builder is named by its engine's catalogue entry (``target_only``,
`specbench.catalogue.engines`) and called by `engine_settings.target_only_settings` with the target as that
engine's lines name it (a Hugging Face id, or a GGUF file). The command lines are the speculative ones' own
builders (`engine_settings.vllm_snippet`, `sglang_command`, `llamacpp_command`) with no speculation asked,
so a yes and a no differ only by the speculative part.
"""

from __future__ import annotations

from specbench.analysis.settings.engine_settings import EngineSetting, llamacpp_command, sglang_command, vllm_snippet

WHY = "a confident no: speculation does not pay for this workload here, so serve the target alone"


def _alone(engine: str, snippet: str, how: str) -> EngineSetting:
    return EngineSetting(engine, True, {}, snippet, [f"{WHY} ({how})"], target_only=True)


def vllm_target_only(target: str) -> EngineSetting:
    return _alone("vllm", vllm_snippet(target, None), "no speculative_config")


def sglang_target_only(target: str) -> EngineSetting:
    return _alone("sglang", sglang_command(target, {}), "no --speculative-* flag")


def transformers_target_only(target: str) -> EngineSetting:
    snippet = f"model = AutoModelForCausalLM.from_pretrained({target!r})\nmodel.generate(**inputs)"
    return _alone("transformers", snippet, "no assistant_model, no prompt_lookup_num_tokens")


def llamacpp_target_only(target: str) -> EngineSetting:
    return _alone("llamacpp", llamacpp_command(target, []), "no --spec-type, no --model-draft")
