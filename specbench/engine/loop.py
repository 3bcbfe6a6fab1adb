"""The speculative loop: draft → verify → accept → roll back, one target forward per round.

Invariant between rounds: the context holds L tokens; the target's KV cache holds the first
L − 1 (the last token, just emitted, is fed as the root of the next verification). A round
with k drafts runs the target once over [last, d_1..d_k], keeps the m accepted drafts, emits
m + 1 tokens and truncates the cache to L + m. γ = 0 is target-only decoding through the same
code, the baseline every speedup is measured against.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Callable

import torch

from specbench.engine.decoder import make_decoder
from specbench.engine.drafters.base import Drafter, Proposal, RoundOutcome
from specbench.engine.sampling import SamplingParams, probabilities
from specbench.engine.stats import GenerationResult, RoundLog
from specbench.engine.timing import DeviceClock
from specbench.engine.verify import Verdict, verify_greedy, verify_sampling
from specbench.errors import SpecbenchError


def eos_token_ids(model, tokenizer) -> set[int]:
    """Every id that ends a generation: generation config, model config and tokenizer."""
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids


@dataclass
class Verifier:
    """The acceptance rule; swappable so tests can show a broken rule is caught."""

    greedy: Callable = verify_greedy
    sampling: Callable = verify_sampling


class SpeculativeEngine:
    """Generate with a target model and an optional drafter, recording every round."""

    def __init__(self, target, drafter: Drafter | None = None, *, gamma: int = 0,
                 sampling: SamplingParams = SamplingParams(), backend: str = "auto",
                 verifier: Verifier | None = None, decoder=None):
        if gamma < 0:
            raise SpecbenchError(f"gamma must be >= 0, got {gamma}")
        if gamma > 0 and drafter is None:
            raise SpecbenchError("gamma > 0 needs a drafter")
        self.target = target
        self.drafter = drafter if gamma > 0 else None
        self.gamma = gamma
        self.sampling = sampling
        self.decoder = decoder or make_decoder(target.model, backend)  # engines of one target may share it
        self.device = self.decoder.device
        self.clock = DeviceClock(self.device)
        self.eos_ids = eos_token_ids(target.model, target.tokenizer)
        self.verifier = verifier or Verifier()

    # ------------------------------------------------------------------ pieces
    def _first_token(self, logits: torch.Tensor, generator) -> torch.Tensor:
        """Token after the prompt from logits [B, V] -> [B]."""
        if self.sampling.greedy:
            return logits.argmax(-1)
        return torch.multinomial(probabilities(logits, self.sampling), 1, generator=generator).squeeze(-1)

    def _verify(self, proposal: Proposal, logits: torch.Tensor, generator) -> Verdict:
        """logits [B, K+1, V] of the target over [last, drafts] -> verdict."""
        if self.sampling.greedy:
            return self.verifier.greedy(proposal.tokens, logits)
        target_probs = probabilities(logits, self.sampling)  # [B, K+1, V]
        bsz, k = proposal.tokens.shape
        uniform = torch.rand(bsz, k, generator=generator, device=self.device)
        exponential = torch.empty(bsz, target_probs.shape[-1], device=self.device).exponential_(generator=generator)
        return self.verifier.sampling(proposal.tokens, proposal.probs, target_probs, uniform, exponential)

    def _propose(self, context: torch.Tensor, k: int, generator) -> Proposal:
        if k == 0 or self.drafter is None:
            return Proposal(tokens=context[:, :0], probs=None, draft_steps=0)
        return self.drafter.propose(context, k, self.sampling, generator)

    # ------------------------------------------------------------------ generation
    def generate(self, prompt, max_new_tokens: int, *, seed: int = 0, stop_at_eos: bool = True,
                 on_round: Callable[[GenerationResult], None] | None = None) -> GenerationResult:
        """Generate up to max_new_tokens after prompt (list of ids or [1, T] tensor)."""
        prompt = torch.as_tensor(prompt, dtype=torch.long, device=self.device)
        if prompt.dim() == 1:
            prompt = prompt[None, :]
        if prompt.shape[0] != 1:
            raise SpecbenchError("the engine runs one sequence at a time (batch size 1)")
        if prompt.shape[1] == 0:
            raise SpecbenchError("empty prompt")
        if max_new_tokens < 1:
            raise SpecbenchError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        generator = torch.Generator(device=self.device).manual_seed(seed)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        capacity = prompt.shape[1] + max_new_tokens + self.gamma + 2
        context = torch.zeros(1, capacity, dtype=torch.long, device=self.device)  # [1, capacity]
        context[:, : prompt.shape[1]] = prompt
        length = prompt.shape[1]

        start = self.clock.now()
        self.decoder.reset(1, capacity)
        first = self._first_token(self.decoder.forward(prompt, logits="last").logits[:, -1], generator)  # [1]
        if self.drafter is not None:
            self.drafter.start(prompt, capacity)
        context[:, length] = first
        length += 1
        tokens = [int(first[0])]
        prefill_s = self.clock.now() - start

        rounds = RoundLog()
        result = GenerationResult(prompt_tokens=prompt.shape[1], tokens=tokens, rounds=rounds,
                                  prefill_s=prefill_s, decode_s=0.0, stop_reason="length")
        done = (stop_at_eos and tokens[0] in self.eos_ids) or len(tokens) >= max_new_tokens
        if done and tokens[0] in self.eos_ids and stop_at_eos:
            result.stop_reason = "eos"
        decode_start = self.clock.now()
        while not done:
            t0 = self.clock.now()
            k = min(self.gamma, max_new_tokens - len(tokens) - 1)
            proposal = self._propose(context[:, :length], k, generator)
            t1 = self.clock.now()
            root = self.decoder.length  # = length - 1
            feed = torch.cat([context[:, length - 1: length], proposal.tokens], dim=1)  # [1, 1+K]
            logits = self.decoder.forward(feed, logits="all").logits  # [1, 1+K, V]
            verdict = self._verify(proposal, logits, generator)
            t2 = self.clock.now()
            accepted = int(verdict.accepted[0])
            new = proposal.tokens[0, :accepted].tolist() + [int(verdict.next_token[0])]
            self.decoder.truncate(root + 1 + accepted)
            if stop_at_eos:
                for i, tok in enumerate(new):
                    if tok in self.eos_ids:
                        new = new[: i + 1]
                        result.stop_reason, done = "eos", True
                        break
            context[0, length: length + len(new)] = torch.tensor(new, device=self.device)
            if self.drafter is not None:
                self.drafter.observe(RoundOutcome(context_length=length, accepted=accepted, next_token=new[-1]))
            length += len(new)
            tokens.extend(new)
            done = done or len(tokens) >= max_new_tokens
            t3 = self.clock.now()
            rounds.add(drafted=proposal.size, depth=proposal.size, accepted=accepted, emitted=len(new),
                       draft_steps=proposal.draft_steps, draft_s=t1 - t0, verify_s=t2 - t1, round_s=t3 - t0)
            if on_round is not None:
                result.decode_s = t3 - decode_start
                on_round(result)
        result.decode_s = self.clock.now() - decode_start
        result.peak_memory_bytes = peak_memory_bytes(self.device)
        return result


def peak_memory_bytes(device: torch.device) -> int:
    """CUDA: max allocated since the generation began; CPU: peak RSS of the process."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
