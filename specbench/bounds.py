"""The bounds table: every number a user can hand specbench, its range, and why.

A flag (``--gamma``, ``--bootstrap``, ``profile --batch``, ``train-drafter --heads``, ...), a sweep
YAML key (``gammas``, ``seed``, ``max_new_tokens``, ``timing.warmup_s``, ...) and a backend option
(``timeout_s``, ``port``, ...) that mean the same quantity read the same row of `BOUNDS`, so
``run`` and ``sweep`` share their limits and ``--dry-run`` refuses what the run would. A value
outside its row is one line naming the key, the range and the reason; NaN and ±inf are never
inside a row; booleans are not numbers; a whole-valued float (``4.0``) is accepted for an
integer.

The bounds are not physical limits: each stops a value that cannot mean anything useful
before it costs memory or time (``--bootstrap 1e9`` allocates replicates × prompts floats,
``--temperature 1e-300`` overflows logits ÷ T to inf). Where a later check knows better (a
model's context window, a drafter's head count), that check still runs; the table only keeps
every value finite and small enough to reach it.

Imports nothing of specbench but errors: the CLI, measure/, backends/, engine/ and the trainer
may all read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.errors import TEXT_MAX_CHARS, SpecbenchError

GAMMA_LIMIT = 128  # the largest γ anywhere: sweep gammas, run --gamma, recommend/plot --max-gamma
MAX_TOKENS = 2**20  # new tokens per turn, context lengths: no model's window is longer
MAX_PROMPTS = 1_000_000  # prompts per workload (the largest built-in one has 17,671)
MAX_BATCH = 4096  # sequences in one forward / requests in flight
SEED_ROW = (
    "seed"  # the row of every seed: `is_seed` names take it by construction (`specbench.cli.shell.params.flag_row`)
)


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``low`` itself excluded when ``open_low``, ``high`` when ``open_high``); ``integer``
    or real.

    ``zero_or_from``: besides 0 only values >= it (a temperature is 0, greedy, or >= 1e-3).
    """

    low: float
    high: float
    integer: bool
    reason: str
    open_low: bool = False
    open_high: bool = False
    zero_or_from: float | None = None

    def describe(self) -> str:
        """'an integer from 1 to 128', 'a number > 0 and <= 86400', '0 or a number from 0.001 to 100'."""
        what = "an integer" if self.integer else "a number"
        low, high = _show(self.low), _show(self.high)
        if self.zero_or_from is not None:
            return f"0 or {what} from {_show(self.zero_or_from)} to {high}"
        if self.open_low or self.open_high:
            return f"{what} {'>' if self.open_low else '>='} {low} and {'<' if self.open_high else '<='} {high}"
        return f"{what} from {low} to {high}"


def _show(x: float) -> str:
    """A bound as people write it: 128, 0.001, 2^20, 2,147,483,647."""
    if isinstance(x, int) or float(x).is_integer():
        n = int(x)
        if abs(n) >= 2**16 and abs(n) & (abs(n) - 1) == 0:
            return f"{'-' if n < 0 else ''}2^{abs(n).bit_length() - 1}"
        return f"{n:,}" if abs(n) >= 100_000 else str(n)
    return f"{x:g}"


def is_seed(name: str) -> bool:
    """Whether a flag or key names a seed (``--seed``, ``--sample-seed``, ``strategy.seed``): its row is
    `SEED_ROW`, whatever a table says."""
    return name.lstrip("-").replace("_", "-").split(".")[-1].split("-")[-1] == "seed"


_TOKENS = "no model's context window holds more than 2^20 tokens; the model's own window is checked after it loads"
_SECONDS = "a request or a start-up taking more than a day is hung, not slow"

BOUNDS: dict[str, Bound] = {
    # ---- what one generation does (run and sweep alike)
    "gamma": Bound(
        0,
        GAMMA_LIMIT,
        True,
        "draft tokens per round: even at α = 0.95 a round of 128 drafts "
        "yields 19.97 tokens on average, (1 − α^129) / (1 − α), and any number of further drafts adds "
        "at most 0.14 %",
    ),
    "max_new_tokens": Bound(1, MAX_TOKENS, True, _TOKENS),
    "temperature": Bound(
        0,
        100,
        False,
        "0 is greedy; below 0.001 logits ÷ T overflow 16-bit floats (and "
        "1e-300 overflows every float); above 100 the distribution is uniform to float precision",
        zero_or_from=1e-3,
    ),
    "top_p": Bound(0, 1, False, "a probability mass", open_low=True),
    "top_k": Bound(0, 2**31 - 1, True, "0 is off; a cut beyond the vocabulary is off too, and must fit a 32-bit index"),
    # one row for every seed, flag or key: a seed reaches numpy's generators somewhere (the bootstrap's, the
    # online trainer's, a workload's sample), and they take none below 0
    SEED_ROW: Bound(
        0,
        2**63 - 1,
        True,
        "a seed of 0 or more (64 bits): numpy's generators (the bootstrap's, the online trainer's) take none below 0",
    ),
    "threads": Bound(1, 1024, True, "torch starts one CPU thread per count; more threads than cores only contend"),
    # ---- the sweep grid
    "prompts": Bound(
        1,
        MAX_PROMPTS,
        True,
        "prompts per workload: the largest built-in workload has 17,671; the unit limit bounds the grid as well",
    ),
    "repeats": Bound(1, 1000, True, "timed repeats of one unit: the timing protocol re-times disturbed units already"),
    "request_rate": Bound(
        1e-3,
        100_000,
        False,
        "requests per second of open-loop load: below 0.001 (one request per 17 minutes) a batch waits hours for "
        "its arrivals; above 100,000 arrivals come closer together than a client sends requests",
    ),
    "concurrency": Bound(
        1,
        MAX_BATCH,
        True,
        "requests in flight: each holds a socket, and 4096 approaches the default limit of open files",
    ),
    "timing.warmup_s": Bound(
        0, 600, False, "ten minutes of untimed decoding is more than any engine needs to reach a steady state"
    ),
    "timing.max_other_cores": Bound(0, 4096, False, "busy cores of other processes tolerated while timing"),
    "timing.retries": Bound(0, 100, True, "re-timings of a disturbed unit: each costs a whole block"),
    "adaptive.calibration_batch": Bound(0, MAX_PROMPTS, True, "timed prompts added per look (mode replay)"),
    "adaptive.budget_s": Bound(
        0, 30 * 24 * 3600, False, "an adaptive sweep's wall-time budget: 30 days", open_low=True
    ),
    "confirm.first": Bound(1, MAX_PROMPTS, True, "fresh prompts of a confirmation's first look, per target"),
    "confirm.batch": Bound(1, MAX_PROMPTS, True, "fresh prompts a confirmation adds per look"),
    "confirm.max_prompts": Bound(1, MAX_PROMPTS, True, "fresh prompts a confirmation may use per target"),
    "confirm.budget_s": Bound(0, 30 * 24 * 3600, False, "a confirmation's wall-time budget: 30 days", open_low=True),
    # ---- analysis (fit, recommend, plot)
    "bootstrap": Bound(
        0,
        10_000,
        True,
        "0: no intervals; a 95 % interval needs 39 replicates, one beyond each end (analysis.statistics.intervals."
        "replicates_needed); replicates hold replicates × prompts floats (10,000 × 17,671 prompts is 1.4 GB); "
        "beyond 10,000 the Monte-Carlo error is far below the interval's own",
        zero_or_from=39,
    ),
    "price_per_hour": Bound(
        0,
        1_000_000,
        False,
        "the machine's price per hour (any currency): a million an hour is beyond any machine's rent",
        open_low=True,
    ),
    "margin": Bound(
        0, 1, False, "a relative margin: 0.05 is 5 %; 1 would call a halving equivalent", open_low=True, open_high=True
    ),
    "tune.sweep_share": Bound(
        0,
        1,
        False,
        "the share of tune's budget the sweep may use (the confirmation gets the rest): 1 leaves nothing to confirm",
        open_low=True,
    ),
    "tolerance": Bound(
        0,
        0.5,
        False,
        "ε, how far below the best option's speedup the chosen one may be: 0.05 is 5 %; beyond 0.5 any option "
        "at half the best's speed would count as best",
        open_low=True,
    ),
    "max_gamma": Bound(1, GAMMA_LIMIT, True, "the largest γ predicted: no sweep may measure γ above 128"),
    "batch": Bound(
        1,
        MAX_BATCH,
        True,
        "sequences per forward: vLLM batches at most 1024 by default, and a forward's activations grow with the batch",
    ),
    "context": Bound(1, MAX_TOKENS, True, _TOKENS),
    # ---- profile
    "verify_tokens": Bound(1, GAMMA_LIMIT + 1, True, "tokens one verify forward checks: γ + 1 for γ up to 128"),
    "profile.repeats": Bound(1, 10_000, True, "timed calls per cell: the median settles long before"),
    "profile.warmup": Bound(0, 1000, True, "untimed calls per cell"),
    # ---- train-drafter
    "train.tokens": Bound(2, 100_000_000, True, "answer tokens generated by the target: 10^8 is weeks of CPU"),
    "train.epochs": Bound(1, 1000, True, "passes over the training sequences"),
    "train.lr": Bound(0, 10, False, "AdamW's peak learning rate: above 10 every step diverges", open_low=True),
    "train.max_minutes": Bound(0, 10_080, False, "a week", open_low=True),
    "train.draft_vocab": Bound(0, MAX_TOKENS, True, "0 is the full vocabulary; no tokenizer has 2^20 tokens"),
    "train.batch_tokens": Bound(
        16, MAX_TOKENS, True, "padded positions per optimizer step: the activations grow with it"
    ),
    "train.steps": Bound(1, 64, True, "unrolled training steps: each one is a drafter forward per position"),
    "train.heads": Bound(
        1,
        64,
        True,
        "Medusa heads: each is a hidden × hidden block (64 heads of a 4096-wide "
        "target are a billion parameters), and a draft is at most as deep as the heads",
    ),
    "train.modules": Bound(1, 16, True, "MTP modules: each is a transformer layer"),
    "train.intermediate": Bound(
        1, 65_536, True, "MLP width of the drafter layer: the largest open models use about 30,000"
    ),
    # ---- online adaptation (strategy: {name: online, ...})
    "online.steps": Bound(1, 1000, True, "optimizer steps per update: each is a drafter forward and backward pass"),
    "online.window": Bound(1, 100_000, True, "recent sequences an update trains on: each is kept in memory"),
    "online.reject_weight": Bound(0, 100, False, "weight of the rejected-draft term against the accepted one"),
    # ---- sizes read from checkpoints and configs (checked before any tensor is allocated)
    "model.hidden_size": Bound(1, 65_536, True, "the widest open models are 16,384 wide"),
    "model.intermediate_size": Bound(1, 262_144, True, "the widest open MLPs are about 50,000 wide"),
    "model.vocab_size": Bound(1, MAX_TOKENS, True, "no tokenizer has 2^20 tokens"),
    "model.layers": Bound(1, 1024, True, "the deepest open models have about 130 layers"),
    "model.heads": Bound(1, 1024, True, "attention heads (and key/value heads) of one layer"),
    "model.experts": Bound(1, 4096, True, "experts of one MoE layer: the largest open models have 256"),
    "memory_gib": Bound(
        0,
        1 << 20,
        False,
        "memory a model, a drafter or a profile grid implies, estimated before it is allocated (raise the "
        "limit with SPECBENCH_MAX_MEMORY_GIB, default: the machine's memory)",
        open_low=True,
    ),
    # ---- serving backends (backend: {name: ..., option: value})
    "timeout_s": Bound(0, 86_400, False, _SECONDS, open_low=True),
    "startup_timeout_s": Bound(0, 86_400, False, _SECONDS, open_low=True),
    "stop_grace_s": Bound(0, 600, False, "SIGTERM to SIGKILL of a server specbench started"),
    "port": Bound(1, 65_535, True, "a TCP port"),
    "max_model_len": Bound(16, MAX_TOKENS, True, _TOKENS),
    "kv_cache_gib": Bound(0, 65_536, False, "GiB of KV cache: more than any machine's memory", open_low=True),
    "max_num_seqs": Bound(1, MAX_BATCH, True, "requests vLLM batches at once"),
    "parallel_size": Bound(1, 1024, True, "GPUs or stages a model is split over"),
    "gpu_memory_utilization": Bound(0, 1, False, "a fraction of GPU memory", open_low=True),
    "warmup_tokens": Bound(0, 1024, True, "untimed tokens when an engine starts"),
    "engines_kept": Bound(1, 16, True, "vLLM engines kept alive at once: each holds its own copy of the model"),
    "slots": Bound(1, MAX_BATCH, True, "llama-server's parallel slots (-np): requests it decodes at once"),
    # ---- workload files
    "train_percent": Bound(0, 100, True, "the share of a workload's prompts kept for training drafters"),
    "chars": Bound(1, 2**30, True, "characters of one prompt: a prompt file holds at most 4 MiB"),
    "fraction": Bound(0, 1, False, "a share of something: from 0 to 1"),
}


# ----------------------------------------------------------------------------- rows that are not numbers


@dataclass(frozen=True)
class TextBound:
    """Text of at most ``max_chars`` characters, no NUL (a path: at most ``max_chars`` bytes)."""

    max_chars: int
    reason: str

    def describe(self) -> str:
        return f"text of at most {_show(self.max_chars)} characters"


TEXT_BOUNDS: dict[str, TextBound] = {
    "text": TextBound(
        TEXT_MAX_CHARS,
        "a name, a label, a model spec, a description or a template: anything longer is a file pasted by mistake",
    ),
    "path": TextBound(4096, "the longest path Linux opens (PATH_MAX)"),
    "prompt": TextBound(4 * 2**20, "a prompt, as long as a prompt file may be (4 MiB)"),
}
# rows whose values have nothing to bound but their form
KINDS: dict[str, str] = {
    "switch": "true or false",
    "choice": "one of the names the command lists (refused with the list otherwise)",
    "mapping": "a mapping whose keys have rows of their own",
    "list": "a list: its length is bounded by the grid's limit (20,000 configurations) or the file's size (1 MiB)",
}


def row_exists(name: str) -> bool:
    """Whether ``name`` is a row of the bounds table (a number's, a text's or a kind's)."""
    return name in BOUNDS or name in TEXT_BOUNDS or name in KINDS


def text_violation(name: str, value) -> str | None:
    """What is wrong with the text ``value`` for the row ``name`` (too long, a NUL), or None."""
    bound = TEXT_BOUNDS[name]
    text = str(value)
    size = len(text.encode("utf-8", "surrogateescape")) if name == "path" else len(text)
    if size > bound.max_chars:
        return f"must be {bound.describe()}, got {_show(size)} ({bound.reason})"
    if "\x00" in text:
        return "must not contain a NUL character"
    return None


# ----------------------------------------------------------------------------- every flag and every file key

# The row of every flag of every command: "--flag" for a flag that means the same in every command, "command
# --flag" where one command's flag means something of its own (a positional argument: "command NAME").
# tests/test_bounds_everywhere.py introspects the command line and fails on a flag without a row here. A flag
# whose value is a list or a range of numbers ("1,4,16", "1..8") has its numbers' row: each is checked
# where it is parsed (`int_list`, the sweep spec); the text of the flag itself is held to the "text" row.
# Not here: the rows `specbench sweep`'s flag table declares (a `Flag` with a ``bound``): "sweep --gamma" and the
# sweep-file key's "sweep: gammas" come from that one statement (`specbench.measure.grid.flags.declared_rows`,
# joined to these tables by `joined`); a row written here as well is refused there.
FLAG_ROWS: dict[str, str] = {
    "--address": "text",
    "--arrivals": "choice",
    "--backend": "choice",
    "--baseline": "switch",
    "--batch": "batch",
    "--batch-tokens": "train.batch_tokens",
    "--bootstrap": "bootstrap",
    "--budget": "adaptive.budget_s",
    "--by": "choice",
    "--chat": "switch",
    "--checkpoint": "path",
    "--compile": "switch",
    "--context": "context",
    "--cost-profile": "path",
    "--count": "prompts",
    "--csv": "path",
    "--dense-twin": "switch",
    "--device": "text",
    "--draft-vocab": "train.draft_vocab",
    "--drafter": "text",
    "--drafter-model": "text",
    "--drafter-param": "text",
    "--dry-run": "switch",
    "--dtype": "choice",
    "--engine": "choice",
    "--epochs": "train.epochs",
    "--executor": "choice",
    "--target-quant": "choice",
    "--drafter-quant": "choice",
    "--force": "switch",
    "--format": "choice",
    "--gamma": "gamma",
    "--heads": "train.heads",
    "--ignore-eos": "switch",
    "--intermediate": "train.intermediate",
    "--itl-p90": "text",
    "--json": "switch",
    "--kernels": "choice",
    "--latency-p90": "text",
    "--layout": "choice",
    "--lr": "train.lr",
    "--margin": "margin",
    "--max-gamma": "max_gamma",
    "--max-minutes": "train.max_minutes",
    "--max-new-tokens": "max_new_tokens",
    "--mode": "choice",
    "--modules": "train.modules",
    "--name": "text",
    "--objective": "choice",
    "--out": "path",
    "--prompt": "prompt",
    "--prompt-file": "path",
    "--price-per-hour": "price_per_hour",
    "--tolerance": "tolerance",
    "train-drafter --prompts": "text",
    "--quantities": "text",
    "profile --repeats": "profile.repeats",
    "--seed": SEED_ROW,
    "--shard": "text",
    "--slo": "text",
    "--split": "text",
    "--steps": "train.steps",
    "--target": "text",
    "--temperature": "temperature",
    "--threads": "threads",
    "--tokens": "train.tokens",
    "--top-k": "top_k",
    "--top-p": "top_p",
    "--tree": "text",
    "--ttft-p90": "text",
    "--type": "choice",
    "--until-decided": "switch",
    "--verifier": "text",
    "--verify-tokens": "verify_tokens",
    "--warmup": "profile.warmup",
    "--workload": "text",
    "--yes": "switch",
    "results show FOLDER": "path",
    "confirm RESULTS": "path",
    "confirm --first": "confirm.first",
    "--sweep-share": "tune.sweep_share",
    "tune SPEC_FILE": "path",
    "confirm --batch": "confirm.batch",
    "confirm --max-prompts": "confirm.max_prompts",
    "confirm --budget": "confirm.budget_s",
    "--gguf-only": "switch",
    "compare OLD": "path",
    "compare NEW": "path",
    "results merge FOLDERS": "path",
    "export-drafter KIND": "choice",
    "models pull NAME": "text",
    "workloads show NAME": "text",
    "fit RESULTS_DIR": "path",
    "plot RESULTS_DIR": "path",
    "recommend RESULTS_DIR": "path",
    "sweep SPEC_FILE": "path",
}

# The row of every key of every YAML file specbench reads, as "KIND: KEY" (nested keys "KIND: SECTION.KEY").
# tests/test_bounds_everywhere.py reads the keys each parser accepts and fails on one without a row here.
KEY_ROWS: dict[str, str] = {
    # a sweep file (specbench.measure.grid.sweep and the sections it hands on)
    "sweep: name": "text",
    "sweep: description": "text",
    "sweep: target": "text",
    "sweep: device": "text",
    "sweep: dtype": "choice",
    "sweep: ignore_eos": "switch",
    "sweep: drafters": "list",
    "sweep: trees": "list",
    "sweep: workloads": "list",
    "sweep: mode": "choice",
    "sweep: calibration": "mapping",
    "sweep: compile": "switch",
    "sweep: kernels": "choice",
    "sweep: timing": "mapping",
    "sweep: backend": "mapping",
    "sweep: strategy": "list",
    "sweep: schedules": "list",
    "sweep: threads": "threads",
    "sweep: adaptive": "mapping",
    "sweep: layout": "choice",
    "sweep: arrivals": "choice",
    "sweep: executor": "mapping",
    "sweep: quantization": "mapping",
    "sweep: quantization.target": "choice",
    "sweep: quantization.drafters": "choice",
    "sweep: price_per_hour": "price_per_hour",
    "sweep: drafters.type": "choice",
    "sweep: drafters.params": "mapping",
    "sweep: workloads.name": "text",
    "sweep: workloads.split": "text",
    "sweep: workloads.max_new_tokens": "max_new_tokens",
    "sweep: calibration.gammas": "gamma",
    "sweep: calibration.prompts": "prompts",
    "sweep: timing.order": "choice",
    "sweep: timing.warmup_s": "timing.warmup_s",
    "sweep: timing.max_other_cores": "timing.max_other_cores",
    "sweep: timing.retries": "timing.retries",
    "sweep: adaptive.first": "prompts",
    "sweep: adaptive.budget": "adaptive.budget_s",
    "sweep: adaptive.calibration_batch": "adaptive.calibration_batch",
    "sweep: executor.name": "choice",
    "sweep: executor.address": "text",
    "sweep: executor.retries": "timing.retries",
    "sweep: executor.replay_per_gpu": "parallel_size",
    "sweep: strategy.name": "choice",
    "sweep: strategy.start": "choice",
    "sweep: strategy.loss": "choice",
    "sweep: strategy.every_prompts": "prompts",
    "sweep: strategy.every_tokens": "max_new_tokens",
    "sweep: strategy.steps": "online.steps",
    "sweep: strategy.lr": "train.lr",
    "sweep: strategy.reject_weight": "online.reject_weight",
    "sweep: strategy.window": "online.window",
    "sweep: strategy.batch_tokens": "train.batch_tokens",
    "sweep: strategy.seed": SEED_ROW,
    # a workload file (specbench.workloads.spec and the kinds it hands on)
    "workload: name": "text",
    "workload: description": "text",
    "workload: chat": "switch",
    "workload: max_new_tokens": "max_new_tokens",
    "workload: sampling": "mapping",
    "workload: train_percent": "train_percent",
    "workload: category": "text",
    "workload: id_format": "text",
    "workload: filter": "mapping",
    "workload: fields": "mapping",
    "workload: sources": "list",
    "workload: long_context": "mapping",
    "workload: prepared": "mapping",
    "workload: stream": "list",
    "workload: sampling.count": "prompts",
    "workload: sampling.seed": SEED_ROW,
    "workload: filter.min_chars": "chars",
    "workload: filter.max_chars": "chars",
    "workload: fields.id": "text",
    "workload: fields.turns": "text",
    "workload: fields.category": "text",
    "workload: sources.package": "text",
    "workload: sources.file": "path",
    "workload: sources.path": "path",
    "workload: sources.hf": "text",
    "workload: sources.split": "text",
    "workload: sources.format": "choice",
    "workload: stream.workload": "text",
    "workload: stream.count": "prompts",
    "workload: stream.label": "text",
    "workload: prepared.layout": "choice",
    "workload: prepared.folder_variable": "text",
    "workload: prepared.hub": "mapping",
    "workload: prepared.get": "text",
    "workload: prepared.configs": "mapping",
    "workload: prepared.categories": "list",
    "workload: prepared.configs.bin": "text",
    "workload: prepared.configs.categories": "list",
    "workload: prepared.hub.dataset": "text",
    "workload: prepared.hub.split": "text",
    "workload: long_context.tolerance": "fraction",
    "workload: long_context.bins": "mapping",
    "workload: long_context.tasks": "mapping",
    "workload: long_context.documents": "list",
    "workload: long_context.documents.source": "choice",
    "workload: long_context.documents.count": "prompts",
    "workload: long_context.documents.seed": SEED_ROW,
    "workload: long_context.documents.min_chars": "chars",
    "workload: long_context.documents.exclude": "list",
    "workload: long_context.documents.package": "text",
    "workload: long_context.documents.file": "path",
    "workload: long_context.documents.path": "path",
    "workload: long_context.documents.min_ascii": "fraction",
    # a tree file (specbench.engine.tree)
    "tree: paths": "list",
}


def joined(written: dict[str, str], declared: dict[str, str], table: str) -> dict[str, str]:
    """The table ``written`` here (`FLAG_ROWS`, `KEY_ROWS`) with the rows a flag table ``declared``; a row in both
    is stated twice and refused (`ValueError`: a developer's mistake, caught by tests/test_bounds_everywhere.py)."""
    twice = sorted(set(written) & set(declared))
    if twice:
        raise ValueError(
            f"specbench.bounds.{table} writes rows a flag table declares already: {', '.join(twice)} "
            "(delete them from bounds.py: the flag's bound is the one statement)"
        )
    return {**written, **declared}


def violation(name: str, value) -> str | None:
    """What is wrong with ``value`` for the row ``name`` ('must be ..., got ... (why)'), or None."""
    bound = BOUNDS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be {bound.describe()}, got {_short(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be {bound.describe()} (a finite number), got {value}"
    if bound.integer and isinstance(value, float) and not value.is_integer():
        return f"must be {bound.describe()}, got {value}"
    below = value <= bound.low if bound.open_low else value < bound.low
    if bound.zero_or_from is not None and value != 0 and value < bound.zero_or_from:
        below = True
    above = value >= bound.high if bound.open_high else value > bound.high
    if below or above:
        return f"must be {bound.describe()}, got {_short(value)} ({bound.reason})"
    return None


def check(name: str, value, where: str = "", key: str | None = None):
    """``value`` as an int (integer rows) or float, or a one-line `SpecbenchError`:
    ``WHERE: 'KEY' must be ..., got ... (reason)``."""
    problem = violation(name, value)
    if problem is not None:
        label = f"'{key or name}' {problem}"
        raise SpecbenchError(f"{where}: {label}" if where else label)
    return int(value) if BOUNDS[name].integer else float(value)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def int_list(text: str, name: str, flag: str) -> tuple[int, ...]:
    """'1,4,16', '1..16' or '1..4,8' → the sorted distinct integers, each inside the row ``name``.

    A range is checked at its ends before it is expanded (``1..1000000000`` is refused, not built).
    """
    values: set[int] = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        ends = part.split("..", 1)
        if not all(e.isascii() and e.lstrip("-").isdigit() and len(e) <= 20 for e in ends):
            raise SpecbenchError(f"{flag}: '{_short(part)[1:-1]}' is not an integer or a range A..B")
        numbers = [int(e) for e in ends]
        for n in numbers:
            problem = violation(name, n)
            if problem is not None:
                raise SpecbenchError(f"{flag}: {problem}")
        if len(numbers) == 2 and numbers[1] < numbers[0]:
            raise SpecbenchError(f"{flag}: range '{part}' runs backwards")
        values.update(range(numbers[0], numbers[-1] + 1))
    if not values:
        raise SpecbenchError(f"{flag}: no values given")
    return tuple(sorted(values))
