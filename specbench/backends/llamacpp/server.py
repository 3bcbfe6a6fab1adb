"""``backend: llamacpp-server``: llama.cpp's ``llama-server``, launched by specbench per configuration — or, with
``url``, a server the user already runs, measured as it is.

Launched (`LaunchedServers`: one server per configuration, kept between configurations, stopped on every exit
path), each configuration's server runs

    llama-server -m <target GGUF> --host 127.0.0.1 --port <free port> --metrics -np <parallel>
        -c <ctx_size × parallel> --seed <seed> [-t <threads>] <speculation flags> <extra_args>

with the speculation flags of `specbench.analysis.settings.llamacpp_flags` (the mapping ``recommend --engine llamacpp``
prints: draft model → ``--spec-type draft-simple --model-draft <GGUF> --spec-draft-n-max γ``, llama.cpp's n-gram
kinds, ...); the γ = 0 baseline runs the same server without them. Requests go to llama.cpp's own
``POST /completions`` (token-id prompts, streamed, ``return_tokens`` and ``timings_per_token``: every token comes
with its id and the request's running draft totals), through the hardened client of every server backend
(`specbench.backends.servers.http_client`: total deadlines, capped bodies, cancellation) with every chunk checked
(`specbench.backends.servers.server_schema.llamacpp_chunk`).

What a record gets, and from where:

* tokens: the streamed ids; a token llama-server held back (it ends mid-way through a UTF-8 character and gets
  no chunk of its own) is filled in from one untimed, unstreamed repeat of the request, which must agree with
  every streamed id (noted in ``describe()``);
* rounds: rebuilt from the running totals each token carried (`specbench.backends.llamacpp.rounds`): drafted,
  accepted and emitted tokens of every decode step, steps without a draft included; per-round times are NaN;
* prefill and decode time: the server's ``timings`` (``prompt_ms``; ``predicted_ms``, first to last token); TTFT:
  the client's clock, request sent to first token (queueing included);
* llama.cpp's own figures (``llamacpp:spec_decode_*`` counters read before and after each batch) go into
  ``describe()["aggregates"]`` beside the per-request count, and a disagreement is a warning during the sweep
  (``counter_problems``).

The weights are the GGUF's own (a Q4_1 file runs as Q4_1: the records' dtype does not apply, and run.json's
``engine.weights`` says what ran), a type the model spec names (``smollm2-135m@Q8_0``, target or draft model:
llama-quantize's variant of the shipped weights, `specbench.backends.llamacpp.quantized`), or with ``weights: dtype`` the GGUFs dequantized once to the sweep's dtype
(`specbench.models.gguf_convert`): the values the own engine and vLLM compute with.

Options: `specbench.backends.options` (``llamacpp-server``). What llama.cpp cannot run is refused before any
server starts (`check_sweep`): a tree, a drafter kind without a llama.cpp type (specbench's ``ngram``: llama.cpp's
closest is ``ngram-simple``), a draft model that is not a GGUF; a draft model with another vocabulary and MTP on a
target without MTP layers are refused when the sweep starts (`check_configs`).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from specbench.analysis.settings.llamacpp_flags import spec_flags
from specbench.backends.base import Request, RoundLog, StatusCallback, cpu_engine_cores
from specbench.backends.llamacpp.env import build_info, server_binary
from specbench.backends.llamacpp.quantized import model_gguf
from specbench.backends.llamacpp.rounds import Mark, Steps, rebuild
from specbench.backends.options import check_backend_options, check_option_mode
from specbench.backends.servers import prometheus, server_schema
from specbench.backends.servers.http_client import ServerError, one_line, stream_cap, strict_json
from specbench.backends.servers.http_client import run as run_http
from specbench.backends.servers.launched_servers import LaunchedServers
from specbench.backends.servers.openai_client import OpenAIClient
from specbench.backends.servers.openai_server import (
    OpenAIServerBackend,
    ServerGenerationResult,
    _config_label,
    _drafter_type,
    request_clock,
)
from specbench.backends.servers.server_process import ServerProcess
from specbench.catalogue import drafters as catalogue
from specbench.catalogue import gguf_types
from specbench.errors import SpecbenchError
from specbench.models.gguf_convert import dequantized
from specbench.models.gguf_files import check_same_gguf_vocabulary, gguf_facts, gguf_file, load_gguf_tokenizer

DEFAULT_CTX = 4096


# ----------------------------------------------------------------------------- the client


class LlamaCppClient(OpenAIClient):
    """llama.cpp's native ``/completions`` through the hardened client (`OpenAIClient`'s streaming): token ids
    and running draft totals with every token, the closing chunk (``stop: true``) with the request's timings."""

    completion_path = "/completions"
    stream_end = "its closing chunk (stop: true)"
    cache_prompt = False

    @staticmethod
    def max_tokens(body: dict) -> int:
        return int(body["n_predict"])

    def body(
        self, prompt_ids: list[int], max_new_tokens: int, *, config, seed: int, stop_at_eos: bool, stream: bool = True
    ) -> dict:
        """The request: the sweep's sampling exactly (temperature, top-p, top-k; llama.cpp's other samplers —
        min-p 0.05 and top-k 40 by default — switched off), ids back, running totals per token."""
        return {
            "prompt": list(prompt_ids),
            "n_predict": int(max_new_tokens),
            "seed": int(seed),
            "temperature": float(config.temperature),
            "top_p": float(config.top_p),
            "top_k": int(config.top_k or 0),
            "min_p": 0.0,
            "typical_p": 1.0,
            "top_n_sigma": -1.0,
            "xtc_probability": 0.0,
            "repeat_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "dry_multiplier": 0.0,
            "mirostat": 0,
            "n_probs": 0,
            "ignore_eos": not stop_at_eos,
            "stream": stream,
            "return_tokens": True,
            "timings_per_token": stream,
            "cache_prompt": bool(self.cache_prompt),
        }

    def _take(self, payload, out: dict, index: int, max_tokens: int) -> bool:
        chunk = server_schema.llamacpp_chunk(payload, self.url, index, max_tokens)
        now = time.perf_counter()
        marks = out.setdefault("marks", [])
        if chunk.tokens:
            out["has_token_ids"] = True
            out["token_ids"].extend(chunk.tokens)
            if len(out["token_ids"]) > max_tokens:
                raise ServerError(f"server {self.url}: streamed more than n_predict {max_tokens} token ids")
            out["chunk_times"].append(now)
            if chunk.timings is not None and chunk.tokens_predicted is not None:
                marks.append(
                    Mark(
                        chunk.tokens_predicted,
                        int(chunk.timings.get("draft_n", 0)),
                        int(chunk.timings.get("draft_n_accepted", 0)),
                    )
                )
        out["text"] += chunk.content
        if chunk.stop:
            out["final"] = chunk
            out["finish_reason"] = "length" if chunk.stop_type == "limit" else "stop"
            out["timings"] = dict(chunk.timings or {})
        return chunk.stop

    def _check_stream(self, out: dict, max_tokens: int) -> None:
        final = out["final"]
        generated = final.tokens_predicted if final.tokens_predicted is not None else len(out["token_ids"])
        if len(out["token_ids"]) > generated:
            raise ServerError(
                f"server {self.url}: streamed {len(out['token_ids'])} token ids but its closing chunk "
                f"counts {generated}"
            )
        if generated == 0:
            raise ServerError(
                f"server {self.url}: generated no tokens for a request of n_predict {max_tokens} "
                f"(stop_type {final.stop_type!r}): nothing to measure"
            )
        out["generated"], out["missing"] = generated, generated - len(out["token_ids"])
        out["usage"] = {"completion_tokens": generated}

    def complete_whole(
        self, prompt_ids: list[int], max_new_tokens: int, *, config, seed: int, stop_at_eos: bool
    ) -> list[int]:
        """The token ids of one unstreamed completion (untimed: fills the ids a stream held back)."""
        body = self.body(prompt_ids, max_new_tokens, config=config, seed=seed, stop_at_eos=stop_at_eos, stream=False)
        path, lines = self.completion_path, []

        async def opened(response) -> None:
            if response.status_code != 200:
                detail = await self.http.error_body(response, path)
                raise ServerError(f"server {self.url}: {path} answered HTTP {response.status_code}: {detail}")

        def keep(line: bytes) -> bool:  # every line, to the end of the stream
            lines.append(line)
            return True

        async def one() -> None:
            async with self.http.session(self.timeout) as session:
                await self.http.bounded(
                    self.http.stream_lines(
                        session,
                        path,
                        body,
                        max_bytes=stream_cap(max_new_tokens),
                        on_open=opened,
                        on_line=keep,
                    ),
                    path,
                    self.timeout,
                )

        run_http(one())
        try:
            data = strict_json(b"\n".join(lines).decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ServerError(
                f"server {self.url}: {path} (not streamed) is not JSON ({one_line(str(exc), 80)})"
            ) from None
        check = server_schema.Check(self.url, f"{path} (not streamed)")
        return list(check.counts(check.mapping(data, "the answer").get("tokens"), "tokens", server_schema.MAX_TOKEN_ID))

    def server_config(self) -> dict:
        """What ``/props`` says about the server: its build, slots, context, model file and weight type. (Its
        ``default_generation_settings.params["speculative.types"]`` says "none" even for a server started with
        ``--spec-type``, llama.cpp@0c1e57098: the speculation is what the server was started with, not read here.)"""
        try:
            answer = self.http.get("/props", deadline_s=self.probe_s)
            info = (
                server_schema.server_info(answer.json("/props", self.url), self.url, "/props")
                if answer.status == 200
                else None
            )
        except ServerError:
            return {}
        if not info:
            return {}
        settings = info.get("default_generation_settings")
        found = {
            "build_info": info.get("build_info"),
            "total_slots": info.get("total_slots"),
            "model_path": info.get("model_path"),
            "weights": info.get("model_ftype"),
            "n_ctx": settings.get("n_ctx") if isinstance(settings, dict) else None,
        }
        return {"llamacpp_speculative": {k: v for k, v in found.items() if isinstance(v, (str, int, float))}}


# ----------------------------------------------------------------------------- the backend


def check_sweep(options: dict, configs: list, where: str) -> None:
    """The llamacpp-server backend's check of a sweep (its registry entry's ``check``): its options, then every
    configuration's flags (a launched server) — before anything starts."""
    options = check_backend_options("llamacpp-server", options, f"{where}: backend llamacpp-server")
    check_option_mode("llamacpp-server", options, f"{where}: backend llamacpp-server")
    if "url" in options:
        return  # a running server's setup is what it is
    for config in configs:
        try:
            _flags(config, model_file=str)
        except SpecbenchError as exc:
            raise SpecbenchError(f"{where}: backend llamacpp-server: {exc}") from None


def _flags(config, model_file) -> list[str]:
    """llama-server's speculation flags of a `RunConfig` ([] for the target-only baseline); refusals in one line."""
    if config.drafter is None or config.gamma == 0:
        return []
    if config.tree != "chain":
        raise SpecbenchError(
            f"tree '{config.tree}' cannot run on llama.cpp: its speculation drafts chains only "
            "(use trees: [chain] with backend llamacpp-server)"
        )
    return spec_flags(config.drafter.type, config.drafter.params_dict, int(config.gamma), model_file=model_file)


class LlamaCppServerBackend(LaunchedServers, OpenAIServerBackend):
    """llama.cpp's llama-server: launched per configuration on 127.0.0.1, or attached with ``url``."""

    name = "llamacpp-server"
    engine_label = "llama.cpp"
    spec_name = "spec_flags"
    server_config_name = "llamacpp_spec_flags"
    client_class = LlamaCppClient
    client: LlamaCppClient | None  # built by `client_class`
    baseline_client: LlamaCppClient | None

    def __init__(self, options: dict, *, target: str, device: str, dtype: str, seed: int):
        options = check_backend_options(self.name, options)
        check_option_mode(self.name, options, f"backend {self.name}")
        shared = ("url", "baseline_url", "api_key", "timeout_s", "warmup", "tokenizer")
        self._setup(
            {key: options[key] for key in shared if key in options},
            target=target,
            device=device,
            dtype=dtype,
            seed=seed,
        )
        self._launcher(options)
        self.attached = "url" in options
        self.parallel = int(options.get("parallel", 1))
        self.target_file: Path | None = None  # the target's GGUF, found by `start` (launched servers)
        self.engine: dict = {"engine": "llama.cpp"}
        self.counter_problems: list[str] = []
        self.repaired = 0  # requests whose held-back token ids came from an unstreamed repeat

    # ------------------------------------------------------------------ lifecycle
    def start(self, status: StatusCallback) -> None:
        self._status = status
        if self.attached:
            super().start(status)  # OpenAIServerBackend.start: connect (and the baseline server), tokenizer
            for client in (self.client, self.baseline_client):
                if client is not None:
                    client.cache_prompt = bool(self.server_options.get("cache_prompt", False))
            assert self.client is not None, "start() connects the client"
            self.engine.update(
                attached=self.options["url"],
                **(self.server_configs.get(self.client.url) or {}).get("llamacpp_speculative", {}),
            )
            self.notes.append(
                "an attached server runs the speculation it was started with; start it with --metrics "
                "for llama.cpp's own counters"
            )
            return
        binary = None if self.server_options.get("server_command") else server_binary(self.server_options.get("binary"))
        self.target_file = target_file = self._gguf(self.server_options.get("model") or self.target_spec)
        facts = gguf_facts(target_file)
        self.engine.update(build_info(binary) if binary is not None else {"binary": "server_command (test)"})
        self.engine.update(target_gguf=str(self.target_file), weights=facts.get("file_type"))
        self._binary = binary
        self._load_tokenizer()
        self.device_name = f"llama.cpp server ({self.device}, {facts.get('file_type') or 'GGUF'} weights)"

    def _load_tokenizer(self, location: str | None = None) -> None:
        spec = self.options.get("tokenizer") or gguf_types.split(self.target_spec)[0]  # every type: one vocabulary
        self._status(f"loading the tokenizer of {spec}")
        self.tokenizer = load_gguf_tokenizer(spec)

    def engine_report(self) -> dict:
        """What run.json records of the engine: llama.cpp's commit and build, the GGUF it ran and its weights."""
        return dict(self.engine)

    def describe(self) -> dict:
        info = super().describe()
        info.update(
            engine=dict(self.engine), counter_problems=list(self.counter_problems), repaired_requests=self.repaired
        )
        return info

    run_info = describe

    def check_configs(self, configs: list) -> None:
        """What the GGUF files decide, before any server starts: a draft model shares the target's vocabulary;
        MTP needs a target whose GGUF carries MTP layers."""
        if self.attached:
            return
        for config in configs:
            if config.drafter is None or config.gamma == 0:
                continue
            target_file = self.target_file
            assert target_file is not None, "start() finds the target's GGUF"
            flags = self.engine_spec(config)
            assert flags is not None  # a drafter's configuration has flags (None: target only)
            kind = catalogue.get(config.drafter.type)
            if kind.llamacpp_weights == "model":
                draft = flags[flags.index("--model-draft") + 1]
                check_same_gguf_vocabulary(
                    target_file, Path(draft), self.target_spec, config.drafter.params_dict.get("model", draft)
                )
            elif kind.llamacpp_weights == "target" and not gguf_facts(target_file)["nextn_layers"]:
                raise SpecbenchError(
                    f"drafter {kind.name} cannot run on llama.cpp with target '{self.target_spec}': "
                    "its GGUF has no MTP (nextn) layers"
                )

    # ------------------------------------------------------------------ attached or launched
    def client_for(self, config):
        if self.attached:
            return OpenAIServerBackend.client_for(self, config)
        return super().client_for(config)

    def timing_scope(self):
        if self.attached:
            return OpenAIServerBackend.timing_scope(self)
        return super().timing_scope()

    def engine_cores(self) -> int:
        """``threads`` (-t) cores when set, else every core (llama.cpp's own choice is the physical cores)."""
        threads = self.server_options.get("threads")
        return min(int(threads), cpu_engine_cores()) if threads is not None else cpu_engine_cores()

    # ------------------------------------------------------------------ servers
    def _gguf(self, spec: str) -> Path:
        """The GGUF a model spec runs from: as stored, at the type it names (``alias@Q4_K_M``: built once with
        llama-quantize, `specbench.backends.llamacpp.quantized`), or (``weights: dtype``) dequantized to the sweep's
        dtype."""
        if gguf_types.split(spec)[1] is not None:
            return model_gguf(spec, status=self._status)
        path = gguf_file(spec)
        if self.server_options.get("weights") == "dtype":
            path = dequantized(path, self.dtype, status=self._status)
        return path

    def engine_spec(self, config) -> list[str] | None:
        return _flags(config, model_file=lambda spec: str(self._gguf(spec))) or None

    def command(self, port: int, spec: list[str] | None) -> list[str]:
        opts = self.server_options
        prefix = list(opts["server_command"]) if opts.get("server_command") else [str(self._binary)]
        ctx = int(opts.get("ctx_size", DEFAULT_CTX)) * self.parallel
        args = [
            "-m",
            str(self.target_file),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics",
            "-np",
            str(self.parallel),
            "-c",
            str(ctx),
            "--seed",
            str(self.seed),
        ]
        if opts.get("threads") is not None:
            args += ["-t", str(int(opts["threads"]))]
        return prefix + args + list(spec or []) + [str(a) for a in opts.get("extra_args", [])]

    def make_client(self, server: ServerProcess) -> LlamaCppClient:
        client = LlamaCppClient(server.url, timeout=self.timeout, alive=lambda: self._died(server))
        client.cache_prompt = bool(self.server_options.get("cache_prompt", False))
        client.model = client.served_model()
        return client

    # ------------------------------------------------------------------ measuring
    def generate_batch(self, config, requests: list[Request], concurrency: int) -> list:
        if concurrency > self.parallel and not self.attached:
            self.notes.append(
                f"concurrency {concurrency} above the server's {self.parallel} slots: requests queue "
                "in the server (set parallel)"
            )
        results = super().generate_batch(config, requests, concurrency)
        self._check_counters(config, results)
        return results

    def _result(
        self, config, request: Request, out: dict, started: float | None = None, client: OpenAIClient | None = None
    ) -> ServerGenerationResult:
        started = out["sent"] if started is None else started
        tokens = list(out["token_ids"])
        if out.get("missing"):
            repeat_on = client or self.client
            assert isinstance(repeat_on, LlamaCppClient), "`client_class` builds this backend's clients"
            tokens = self._repaired(config, request, out, repeat_on)
        timings = out.get("timings") or {}
        times = out["chunk_times"]
        final = Mark(out["generated"], int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0)))
        steps = rebuild(out.get("marks", []), final)
        rounds = _round_log(steps, _drafter_type(config), len(tokens))
        prefill_ms, decode_ms = timings.get("prompt_ms"), timings.get("predicted_ms")
        prefill_s = prefill_ms / 1000.0 if prefill_ms is not None else (times[0] - out["sent"] if times else math.nan)
        decode_s = (
            decode_ms / 1000.0 if decode_ms is not None else (times[-1] - times[0] if len(times) > 1 else math.nan)
        )
        arrival, waited = request_clock(request, out, started)
        ttft_s = (times[0] - out["sent"] if times else prefill_s) + waited
        depth = max([d for d, _, _ in steps.rounds] + [int(config.gamma)])
        server_spec = {
            "draft_n": final.drafted,
            "draft_n_accepted": final.accepted,
            "verify_steps": steps.verify_steps,
            "per_position": steps.per_position(depth),
            "rounds_exact": steps.exact,
        }
        return ServerGenerationResult(
            prompt_tokens=len(request.prompt_ids),
            tokens=tokens,
            rounds=rounds,
            prefill_s=prefill_s,
            decode_s=decode_s,
            stop_reason="length" if out.get("finish_reason") == "length" else "eos",
            ttft_s=ttft_s,
            itl_s=decode_s / (len(tokens) - 1) if len(tokens) > 1 else math.nan,
            chunk_gaps_s=[b - a for a, b in zip(times, times[1:])],
            timing_source="server" if decode_ms is not None else "client",
            spec_source="per-request",
            server_spec=server_spec,
            arrival_s=arrival,
            finish_s=(times[-1] - started) if times else None,
        )

    def _repaired(self, config, request: Request, out: dict, client: LlamaCppClient) -> list[int]:
        """The full ids of a request whose stream held tokens back: an unstreamed repeat, which must agree with
        every id that was streamed (else one line)."""
        whole = client.complete_whole(
            request.prompt_ids,
            request.max_new_tokens,
            config=config,
            seed=request.seed,
            stop_at_eos=request.stop_at_eos,
        )
        streamed, at = out["token_ids"], 0
        for token in whole:  # the streamed ids are the whole answer with the held-back ones left out
            if at < len(streamed) and streamed[at] == token:
                at += 1
        if len(whole) != out["generated"] or at != len(streamed):
            raise SpecbenchError(
                f"server {client.url}: the stream held back {out['missing']} token(s) and an "
                "unstreamed repeat of the request does not agree with the streamed ones (the "
                "server is not deterministic here: use temperature 0 and one slot)"
            )
        with self._lock:
            self.repaired += 1
        return list(whole)

    def _check_counters(self, config, results: list) -> None:
        """llama.cpp's counters over the batch against the per-request count: draft tokens and accepted tokens
        (each request's final timings), verification steps and per-position acceptance (its rebuilt rounds)."""
        if not self.aggregates:
            return
        entry = self.aggregates[-1]
        window = entry.get("window")
        if window is None or window.get("source") != prometheus.LLAMACPP.source:
            return
        specs = [r.server_spec or {} for r in results]
        count = {
            "drafts": sum(s.get("verify_steps", 0) for s in specs),
            "draft_tokens": sum(s.get("draft_n", 0) for s in specs),
            "accepted": sum(s.get("draft_n_accepted", 0) for s in specs),
        }
        depth = max([len(window.get("per_position") or [])] + [len(s.get("per_position", [])) for s in specs])
        per_position = [
            sum((s.get("per_position") or [])[i] if i < len(s.get("per_position") or []) else 0 for s in specs)
            for i in range(depth)
        ]
        counters = list(window.get("per_position") or []) + [0] * (depth - len(window.get("per_position") or []))
        count["per_position"] = per_position
        exact = all(s.get("rounds_exact", True) for s in specs)
        entry["per_request_count"] = {**count, "rounds_exact": exact}
        problems = [
            f"{key}: counters {window.get(key)} vs requests {count[key]}"
            for key in ("draft_tokens", "accepted")
            if window.get(key) != count[key]
        ]
        if exact:
            problems += [
                f"{key}: counters {value} vs requests {count[key]}"
                for key, value in (("drafts", window.get("drafts")), ("per_position", counters))
                if value != count[key]
            ]
        if problems:
            line = f"{_config_label(config)} at concurrency {entry.get('concurrency')}: " + "; ".join(problems)
            self.counter_problems.append(line)
            self._status(f"warning: llama.cpp's counters disagree with its per-request figures ({line})")


def _round_log(steps: Steps, drafter_type: str, n_tokens: int) -> RoundLog:
    """The records' rounds from rebuilt steps: timings NaN (a server does not report them); a round keeps the
    tokens it emitted (its accepted count cut to them at a stop)."""
    log = RoundLog()
    for drafted, accepted, emitted in steps.rounds:
        draft_steps = (
            0
            if drafted == 0 or catalogue.is_target_only(drafter_type)
            else catalogue.get(drafter_type).forwards_per_round(drafted)
        )
        log.add(
            drafted=drafted,
            depth=drafted,
            accepted=min(accepted, emitted),
            emitted=emitted,
            draft_steps=draft_steps,
            draft_s=math.nan,
            verify_s=math.nan,
            round_s=math.nan,
        )
    return log
