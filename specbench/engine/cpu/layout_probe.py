"""The CPU weight layout and dtype, measured on the machine at hand rather than taken from a rule.

Which layout of the linear weights (`specbench.engine.cpu.weight_layout.CpuLayout`) and which dtype is
fastest depends on the CPU: on an AVX2-only EPYC the float32 mix of row-major weight-first products and
column-major single-row copies won and a bfloat16 product cost one weight pass per row; on an AVX-512
EPYC with AVX512-BF16 torch's bfloat16 products go through oneDNN and cost about the same for 1 or 8 rows
(docs/bench-engine-steps.md, "Engine speed, fourth step"). Like `threads: auto` (`specbench.engine.cpu.threads`),
`probe_layouts` times the shapes the engine will run, for every candidate (dtype × layout):

* decode: one token after ``context`` cached, plus its LM-head row;
* verify: k = γ + 1 tokens after the same context (the layers only);
* the LM head over one row, and over k rows at once (which decides `CpuLayout.lazy_head`: one row at a
  time costs LAZY_HEAD_ROWS rows per round on average, the batched head one k-row product);
* for 16-bit weights, a prefill of ``context`` tokens in 16 bits and in float32 (`upcast_prefill`).

One untimed round first (every candidate's shapes warmed up, the exactness check below, and candidates
whose decode step is over PRUNE_FACTOR × the fastest dropped), then ``repeats`` interleaved rounds —
candidate 1, 2, ..., n, then again — so that a change in the machine's load falls on all alike; medians.
A candidate's score is the seconds of one decode step plus one verify step as the engine runs it
(decode alone for target-only runs, k = 1).

Lossless first. In float32 greedy output equals target-only output up to rounding, as it always has
(every layout sums the same products in another order; tests/test_engine_greedy.py). In 16 bits a
last-bit difference is a 2⁻⁸ relative error, enough to flip a near-tied argmax, so a 16-bit candidate
must give every verified row bit for bit what a decode step gives (`rows_exact`: k single-token steps
against one k-token step for EXACT_CHECKS random token sets, hidden states and LM-head rows, at the thread
counts the engine will run: its ``threads`` setting, every count for ``threads: auto``); one that does
not is never chosen, and a batched LM head is used only where its rows are exact too. (A check on random
tokens can miss a rare difference; the tests check greedy identity on real prompts for every layout that
passes it.) The
fastest candidate left wins. The result is cached per machine and model
(``$SPECBENCH_CACHE/cpu-layouts/``, keyed by CPU, flags, cores, torch, model weights, dtypes and k) and
recorded in run.json (``cpu_layout``, docs/results-schema.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from specbench.engine.cpu.cpu_info import cpu_features, cpu_model, describe_cpu, onednn_16bit
from specbench.engine.cpu.threads import available_cores, using_threads
from specbench.engine.cpu.weight_layout import (
    DTYPE_NAMES,
    LAYOUTS,
    CpuLayout,
    candidate_layouts,
    default_layout,
    layout_named,
    layout_refusal,
)
from specbench.errors import SpecbenchError, did_you_mean
from specbench.models.cache import cache_root
from specbench.safe_files import read_json, write_json

PROBE_VERSION = 2  # part of the cache key: a change to what the probe measures re-measures every machine
PROBE_CONTEXT = 64  # cached tokens the probed steps attend over (and the probed prefill's length)
PROBE_REPEATS = 3
PROBE_BUDGET_S = 10.0  # timed rounds stop after this (one round at least)
PRUNE_FACTOR = 3.0  # a candidate whose warmed-up decode step takes this many times the fastest one's is dropped
EXACT_CHECKS = 2  # random token sets the exact-rows check runs
LAZY_HEAD_ROWS = 2.0  # head rows a lazy chain verdict computes per round: Σ αⁱ ≈ 1 / (1 − α) = 2 at α = 0.5
CACHE_FOLDER = "cpu-layouts"
DTYPES_BY_NAME = {name: dtype for dtype, name in DTYPE_NAMES.items()}


def parse_layout_setting(value, where: str) -> str | None:
    """A ``layout`` setting: unset (None), ``auto`` (measured) or a layout name (`weight_layout.LAYOUTS`)."""
    if value is None or value == "auto":
        return value
    if not isinstance(value, str) or value not in LAYOUTS:
        raise SpecbenchError(
            f"{where}: 'layout' must be auto or one of {', '.join(LAYOUTS)}, got {value!r}"
            f"{did_you_mean(str(value), list(LAYOUTS))}"
        )
    return value


def check_cpu_settings(device: str, dtype: str, layout: str | None, where: str) -> None:
    """``dtype: auto`` and ``layout`` choose among CPU layouts: the CPU only, a named layout needs a fixed dtype,
    and one this CPU cannot run for that dtype is refused, naming the feature it lacks (`layout_refusal`)."""
    if dtype == "auto" and device != "cpu":
        raise SpecbenchError(
            f"{where}: dtype auto is measured on the CPU only (device '{device}'): choose fp32, bf16 or fp16"
        )
    if layout is not None and device != "cpu":
        raise SpecbenchError(f"{where}: 'layout' chooses the CPU weight layout, not one for device '{device}'")
    if dtype == "auto" and layout not in (None, "auto"):
        raise SpecbenchError(
            f"{where}: layout {layout} is a layout of one dtype; with dtype auto the layout is "
            "measured too (leave layout unset or auto)"
        )
    if device == "cpu" and layout in LAYOUTS and dtype in DTYPES_BY_NAME:
        refusal = layout_refusal(LAYOUTS[layout], DTYPES_BY_NAME[dtype])
        if refusal is not None:
            raise SpecbenchError(f"{where}: {refusal} (layout auto measures the layouts this CPU runs)")


@dataclass
class Candidate:
    """One dtype × layout and what the probe measured for it (medians, seconds; None: not measured)."""

    dtype: str
    layout: str
    decode_s: float | None = None
    verify_s: float | None = None
    head_row_s: float | None = None
    head_rows_s: float | None = None
    prefill_s: float | None = None
    prefill_upcast_s: float | None = None
    exact_rows: bool | None = None  # verify rows == decode rows bit for bit (None: not checked: float32, or k = 1)
    exact_head: bool | None = None  # the k-row LM head's rows == one-row heads bit for bit
    dropped: str | None = None  # why it cannot be chosen

    @property
    def reduced(self) -> bool:
        return self.dtype != "fp32"

    @property
    def lazy_head(self) -> bool:
        """One LM-head row at a time unless the batched head is measured cheaper (and, in 16 bits, exact)."""
        if self.head_row_s is None or self.head_rows_s is None or (self.reduced and not self.exact_head):
            return True
        return LAZY_HEAD_ROWS * self.head_row_s <= self.head_rows_s

    @property
    def upcast_prefill(self) -> bool:
        return (
            self.reduced
            and self.prefill_s is not None
            and self.prefill_upcast_s is not None
            and self.prefill_upcast_s < self.prefill_s
        )

    def score(self, verify_tokens: int) -> float:
        """Seconds of one decode step plus (k > 1) one verify step with its LM-head rows; inf if dropped."""
        if self.dropped or self.decode_s is None:
            return math.inf
        if verify_tokens == 1:
            return self.decode_s
        head = (LAZY_HEAD_ROWS * self.head_row_s) if self.lazy_head else self.head_rows_s
        return self.decode_s + self.verify_s + head

    def plan(self) -> CpuLayout:
        """The layout with the head and prefill settings this candidate's measurements chose."""
        return replace(LAYOUTS[self.layout], lazy_head=self.lazy_head, upcast_prefill=self.upcast_prefill)

    def to_dict(self) -> dict:
        return {
            (key[:-2] + "_ms" if key.endswith("_s") else key): (
                round(value * 1e3, 3) if key.endswith("_s") and value is not None else value
            )
            for key, value in asdict(self).items()
        }

    @classmethod
    def from_dict(cls, data: dict) -> Candidate:
        fields = {
            (key[:-3] + "_s" if key.endswith("_ms") else key): (
                value / 1e3 if key.endswith("_ms") and value is not None else value
            )
            for key, value in data.items()
        }
        return cls(**fields)


@dataclass
class LayoutChoice:
    """What the engine runs with on the CPU, and why (what run.json's ``cpu_layout`` records)."""

    setting: str  # "auto" (probed), a layout name (forced) or "default" (the rule, nothing measured)
    dtype: str
    layout: CpuLayout
    verify_tokens: int
    reason: str
    cached: bool = False
    probe_s: float | None = None
    measured: str | None = None  # when the probe ran (UTC), cached or not
    cpu: str = field(default_factory=describe_cpu)
    candidates: list[Candidate] = field(default_factory=list)

    def summary(self) -> str:
        """One line: what runs and why."""
        return f"{self.dtype}, layout {self.layout.describe()}: {self.reason}"

    def to_dict(self) -> dict:
        return {
            "setting": self.setting,
            "dtype": self.dtype,
            "layout": self.layout.to_dict(),
            "verify_tokens": self.verify_tokens,
            "reason": self.reason,
            "cached": self.cached,
            "probe_s": None if self.probe_s is None else round(self.probe_s, 2),
            "measured": self.measured,
            "cpu": self.cpu,
            "candidates": [c.to_dict() for c in self.candidates],
        }

    @classmethod
    def from_dict(cls, data: dict) -> LayoutChoice:
        return cls(
            setting=data["setting"],
            dtype=data["dtype"],
            layout=CpuLayout(**data["layout"]),
            verify_tokens=int(data["verify_tokens"]),
            reason=data["reason"],
            cached=bool(data["cached"]),
            probe_s=data.get("probe_s"),
            measured=data.get("measured"),
            cpu=data["cpu"],
            candidates=[Candidate.from_dict(c) for c in data["candidates"]],
        )


def auto_dtypes() -> list[str]:
    """The dtypes ``dtype: auto`` measures: float32 and bfloat16 everywhere (on the AVX2 EPYC bfloat16 decoded
    fastest, docs/benchmarks.md), float16 where torch has a native product for it on this CPU."""
    return ["fp32", "bf16"] + (["fp16"] if onednn_16bit("fp16") else [])


def default_choice(dtype: torch.dtype, verify_tokens: int) -> LayoutChoice:
    """The rule's layout for ``dtype`` (`weight_layout.default_layout`), nothing measured."""
    return LayoutChoice(
        "default",
        DTYPE_NAMES[dtype],
        default_layout(dtype),
        verify_tokens,
        "the default for this dtype and CPU (not measured; --layout auto measures)",
    )


def forced_choice(name: str, dtype: torch.dtype, verify_tokens: int) -> LayoutChoice:
    return LayoutChoice(
        name, DTYPE_NAMES[dtype], layout_named(name, dtype), verify_tokens, "forced by the layout setting"
    )


# ----------------------------------------------------------------------------- measuring


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class _Shapes:
    """The probed steps of one decoder over a fixed random context (the cache is put back after each)."""

    def __init__(self, decoder, verify_tokens: int, context: int, seed: int):
        self.decoder, self.k, self.context = decoder, verify_tokens, context
        vocab = decoder.model.get_input_embeddings().weight.shape[0]
        gen = torch.Generator().manual_seed(seed)
        self.prompt = torch.randint(vocab, (1, context), generator=gen).to(decoder.device)  # [1, context]
        self.tokens = torch.randint(vocab, (EXACT_CHECKS, verify_tokens), generator=gen).to(decoder.device)  # [C, k]
        self.hidden_rows: torch.Tensor | None = None  # [1, k, H] the last verify step's final states

    def prefill(self) -> None:
        self.decoder.reset(1, self.context + self.k + 2)
        self.decoder.forward(self.prompt, logits="none")

    def ensure_filled(self) -> None:
        if self.decoder.cache is None or self.decoder.length != self.context:
            self.prefill()

    def decode(self) -> None:
        out = self.decoder.forward(self.tokens[:1, :1], logits="none")
        self.decoder.head(out.hidden[:, -1:])
        self.decoder.truncate(self.context)

    def verify(self) -> None:
        self.hidden_rows = self.decoder.forward(self.tokens[:1], logits="none").hidden
        self.decoder.truncate(self.context)

    def head_row(self) -> None:
        self.decoder.head(self.hidden_rows[:, :1])

    def head_rows(self) -> None:
        self.decoder.head(self.hidden_rows)

    def rows_exact(self) -> tuple[bool, bool]:
        """(every verify row's final hidden state == the decode step's, bit for bit; the k-row LM head's rows
        == the one-row heads') for EXACT_CHECKS random sets of k tokens after the context."""
        d = self.decoder
        rows = head = True
        for tokens in self.tokens.split(1):  # [1, k] each
            singles = []
            for i in range(self.k):
                singles.append(d.forward(tokens[:, i : i + 1], logits="none").hidden)  # [1, 1, H]
            d.truncate(self.context)
            together = d.forward(tokens, logits="none").hidden  # [1, k, H]
            d.truncate(self.context)
            rows = rows and torch.equal(together, torch.cat(singles, 1))
            one_row_heads = torch.cat([d.head(h) for h in singles], 1)  # [1, k, V]
            head = head and rows and torch.equal(d.head(together), one_row_heads)
        return rows, head


STEPS = ("decode", "verify", "head_row", "head_rows", "prefill", "prefill_upcast")


class _Entry:
    """A candidate, its decoder and probed shapes, its layout and the seconds measured per step."""

    def __init__(self, candidate: Candidate, decoder, shapes: _Shapes, layout: CpuLayout):
        self.candidate, self.decoder, self.shapes, self.layout = candidate, decoder, shapes, layout
        self.times: dict[str, list[float]] = {step: [] for step in STEPS}

    def prepare(self) -> None:
        """Put the weights in this layout (untimed; a no-op when they are) and fill the cache: for 16-bit
        weights by timing the prefill both ways."""
        self.decoder.use_layout(replace(self.layout, lazy_head=True, upcast_prefill=False))
        if not self.candidate.reduced:
            self.shapes.ensure_filled()
            return
        self.times["prefill"].append(_seconds(self.shapes.prefill))
        self.decoder.upcast_prefill = True
        self.times["prefill_upcast"].append(_seconds(self.shapes.prefill))
        self.decoder.upcast_prefill = False

    def measure(self) -> None:
        self.times["decode"].append(_seconds(self.shapes.decode))
        if self.shapes.k > 1:
            self.times["verify"].append(_seconds(self.shapes.verify))
            self.times["head_row"].append(_seconds(self.shapes.head_row))
            self.times["head_rows"].append(_seconds(self.shapes.head_rows))

    def check_exact(self, counts: tuple[int, ...]) -> None:
        checks = []
        for n in counts:
            with using_threads(n):
                checks.append(self.shapes.rows_exact())
        self.candidate.exact_rows = all(rows for rows, _ in checks)
        self.candidate.exact_head = all(head for _, head in checks)
        if self.candidate.reduced and not self.candidate.exact_rows:
            self.candidate.dropped = "verify rows differ from decode rows in 16 bits (not lossless)"

    def keep_medians(self) -> None:
        medians = {step: statistics.median(v) if v else None for step, v in self.times.items()}
        c = self.candidate
        c.decode_s, c.verify_s, c.head_row_s, c.head_rows_s = (
            medians["decode"],
            medians["verify"],
            medians["head_row"],
            medians["head_rows"],
        )
        c.prefill_s, c.prefill_upcast_s = medians["prefill"], medians["prefill_upcast"]


def probe_layouts(
    decoders: dict,
    verify_tokens: int,
    *,
    repeats: int = PROBE_REPEATS,
    context: int = PROBE_CONTEXT,
    seed: int = 0,
    budget_s: float = PROBE_BUDGET_S,
    thread_counts: tuple[int, ...] | None = None,
    layouts: dict | None = None,
) -> LayoutChoice:
    """Measure every candidate of ``decoders`` (dtype name -> `NativeDecoder` on the CPU, one model per
    dtype) for verify steps of ``verify_tokens`` and leave the winner's decoder in the winning layout.

    ``thread_counts``: the counts the exactness check runs at (default: torch's current count);
    ``layouts``: dtype name -> the layouts to try (default `candidate_layouts`). The decoders' caches are
    reset (engines reset them when a generation starts)."""
    started = time.perf_counter()
    counts = tuple(sorted(set(thread_counts or (torch.get_num_threads(),))))
    entries = []
    for dtype_name, decoder in decoders.items():
        shapes = _Shapes(decoder, verify_tokens, context, seed)
        for layout in (layouts or {}).get(dtype_name) or candidate_layouts(decoder.dtype):
            if layout_refusal(layout, decoder.dtype) is None:  # never measured, never chosen
                entries.append(_Entry(Candidate(dtype_name, layout.name), decoder, shapes, layout))
    if not entries:
        raise SpecbenchError(f"the layout probe has no layout to measure that this CPU runs ({describe_cpu()})")
    best_decode = math.inf
    for entry in entries:  # the untimed round: warm-up, exactness, hopeless candidates dropped
        entry.prepare()
        if verify_tokens > 1 and entry.candidate.reduced:  # float32 is lossless up to rounding in any layout
            entry.check_exact(counts)
        decode = _seconds(entry.shapes.decode)
        if decode > PRUNE_FACTOR * best_decode:
            entry.candidate.dropped = (
                entry.candidate.dropped or f"decode {decode * 1e3:.1f} ms > {PRUNE_FACTOR:g}x the fastest"
            )
            entry.candidate.decode_s = decode
        if not entry.candidate.dropped:  # only a choosable candidate sets the bar
            best_decode = min(best_decode, decode)
        entry.times = {step: [] for step in STEPS}
    live = [entry for entry in entries if entry.candidate.decode_s is None]
    timed_start = time.perf_counter()
    for repeat in range(repeats):
        if repeat and time.perf_counter() - timed_start > budget_s:
            break
        for entry in live:  # interleaved: candidate 1, 2, ..., n, then again
            entry.prepare()
            entry.measure()
    for entry in live:
        entry.keep_medians()
    candidates = [entry.candidate for entry in entries]
    winner = min(entries, key=lambda e: e.candidate.score(verify_tokens))
    if not math.isfinite(winner.candidate.score(verify_tokens)):
        raise SpecbenchError("the layout probe found no lossless candidate on this CPU")
    plan = winner.candidate.plan()
    winner.decoder.use_layout(plan)
    return LayoutChoice(
        "auto",
        winner.candidate.dtype,
        plan,
        verify_tokens,
        _reason(winner.candidate, candidates, verify_tokens),
        probe_s=time.perf_counter() - started,
        measured=_now(),
        candidates=candidates,
    )


def _reason(winner: Candidate, candidates: list[Candidate], verify_tokens: int) -> str:
    """Why the winner won, in one line: its step times against the best other dtype's (or layout's)."""

    def steps(c: Candidate) -> str:
        if verify_tokens == 1:
            return f"decode {c.decode_s * 1e3:.1f} ms"
        return f"decode {c.decode_s * 1e3:.1f} + verify({verify_tokens}) {(c.score(verify_tokens) - c.decode_s) * 1e3:.1f} ms"

    finite = [c for c in candidates if math.isfinite(c.score(verify_tokens)) and c is not winner]
    others = [c for c in finite if c.dtype != winner.dtype] or finite
    text = f"fastest lossless of {len(candidates)} measured ({steps(winner)}"
    if others:
        runner_up = min(others, key=lambda c: c.score(verify_tokens))
        text += f"; best {runner_up.dtype} {runner_up.layout}: {steps(runner_up)}"
    text += ")"
    if winner.reduced and verify_tokens > 1:
        text += "; verify rows bit-identical to decode rows"
    lossy = [c for c in candidates if c.dropped and "not lossless" in c.dropped]
    if lossy:
        text += f"; {len(lossy)} 16-bit layout(s) not lossless here"
    return text


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ----------------------------------------------------------------------------- the cache


def probe_key(model_id: str, dtypes: list[str], verify_tokens: int, thread_counts: tuple[int, ...] | None) -> dict:
    """What a cached probe result is valid for: this machine, this torch, this model, these choices."""
    return {
        "probe_version": PROBE_VERSION,
        "cpu": cpu_model(),
        "flags": cpu_features().key_flags(),
        "cores": available_cores(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "model": model_id,
        "dtypes": list(dtypes),
        "verify_tokens": verify_tokens,
        "thread_counts": sorted(set(thread_counts or (torch.get_num_threads(),))),
    }


def cache_file(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache_root() / CACHE_FOLDER / f"{digest}.json"


def load_cached(key: dict) -> LayoutChoice | None:
    """The cached choice for ``key``, or None (absent, unreadable, for another key, or naming a dtype or layout
    this CPU cannot run: a cache entry never picks what the user could not pick, `layout_refusal`)."""
    try:
        data = read_json(cache_file(key), "layout cache entry")
        if data.get("key") != key:
            return None
        choice = LayoutChoice.from_dict(data["choice"])
        if (
            choice.dtype not in DTYPES_BY_NAME
            or choice.layout.name not in LAYOUTS
            or layout_refusal(choice.layout, DTYPES_BY_NAME[choice.dtype]) is not None
        ):
            return None
    except (SpecbenchError, ValueError, KeyError, TypeError, AttributeError):
        return None
    choice.cached = True
    return choice


def store(key: dict, choice: LayoutChoice) -> None:
    """Write the choice for ``key`` (whole, never through a symlink: `safe_files.write_json`); a cache that cannot
    be written is skipped."""
    with contextlib.suppress(OSError):
        write_json(cache_file(key), {"key": key, "choice": choice.to_dict()}, indent=1)


def load_average() -> float | None:
    """The 1-minute load average (None where the system has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def choose_layout(
    decoders: dict,
    verify_tokens: int,
    model_id: str,
    *,
    thread_counts: tuple[int, ...] | None = None,
    use_cache: bool = True,
    status=lambda message: None,
) -> LayoutChoice:
    """The probe's choice for these decoders: cached for this machine and model, else measured (and
    cached); the winning decoder is left in the chosen layout.

    A probe that ran while other processes kept the machine busy (a 1-minute load average above the
    cores this process may use, before or after) is used for this run but not cached, and its reason
    says so: its step times are the other jobs' as much as the candidates', and the next run measures again."""
    key = probe_key(model_id, list(decoders), verify_tokens, thread_counts)
    cached = load_cached(key) if use_cache else None
    if cached is not None and cached.dtype in decoders:
        decoders[cached.dtype].use_layout(cached.layout)
        return cached
    status(f"measuring CPU weight layouts ({', '.join(decoders)}) on {cpu_model()}")
    before = load_average()
    choice = probe_layouts(decoders, verify_tokens, thread_counts=thread_counts)
    loads = [x for x in (before, load_average()) if x is not None]
    if loads and max(loads) > available_cores():
        choice.reason += (
            f"; measured on a busy machine (load average {max(loads):.1f} on {available_cores()} cores): not cached"
        )
    else:
        store(key, choice)
    return choice
