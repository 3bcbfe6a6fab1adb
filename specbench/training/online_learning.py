"""Training a served drafter on its own traffic: the learner of online adaptation (docs/strategies.md, Aurora).

`specbench.engine.strategies.online_drafting.OnlineDriver` hands the learner each generation's trace (the verified
tokens, the target's features at their positions, the drafts the target refused) and asks for an update
every N prompts or M tokens. The learner trains a float32 copy of the drafter's network with AdamW
(constant learning rate, gradient clipping 1.0) and returns its weights, which the engine swaps in.

Data. The learner keeps the last ``window`` generations. Each update takes ``steps`` optimizer steps; a
step's batch holds the newest traffic (the generation in progress for a mid-generation update, else the
newest finished one) and others of the window drawn at random, up to ``batch_tokens`` positions. Every
position of a sequence — prompt and output — is trained on, as `specbench train-drafter` does: the
prefill's features are verified computation of the target too.

Losses (notation of `specbench.training.objectives`: T_t = softmax(W_lm f_t) over the draft vocabulary
is the target's distribution of x_{t+1}; q_{t,s} the drafter's distribution at row t, step s, which
predicts x_{t+s+1}, exactly what drafting at depth s from the root after x_{t+1} does):

* ``accepted`` — the drafter type's own training objective on the traffic: for EAGLE-3

      L_acc = Σ_s mean_t [ −Σ_v T_{t+s}(v) log q_{t,s}(v) ],

  soft cross-entropy (self-distillation) against the target's distribution at every verified
  position, with training-time-test unrolling; EAGLE adds its feature regression, Medusa and MTP
  their per-head / per-module terms. Every verified token counts, accepted drafts and the target's
  corrections alike: all of them are the target's tokens.

* ``accepted+rejected`` — the same plus β times a term on the drafts the target refused, Aurora's
  "implicit negative feedback". A draft d proposed at depth s from row t and refused is an
  unlikelihood example:

      L_rej = mean_{(t, s, d) refused} [ −log(1 − q_{t,s}(d)) ],     L = L_acc + β · L_rej.

  Under greedy verification a refused d is not the target's argmax, so lowering q(d) moves mass
  towards the token L_acc points at; under speculative sampling d is refused with probability
  1 − min(1, p(d)/q(d)), which is positive only where q(d) > p(d): in expectation the term pushes q
  down exactly where it overshoots p. Only refusals whose depth the objective unrolls (EAGLE-3: 3
  steps; Medusa: its heads) and whose token is in the draft vocabulary are scored.

The gradient of L_rej with respect to the logits z of q_{t,s} is q(d)/(1 − q(d)) · (e_d − q): small for
a draft the drafter was unsure of, large for a confident wrong one.
"""

from __future__ import annotations

import copy
import math
import random
from collections import deque

import torch

from specbench.engine.drafters.networks.feature_layers import VocabHead
from specbench.engine.strategies.online_drafting import OnlinePlan, TrafficExample
from specbench.errors import SpecbenchError
from specbench.training.objectives import objective
from specbench.training.train import Example, collate

MIN_ONE_MINUS_Q = 1e-6  # keeps −log(1 − q) finite for a draft the drafter was certain of


class OnlineLearner:
    """A float32 training copy of a served drafter's network, its optimizer and a window of traffic."""

    def __init__(self, drafter_type, drafter, target, plan: OnlinePlan):
        self.plan = plan
        self.kind = drafter_type.name
        self.fn, self.kwargs = objective(self.kind)
        serving = drafter_type.vocab_head(drafter)
        ids = serving.ids
        self.head = VocabHead(target.model.get_output_embeddings(), target.vocab_size, ids).float()
        if not torch.equal(self.head.weight, serving.weight.float()):
            raise SpecbenchError(
                f"online adaptation trains drafters that score with the target's own LM head; this "
                f"'{self.kind}' checkpoint brings an output layer of its own"
            )
        self.target_model = target.model
        self.net = copy.deepcopy(drafter_type.net_of(drafter)).float().train()
        self.net.requires_grad_(True)
        self.params = [p for p in self.net.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=plan.lr, betas=(0.9, 0.95), weight_decay=0.0)
        vocab = int(target.vocab_size)
        self.position = torch.full((vocab,), -1, dtype=torch.long, device=self.head.weight.device)  # id -> draft row
        rows = torch.arange(vocab, device=self.position.device) if ids is None else ids.to(self.position.device)
        self.position[rows] = torch.arange(rows.numel(), device=self.position.device)
        self.window: deque[tuple[Example, list]] = deque(maxlen=plan.window)
        self.rng = random.Random(plan.seed)

    # ------------------------------------------------------------------ data
    def _example(self, traffic: TrafficExample) -> tuple[Example, list[tuple[int, int, int]]]:
        """A training example (its last ``batch_tokens`` positions) and its refusals, rows shifted to match."""
        start = max(0, traffic.ids.numel() - self.plan.batch_tokens)
        features = {key: value[start:].detach().float() for key, value in traffic.features.items()}
        example = Example(traffic.ids[start:].detach().cpu(), features, max(0, traffic.prompt_len - start))
        refused = [(t - start, s, d) for t, s, d in traffic.rejected if t >= start]
        return example, refused

    def remember(self, traffic: TrafficExample) -> None:
        """A finished generation joins the window (the oldest leaves when it is full)."""
        if traffic.ids.numel() >= 2:
            self.window.append(self._example(traffic))

    def _batch(self, newest: tuple[Example, list] | None) -> list[tuple[Example, list]]:
        """The newest traffic first, then window members at random, up to ``batch_tokens`` positions."""
        pool = list(self.window)
        chosen = [newest] if newest is not None else ([pool.pop()] if pool else [])
        self.rng.shuffle(pool)
        used = sum(len(e.ids) for e, _ in chosen)
        for item in pool:
            if used + len(item[0].ids) > self.plan.batch_tokens:
                continue
            chosen.append(item)
            used += len(item[0].ids)
        return chosen

    # ------------------------------------------------------------------ losses
    def rejected_loss(
        self, logits: list[torch.Tensor], refused: list[list[tuple[int, int, int]]]
    ) -> tuple[torch.Tensor | None, int]:
        """mean of −log(1 − q_{t,s}(d)) over the refusals the objective scores; logits[s−1] [B, T, Vd],
        ``refused[b]`` the (t, s, d) of batch row b. (None, 0) when none is scored."""
        picked = [
            (b, t, s - 1, int(self.position[d]))
            for b, rows in enumerate(refused)
            for t, s, d in rows
            if s <= len(logits) and 0 <= t < logits[0].shape[1] and int(self.position[d]) >= 0
        ]
        if not picked:
            return None, 0
        rows = torch.stack([logits[step][b, t] for b, t, step, _ in picked]).float()  # [R, Vd]
        q = rows.softmax(-1)[torch.arange(len(picked)), torch.tensor([j for *_, j in picked])]  # [R] q_{t,s}(d)
        return -torch.log((1.0 - q).clamp_min(MIN_ONE_MINUS_Q)).mean(), len(picked)

    # ------------------------------------------------------------------ update
    def update(self, current: TrafficExample | None) -> tuple[dict, dict]:
        """``steps`` optimizer steps on the window (and ``current``, the generation in progress); returns the
        new weights and what the update used: training positions, mean losses, refusals scored."""
        newest = self._example(current) if current is not None and current.ids.numel() >= 2 else None
        if newest is None and not self.window:
            return self._weights(), {"tokens": 0, "loss": math.nan, "reject_loss": math.nan, "rejections": 0}
        tokens, losses, reject_losses, scored = 0, [], [], 0
        for _ in range(self.plan.steps):
            chosen = self._batch(newest)
            batch = collate([e for e, _ in chosen], self.target_model, self.head, full_top=False)
            result = self.fn(self.net, batch, self.head, **self.kwargs)
            loss = result.loss
            if self.plan.uses_rejections:
                rejected, count = self.rejected_loss(result.logits, [r for _, r in chosen])
                if rejected is not None:
                    loss = loss + self.plan.reject_weight * rejected
                    reject_losses.append(float(rejected.detach()))
                    scored += count
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.params, 1.0)
            self.optimizer.step()
            tokens += int(batch.valid.sum())
            losses.append(float(result.loss.detach()))
        return self._weights(), {
            "tokens": tokens,
            "loss": _mean(losses),
            "reject_loss": _mean(reject_losses),
            "rejections": scored,
        }

    def _weights(self) -> dict:
        return {key: value.detach().clone() for key, value in self.net.state_dict().items()}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan
