"""The speculative loop: draft → verify → accept → roll back, one target forward per round.

Invariant between rounds: the context holds L tokens; the target's KV cache holds the first
L − 1 (the last token, just emitted, is fed as the root of the next verification). A round
runs the target once over [root, drafts] — a chain causally, a tree with its ancestor mask —
keeps the m accepted drafts (a chain prefix or a root-to-node path), emits m + 1 tokens and
leaves the cache at L + m: truncated for a chain, compacted in place for a tree. γ = 0 is
target-only decoding through the same code, the baseline every speedup is measured against.

How many of its γ tokens a chain drafts in a round is the schedule's choice
(`specbench.engine.strategies.schedule`): ``fixed`` (the default) always drafts γ; the others choose per round
(before it, or token by token from the drafter's confidence) and learn from each verdict.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specbench.engine.cpu.threads import RoleThreads, using_threads
from specbench.engine.decoder import make_decoder
from specbench.engine.drafters.base import BaseDrafter, Proposal, RoundOutcome, check_draft_depth
from specbench.engine.rounds import Round, RoundDriver, Verification
from specbench.engine.sampling import SamplingParams, probabilities
from specbench.engine.stats import GenerationResult, RoundLog
from specbench.engine.strategies.schedule import RoundVerdict, ScheduleSpec, check_schedule, make_schedule
from specbench.engine.timing import DeviceClock
from specbench.engine.tree import StaticTree, shape_for, verification_layout
from specbench.engine.verify import (
    verify_greedy,
    verify_greedy_rows,
    verify_sampling,
    verify_sampling_rows,
    verify_tree_greedy,
    verify_tree_sampling,
)
from specbench.errors import SpecbenchError
from specbench.models.moe_upcycle import RoutingLog, routing_log
from specbench_kernels.rejection_sampling import rejection_sampling


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
    """The acceptance rule; swappable so tests can show a broken rule is caught.

    ``greedy_rows`` / ``sampling_rows`` are the chain rules with the target's rows computed on demand
    (`verify_greedy_rows`, `verify_sampling_rows`); the engine uses them on a decoder with a lazy LM
    head as long as the batched rule of the same kind is the standard one (a test that swaps the
    batched rule gets the batched path)."""

    greedy: Callable = verify_greedy
    sampling: Callable = verify_sampling
    greedy_rows: Callable = verify_greedy_rows
    sampling_rows: Callable = verify_sampling_rows
    tree_greedy: Callable = verify_tree_greedy
    tree_sampling: Callable = verify_tree_sampling


class SpeculativeEngine:
    """Generate with a target model and an optional drafter, recording every round.

    ``driver``: how rounds are drafted and verified (`specbench.engine.rounds.RoundDriver`; default sequential:
    draft, then verify). Nested speculation and online adaptation are drivers."""

    def __init__(
        self,
        target,
        drafter: BaseDrafter | None = None,
        *,
        gamma: int = 0,
        tree: str = "chain",
        sampling: SamplingParams = SamplingParams(),
        implementation: str = "auto",
        kernels: str = "auto",
        compile: bool = False,
        verifier: Verifier | None = None,
        decoder=None,
        schedule: ScheduleSpec = ScheduleSpec(),
        threads: RoleThreads | None = None,
        driver: RoundDriver | None = None,
    ):
        if gamma < 0:
            raise SpecbenchError(f"gamma must be >= 0, got {gamma}")
        if gamma > 0 and drafter is None:
            raise SpecbenchError("gamma > 0 needs a drafter")
        self.target = target
        self.drafter = drafter if gamma > 0 else None
        self.config_gamma = gamma  # the configuration's γ: each round's γ (round_gamma) is at most this
        self.shape = shape_for(tree, gamma) if gamma > 0 else None
        check_draft_depth(self.drafter, self.shape)
        self.sampling = sampling
        # CPU threads of the target's and the drafter's forwards (`specbench.engine.cpu.threads`); None: torch's
        self.threads = threads
        # engines of one target may share a decoder (and its compiled graphs)
        self.decoder = decoder or make_decoder(target.model, implementation, kernels, compile)
        if compile and self.drafter is not None:  # a draft model compiles its steps too
            self.drafter.compile_steps()
        if self.shape is not None and not self.shape.is_chain and not self.decoder.supports_trees:
            raise SpecbenchError(
                f"tree drafting needs a natively supported target architecture; "
                f"'{target.name}' runs through transformers' own forward (chains only)"
            )
        self.kernels = kernels
        if isinstance(self.shape, StaticTree) and max(self.shape.ranks) >= target.vocab_size:
            raise SpecbenchError(
                f"tree rank {max(self.shape.ranks)} is beyond the vocabulary ({target.vocab_size} tokens)"
            )
        self.device = self.decoder.device
        self.clock = DeviceClock(self.device)
        self.eos_ids = eos_token_ids(target.model, target.tokenizer)
        self.verifier = verifier or Verifier()
        if self.drafter is not None:
            check_schedule(
                schedule, chain=self.shape.is_chain, drafter=self.drafter.name, confident=self.drafter.confident
            )
        self.schedule = make_schedule(schedule if self.drafter is not None else ScheduleSpec(), gamma)
        self.routing = routing_log(target.model)  # MoE targets: the experts of each forward's tokens
        if self.shape is not None and self.shape.expert_cost > 0:
            self._predict_experts_with(self.drafter)
        self.driver = driver or RoundDriver()
        self.driver.bind(self)

    def _predict_experts_with(self, drafter) -> None:
        """Give the drafter the target's routers for an expert-aware tree (λ > 0), or refuse the configuration."""
        if self.routing is None or not self.routing.routers:
            raise SpecbenchError(
                f"an expert-aware tree (lambda > 0) needs an MoE target whose routers specbench "
                f"knows (e.g. smollm2-135m-moe); '{self.target.name}' is dense"
            )
        if not drafter.predicts_experts:
            raise SpecbenchError(
                f"drafter '{drafter.name}' cannot predict the target's experts (expert-aware "
                "trees need a draft model, EAGLE or EAGLE-3)"
            )
        if drafter.feature_size != self.routing.hidden_size:
            raise SpecbenchError(
                f"drafter '{drafter.name}' has hidden size {drafter.feature_size}, the target's "
                f"routers take {self.routing.hidden_size}: no expert prediction from its features"
            )
        drafter.expert_router = self.routing

    # ------------------------------------------------------------------ pieces
    def _first_token(self, logits: torch.Tensor, generator) -> torch.Tensor:
        """Token after the prompt from logits [B, V] -> [B]."""
        if self.sampling.greedy:
            return logits.argmax(-1)
        return torch.multinomial(probabilities(logits, self.sampling), 1, generator=generator).squeeze(-1)

    def _chain_randomness(self, tokens: torch.Tensor, vocab: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The random numbers of a sampled chain verdict, drawn before it: uniform [B, K], then
        exponential [B, V] (the batched and the row-by-row rule read the same ones)."""
        bsz, k = tokens.shape
        uniform = torch.rand(bsz, k, generator=generator, device=self.device)
        exponential = torch.empty(bsz, vocab, device=self.device).exponential_(generator=generator)
        return uniform, exponential

    def _verify_chain(self, proposal: Proposal, logits: torch.Tensor, generator) -> tuple[int, int]:
        """logits [1, K+1, V] of the target over [root, drafts] -> (accepted, next token)."""
        if self.sampling.greedy:
            verdict = self.verifier.greedy(proposal.tokens, logits)
        else:
            target_probs = probabilities(logits, self.sampling)  # [B, K+1, V]
            uniform, exponential = self._chain_randomness(proposal.tokens, target_probs.shape[-1], generator)
            rule = self.verifier.sampling
            if self.kernels != "torch" and rule is verify_sampling and self.device.type == "cuda":
                rule = rejection_sampling  # the fused Triton kernel, same numbers in, same tokens out
            verdict = rule(proposal.tokens, proposal.probs, target_probs, uniform, exponential)
        return int(verdict.accepted[0]), int(verdict.next_token[0])

    def _lazy_chain_rule(self, proposal: Proposal) -> bool:
        """Whether this chain's verdict reads the target's rows on demand (`_verify_chain_rows`): a
        decoder with a lazy LM head and the standard batched rule for this sampling mode."""
        if not (proposal.is_chain and self.decoder.lazy_head):
            return False
        if self.sampling.greedy:
            return self.verifier.greedy is verify_greedy
        return self.verifier.sampling is verify_sampling

    def _verify_chain_rows(self, proposal: Proposal, hidden: torch.Tensor, generator) -> tuple[int, int]:
        """hidden [1, K+1, H] (final-norm states over [root, drafts]) -> (accepted, next token), the LM
        head run one row at a time, only for rows whose acceptance is decided (see `verify_chain_rows`)."""

        def logits(i: int) -> torch.Tensor:  # [V]
            return self.decoder.head(hidden[:, i : i + 1])[0, 0]

        if self.sampling.greedy:
            verdict = self.verifier.greedy_rows(proposal.tokens, logits)
        else:
            vocab = self.decoder.model.get_output_embeddings().weight.shape[0]
            uniform, exponential = self._chain_randomness(proposal.tokens, vocab, generator)
            verdict = self.verifier.sampling_rows(
                proposal.tokens, proposal.probs, lambda i: probabilities(logits(i), self.sampling), uniform, exponential
            )
        return int(verdict.accepted[0]), int(verdict.next_token[0])

    def _verify_tree(self, proposal: Proposal, logits: torch.Tensor, generator) -> tuple[list[int], int]:
        """logits [1, N+1, V] over [root, nodes] -> (accepted path of node indices, next token)."""
        tokens = proposal.tokens[0]
        if self.sampling.greedy:
            verdict = self.verifier.tree_greedy(tokens, proposal.parents, logits[0])
        else:
            probs = proposal.probs[0] if proposal.probs is not None else None
            verdict = self.verifier.tree_sampling(
                tokens, proposal.parents, probs, probabilities(logits[0], self.sampling), generator
            )
        return verdict.path, verdict.next_token

    # ------------------------------------------------------------------ the round's steps (drivers call these)
    def propose(self, context: torch.Tensor, round_gamma: int, generator) -> Proposal:
        """The drafter's draft for context [1, L]: the shape cut to depth ``round_gamma`` (this round's γ)."""
        if round_gamma == 0 or self.drafter is None:
            return Proposal(tokens=context[:, :0], probs=None, draft_steps=0)
        shape = self.shape.truncated(round_gamma)
        if self.schedule.keep_drafting is None:
            return self.drafter.propose(context, shape, self.sampling, generator)
        return self.drafter.propose(context, shape, self.sampling, generator, keep_drafting=self.schedule.keep_drafting)

    def verify(self, proposal: Proposal, root_token: torch.Tensor, generator) -> Verification:
        """One target forward over [root, drafts]; leaves the cache holding root + accepted path, and returns the
        target's verdict (the accepted node indices — a chain's are 0..m−1 —, the token after them, and the target
        features the drafter and the driver asked for at the kept positions: root, then the path)."""
        root = self.decoder.length
        feed = torch.cat([root_token, proposal.tokens], dim=1)  # [1, 1+N]
        layout = None if proposal.is_chain else verification_layout(tuple(proposal.parents))
        # chains on a decoder whose LM head costs one weight pass per row: the head only for the rows
        # whose acceptance is decided (up to the first rejection), computed after the layers
        lazy = self._lazy_chain_rule(proposal)
        out = self.decoder.forward(
            feed, tree=layout, logits="none" if lazy else "all", hidden_layers=self.feature_layers
        )
        if proposal.is_chain:
            accepted, next_token = (
                self._verify_chain_rows(proposal, out.hidden, generator)
                if lazy
                else self._verify_chain(proposal, out.logits, generator)
            )
            path = list(range(accepted))
            self.decoder.truncate(root + 1 + accepted)
        else:
            path, next_token = self._verify_tree(proposal, out.logits, generator)
            self.decoder.keep(root, torch.tensor([0] + [1 + i for i in path]))
        kept = [0] + [1 + i for i in path]
        return Verification(path, next_token, self._features(out, kept))

    def run_round(self, context: torch.Tensor, round_gamma: int, generator, stop_at_eos: bool) -> Round:
        """One round continuing context [1, L]: draft (at most ``round_gamma`` tokens), verify, accept; the
        drafter hears the verdict. The context and the books are the caller's (`generate`)."""
        t0 = self.clock.now()
        with using_threads(self._drafter_threads):
            proposal = self.driver.draft(context, round_gamma, generator)
        t1 = self.clock.now()
        with using_threads(self._target_threads):
            verdict = self.driver.verify(proposal, context, generator)
        t2 = self.clock.now()
        emitted = proposal.tokens[0, verdict.path].tolist() + [verdict.next_token]
        eos = False
        if stop_at_eos:
            ends = [i for i, token in enumerate(emitted) if token in self.eos_ids]
            if ends:
                emitted, eos = emitted[: ends[0] + 1], True
        if self.drafter is not None:
            self.drafter.observe(
                RoundOutcome(
                    context_length=context.shape[1],
                    accepted=len(verdict.path),
                    next_token=verdict.next_token,
                    accepted_nodes=verdict.path,
                    features=verdict.features,
                )
            )
        return Round(
            drafted=proposal.tree_nodes,
            depth=proposal.depth,
            draft_steps=proposal.draft_steps,
            confidences=proposal.confidences,
            accepted=len(verdict.path),
            emitted=emitted,
            eos=eos,
            draft_s=t1 - t0,
            verify_s=t2 - t1,
        )

    @property
    def feature_layers(self) -> tuple[int, ...]:
        """Decoder layers whose outputs a forward keeps (the drafter's and the driver's features but "final")."""
        return tuple(k for k in self._feature_keys if k != "final")

    @property
    def _feature_keys(self) -> tuple:
        needs = self.drafter.feature_layers if self.drafter is not None else ()
        return tuple(dict.fromkeys((*needs, *self.driver.features)))

    def _features(self, out, positions) -> dict | None:
        """Target features the drafter and the driver declared at ``positions`` of the forward (the driver hears
        them).

        "final" is the last hidden state after the final norm (the LM head's input); an integer
        i is the output of decoder layer i (0: the embeddings). Each value is [B, n, H].
        """
        keys = self._feature_keys
        if not keys:
            return None
        index = torch.as_tensor(positions, device=out.hidden.device)
        source = {"final": out.hidden, **out.layer_hidden}
        chosen = {key: source[key].index_select(1, index) for key in keys}
        self.driver.took_features(chosen)
        return chosen

    def capacity(self, prompt_tokens: int, max_new_tokens: int) -> int:
        """Positions a generation's caches hold: prompt, new tokens and room for a whole tree before compaction."""
        nodes = self.shape.num_nodes if self.shape is not None else 0
        return prompt_tokens + max_new_tokens + nodes + 2

    @property
    def _target_threads(self) -> int | None:
        """The thread count of the target's forwards; None: leave torch's as it is."""
        return None if self.threads is None else self.threads.target

    @property
    def _drafter_threads(self) -> int | None:
        return None if self.threads is None else self.threads.drafter

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        prompt,
        max_new_tokens: int,
        *,
        seed: int = 0,
        stop_at_eos: bool = True,
        on_round: Callable[[GenerationResult], None] | None = None,
    ) -> GenerationResult:
        """Generate up to max_new_tokens after prompt (list of ids or [1, T] tensor): prefill, then rounds until
        the length limit or an end-of-sequence token, each round booked in the result's round log."""
        prompt = self._checked_prompt(prompt, max_new_tokens)
        self.driver.begin(prompt[0].tolist(), max_new_tokens, seed, stop_at_eos)
        generator = torch.Generator(device=self.device).manual_seed(seed)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        capacity = self.capacity(prompt.shape[1], max_new_tokens)
        context = torch.zeros(1, capacity, dtype=torch.long, device=self.device)  # [1, capacity]
        context[:, : prompt.shape[1]] = prompt
        length = prompt.shape[1]

        start = self.clock.now()
        first = self._prefill(prompt, capacity, generator)
        context[:, length] = first
        length += 1
        tokens = [first]
        result = GenerationResult(
            prompt_tokens=prompt.shape[1],
            tokens=tokens,
            rounds=RoundLog(),
            prefill_s=self.clock.now() - start,
            decode_s=0.0,
            stop_reason="length",
            moe=None
            if self.routing is None
            else {
                "experts": self.routing.experts,
                "top_k": self.routing.top_k,
                "expert_bytes": self.routing.expert_bytes,
                "step_bytes": self.routing.step_bytes,
            },
        )
        eos = stop_at_eos and first in self.eos_ids
        if eos:
            result.stop_reason = "eos"
        done = eos or len(tokens) >= max_new_tokens
        self.schedule.start()
        decode_start = self.clock.now()
        while not done:
            t0 = self.clock.now()
            # the schedule's γ for this round (fixed: the configuration's), never past the length limit
            round_gamma = min(self.schedule.round_gamma(), max_new_tokens - len(tokens) - 1)
            step = self.run_round(context[:, :length], round_gamma, generator, stop_at_eos)
            context[0, length : length + len(step.emitted)] = torch.tensor(step.emitted, device=self.device)
            length += len(step.emitted)
            tokens.extend(step.emitted)
            if step.eos:
                result.stop_reason = "eos"
            done = step.eos or len(tokens) >= max_new_tokens
            round_s = self.clock.now() - t0
            self._book(result.rounds, step, round_s)
            if on_round is not None:
                result.decode_s = t0 + round_s - decode_start
                on_round(result)
            if not done:  # work a round driver does off the decode clock (online adaptation: a drafter update)
                decode_start += self.driver.between_rounds(context[:, :length])
        result.decode_s = self.clock.now() - decode_start
        result.peak_memory_bytes = peak_memory_bytes(self.device)
        self.driver.end(result)
        return result

    def _checked_prompt(self, prompt, max_new_tokens: int) -> torch.Tensor:
        """The prompt as [1, T] ids on the engine's device; one line for what the engine cannot run."""
        prompt = torch.as_tensor(prompt, dtype=torch.long, device=self.device)
        if prompt.dim() == 1:
            prompt = prompt[None, :]
        if prompt.shape[0] != 1:
            raise SpecbenchError("the engine runs one sequence at a time (batch size 1)")
        if prompt.shape[1] == 0:
            raise SpecbenchError("empty prompt")
        if max_new_tokens < 1:
            raise SpecbenchError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        return prompt

    def _prefill(self, prompt: torch.Tensor, capacity: int, generator) -> int:
        """The target over prompt [1, T] (its cache reset to ``capacity``) and the drafter started on it; the
        token after the prompt."""
        self.decoder.reset(1, capacity)
        with using_threads(self._target_threads):
            out = self.decoder.forward(prompt, logits="last", hidden_layers=self.feature_layers)
        first = self._first_token(out.logits[:, -1], generator)  # [1]
        if self.drafter is not None:
            with using_threads(self._drafter_threads):
                self.drafter.start(prompt, capacity, features=self._features(out, range(prompt.shape[1])))
        return int(first[0])

    def _book(self, log: RoundLog, step: Round, round_s: float) -> None:
        """A finished round into the generation's round log and the verify-length schedule."""
        log.add(
            drafted=step.drafted,
            depth=step.depth,
            accepted=step.accepted,
            emitted=len(step.emitted),
            draft_steps=step.draft_steps,
            draft_s=step.draft_s,
            verify_s=step.verify_s,
            round_s=round_s,
            **expert_traffic(self.routing),
        )
        self.schedule.observe(
            RoundVerdict(
                drafted=step.drafted,
                accepted=step.accepted,
                emitted=len(step.emitted),
                confidences=step.confidences,
                draft_s=step.draft_s,
                verify_s=step.verify_s,
                round_s=round_s,
            )
        )


def expert_traffic(routing: RoutingLog | None) -> dict:
    """The last (verify) forward's expert traffic, as `RoundLog.add` takes it: distinct experts its tokens
    touched per layer, mean over layers, and the expert weight bytes that reads (Σ_layers distinct × the
    bytes of one expert). Nothing for a dense target."""
    if routing is None:
        return {}
    distinct = routing.distinct_per_layer()
    return {"experts": sum(distinct) / len(distinct), "expert_bytes": sum(distinct) * routing.expert_bytes}


def peak_memory_bytes(device: torch.device) -> int:
    """CUDA: max allocated since the generation began; CPU: peak RSS of the process."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
