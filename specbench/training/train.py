"""Training a drafter on a cached self-distillation corpus (UI-free; the CLI draws the progress).

`train_drafter` runs the whole recipe for one drafter type: corpus (generated once, cached),
features (computed once, cached), draft vocabulary, AdamW with warm-up and cosine decay on the
type's objective (`specbench.training.objectives`), held-out evaluation, checkpoint. Progress is
reported through ``on_event(dict)`` events: ``{"event": "phase", ...}``, ``"generate"``,
``"features"``, ``"step"`` (loss), ``"eval"`` (held-out loss and top-1 accuracy per head/step).
"""

from __future__ import annotations

import math
import os
import platform
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

from specbench.engine.device import cpu_name
from specbench.engine.drafters import registry
from specbench.engine.drafters.checkpoints.checkpoint import target_fingerprint
from specbench.engine.drafters.networks.feature_layers import VocabHead, embed
from specbench.engine.drafters.networks.trained import parameter_count
from specbench.engine.loop import eos_token_ids
from specbench.errors import SpecbenchError
from specbench.training.data import CorpusSpec, ensure_features, generate_corpus, read_features
from specbench.training.objectives import Batch, objective

EVAL_STEPS = 3  # unrolled steps scored at evaluation for the feature drafters


@dataclass
class TrainOptions:
    kind: str
    tokens: int = 40_000  # answer tokens of the corpus to train on (train + held-out)
    epochs: int = 4
    lr: float = 1e-3
    batch_tokens: int = 4096
    max_len: int = 512
    steps: int | None = None  # unrolled steps (default: the type's unrolled_steps, eagle 1, eagle3 3)
    draft_vocab: int = 8192  # 0: the full vocabulary
    heldout_fraction: float = 0.05
    seed: int = 0
    max_minutes: float | None = None  # stop training early (the checkpoint is still written)
    eval_every: int = 50
    architecture: dict = field(default_factory=dict)  # overrides of the default architecture


@dataclass
class Example:
    ids: torch.Tensor  # [T] long
    features: dict  # key -> [T, H] (fp16 in memory)
    prompt_len: int


# ----------------------------------------------------------------------------- data


def load_examples(corpus, indices: list[int], layers: tuple[int, ...], max_len: int) -> list[Example]:
    """Sequences with their features, cut to their last ``max_len`` positions."""
    out = []
    for index in indices:
        seq = corpus.sequences[index]
        feats = read_features(corpus, index, layers)
        start = max(0, len(seq.ids) - max_len)
        features = {("final" if k == "final" else int(k.split(".")[1])): v[start:].half() for k, v in feats.items()}
        out.append(Example(torch.tensor(seq.ids[start:]), features, max(0, seq.prompt_len - start)))
    return out


def choose_draft_vocab(examples: list[Example], size: int, vocab_size: int, always: set[int]) -> torch.Tensor | None:
    """The ``size`` most frequent next tokens of the corpus (plus ``always``), sorted; None = full."""
    if size <= 0 or size >= vocab_size:
        return None
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for ex in examples:
        counts.index_add_(0, ex.ids[1:], torch.ones(ex.ids.numel() - 1, dtype=torch.long))
    for token in always:
        if 0 <= token < vocab_size:
            counts[token] = counts.max() + 1
    order = sorted(range(vocab_size), key=lambda t: (-int(counts[t]), t))[:size]
    return torch.tensor(sorted(order), dtype=torch.long)


def make_batches(examples: list[Example], batch_tokens: int, rng: random.Random | None) -> list[list[int]]:
    """Index groups of similar length with about ``batch_tokens`` padded positions each."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].ids))
    batches, current, width = [], [], 0
    for i in order:
        width_i = max(width, len(examples[i].ids))
        if current and width_i * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, width_i = [], len(examples[i].ids)
        current.append(i)
        width = width_i
    if current:
        batches.append(current)
    if rng is not None:
        rng.shuffle(batches)
    return batches


def collate(examples: list[Example], target_model, head: VocabHead, *, full_top: bool) -> Batch:
    """Pad a group of examples and attach embeddings, teacher distributions and target argmaxes."""
    length = max(len(ex.ids) for ex in examples)
    bsz = len(examples)
    device = head.weight.device
    ids = torch.zeros(bsz, length, dtype=torch.long)
    valid = torch.zeros(bsz, length, dtype=torch.bool)
    answer = torch.zeros(bsz, length, dtype=torch.bool)
    features = {}
    for b, ex in enumerate(examples):
        n = len(ex.ids)
        ids[b, :n] = ex.ids
        valid[b, :n] = True
        answer[b, max(0, ex.prompt_len - 1) : n] = True
        for key, value in ex.features.items():
            if key not in features:
                features[key] = torch.zeros(bsz, length, value.shape[-1])
            features[key][b, :n] = value.float()
    ids, valid, answer = ids.to(device), valid.to(device), answer.to(device)
    features = {k: v.to(device) for k, v in features.items()}
    with torch.no_grad():
        embeds = embed(target_model, ids).float()
        teacher = head.sub_logits(features["final"]).softmax(-1)
        top = _full_argmax(target_model, features["final"]) if full_top else None
    return Batch(ids=ids, features=features, valid=valid, answer=answer, embeds=embeds, teacher=teacher, target_top=top)


def _full_argmax(target_model, final: torch.Tensor, chunk: int = 512) -> torch.Tensor:
    """argmax over the whole vocabulary of W_lm f, final [B, T, H] -> [B, T], a chunk of rows at a time."""
    weight = target_model.get_output_embeddings().weight
    flat = final.reshape(-1, final.shape[-1])
    tops = [torch.nn.functional.linear(rows.to(weight.dtype), weight).argmax(-1) for rows in flat.split(chunk)]
    return torch.cat(tops).reshape(final.shape[:-1])


# ----------------------------------------------------------------------------- loop


@dataclass
class TrainResult:
    net: torch.nn.Module
    draft_vocab: torch.Tensor | None
    history: list[dict]
    heldout: dict
    seconds: float
    steps: int
    epochs_done: float


def evaluate(kind: str, net, batches: list[Batch], head: VocabHead, steps: int | None) -> dict:
    fn, kwargs = objective(kind, steps)
    if registry.get(kind).unrolled_steps is not None:
        kwargs = {**kwargs, "steps": max(kwargs["steps"], EVAL_STEPS)}
    correct, counted, loss, n = None, None, 0.0, 0
    net.eval()
    with torch.no_grad():
        for batch in batches:
            res = fn(net, batch, head, **kwargs)
            correct = res.correct if correct is None else [a + b for a, b in zip(correct, res.correct)]
            counted = res.counted if counted is None else [a + b for a, b in zip(counted, res.counted)]
            loss += res.losses[0]
            n += 1
    net.train()
    acc = [c / max(1, m) for c, m in zip(correct or [], counted or [])]
    return {
        "top1": [round(a, 4) for a in acc],
        "positions": counted[0] if counted else 0,
        "loss": round(loss / max(1, n), 4),
    }


def run_training(
    kind: str,
    net,
    train_ex: list[Example],
    eval_ex: list[Example],
    target_model,
    head: VocabHead,
    opts: TrainOptions,
    on_event: Callable[[dict], None],
) -> TrainResult:
    rng = random.Random(opts.seed)
    torch.manual_seed(opts.seed)
    fn, kwargs = objective(kind, opts.steps)
    eval_batches = [
        collate([eval_ex[i] for i in group], target_model, head, full_top=True)
        for group in make_batches(eval_ex, opts.batch_tokens, None)
    ]
    per_epoch = len(make_batches(train_ex, opts.batch_tokens, None))
    total = max(1, per_epoch * opts.epochs)
    params = [p for p in net.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=opts.lr, betas=(0.9, 0.95), weight_decay=0.0)
    warmup = min(100, total // 10 + 1)
    budget_s = None if opts.max_minutes is None else 60.0 * opts.max_minutes

    def progress(step: int) -> float:
        """Fraction of the run done: by steps, or by time when --max-minutes comes first."""
        done = step / total
        if budget_s is not None:
            done = max(done, (time.perf_counter() - start) / budget_s)
        return done

    def lr_at(step: int) -> float:
        """Linear warm-up, then cosine decay to 0 over the run's progress (steps or time)."""
        if step < warmup:
            return opts.lr * (step + 1) / warmup
        return opts.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress(step))))

    history: list[dict] = []
    start = time.perf_counter()
    step, stop = 0, False
    net.train()
    first = evaluate(kind, net, eval_batches, head, opts.steps)
    history.append({"step": 0, **first})
    on_event({"event": "eval", "step": 0, "total": total, **first})
    for epoch in range(opts.epochs):
        for group in make_batches(train_ex, opts.batch_tokens, rng):
            batch = collate([train_ex[i] for i in group], target_model, head, full_top=False)
            for g in optimizer.param_groups:
                g["lr"] = lr_at(step)
            res = fn(net, batch, head, **kwargs)
            optimizer.zero_grad(set_to_none=True)
            res.loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            step += 1
            on_event(
                {
                    "event": "step",
                    "step": step,
                    "total": total,
                    "epoch": epoch + 1,
                    "loss": float(res.loss.detach()),
                    "losses": res.losses,
                    "elapsed": time.perf_counter() - start,
                }
            )
            if progress(step) >= 1.0:
                stop = True
            if step % opts.eval_every == 0 or stop:
                ev = evaluate(kind, net, eval_batches, head, opts.steps)
                history.append({"step": step, "train_loss": round(float(res.loss.detach()), 4), **ev})
                on_event({"event": "eval", "step": step, "total": total, **ev})
            if stop:
                break
        if stop:
            break
    heldout = history[-1] if history[-1]["step"] == step else evaluate(kind, net, eval_batches, head, opts.steps)
    return TrainResult(
        net=net,
        draft_vocab=head.ids,
        history=history,
        heldout=heldout,
        seconds=time.perf_counter() - start,
        steps=step,
        epochs_done=round(step / max(1, per_epoch), 2),
    )


# ----------------------------------------------------------------------------- recipe


def host_record() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(x, 2) for x in load] if load else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def corpus_feature_layers(target_config, wanted: tuple = ()) -> tuple[int, ...]:
    """Decoder layers whose outputs the corpus stores: those any registered trained type reads by
    default for this target, plus ``wanted`` — computed once and shared by every type."""
    layers = set(int(k) for k in wanted if k != "final")
    for drafter_type in registry.trained_types():
        default = drafter_type.architecture(target_config)
        layers.update(int(k) for k in drafter_type.feature_layers(default) if k != "final")
    return tuple(sorted(layers))


def train_drafter(
    target,
    opts: TrainOptions,
    out: Path,
    *,
    workloads: tuple[str, ...] = ("sharegpt",),
    max_new_tokens: int = 160,
    corpus_seed: int = 0,
    command: str = "",
    on_event: Callable[[dict], None] = lambda e: None,
) -> dict:
    """Corpus → features → training → checkpoint in ``out``. Returns the training record."""
    drafter_type = registry.get(opts.kind, trained=True)
    arch = drafter_type.architecture(target.model.config, **opts.architecture)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    fingerprint = target_fingerprint(target.model)
    spec = CorpusSpec(
        target=target.name,
        target_id=fingerprint["id"],
        workloads=tuple(workloads),
        seed=corpus_seed,
        max_new_tokens=max_new_tokens,
    )
    on_event({"event": "phase", "phase": "generate", "folder": str(spec.folder())})
    corpus = generate_corpus(
        target,
        spec,
        opts.tokens,
        lambda done, budget, n: on_event({"event": "generate", "done": done, "total": budget, "prompts": n}),
    )
    indices = corpus.take(opts.tokens)
    if len(indices) < 2:
        raise SpecbenchError(f"the training prompts gave only {len(indices)} sequence(s); need at least 2")
    generate_s = time.perf_counter() - t0
    layers = corpus_feature_layers(target.model.config, drafter_type.feature_layers(arch))
    on_event({"event": "phase", "phase": "features"})
    t1 = time.perf_counter()
    ensure_features(
        target,
        corpus,
        indices,
        layers,
        lambda done, total: on_event({"event": "features", "done": done, "total": total}),
    )
    features_s = time.perf_counter() - t1
    examples = load_examples(corpus, indices, layers, opts.max_len)
    n_eval = max(1, round(len(examples) * opts.heldout_fraction))
    train_ex, eval_ex = examples[:-n_eval], examples[-n_eval:]

    vocab = choose_draft_vocab(
        train_ex, opts.draft_vocab, target.vocab_size, eos_token_ids(target.model, target.tokenizer)
    )
    head = VocabHead(target.model.get_output_embeddings(), target.vocab_size, vocab).float()
    torch.manual_seed(opts.seed)
    device = next(target.model.parameters()).device
    net = drafter_type.new_net(arch).float().to(device)
    on_event(
        {
            "event": "phase",
            "phase": "train",
            "parameters": parameter_count(net),
            "train_sequences": len(train_ex),
            "heldout_sequences": len(eval_ex),
        }
    )
    result = run_training(opts.kind, net, train_ex, eval_ex, target.model, head, opts, on_event)
    finished = datetime.now(timezone.utc)
    coverage = None
    if vocab is not None:
        answer_ids = torch.cat([ex.ids[max(1, ex.prompt_len) :] for ex in eval_ex])
        coverage = round(float(torch.isin(answer_ids, vocab).float().mean()), 4)
    record = {
        "command": command,
        "data": {
            **corpus.describe(indices),
            "train_sequences": len(train_ex),
            "heldout_sequences": len(eval_ex),
            "target_features": ["final", *layers],
        },
        "options": {k: v for k, v in asdict(opts).items() if k != "architecture"},
        "draft_vocab": {
            "size": None if vocab is None else int(vocab.numel()),
            "heldout_answer_coverage": coverage,
            "chosen_by": "most frequent next tokens of the training sequences, plus EOS",
        },
        "heldout": result.heldout,
        "history": result.history,
        "steps": result.steps,
        "epochs_done": result.epochs_done,
        "time": {
            "started": started.isoformat(timespec="seconds"),
            "finished": finished.isoformat(timespec="seconds"),
            "generation_s_this_run": round(generate_s, 1),
            "generation_s_of_the_corpus": round(sum(corpus.sequences[i].seconds for i in indices), 1),
            "features_s": round(features_s, 1),
            "training_s": round(result.seconds, 1),
            "total_s": round(time.perf_counter() - t0, 1),
        },
        "host": host_record(),
    }
    drafter_type.save(out, result.net, target, vocab, training=record)
    on_event({"event": "phase", "phase": "saved", "folder": str(out)})
    return record
