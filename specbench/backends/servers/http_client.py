"""The HTTP client of the server backends: total deadlines, capped bodies, cancellation.

Every request specbench sends to a serving engine (``/v1/completions``, ``/v1/models``,
``/metrics``, ``/health``, ``/server_info``) goes through `HttpClient`, built on httpx2's
AsyncClient (the HTTP library huggingface_hub already installs) and asyncio:

* **Total deadline.** Each request — connect, headers and the whole body — runs under
  ``asyncio.wait_for`` with its deadline (a completion: the backend's ``timeout_s``; a probe:
  `PROBE_S`). A per-socket timeout alone would let a server that drips a byte a second hold a
  request forever; the deadline cancels it, whatever the server does.
* **Capped bodies.** Bodies are read in pieces and counted: a JSON answer may hold
  `MAX_JSON_BYTES`, a ``/metrics`` page `MAX_METRICS_BYTES`, one streamed line `MAX_LINE_BYTES`
  and a whole stream `stream_cap(max_tokens)`. A declared Content-Length over the cap is refused
  before reading; an endless body is cut at the cap. Compressed bodies are refused (specbench
  asks for ``identity``; a gzip bomb would inflate past any cap in one piece). Header size is
  bounded by h11 (16 KiB).
* **One line per failure.** Every transport failure is a `ServerError` (a `SpecbenchError`:
  exit 2) naming the server and what went wrong: cannot connect, not HTTP (raw bytes), reset
  mid-stream, deadline passed, body over its cap, an HTTP error status.
* **Cancellation.** A batch of requests runs as asyncio tasks in one event loop
  (`run_all`, at most N in flight). Ctrl-C cancels the loop's main task and SIGTERM's
  exception unwinds it; either way every task is cancelled and its socket closed before the
  loop ends, so the command exits within a second or two even with hung requests (no thread
  is left waiting on a socket: there are none).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx2

from specbench.errors import SpecbenchError

MiB = 2**20
PROBE_S = 10.0  # deadline of a probe (/v1/models, /server_info)
METRICS_S = 30.0  # deadline of a /metrics scrape
HEALTH_S = 2.0  # deadline of one /health poll
CONNECT_S = 10.0  # connecting alone (inside the deadline)
MAX_JSON_BYTES = 1 * MiB  # a JSON answer (/v1/models, /server_info, an error body)
MAX_METRICS_BYTES = 16 * MiB  # a Prometheus page (vLLM's is ~100 KiB)
MAX_LINE_BYTES = 4 * MiB  # one streamed line (the last chunk carries per-step lists of every token)
STREAM_BASE_BYTES = 16 * MiB  # a whole stream: this, plus `STREAM_BYTES_PER_TOKEN` per token asked
STREAM_BYTES_PER_TOKEN = 4096  # a chunk per token is ~200 bytes in vLLM: a 20× margin


class ServerError(SpecbenchError):
    """A server failed or answered what specbench cannot use; the message is one line naming it."""


def stream_cap(max_tokens: int) -> int:
    """Bytes a streamed completion of ``max_tokens`` may take in all."""
    return STREAM_BASE_BYTES + STREAM_BYTES_PER_TOKEN * max(int(max_tokens), 0)


def one_line(text: object, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Answer:
    """A whole (capped) HTTP answer."""

    status: int
    content_type: str
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self, what: str, server: str):
        try:
            return strict_json(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ServerError(f"server {server}: {what} is not valid JSON ({one_line(exc, 80)})") from None


def strict_json(text: str):
    """JSON as the standard defines it: NaN and Infinity are refused (Python's json accepts them)."""
    return json.loads(text, parse_constant=_no_constant)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


class HttpClient:
    """Requests to one server (``base_url``, e.g. ``http://127.0.0.1:8000``) with fixed headers.

    ``on_failure``: called before a transport failure becomes a `ServerError`; it may raise a
    better one (a server process that died says so, with its log).
    """

    def __init__(self, base_url: str, headers: dict | None = None, on_failure: Callable[[], None] | None = None):
        self.base_url = base_url.rstrip("/")
        self.headers = {"Accept-Encoding": "identity", **(headers or {})}
        self.on_failure = on_failure

    # ------------------------------------------------------------------ sessions and running
    def session(self, deadline_s: float, connections: int = 1) -> httpx2.AsyncClient:
        """An AsyncClient for one event loop (create it inside `run`)."""
        timeout = httpx2.Timeout(deadline_s, connect=min(CONNECT_S, deadline_s))
        limits = httpx2.Limits(max_connections=max(1, connections), max_keepalive_connections=max(1, connections))
        return httpx2.AsyncClient(timeout=timeout, limits=limits, headers=self.headers, follow_redirects=False)

    def get(self, path: str, *, deadline_s: float = PROBE_S, max_bytes: int = MAX_JSON_BYTES) -> Answer:
        """A whole GET answer (any status), under its deadline and cap."""

        async def one() -> Answer:
            async with self.session(deadline_s) as session:
                return await self.aget(session, path, deadline_s=deadline_s, max_bytes=max_bytes)

        return run(one())

    async def aget(self, session: httpx2.AsyncClient, path: str, *, deadline_s: float, max_bytes: int) -> Answer:
        async def fetch() -> Answer:
            async with session.stream("GET", self.base_url + path) as response:
                body = bytearray()
                await self._read(response, path, max_bytes, body.extend)
                return Answer(response.status_code, response.headers.get("content-type", ""), bytes(body))

        return await self.bounded(fetch(), path, deadline_s)

    async def bounded(self, work: Awaitable, path: str, deadline_s: float):
        """``work`` under the total deadline, every transport failure as one `ServerError` line."""
        try:
            return await asyncio.wait_for(work, deadline_s)
        except ServerError:
            raise
        except (asyncio.TimeoutError, httpx2.TimeoutException):
            self._failed()
            raise ServerError(
                f"server {self.base_url}: {path} gave no complete answer within {deadline_s:g} s "
                "(deadline; raise timeout_s if the server is only slow)"
            ) from None
        except httpx2.ConnectError as exc:
            self._failed()
            raise ServerError(f"cannot reach the server at {self.base_url}: {_reason(exc)}") from None
        except httpx2.RemoteProtocolError as exc:
            self._failed()
            raise ServerError(f"server {self.base_url}: {path} did not answer valid HTTP ({_reason(exc)})") from None
        except (httpx2.ReadError, httpx2.WriteError, httpx2.CloseError) as exc:
            self._failed()
            raise ServerError(f"server {self.base_url}: the connection broke during {path} ({_reason(exc)})") from None
        except (httpx2.HTTPError, httpx2.InvalidURL, httpx2.StreamError, OSError) as exc:
            self._failed()
            raise ServerError(f"server {self.base_url}: {path} failed ({type(exc).__name__}: {_reason(exc)})") from None

    def _failed(self) -> None:
        if self.on_failure is not None:
            self.on_failure()

    # ------------------------------------------------------------------ bodies
    async def _read(
        self, response: httpx2.Response, path: str, max_bytes: int, take: Callable[[bytes], object]
    ) -> None:
        """Hand the raw body to ``take`` piece by piece (it returns False to stop early); refused when
        compressed or over ``max_bytes``."""
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise ServerError(
                f"server {self.base_url}: {path} came with Content-Encoding {one_line(encoding, 40)}, "
                "but specbench asked for an uncompressed body"
            )
        declared = response.headers.get("content-length", "").strip()
        if declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
            raise ServerError(
                f"server {self.base_url}: {path} declares {int(declared):,} bytes, over the {max_bytes:,}-byte cap"
            )
        total = 0
        async for piece in response.aiter_raw():
            total += len(piece)
            if total > max_bytes:
                raise ServerError(
                    f"server {self.base_url}: {path} sent more than {max_bytes:,} bytes (cap of its "
                    "body); an endless body is cut here"
                )
            if take(piece) is False:
                return

    async def stream_lines(
        self,
        session: httpx2.AsyncClient,
        path: str,
        payload: dict,
        *,
        max_bytes: int,
        on_open: Callable[[httpx2.Response], Awaitable[None]],
        on_line: Callable[[bytes], bool],
    ) -> None:
        """POST ``payload`` as JSON and hand the answer's lines (without line ends) to ``on_line``, which
        returns False to stop; each line at most `MAX_LINE_BYTES`, all together at most ``max_bytes``.
        ``on_open(response)`` sees the status and headers first (and may raise). Call it inside
        `bounded`: the deadline covers the whole stream."""
        data = json.dumps(payload).encode()
        buffer = bytearray()

        def take(piece: bytes) -> bool:
            buffer.extend(piece)
            if b"\n" in piece:
                *lines, rest = bytes(buffer).split(b"\n")
                buffer[:] = rest
                for line in lines:
                    if on_line(line.rstrip(b"\r")) is False:
                        return False
            if len(buffer) > MAX_LINE_BYTES:
                raise ServerError(f"server {self.base_url}: {path} sent a line over {MAX_LINE_BYTES:,} bytes")
            return True

        async with session.stream(
            "POST", self.base_url + path, content=data, headers={"Content-Type": "application/json"}
        ) as response:
            await on_open(response)
            await self._read(response, path, max_bytes, take)
            if buffer:
                on_line(bytes(buffer).rstrip(b"\r"))

    async def error_body(self, response: httpx2.Response, path: str) -> str:
        """The (capped) body of an error answer, on one line."""
        body = bytearray()
        try:
            await self._read(response, path, MAX_JSON_BYTES, body.extend)
        except ServerError:
            return "(body over its cap)"
        return one_line(body.decode("utf-8", "replace"), 300)


def _reason(exc: BaseException) -> str:
    text = one_line(str(exc), 160)
    return text or type(exc).__name__


def run(work: Awaitable):
    """Run ``work`` in a new event loop; Ctrl-C or SIGTERM cancels it (tasks and sockets closed) and
    propagates as KeyboardInterrupt (or the SIGTERM exception)."""
    return asyncio.run(_main(work))


async def _main(work: Awaitable):
    return await work


async def run_all(jobs: list[Callable[[], Awaitable]], concurrency: int) -> list:
    """Every job's result in order, with at most ``concurrency`` running at once; the first failure
    cancels the rest (and is raised), as does a cancellation from outside."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def gated(job):
        async with gate:
            return await job()

    tasks = [asyncio.ensure_future(gated(job)) for job in jobs]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            error = task.exception()
            if error is not None:
                raise error
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
