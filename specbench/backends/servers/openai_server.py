"""``backend: openai``: measure a running vLLM or SGLang server through its OpenAI-compatible API.

Whoever launched the server chose its speculative configuration; specbench measures it as it
is and records what the server reports about it (``describe()``, written to the results
folder's backend.json). Each unit's requests go to
``POST /v1/completions`` as token-id prompts, streamed (``stream_options.include_usage``), with
a bounded thread pool that keeps ``concurrency`` requests in flight. ``GET /metrics`` is read
before and after each batch.

What a record gets, and from where:

* tokens: the streamed ``token_ids`` (vLLM's ``return_token_ids``), else the streamed text
  re-encoded with the target's tokenizer (noted in ``describe()``);
* time to first token and decode time: the server's per-request ``metrics`` block (vLLM with
  ``--enable-per-request-metrics``: ``time_to_first_token_ms`` from scheduling, and
  ``generation_time_ms``, first to last token), else the client's clock on the stream;
* rounds: vLLM's per-request ``metrics.speculative_decoding.per_step_accepted`` /
  ``per_step_drafted`` (``--per-request-spec-decode-metrics detailed``), one round per verify
  step that carried a draft, plus one round drafting 0 tokens for each decode step that had no
  draft (ngram without a match; their place in the sequence is not reported, they are put
  last). Per-round timings are NaN: a server does not report them.
* without per-request figures the rounds stay empty (α, τ and the per-position columns of
  the record are then null), and the acceptance of the whole batch, from the counter
  differences, goes into ``describe()["aggregates"]`` — never split evenly over requests.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.backends.base import (
    GenerationResult,
    Request,
    RoundCallback,
    RoundLog,
    ServingBackend,
    StatusCallback,
    TimingScope,
)
from specbench.backends.options import check_backend_options
from specbench.backends.servers import prometheus
from specbench.backends.servers.openai_client import DEFAULT_TIMEOUT_S, OpenAIClient
from specbench.catalogue import drafters as catalogue
from specbench.catalogue.drafters import is_target_only
from specbench.errors import SpecbenchError
from specbench.models.resolve import alias_status, aliases, pull

WARMUP_TOKENS = 8

CHARS_PER_TOKEN = 64  # re-encoded server text: characters kept per token asked for (no token is longer)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass
class ServerGenerationResult(GenerationResult):
    """A `GenerationResult` measured through a server.

    When the server gave no per-round figures the rounds are unobserved (`RoundLog.unobserved`: counts
    None, round seconds NaN); the decode tokens then come from the stream (every generated token after
    the first), so tokens/s stays right.
    """

    ttft_s: float = math.nan  # time to first token: server queue + prefill (server), or send → first chunk (client)
    itl_s: float = math.nan  # mean inter-token latency: the server's mean_itl_ms, else decode time ÷ (tokens − 1)
    queue_s: float = math.nan  # server queue wait, when reported
    chunk_gaps_s: list[float] = field(default_factory=list)  # client-side gaps between streamed chunks
    timing_source: str = "client"  # 'server' (per-request metrics block) or 'client' (stream clock)
    spec_source: str = "none"  # 'per-request' or 'none' (aggregate only, see describe)
    server_spec: dict | None = None  # the per-request speculative_decoding block as the server sent it


def rounds_from_steps(accepted: list[int], drafted: list[int], n_tokens: int, drafter_type: str) -> RoundLog:
    """Rounds from per-step accepted/drafted counts of one request (timings NaN).

    The first token comes from the prefill; every verify step emits accepted + 1 tokens, cut so
    that the rounds emit exactly the ``n_tokens − 1`` tokens after the first. Decode steps that
    carried no draft (the server only reports steps with one) become rounds drafting 0.
    """
    log = RoundLog()
    left = max(n_tokens - 1, 0)
    for acc, gamma in zip(accepted, drafted):  # a chain: the step's drafted tokens are its γ
        if left <= 0:
            break
        emitted = min(int(acc) + 1, left)
        left -= emitted
        steps = 0 if is_target_only(drafter_type) else catalogue.get(drafter_type).forwards_per_round(int(gamma))
        log.add(
            drafted=int(gamma),
            depth=int(gamma),
            accepted=min(int(acc), emitted),
            emitted=emitted,
            draft_steps=steps,
            draft_s=math.nan,
            verify_s=math.nan,
            round_s=math.nan,
        )
    for _ in range(left):  # decode steps without a draft
        log.add(
            drafted=0,
            depth=0,
            accepted=0,
            emitted=1,
            draft_steps=0,
            draft_s=math.nan,
            verify_s=math.nan,
            round_s=math.nan,
        )
    return log


def resolve_model_location(spec: str) -> str:
    """A model spec → what a serving engine loads: an alias's converted folder (built once), a
    local folder, or the spec unchanged (a hub id)."""
    if spec in aliases():
        entry = aliases()[spec]
        if entry["source"] in ("random", "early-exit"):
            raise SpecbenchError(
                f"model '{spec}' is built in memory by specbench ({entry['source']}); "
                "a serving engine needs a model folder or a hub id"
            )
        status = alias_status(spec)
        return status["path"] if status["cached"] else str(pull(spec))
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.exists() else spec


def load_tokenizer(location: str):
    from transformers import AutoTokenizer  # lazy: transformers loads torch

    try:
        return AutoTokenizer.from_pretrained(location)
    except (OSError, ValueError) as exc:
        raise SpecbenchError(f"could not load the tokenizer of '{location}': {str(exc).splitlines()[0]}") from None


def request_clock(request: Request, out: dict, started: float) -> tuple[float, float]:
    """A request's arrival within its batch (s after ``started``) and how long it waited to be sent after
    arriving (open loop: held back by the in-flight cap; 0 in a closed loop)."""
    arrival = request.arrival_s if request.arrival_s is not None else out["sent"] - started
    return arrival, out["sent"] - started - arrival


def _ms(value) -> float:
    return value / 1000.0 if isinstance(value, (int, float)) else math.nan


def _drafter_type(config) -> str:
    return catalogue.TARGET_ONLY if config.is_baseline else config.drafter.type


def _config_label(config) -> str:
    return getattr(config, "label", None) or repr(config)


class OpenAIServerBackend(ServingBackend):
    """A running OpenAI-compatible server (vLLM, SGLang); options: ``url`` (required),
    ``model`` (served name; default: the first of /v1/models), ``tokenizer`` (default: the
    sweep's target), ``api_key``, ``timeout_s``, ``baseline_url`` (a server without speculation
    for the γ = 0 units; without it they are sent to ``url`` and measure its speculative setup),
    ``warmup`` — checked by `specbench.backends.options`."""

    name = "openai"
    client_class = OpenAIClient  # the dialect this backend speaks (`LlamaCppClient` for llama.cpp's own API)

    def __init__(self, options: dict, *, target: str, device: str, dtype: str, seed: int):
        self._setup(check_backend_options(self.name, options), target=target, device=device, dtype=dtype, seed=seed)

    def _setup(self, options: dict, *, target: str, device: str, dtype: str, seed: int) -> None:
        """What every server backend holds, from options already checked."""
        self.options, self.target_spec, self.device, self.dtype, self.seed = options, target, device, dtype, seed
        self.device_name = ""
        self.tokenizer: PreTrainedTokenizerBase | None = None  # loaded by `start`
        self.timeout = float(options.get("timeout_s", DEFAULT_TIMEOUT_S))
        self.warmup = bool(options.get("warmup", True))
        self.client: OpenAIClient | None = None
        self.baseline_client: OpenAIClient | None = None
        self.aggregates: list[dict] = []
        self.server_configs: dict[str, dict] = {}
        self.ran_configs: dict[str, dict | None] = {}  # RunConfig label -> what the server reported running
        self.notes: list[str] = []
        self._status: StatusCallback = lambda message: None
        self._warm: set[str] = set()
        self._lock = threading.Lock()
        self.target_only_urls: set[str] = set()  # servers known to run without speculation (baseline_url)

    # ------------------------------------------------------------------ lifecycle
    def start(self, status: StatusCallback) -> None:
        self._status = status
        self.client = self._connect(self.options["url"], self.options.get("model"))
        if self.options.get("baseline_url"):
            self.baseline_client = self._connect(self.options["baseline_url"], None)
            self.target_only_urls.add(self.baseline_client.url)
        self._load_tokenizer()

    def _connect(self, url: str, model: str | None, alive=None) -> OpenAIClient:
        client = self.client_class(
            url, model=model, api_key=self.options.get("api_key"), timeout=self.timeout, alive=alive
        )
        self._status(f"connecting to {url}")
        client.check_reachable()
        client.model = client.model or client.served_model()
        self.device_name = self.device_name or f"server {client.url} ({client.model})"
        self.server_configs[client.url] = client.server_config()
        return client

    def _load_tokenizer(self, location: str | None = None) -> None:
        spec = self.options.get("tokenizer") or location or self.target_spec
        self._status(f"loading the tokenizer of {spec}")
        self.tokenizer = load_tokenizer(resolve_model_location(spec))

    def close(self) -> None:
        self._warm.clear()

    def describe(self) -> dict:
        """What the run records about this backend (the results folder's backend.json): per
        configuration label the speculative settings the server reported (None: not reported),
        the servers' reported settings, and the batch-level acceptance of every measured batch —
        the only acceptance figure when the server gives none per request."""
        return {
            "backend": self.name,
            "configs": dict(self.ran_configs),
            "servers": dict(self.server_configs),
            "aggregates": list(self.aggregates),
            "notes": sorted(set(self.notes)),
        }

    run_info = describe

    # ------------------------------------------------------------------ measuring
    def client_for(self, config) -> OpenAIClient:
        if config.is_baseline and self.baseline_client is not None:
            return self.baseline_client
        if config.is_baseline:
            self.notes.append(
                "γ = 0 units were sent to the speculative server (no baseline_url): "
                "they measure that server's speculative setup, not the target alone"
            )
        assert self.client is not None, "start() connects the client"
        return self.client

    def generate(
        self,
        config,
        prompt_ids: list[int],
        max_new_tokens: int,
        *,
        seed: int,
        stop_at_eos: bool,
        on_round: RoundCallback | None = None,
    ) -> GenerationResult:
        result = self.generate_batch(config, [Request(list(prompt_ids), max_new_tokens, seed, stop_at_eos)], 1)[0]
        if on_round is not None:
            on_round(result)
        return result

    def prepare(self, config, requests: list[Request]) -> None:
        """What a batch needs before it is timed: its server (and one untimed warm-up request)."""
        client = self.client_for(config)
        if requests:
            self._warm_up(client, config, requests[0])

    def timing_scope(self) -> TimingScope:
        return TimingScope(
            (),
            1,
            f"machine state of this machine, the client's side only: the server at "
            f"{self.options['url']} was not observed (if it runs here, its CPU counts as other "
            "processes')",
        )

    def generate_batch(self, config, requests: list[Request], concurrency: int) -> list[GenerationResult]:
        if concurrency < 1:
            raise SpecbenchError(f"concurrency must be at least 1, got {concurrency}")
        client = self.client_for(config)
        self.ran_configs[_config_label(config)] = self._reported_config(client)
        self._warm_up(client, config, requests[0])
        before = client.scrape()
        if not config.is_baseline and not prometheus.has_spec_metrics(before):
            raise self._no_spec_error(client)
        started = time.perf_counter()
        # one event loop, at most `concurrency` requests in flight; a failure or Ctrl-C cancels them all
        raw = client.complete_all(
            [(r.prompt_ids, r.max_new_tokens, r.seed, r.stop_at_eos, r.arrival_s) for r in requests],
            concurrency,
            config=config,
            started=started,
        )
        wall = time.perf_counter() - started
        after = client.scrape()
        results: list[GenerationResult] = [
            self._result(config, r, out, started, client) for r, out in zip(requests, raw)
        ]
        self._record_aggregate(config, client, concurrency, results, before, after, wall)
        return results

    def _warm_up(self, client: OpenAIClient, config, request: Request) -> None:
        """One short untimed request per server (the first request after start-up is slow)."""
        if not self.warmup or client.url in self._warm:
            return
        self._status(f"warming up {client.url}")
        client.complete(request.prompt_ids, WARMUP_TOKENS, config=config, seed=request.seed, stop_at_eos=False)
        self._warm.add(client.url)

    def _tokens(self, out: dict, max_new_tokens: int) -> list[int]:
        """The answer's token ids: the server's, or its text re-encoded — at most ``max_new_tokens`` either way (a
        server that streams more than it was asked for is cut, with a note: 200,001 re-encoded tokens once came
        back for -n 8), and the text cut before it is encoded (`CHARS_PER_TOKEN` characters a token at most)."""
        if out["has_token_ids"]:
            ids = list(out["token_ids"])
        else:
            with self._lock:
                self.notes.append("the server streamed no token ids: output ids are the streamed text re-encoded")
            text = (out["text"] or "")[: max_new_tokens * CHARS_PER_TOKEN]
            assert self.tokenizer is not None, "start() loads the tokenizer"
            ids = list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []
        if len(ids) > max_new_tokens:
            with self._lock:
                self.notes.append(
                    f"the server answered with more than the {max_new_tokens} tokens asked for: the answer is cut there"
                )
            ids = ids[:max_new_tokens]
        return ids

    def _result(
        self, config, request: Request, out: dict, started: float | None = None, client: OpenAIClient | None = None
    ) -> ServerGenerationResult:
        started = out["sent"] if started is None else started
        tokens = self._tokens(out, request.max_new_tokens)
        times = out["chunk_times"]
        metrics = out.get("metrics") or {}
        ttft_ms, gen_ms = metrics.get("time_to_first_token_ms"), metrics.get("generation_time_ms")
        if ttft_ms is not None and gen_ms is not None:
            prefill_s, decode_s, timing = ttft_ms / 1000.0, gen_ms / 1000.0, "server"
        else:
            prefill_s = times[0] - out["sent"] if times else math.nan
            decode_s = times[-1] - times[0] if len(times) > 1 else math.nan
            timing = "client"
        spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
        rounds, spec_source = RoundLog.unobserved(), "none"
        if isinstance(spec, dict) and None not in (spec.get("per_step_accepted"), spec.get("per_step_drafted")):
            rounds = rounds_from_steps(
                spec["per_step_accepted"], spec["per_step_drafted"], len(tokens), _drafter_type(config)
            )
            spec_source = "per-request"
            self._check_gamma(config, spec)
        elif isinstance(spec, dict):
            with self._lock:
                self.notes.append(
                    "the server reports per-request acceptance without per-step counts "
                    "(start vLLM with --per-request-spec-decode-metrics detailed)"
                )
        elif config.is_baseline and client is not None and client.url in self.target_only_urls:
            rounds = rounds_from_steps([], [], len(tokens), catalogue.TARGET_ONLY)  # one token per target step
        finish = out.get("finish_reason")
        queue_s = _ms(metrics.get("queue_time_ms"))
        arrival, waited = request_clock(request, out, started)
        ttft_s = prefill_s + (queue_s if timing == "server" and not math.isnan(queue_s) else 0.0) + waited
        itl_s = _ms(metrics.get("mean_itl_ms"))
        if math.isnan(itl_s) and len(tokens) > 1:
            itl_s = decode_s / (len(tokens) - 1)
        return ServerGenerationResult(
            prompt_tokens=len(request.prompt_ids),
            tokens=tokens,
            rounds=rounds,
            prefill_s=prefill_s,
            decode_s=decode_s,
            stop_reason="length" if finish == "length" else "eos",
            ttft_s=ttft_s,
            itl_s=itl_s,
            queue_s=queue_s,
            chunk_gaps_s=[b - a for a, b in zip(times, times[1:])],
            timing_source=timing,
            spec_source=spec_source,
            server_spec=spec if isinstance(spec, dict) else None,
            arrival_s=arrival,
            finish_s=(times[-1] - started) if times else None,
        )

    REPORTED_KEYS = ("vllm_speculative_config", "sglang_speculative", "llamacpp_spec_flags", "llamacpp_speculative")

    def _reported_config(self, client: OpenAIClient):
        """What the server runs, as it reported it (or as launched), under the first key it has."""
        reported = self.server_configs.get(client.url) or {}
        return next((reported[key] for key in self.REPORTED_KEYS if reported.get(key)), None)

    def _check_gamma(self, config, spec: dict) -> None:
        server_gamma = spec.get("num_spec_tokens")
        if server_gamma is None or config.is_baseline or int(server_gamma) == int(config.gamma):
            return
        raise SpecbenchError(
            f"the server at {self.client.url if self.client is not None else '?'} drafts {server_gamma} tokens per step but the sweep "
            f"asks γ = {config.gamma}: a running server's γ is what it is (set gammas: "
            f"[{server_gamma}])"
        )

    def _record_aggregate(
        self, config, client: OpenAIClient, concurrency: int, results: list, before, after, wall: float
    ) -> None:
        counts = prometheus.window_counts(before, after)
        per_request = all(r.spec_source == "per-request" for r in results)
        entry = {
            "config": _config_label(config),
            "server": client.url,
            "concurrency": concurrency,
            "requests": len(results),
            "wall_s": wall,
            "generated_tokens": int(sum(len(r.tokens) for r in results)),
            "per_request_rounds": per_request,
            "window": counts.as_dict() if counts is not None else None,
        }
        with self._lock:
            self.aggregates.append(entry)
        if counts is None and not per_request and not config.is_baseline:
            raise self._no_spec_error(client)

    @staticmethod
    def _no_spec_error(client: OpenAIClient) -> SpecbenchError:
        return SpecbenchError(
            f"the server at {client.url} reports no speculative-decoding metrics "
            "(no vllm:spec_decode_*, llamacpp:spec_decode_* or sglang:spec_accept_* series in /metrics): "
            "was it started with a speculative config?"
        )
