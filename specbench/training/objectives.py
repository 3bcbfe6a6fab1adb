"""Training objectives of the four drafter types, on whole sequences at once.

Notation: f_t the target's final hidden state at position t, T_t = softmax(W_lm f_t) restricted to
the draft vocabulary — the target's distribution of x_{t+1}, the *teacher* (self-distillation).
Every prediction of the token at t+s+1 is scored against T_{t+s} by the soft cross-entropy
−Σ_v T(v) log q(v), which has the KL divergence's gradient. ``shift(x, s)[t] = x[t+s]``.

* medusa — head k on f_t against T_{t+k}, weighted 0.8^(k−1) (the Medusa paper's decay);
  semi-ar the same, each head's state passed through the serial head with the true tokens before it;
* eagle — entry t (f_t, x_{t+1}) predicts f_{t+1}: smooth-L1 to f_{t+1} plus 0.1 × the token loss
  against T_{t+1} (EAGLE's weighting); optional unrolling as below;
* eagle3, eagle3.1 — token loss only, with *training-time test*: step s of the chain starting
  at t runs the layer on its step s−1 output and x_{t+s} at position t+s−1, attending the step-1
  entries of positions ≤ t and the chain's own steps 2..s, exactly as drafting does; loss against
  T_{t+s};
* parallel-tree — the same unrolling, but step s ≥ 2 is fed the mask-token slot of the rank the
  true token x_{t+s} has in step s−1's distribution (`parallel_tree.ParallelTreeNet.next_inputs`);
* mtp — module k at position i on (h^{k−1}_i, x_{i+k}) with the band mask of
  `specbench.engine.drafters.networks.mtp.band_mask`, loss against T_{i+k}; modules weighted equally.

A drafter type names its objective (``TrainedType.objective``, a ``"module:function"`` reference
or a callable) and its keyword arguments; `objective` resolves them for a type name.

Each objective returns the loss and, per head / step / module, the number of positions whose
drafted argmax equals the target's argmax over the full vocabulary (``target_top``), counted on
answer tokens only, with the number of such positions.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from specbench.engine.drafters import registry
from specbench.engine.drafters.networks.feature_layers import VocabHead, causal_mask
from specbench.engine.drafters.networks.mtp import band_mask


@dataclass
class Batch:
    ids: torch.Tensor  # [B, T] long
    features: dict  # key -> [B, T, H] float
    valid: torch.Tensor  # [B, T] bool: a real position
    answer: torch.Tensor  # [B, T] bool: x_{t+1} is an answer token
    embeds: torch.Tensor | None = None  # [B, T, H] e(x_t)
    teacher: torch.Tensor | None = None  # [B, T, Vd] T_t (probabilities)
    target_top: torch.Tensor | None = None  # [B, T] long: argmax over the full vocabulary of W_lm f_t


@dataclass
class StepResult:
    loss: torch.Tensor
    correct: list[int]  # per head/step: answer positions whose argmax matches the target's
    counted: list[int]
    losses: list[float]
    # per head/step s (1-based at index s−1): the draft-vocabulary logits [B, T, Vd] whose row t predicts
    # x_{t+s+1}, as drafting at depth s from entry t does (online adaptation scores rejected drafts on them)
    logits: list[torch.Tensor] = field(default_factory=list)


def shift(x: torch.Tensor, s: int, fill=0) -> torch.Tensor:
    """x [B, T, ...] -> [B, T, ...] with row t holding x[t + s] (``fill`` past the end)."""
    if s == 0:
        return x
    pad = torch.full_like(x[:, :s], fill)
    return torch.cat((x[:, s:], pad), dim=1)


def soft_ce(logits: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over masked positions of −Σ teacher · log_softmax(logits); logits, teacher [B, T, Vd]."""
    per = -(teacher * logits.log_softmax(-1)).sum(-1)  # [B, T]
    return (per * mask).sum() / mask.sum().clamp_min(1)


def _score(logits: torch.Tensor, head: VocabHead, batch: Batch, s: int) -> tuple[int, int]:
    """(correct, counted) of step s: drafted argmax vs the target's, on answer positions."""
    if batch.target_top is None:
        return 0, 0
    mask = shift(batch.valid & batch.answer, s, False) & batch.valid
    drafted = logits.argmax(-1)
    if head.ids is not None:
        drafted = head.ids[drafted]
    truth = shift(batch.target_top, s, -1)
    return int(((drafted == truth) & mask).sum()), int(mask.sum())


def _token_term(logits, batch, head, s, result: StepResult) -> torch.Tensor:
    mask = (shift(batch.valid, s, False) & batch.valid).float()
    loss = soft_ce(logits, shift(batch.teacher, s), mask)
    correct, counted = _score(logits.detach(), head, batch, s)
    result.correct.append(correct)
    result.counted.append(counted)
    result.losses.append(float(loss.detach()))
    result.logits.append(logits)
    return loss


def medusa_objective(net, batch: Batch, head: VocabHead, **_) -> StepResult:
    """Medusa and semi-ar: head k on f_t against T_{t+k}; a net with a ``serial`` head (semi-ar) first
    conditions depth k on e(x_{t+k}) and the mean of e(x_{t+1..t+k}), the true tokens before it."""
    result = StepResult(torch.zeros(()), [], [], [])
    hidden = net(batch.features["final"])  # [K, B, T, H]
    serial = getattr(net, "serial", None)
    total, prefix = 0.0, torch.zeros_like(hidden[0])
    for k in range(1, hidden.shape[0] + 1):
        h = hidden[k - 1]
        if serial is not None:
            prev = shift(batch.embeds, k)  # e(x_{t+k}) [B, T, H]
            prefix = prefix + prev
            h = serial(h, prev, prefix / k)
        logits = head.sub_logits(h)
        total = total + 0.8 ** (k - 1) * _token_term(logits, batch, head, k, result)
    result.loss = total
    return result


def _attend(layer, a, r, positions, keys, own, mask):
    """One unrolled step of a drafter layer: (output, this step's k, v)."""
    q, k, v = layer.self_attn.project(a, positions)
    if keys is None:
        out = layer.self_attn.unrolled(q, k, v, mask)
    else:
        own = own + [(k, v)]
        out = layer.self_attn.unrolled(q, keys[0], keys[1], mask, own)
    return layer.finish(r, out), (k, v)


def eagle_objective(
    net, batch: Batch, head: VocabHead, *, steps: int = 1, feature_weight: float = 1.0, token_weight: float = 0.1, **_
) -> StepResult:
    """EAGLE (feature_weight > 0), EAGLE-3 / 3.1 and parallel-tree (feature_weight = 0, token_weight = 1)
    with ``steps`` unrolled; the net says what step s+1 is fed (``next_inputs``, teacher-forced)."""
    result = StepResult(torch.zeros(()), [], [], [])
    length = batch.ids.shape[1]
    positions = torch.arange(length, device=batch.ids.device)
    mask = causal_mask(length, batch.ids.device)
    a, r = net.step_inputs(net.context(batch.features), shift(batch.embeds, 1))  # entries: [B, T, A], [B, T, H]
    first, own, total = None, [], 0.0
    for s in range(1, steps + 1):
        out, kv = _attend(net.layer, a, r, positions + (s - 1), first, own, mask)
        out = net.step_output(out)
        if first is None:
            first = kv
        else:
            own.append(kv)
        logits = head.sub_logits(net.head_input(out))
        total = total + token_weight * _token_term(logits, batch, head, s, result)
        if feature_weight:
            valid = (shift(batch.valid, s, False) & batch.valid).unsqueeze(-1).float()
            target = shift(batch.features["final"], s)
            feat = (F.smooth_l1_loss(out, target, reduction="none") * valid).sum() / (valid.sum() * out.shape[-1])
            total = total + feature_weight * feat
        if s < steps:
            a, r = net.next_inputs(out, shift(batch.embeds, s + 1), logits.detach(), shift(batch.ids, s + 1), head)
    result.loss = total
    return result


def mtp_objective(net, batch: Batch, head: VocabHead, **_) -> StepResult:
    result = StepResult(torch.zeros(()), [], [], [])
    length = batch.ids.shape[1]
    positions = torch.arange(length, device=batch.ids.device)
    h_prev, total = batch.features["final"], 0.0
    for k, module in enumerate(net.layers, start=1):
        a, r = module.step_inputs(h_prev, shift(batch.embeds, k))
        out, _ = _attend(module.block, a, r, positions, None, [], band_mask(positions, positions, k))
        logits = head.sub_logits(module.head_input(out))
        total = total + _token_term(logits, batch, head, k, result) / net.depth
        h_prev = out
    result.loss = total
    return result


def resolve(reference: str | Callable) -> Callable:
    """A callable objective, or the function a ``"module:function"`` reference names."""
    if callable(reference):
        return reference
    module, _, name = str(reference).partition(":")
    return getattr(importlib.import_module(module), name)


def objective(kind: str, steps: int | None = None) -> tuple[Callable, dict]:
    """(function, keyword arguments) of a drafter type's objective; ``steps``: unrolled steps."""
    drafter_type = registry.get(kind, trained=True)
    return resolve(drafter_type.objective), drafter_type.training_args(steps)
