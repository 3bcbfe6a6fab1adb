"""Self-distillation data: the target's own answers to training prompts, and its features.

Phase 1 — *generate*. The target answers prompts from the **train** split of the chosen
workloads (ShareGPT keeps half of its prompts for training, chosen by a hash of the prompt id,
so they never overlap the eval split that sweeps use; MT-Bench and HumanEval are eval-only and
refused here). Answers are greedy and produced by the specbench engine with prompt-lookup
(n-gram) speculation, which is lossless: the text is exactly the target's greedy output, only
made faster. One JSON line per prompt is appended to ``sequences.jsonl`` as it is produced, so
an interrupted run resumes where it stopped and a larger token budget extends the same corpus.

Phase 2 — *features*. One target forward per sequence (prompt + answer) through the same
`NativeDecoder` the engine verifies with gives the features every drafter type trains on: the
final hidden state (after the last norm, the LM head's input) and the outputs of the decoder
layers EAGLE-3 fuses. They are stored once per sequence in ``features/NNNNNN.safetensors``
(fp16) and shared by all four drafter types.

The corpus lives in ``$SPECBENCH_CACHE/drafter-data/<target>-<weights id>/<key>/`` where the
key hashes the prompt sources, split, seed, answer length and generation settings.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from specbench.engine.decoder import make_decoder
from specbench.engine.drafters.ngram import NgramDrafter
from specbench.engine.loop import SpeculativeEngine
from specbench.errors import SpecbenchError
from specbench.models.cache import cache_root
from specbench.safe_files import open_appending, write_atomic, write_json, writing
from specbench.workloads.catalog import encode_turn, load_workload

GENERATION = {"decoding": "greedy", "drafter": "ngram", "n_min": 1, "n_max": 3, "gamma": 4}
MAX_PROMPT_TOKENS = 1024


@dataclass(frozen=True)
class CorpusSpec:
    """What a self-distillation corpus is made of (its cache key covers every field)."""

    target: str
    target_id: str  # fingerprint id of the target's weights
    workloads: tuple[str, ...] = ("sharegpt",)
    split: str = "train"
    seed: int = 0
    max_new_tokens: int = 160

    @property
    def key(self) -> str:
        data = {**asdict(self), "generation": GENERATION}
        data.pop("target")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]

    def relative_folder(self) -> str:
        """Where the corpus lives inside the specbench cache (``$SPECBENCH_CACHE``), the same on every machine."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.target)
        return f"drafter-data/{safe}-{self.target_id[:8]}/{self.key}"

    def folder(self) -> Path:
        return cache_root() / self.relative_folder()


@dataclass
class Sequence:
    prompt_id: str
    ids: list[int]  # prompt + answer token ids
    prompt_len: int
    stop: str = "length"
    seconds: float = 0.0

    @property
    def answer_len(self) -> int:
        return len(self.ids) - self.prompt_len


@dataclass
class Corpus:
    spec: CorpusSpec
    folder: Path
    sequences: list[Sequence] = field(default_factory=list)

    @property
    def answer_tokens(self) -> int:
        return sum(s.answer_len for s in self.sequences)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.sequences)

    def take(self, answer_tokens: int) -> list[int]:
        """Indices of the first sequences holding at least ``answer_tokens`` answer tokens."""
        chosen, total = [], 0
        for i, seq in enumerate(self.sequences):
            if total >= answer_tokens:
                break
            chosen.append(i)
            total += seq.answer_len
        return chosen

    def describe(self, indices: list[int] | None = None) -> dict:
        seqs = self.sequences if indices is None else [self.sequences[i] for i in indices]
        return {
            "workloads": list(self.spec.workloads),
            "split": self.spec.split,
            "seed": self.spec.seed,
            "prompts": len(seqs),
            "answer_tokens": sum(s.answer_len for s in seqs),
            "prompt_tokens": sum(s.prompt_len for s in seqs),
            "max_new_tokens": self.spec.max_new_tokens,
            "generation": GENERATION,
            "generation_seconds": round(sum(s.seconds for s in seqs), 1),
            "corpus": self.portable(seqs),
        }

    def portable(self, seqs: list[Sequence]) -> dict:
        """A description of the corpus that holds on any machine (no absolute path): what it was made
        of and where it lives inside the specbench cache."""
        return {
            "workloads": list(self.spec.workloads),
            "split": self.spec.split,
            "prompts": len(seqs),
            "seed": self.spec.seed,
            "answer_tokens": sum(s.answer_len for s in seqs),
            "max_new_tokens": self.spec.max_new_tokens,
            "in_cache": self.spec.relative_folder(),
        }


# ----------------------------------------------------------------------------- prompts


def training_prompts(workloads: tuple[str, ...], split: str, seed: int):
    """Prompts of the training split of each workload, interleaved in seeded sample order."""
    lists = []
    for name in workloads:
        try:
            loaded = load_workload(name, count=10**9, seed=seed, split=split)
        except SpecbenchError as exc:
            if "no prompts in split" in str(exc):
                raise SpecbenchError(
                    f"workload '{name}' has no '{split}' prompts (it is evaluation-only); train on "
                    "a workload with a training split, e.g. --prompts sharegpt"
                ) from None
            raise
        lists.append([(loaded, p) for p in loaded.prompts])
    out = []
    for i in range(max(len(items) for items in lists)):
        out.extend(items[i] for items in lists if i < len(items))
    return out


# ----------------------------------------------------------------------------- phase 1


def load_corpus(spec: CorpusSpec) -> Corpus:
    folder = spec.folder()
    corpus = Corpus(spec=spec, folder=folder)
    path = folder / "sequences.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                corpus.sequences.append(Sequence(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                break  # a line cut by an interruption: everything after it is regenerated
    return corpus


def generate_corpus(
    target, spec: CorpusSpec, answer_tokens: int, on_progress: Callable[[int, int, int], None] | None = None
) -> Corpus:
    """Extend the cached corpus until it holds ``answer_tokens`` answer tokens (or prompts run out).

    on_progress(tokens_so_far, budget, prompts_so_far) is called after every prompt.
    """
    corpus = load_corpus(spec)
    if corpus.answer_tokens >= answer_tokens:
        return corpus
    corpus.folder.mkdir(parents=True, exist_ok=True)
    with _exclusive(corpus.folder / ".lock"):
        corpus = load_corpus(spec)  # another process may have extended it meanwhile
        if corpus.answer_tokens >= answer_tokens:
            return corpus
        return _extend(target, spec, corpus, answer_tokens, on_progress)


@contextlib.contextmanager
def _exclusive(path: Path):
    """One generator per corpus at a time (others wait, then reuse what it wrote)."""
    with open_appending(path) as handle:  # never through a symlink (`specbench.safe_files`)
        fcntl.flock(handle, fcntl.LOCK_EX)  # POSIX, like the engine's `resource`
        yield


def _extend(target, spec: CorpusSpec, corpus: Corpus, answer_tokens: int, on_progress) -> Corpus:
    write_json(corpus.folder / "spec.json", {**asdict(spec), "generation": GENERATION})
    path = corpus.folder / "sequences.jsonl"
    # rewrite what was read, dropping a half-written last line if there was one
    write_atomic(path, "".join(json.dumps(asdict(s)) + "\n" for s in corpus.sequences))
    done = {s.prompt_id for s in corpus.sequences}
    engine = SpeculativeEngine(
        target, NgramDrafter(GENERATION["n_min"], GENERATION["n_max"]), gamma=GENERATION["gamma"]
    )
    total = corpus.answer_tokens
    with open_appending(path, text=True) as out:
        for workload, prompt in training_prompts(spec.workloads, spec.split, spec.seed):
            if total >= answer_tokens:
                break
            if prompt.prompt_id in done:
                continue
            ids = encode_turn(target.tokenizer, workload, prompt, 0, [])
            if len(ids) > MAX_PROMPT_TOKENS:
                continue
            start = time.perf_counter()
            result = engine.generate(ids, spec.max_new_tokens)
            seq = Sequence(
                prompt_id=prompt.prompt_id,
                ids=list(ids) + list(result.tokens),
                prompt_len=len(ids),
                stop=result.stop_reason,
                seconds=round(time.perf_counter() - start, 3),
            )
            out.write(json.dumps(asdict(seq)) + "\n")
            out.flush()
            corpus.sequences.append(seq)
            total += seq.answer_len
            if on_progress is not None:
                on_progress(total, answer_tokens, len(corpus.sequences))
    return corpus


# ----------------------------------------------------------------------------- phase 2


def feature_file(corpus: Corpus, index: int) -> Path:
    return corpus.folder / "features" / f"{index:06d}.safetensors"


def _feature_names(layers: tuple[int, ...]) -> list[str]:
    return ["final"] + [f"layer.{i}" for i in layers]


def ensure_features(
    target,
    corpus: Corpus,
    indices: list[int],
    layers: tuple[int, ...],
    on_progress: Callable[[int, int], None] | None = None,
) -> None:
    """Compute (once) the final hidden state and ``layers`` outputs of every chosen sequence."""
    decoder = None
    (corpus.folder / "features").mkdir(parents=True, exist_ok=True)
    wanted = set(_feature_names(layers))
    for n, index in enumerate(indices):
        path = feature_file(corpus, index)
        if path.is_file():
            try:
                with safe_open(str(path), framework="pt") as f:
                    if wanted <= set(f.keys()):
                        if on_progress is not None:
                            on_progress(n + 1, len(indices))
                        continue
            except Exception:  # noqa: BLE001 - a damaged file is recomputed
                pass
        if decoder is None:
            decoder = make_decoder(target.model, "auto", kernels="torch")
        seq = corpus.sequences[index]
        ids = torch.tensor([seq.ids], device=decoder.device)
        decoder.reset(1, ids.shape[1])
        out = decoder.forward(ids, logits="none", hidden_layers=tuple(layers))
        tensors = {"final": out.hidden[0]}
        tensors.update({f"layer.{i}": out.layer_hidden[i][0] for i in layers})
        stored = {}
        for name, value in tensors.items():
            value = value.float().cpu()
            stored[name] = value.half() if value.abs().max() < 6e4 else value
        with writing(path, "training features"):
            write_atomic(path, safetensors_bytes(stored))
        if on_progress is not None:
            on_progress(n + 1, len(indices))


def read_features(corpus: Corpus, index: int, layers: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """{"final": [T, H], "layer.i": [T, H]} float32 for sequence ``index``."""
    data = load_file(str(feature_file(corpus, index)))
    return {name: data[name].float() for name in _feature_names(layers)}
