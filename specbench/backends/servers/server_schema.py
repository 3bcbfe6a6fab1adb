"""What specbench accepts from an OpenAI-compatible server: every answer and streamed chunk is
checked against the fields specbench reads, before any of them is used.

A field of the wrong type or out of range is a `ServerError` (exit 2) on one line naming the
server, the answer and the field — ``server http://h:8000: stream chunk 3: choices[0].token_ids[2]
must be a token id (an integer from 0 to 2^31 - 1), got -1`` — never an AttributeError deep in the
backend. Fields specbench does not read are ignored, so servers may add their own.

Checked:

* ``/v1/models``: ``data`` a non-empty list whose first entry has a non-empty string ``id``;
* a completion stream chunk: an object; ``error`` (if any) is reported as the server's error;
  ``choices`` a list of objects with ``text`` a string, ``token_ids`` a list of token ids,
  ``finish_reason`` a string (each may be null or absent); ``usage`` an object whose token
  counts are integers >= 0; ``metrics`` (vLLM's per-request block) an object whose times are
  finite numbers >= 0 and whose ``speculative_decoding`` has ``num_spec_tokens`` an integer
  >= 0 and ``per_step_accepted`` / ``per_step_drafted`` lists of integers >= 0 of one length,
  accepted <= drafted at every step;
* ``/server_info`` and ``/get_server_info``: an object (its speculative settings are recorded as sent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specbench.backends.servers.http_client import ServerError, one_line

MAX_TOKEN_ID = 2**31 - 1
MAX_COUNT = 2**40  # token and step counts: anything larger is not a real count
TIME_FIELDS = ("time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second")


class Check:
    """Field checks of one answer: ``Check(server, "stream chunk 3")``."""

    def __init__(self, server: str, what: str):
        self.server, self.what = server, what

    def fail(self, path: str, problem: str, value=None) -> ServerError:
        got = "" if value is None else f", got {one_line(repr(value), 60)}"
        return ServerError(f"server {self.server}: {self.what}: {path} {problem}{got}")

    def mapping(self, value, path: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, "must be an object", value)
        return value

    def optional(self, data: dict, key: str, kind, path: str, problem: str):
        value = data.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise self.fail(f"{path}{key}", problem, value)
        return value

    def count(self, value, path: str, high: int = MAX_COUNT) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
            raise self.fail(path, f"must be an integer from 0 to {high:,}", value)
        return value

    def counts(self, value, path: str, high: int = MAX_COUNT) -> list[int]:
        if not isinstance(value, list):
            raise self.fail(path, "must be a list of integers", value)
        for i, item in enumerate(value):
            self.count(item, f"{path}[{i}]", high)
        return value

    def seconds_ms(self, value, path: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise self.fail(path, "must be a finite number >= 0", value)
        return float(value)


def served_model(data, server: str) -> str:
    """The first model id of a ``/v1/models`` answer."""
    check = Check(server, "/v1/models")
    data = check.mapping(data, "the answer")
    models = data.get("data")
    if not isinstance(models, list) or not models:
        raise check.fail("data", "must be a non-empty list of models (the server lists no model)", models)
    first = check.mapping(models[0], "data[0]")
    model = first.get("id")
    if not isinstance(model, str) or not model.strip() or len(model) > 4096:
        raise check.fail("data[0].id", "must be a non-empty model name", model)
    return model


@dataclass
class Choice:
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    meta_info: dict | None = None


@dataclass
class Chunk:
    """One streamed completion chunk, checked."""

    choices: list[Choice] = field(default_factory=list)
    usage: dict | None = None
    metrics: dict | None = None
    meta_info: dict | None = None


def completion_chunk(data, server: str, index: int, max_tokens: int) -> Chunk:
    """A ``data:`` payload of a streamed ``/v1/completions`` answer, checked field by field."""
    check = Check(server, f"stream chunk {index}")
    data = check.mapping(data, "the chunk")
    if data.get("error") is not None:
        error = data["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise ServerError(f"server {server} reported an error mid-stream: {one_line(str(message), 300)}")
    choices = data.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list):
        raise check.fail("choices", "must be a list", choices)
    chunk = Chunk()
    for i, raw in enumerate(choices):
        item = check.mapping(raw, f"choices[{i}]")
        text = check.optional(item, "text", str, f"choices[{i}].", "must be a string")
        ids = item.get("token_ids")
        if ids is not None:
            check.counts(ids, f"choices[{i}].token_ids", MAX_TOKEN_ID)
        finish = check.optional(item, "finish_reason", str, f"choices[{i}].", "must be a string")
        meta = check.optional(item, "meta_info", dict, f"choices[{i}].", "must be an object")
        chunk.choices.append(Choice(text or "", list(ids or []), finish, meta))
    usage = check.optional(data, "usage", dict, "", "must be an object")
    if usage is not None:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if usage.get(key) is not None:
                check.count(usage[key], f"usage.{key}")
    chunk.usage = usage
    chunk.metrics = metrics_block(data.get("metrics"), check, max_tokens)
    chunk.meta_info = check.optional(data, "meta_info", dict, "", "must be an object")
    return chunk


def metrics_block(value, check: Check, max_tokens: int) -> dict | None:
    """vLLM's per-request ``metrics`` object (times in ms, the speculative-decoding block), checked."""
    if value is None:
        return None
    metrics = check.mapping(value, "metrics")
    for key in TIME_FIELDS:
        check.seconds_ms(metrics.get(key), f"metrics.{key}")
    spec = metrics.get("speculative_decoding")
    if spec is None:
        return metrics
    spec = check.mapping(spec, "metrics.speculative_decoding")
    where = "metrics.speculative_decoding."
    if spec.get("num_spec_tokens") is not None:
        check.count(spec["num_spec_tokens"], where + "num_spec_tokens", 2**20)
    raw_accepted, raw_drafted = spec.get("per_step_accepted"), spec.get("per_step_drafted")
    if raw_accepted is not None or raw_drafted is not None:
        accepted = check.counts(raw_accepted, where + "per_step_accepted", 2**20)
        drafted = check.counts(raw_drafted, where + "per_step_drafted", 2**20)
        if len(accepted) != len(drafted):
            raise check.fail(
                where + "per_step_accepted", f"has {len(accepted)} steps but per_step_drafted has {len(drafted)}"
            )
        if len(accepted) > max(max_tokens, 0):
            raise check.fail(
                where + "per_step_accepted", f"lists {len(accepted)} steps for at most {max_tokens} generated tokens"
            )
        bad = next((i for i, (a, d) in enumerate(zip(accepted, drafted)) if a > d), None)
        if bad is not None:
            raise check.fail(
                f"{where}per_step_accepted[{bad}]", f"accepts {accepted[bad]} of {drafted[bad]} drafted tokens"
            )
    return metrics


def server_info(data, server: str, path: str) -> dict | None:
    """A ``/server_info`` answer: an object, or None (ignored) when it is not one."""
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------- llama.cpp's own API

LLAMACPP_TIMINGS = ("prompt_ms", "predicted_ms")
LLAMACPP_COUNTS = ("prompt_n", "predicted_n", "draft_n", "draft_n_accepted", "cache_n")


@dataclass
class LlamaCppChunk:
    """One streamed chunk of llama.cpp's native ``POST /completions``, checked: the token it carries (none in the
    final chunk), the generated count so far (``tokens_predicted``) and the cumulative ``timings``."""

    content: str = ""
    tokens: list[int] = field(default_factory=list)
    stop: bool = False
    stop_type: str | None = None
    tokens_predicted: int | None = None
    timings: dict | None = None


def llamacpp_chunk(data, server: str, index: int, max_tokens: int) -> LlamaCppChunk:
    """A ``data:`` payload of llama.cpp's native completion stream (tools/server/server-task.cpp,
    ``to_json_non_oaicompat``), checked field by field: ``content`` a string, ``tokens`` token ids, ``stop`` a
    boolean, ``tokens_predicted`` a count <= max_tokens, ``timings`` an object whose times are finite ms >= 0 and
    whose counts are integers >= 0 with ``draft_n_accepted`` <= ``draft_n``."""
    check = Check(server, f"stream chunk {index}")
    data = check.mapping(data, "the chunk")
    if data.get("error") is not None:
        error = data["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise ServerError(f"server {server} reported an error mid-stream: {one_line(str(message), 300)}")
    chunk = LlamaCppChunk()
    chunk.content = check.optional(data, "content", str, "", "must be a string") or ""
    if data.get("tokens") is not None:
        chunk.tokens = list(check.counts(data["tokens"], "tokens", MAX_TOKEN_ID))
    stop = data.get("stop", False)
    if not isinstance(stop, bool):
        raise check.fail("stop", "must be true or false", stop)
    chunk.stop = stop
    chunk.stop_type = check.optional(data, "stop_type", str, "", "must be a string")
    if data.get("tokens_predicted") is not None:
        chunk.tokens_predicted = check.count(data["tokens_predicted"], "tokens_predicted", max(max_tokens, 0))
    timings = check.optional(data, "timings", dict, "", "must be an object")
    if timings is not None:
        for key in LLAMACPP_TIMINGS:
            check.seconds_ms(timings.get(key), f"timings.{key}")
        for key in LLAMACPP_COUNTS:
            if timings.get(key) is not None:
                check.count(timings[key], f"timings.{key}")
        drafted, accepted = timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)
        if accepted > drafted:
            raise check.fail("timings.draft_n_accepted", f"is {accepted} but only {drafted} tokens were drafted")
    chunk.timings = timings
    return chunk
