"""One prompt through the engine (the work behind `specbench run`), UI-free."""

from __future__ import annotations

import hashlib
from typing import Callable

from specbench.engine.drafters import check_params, make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.errors import SpecbenchError
from specbench.models.limits import check_context
from specbench.models.resolve import load_model
from specbench.models.prompting import encode_conversation

WARMUP_TOKENS = 8


def timed_generation(engine: SpeculativeEngine, prompt_ids: list[int], max_new_tokens: int, *, seed: int,
                     stop_at_eos: bool):
    """A short untimed warm-up on the same prompt, then the measured generation."""
    engine.generate(prompt_ids, min(WARMUP_TOKENS, max_new_tokens), seed=seed, stop_at_eos=stop_at_eos)
    return engine.generate(prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos)


def run_prompt(*, target: str, drafter: str, params: dict, gamma: int, sampling: SamplingParams, prompt: str,
               tree: str = "chain", kernels: str = "auto", compile: bool = False,
               max_new_tokens: int, seed: int = 0, baseline: bool = False, chat: bool = True,
               stop_at_eos: bool = True, device: str = "cpu", dtype: str = "fp32",
               status: Callable[[str], None] | None = None) -> dict:
    """Run ``prompt`` with the given drafter (and optionally the γ=0 baseline); return a report dict."""
    say = status or (lambda message: None)
    if drafter != "none":
        check_params(drafter, params)  # bad parameters fail before any model loads
    say(f"loading target {target}")
    target_model = load_model(target, device=device, dtype=dtype)
    prompt_ids = encode_conversation(target_model.tokenizer, [prompt], chat=chat)
    check_context(target_model.model, target, len(prompt_ids), max_new_tokens)
    draft = None
    if gamma > 0:
        if drafter == "none":
            raise SpecbenchError("gamma > 0 needs a drafter")
        say(f"preparing drafter {drafter}")
        draft = make_drafter(drafter, target_model, params, device=device, dtype=dtype)
    say("generating")
    engine = SpeculativeEngine(target_model, draft, gamma=gamma, tree=tree, sampling=sampling, kernels=kernels,
                               compile=compile)
    result = timed_generation(engine, prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos)
    report = {
        "target": target, "drafter": drafter if gamma > 0 else "none", "drafter_params": params, "gamma": gamma,
        "tree": tree if gamma > 0 else "chain",
        "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k,
        "device": str(engine.device), "dtype": dtype,
        "text": target_model.tokenizer.decode(result.tokens, skip_special_tokens=True),
        "output_sha1": hashlib.sha1(str(result.tokens).encode()).hexdigest(),
        "metrics": result.metrics(max(gamma, 1)),
    }
    if baseline:
        say("generating the target-only baseline")
        base_engine = SpeculativeEngine(target_model, None, gamma=0, sampling=sampling, decoder=engine.decoder)
        base = timed_generation(base_engine, prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos)
        report["baseline"] = base.metrics(1)
        report["speedup"] = result.tokens_per_s / base.tokens_per_s
        report["identical_to_baseline"] = base.tokens == result.tokens
    return report
