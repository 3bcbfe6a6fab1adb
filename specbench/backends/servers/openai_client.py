"""The client of one OpenAI-compatible server (`OpenAIClient`; llama.cpp's native ``/completions`` dialect is a
subclass): streamed completions, ``/metrics`` and ``/health``, through `specbench.backends.servers.http_client`, every
answer checked by `specbench.backends.servers.server_schema`. `specbench.backends.servers.openai_server` measures through it.
"""

from __future__ import annotations

import asyncio
import functools
import time

from specbench.backends.servers import prometheus, server_schema
from specbench.backends.servers.http_client import (
    HEALTH_S,
    MAX_METRICS_BYTES,
    METRICS_S,
    PROBE_S,
    HttpClient,
    ServerError,
    one_line,
    run_all,
    stream_cap,
    strict_json,
)
from specbench.backends.servers.http_client import run as run_http

DEFAULT_TIMEOUT_S = 600.0


class OpenAIClient:
    """Completions, /metrics and /health of one OpenAI-compatible server, through the hardened
    `specbench.backends.servers.http_client` (total deadlines, capped bodies, cancellation) with every answer
    checked by `specbench.backends.servers.server_schema`.

    Another completion dialect (llama.cpp's native ``/completions``) is a subclass that says its path
    (`completion_path`), its request body (`body`), how a chunk is taken (`_take`: True for the closing one)
    and what closes a stream (`stream_end`); the streaming itself — bounded, capped, cancelled — is this one."""

    completion_path = "/v1/completions"
    stream_end = "its closing [DONE]"

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        alive=None,
    ):
        self.url, self.model, self.timeout = url.rstrip("/"), model, timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.alive = alive  # optional callable raising SpecbenchError when the server process died
        self.http = HttpClient(self.url, headers, on_failure=alive)
        self.probe_s = min(PROBE_S, timeout)  # /v1/models, /server_info: never longer than a request may take

    def _json(self, path: str, answer):
        if answer.status != 200:
            raise ServerError(
                f"server {self.url}: {path} answered HTTP {answer.status}: "
                f"{one_line(answer.text(), 200)} (is this an OpenAI-compatible server?)"
            )
        return answer.json(path, self.url)

    def check_reachable(self) -> None:
        self.http.get("/v1/models", deadline_s=self.probe_s)  # any HTTP answer will do: the list is read next

    def served_model(self) -> str:
        answer = self.http.get("/v1/models", deadline_s=self.probe_s)
        return server_schema.served_model(self._json("/v1/models", answer), self.url)

    def healthy(self) -> bool:
        try:
            return self.http.get("/health", deadline_s=min(HEALTH_S, self.timeout)).status == 200
        except ServerError:
            return False

    def scrape(self) -> prometheus.Scrape:
        answer = self.http.get("/metrics", deadline_s=min(METRICS_S, self.timeout), max_bytes=MAX_METRICS_BYTES)
        if answer.status != 200:
            raise ServerError(
                f"server {self.url}: /metrics answered HTTP {answer.status}: start the server with its metrics on"
            )
        return prometheus.parse(answer.text(), server=self.url)

    def server_config(self) -> dict:
        """The speculative settings the server reports about itself, where it does (else {})."""
        found: dict = {}
        for path in ("/server_info?config_format=json", "/get_server_info"):  # vLLM (dev mode), SGLang
            try:
                answer = self.http.get(path, deadline_s=self.probe_s)
                info = (
                    server_schema.server_info(answer.json(path, self.url), self.url, path)
                    if answer.status == 200
                    else None
                )
            except ServerError:
                continue
            if info is None:
                continue
            vllm_config = info.get("vllm_config")
            if isinstance(vllm_config, dict) and vllm_config.get("speculative_config") is not None:
                spec = vllm_config["speculative_config"]
                if isinstance(spec, dict):
                    spec = {k: v for k, v in spec.items() if not k.startswith(("target_", "draft_"))}
                found["vllm_speculative_config"] = spec
            sglang = {k: v for k, v in info.items() if k.startswith("speculative_") and v is not None}
            if sglang:
                found["sglang_speculative"] = sglang
        return found

    def body(self, prompt_ids: list[int], max_new_tokens: int, *, config, seed: int, stop_at_eos: bool) -> dict:
        body = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": int(max_new_tokens),
            "temperature": float(config.temperature),
            "top_p": float(config.top_p),
            "seed": int(seed),
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
            "ignore_eos": not stop_at_eos,
        }
        if config.top_k and config.top_k > 0:
            body["top_k"] = int(config.top_k)
        return body

    def complete(self, prompt_ids: list[int], max_new_tokens: int, *, config, seed: int, stop_at_eos: bool) -> dict:
        """One streamed completion (see `complete_all`)."""
        return self.complete_all([(prompt_ids, max_new_tokens, seed, stop_at_eos, None)], 1, config=config)[0]

    def complete_all(
        self, requests: list[tuple], concurrency: int, *, config, started: float | None = None
    ) -> list[dict]:
        """Streamed completions of (prompt ids, max new tokens, seed, stop at eos, arrival s or None), in the
        order given, at most ``concurrency`` in flight, each under the total deadline ``timeout``; the first
        failure cancels the rest. Open loop: a request with an arrival time is sent no earlier than
        ``started`` + arrival; requests take the free slots in arrival order and hold one while they wait, as
        ``concurrency`` threads would."""
        order = sorted(range(len(requests)), key=lambda i: requests[i][4] or 0.0)

        async def one(session, r) -> dict:
            if r[4] is not None and started is not None:
                await asyncio.sleep(max(0.0, started + r[4] - time.perf_counter()))
            return await self._complete(session, self.body(r[0], r[1], config=config, seed=r[2], stop_at_eos=r[3]))

        async def batch() -> list[dict]:
            async with self.http.session(self.timeout, concurrency) as session:
                return await run_all([functools.partial(one, session, requests[i]) for i in order], concurrency)

        outs = run_http(batch())
        raw: list[dict] = [{}] * len(requests)
        for i, out in zip(order, outs):
            raw[i] = out
        return raw

    async def _complete(self, session, body: dict) -> dict:
        out: dict = {  # the completion as it streams in (a subclass's `_take` may add its own keys)
            "token_ids": [],
            "text": "",
            "chunk_times": [],
            "metrics": None,
            "meta_info": None,
            "finish_reason": None,
            "usage": None,
            "has_token_ids": False,
            "sent": time.perf_counter(),
        }
        path = self.completion_path
        max_tokens = self.max_tokens(body)

        async def opened(response) -> None:
            if response.status_code != 200:
                detail = await self.http.error_body(response, path)
                raise ServerError(f"server {self.url}: {path} answered HTTP {response.status_code}: {detail}")
            kind = response.headers.get("content-type", "")
            if not kind.lower().startswith("text/event-stream"):
                raise ServerError(
                    f"server {self.url}: {path} did not stream (Content-Type "
                    f"'{one_line(kind, 60) or 'none'}', not text/event-stream): it ignored stream=true"
                )

        state = {"chunks": 0, "done": False}

        def line(raw: bytes) -> bool:
            text = raw.decode("utf-8", "replace").strip()
            if not text.startswith("data:"):
                return True  # comments, event names, the blank lines between events
            data = text[5:].strip()
            if data == "[DONE]":
                state["done"] = True
                return False
            state["chunks"] += 1
            try:
                payload = strict_json(data)
            except (ValueError, RecursionError) as exc:
                raise ServerError(
                    f"server {self.url}: stream chunk {state['chunks']} is not JSON ({one_line(str(exc), 80)})"
                ) from None
            if self._take(payload, out, state["chunks"], max_tokens):
                state["done"] = True
                return False
            return True

        async def read() -> None:
            await self.http.stream_lines(
                session, path, body, max_bytes=stream_cap(max_tokens), on_open=opened, on_line=line
            )
            if not state["done"]:
                raise ServerError(
                    f"server {self.url}: the stream of {path} ended without {self.stream_end} "
                    f"after {state['chunks']} chunk(s) (the connection closed mid-stream)"
                )

        await self.http.bounded(read(), path, self.timeout)
        self._check_stream(out, max_tokens)
        return out

    @staticmethod
    def max_tokens(body: dict) -> int:
        """The tokens a request body asks for."""
        return int(body["max_tokens"])

    def _take(self, payload, out: dict, index: int, max_tokens: int) -> bool:
        """Take one parsed chunk into ``out``; True when it closes the stream (here ``[DONE]`` does)."""
        self._take_chunk(server_schema.completion_chunk(payload, self.url, index, max_tokens), out, max_tokens)
        return False

    def _check_stream(self, out: dict, max_tokens: int) -> None:
        """A stream that measured something: tokens arrived, as many as the usage says."""
        n = len(out["token_ids"]) if out["has_token_ids"] else None
        usage = out.get("usage") or {}
        reported = usage.get("completion_tokens")
        if n is not None and reported is not None and reported != n:
            raise ServerError(
                f"server {self.url}: usage.completion_tokens is {reported} but {n} token ids were streamed"
            )
        if not out["chunk_times"]:
            raise ServerError(
                f"server {self.url}: streamed no tokens for a request of max_tokens {max_tokens} "
                f"(finish_reason {out['finish_reason']!r}): nothing to measure"
            )

    def _take_chunk(self, chunk: server_schema.Chunk, out: dict, max_tokens: int) -> None:
        now = time.perf_counter()
        for choice in chunk.choices:
            if choice.token_ids:
                out["has_token_ids"] = True
                out["token_ids"].extend(choice.token_ids)
                if len(out["token_ids"]) > max_tokens:
                    raise ServerError(f"server {self.url}: streamed more than max_tokens {max_tokens} token ids")
            if choice.token_ids or choice.text:
                out["chunk_times"].append(now)
            out["text"] += choice.text
            if choice.finish_reason:
                out["finish_reason"] = choice.finish_reason
            if choice.meta_info is not None:
                out["meta_info"] = choice.meta_info
        if chunk.usage:
            out["usage"] = chunk.usage
        if chunk.metrics:
            out["metrics"] = chunk.metrics
        if chunk.meta_info is not None:
            out["meta_info"] = chunk.meta_info
