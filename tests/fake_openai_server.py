"""A fake OpenAI-compatible speculative-decoding server for tests (stdlib only), well-behaved or hostile.

Serves ``/health``, ``/v1/models``, ``/metrics`` (vLLM-style ``vllm:spec_decode_*`` counters)
and streamed ``POST /v1/completions`` whose last chunk carries vLLM's per-request ``metrics``
block. Every request "drafts" ``k`` tokens per step and accepts a fixed cycle of counts, so
the expected rounds are known. It records the largest number of requests in flight; with
``hold`` > 1 a request waits (up to 2 s) until that many are in flight, so a client that keeps
N requests in flight makes the maximum exactly N.

**Hostile behaviours** (``hostile={PATH: BEHAVIOUR}``, one per path; the hostile-server fixture
of the server backends' tests and of the fuzz tests): ``raw-bytes`` (bytes that are not HTTP),
``wrong-json`` (a 200 whose body or stream chunk is not JSON), ``bad-chunk`` (valid JSON of the
wrong shape: ``{"choices": [1]}``, a model list ``{"data": [1]}``), ``no-stream`` (a plain JSON
completion, stream=true ignored), ``drip`` (a valid answer, one byte every ``drip_s``),
``endless`` (a 200 whose body never ends), ``hang`` (accepts, never answers), ``reset`` (a
few valid chunks, then a TCP reset). ``script={PATH: bytes}`` answers those bytes verbatim
(status line and headers included, or not) and closes: the fuzz tests' generated garbage.
It listens on 127.0.0.1 only, and every answer ends within ``max_s`` seconds (default 20) or
when the server stops, whichever is first: no test can hang on it.

Run as a script it stands in for ``python -m vllm.entrypoints.openai.api_server``: it takes
``--port`` (and ignores every other vLLM flag), can ignore SIGTERM for a while
(``FAKE_IGNORE_TERM_S``), spawn a child process in its group (``FAKE_SPAWN_CHILD=1``), write
its pid and its child's pid to ``FAKE_PID_FILE``, exit after a while (``FAKE_EXIT_AFTER_S``)
and play a hostile behaviour on completions (``FAKE_HOSTILE=hang``; each such request is noted
as a line of ``FAKE_SEEN_FILE``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ACCEPT_CYCLE = [2, 0, 1, 2, 2, 1]
HOSTILE = ("raw-bytes", "wrong-json", "bad-chunk", "no-stream", "drip", "endless", "hang", "reset")
RAW_GARBAGE = b"\x16\x03\x01\x02\x00garbage, not HTTP\r\n\x00\xff\xfe\r\n\r\n"


def steps_for(n_tokens: int, k: int) -> list[int]:
    """Accepted counts per verify step for a request generating ``n_tokens`` (first from prefill)."""
    accepted, left, i = [], n_tokens - 1, 0
    while left > 0:
        a = min(ACCEPT_CYCLE[i % len(ACCEPT_CYCLE)], k)
        accepted.append(a)
        left -= a + 1
        i += 1
    return accepted


class FakeState:
    def __init__(
        self,
        *,
        spec: bool = True,
        per_request: bool = True,
        k: int = 2,
        hold: int = 1,
        token_ids: bool = True,
        delay_s: float = 0.01,
        hostile: dict | None = None,
        script: dict | None = None,
        drip_s: float = 0.2,
        max_s: float = 20.0,
        dialect: str = "openai",
        held_back: tuple[int, ...] = (),
        miscount: int = 0,
    ):
        self.spec, self.per_request, self.k, self.hold = spec, per_request, k, hold
        self.dialect = dialect  # "openai" (vLLM-style) or "llamacpp" (llama-server's own /completions, /metrics)
        self.held_back = set(held_back)  # llamacpp: token positions (1-based) sent without a chunk of their own
        self.miscount = miscount  # llamacpp: draft tokens per request the counters add beyond its own (a bad server)
        self.token_ids, self.delay_s = token_ids, delay_s
        for path, behaviour in (hostile or {}).items():
            assert behaviour in HOSTILE, f"unknown hostile behaviour {behaviour!r} for {path}"
        self.hostile, self.script = dict(hostile or {}), dict(script or {})
        self.drip_s, self.max_s = drip_s, max_s
        self.stop = threading.Event()  # set when the server stops: every hostile answer ends then
        self.hostile_seen = 0  # requests answered with a hostile behaviour so far
        self.lock = threading.Condition()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0
        self.drafts = self.draft_tokens = self.accepted = 0
        self.per_pos = [0] * k
        self.bodies: list[dict] = []

    def metrics_text(self) -> str:
        if self.dialect == "llamacpp":
            return self.llamacpp_metrics()
        lines = [
            "# HELP vllm:num_requests_running Running requests.",
            "# TYPE vllm:num_requests_running gauge",
            f'vllm:num_requests_running{{engine="0",model_name="fake"}} {self.in_flight}.0',
        ]
        if self.spec:
            for name, value in (
                ("num_drafts", self.drafts),
                ("num_draft_tokens", self.draft_tokens),
                ("num_accepted_tokens", self.accepted),
            ):
                lines += [
                    f"# TYPE vllm:spec_decode_{name} counter",
                    f'vllm:spec_decode_{name}_total{{engine="0",model_name="fake"}} {value}.0',
                    f'vllm:spec_decode_{name}_created{{engine="0",model_name="fake"}} 1.7e9',
                ]
            lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
            for i, value in enumerate(self.per_pos):
                lines.append(
                    f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="fake",'
                    f'position="{i}"}} {value}.0'
                )
        return "\n".join(lines) + "\n"

    def llamacpp_metrics(self) -> str:
        """llama-server's page (tools/server/server-task.cpp ``to_metrics``): ``llamacpp:`` counters, the
        per-position series only once a position was counted."""
        lines = []
        for name, value in (
            ("spec_decode_num_draft_tokens_total", self.draft_tokens + self.miscount * self.requests),
            ("spec_decode_num_accepted_tokens_total", self.accepted),
            ("spec_decode_num_drafts_total", self.drafts),
            ("n_decode_total", self.requests),
        ):
            lines += [
                f"# HELP llamacpp:{name} a counter",
                f"# TYPE llamacpp:{name} counter",
                f"llamacpp:{name} {value}",
            ]
        lines += ["# TYPE llamacpp:requests_processing gauge", f"llamacpp:requests_processing {self.in_flight}"]
        if self.spec and any(self.per_pos):
            lines.append("# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter")
            lines += [
                f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}'
                for i, v in enumerate(self.per_pos)
            ]
        return "\n".join(lines) + "\n"


def llamacpp_events(state: FakeState, body: dict):
    """llama-server's native stream for a ``/completions`` request: one chunk per token with its id and the
    running totals (``timings_per_token``), none for a held-back position, a closing chunk (stop: true) without
    a token; every round drafts k tokens (the last ones fewer, as llama.cpp cuts a draft at the remaining budget)
    and accepts the fixed cycle. Returns (events, the closing event, accepted per round, drafted per round)."""
    prompt = body.get("prompt", [])
    n = int(body.get("n_predict", 1))
    base = sum(prompt) if isinstance(prompt, list) else len(prompt)
    tokens = [(base + i) % 200 + 10 for i in range(n)]
    accepted, drafted = [], []
    left, i = n - 1, 0
    while state.spec and left > 0:
        d = min(state.k, left - 1)
        if d <= 0:
            break
        a = min(ACCEPT_CYCLE[i % len(ACCEPT_CYCLE)], d)
        accepted.append(a)
        drafted.append(d)
        left -= a + 1
        i += 1

    def event(payload: dict) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()

    def timings(done: int, d: int, a: int) -> dict:
        out = {"prompt_n": len(prompt), "prompt_ms": 4.0, "predicted_n": done, "predicted_ms": 2.0 * done, "cache_n": 0}
        if d:
            out.update(draft_n=d, draft_n_accepted=a)
        return out

    events, done, d_total, a_total = [], 0, 0, 0
    sizes = [a + 1 for a in accepted] + [1] * (n - 1 - sum(a + 1 for a in accepted))
    steps = [(0, 0, 1)] + [
        (drafted[j] if j < len(drafted) else 0, accepted[j] if j < len(accepted) else 0, size)
        for j, size in enumerate(sizes)
    ]
    for d, a, size in steps:
        d_total, a_total = d_total + d, a_total + a
        for _ in range(size):
            done += 1
            if done in state.held_back:
                continue
            chunk = {
                "index": 0,
                "content": f"<{tokens[done - 1]}>",
                "tokens": [tokens[done - 1]],
                "stop": False,
                "id_slot": 0,
                "tokens_predicted": done,
                "tokens_evaluated": len(prompt),
            }
            if body.get("timings_per_token"):
                chunk["timings"] = timings(done, d_total, a_total)
            events.append((event(chunk), state.delay_s / 4))
    final = {
        "index": 0,
        "content": "",
        "tokens": [],
        "stop": True,
        "stop_type": "limit",
        "tokens_predicted": n,
        "tokens_evaluated": len(prompt),
        "timings": timings(n, d_total, a_total),
    }
    return events, event(final), accepted, drafted, tokens


def completion_events(state: FakeState, body: dict):
    """The streamed answer to a completion request: (bytes of one SSE event, seconds to wait before it),
    and the counters it adds (applied by the caller once the last token is out)."""
    prompt = body.get("prompt", [])
    n = int(body.get("max_tokens", 1))
    base = sum(prompt) if isinstance(prompt, list) else len(prompt)
    tokens = [(base + i) % 200 + 10 for i in range(n)]
    accepted = steps_for(n, state.k) if state.spec else []

    def event(payload: dict) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()

    def piece(ids, finish=None) -> bytes:
        choice = {"index": 0, "text": "".join(f"<{t}>" for t in ids), "finish_reason": finish}
        if state.token_ids and body.get("return_token_ids"):
            choice["token_ids"] = ids
        return event({"id": "cmpl-1", "object": "text_completion", "choices": [choice]})

    events = [(piece(tokens[:1]), state.delay_s)]
    pos = 1
    for size in [a + 1 for a in accepted] if accepted else [1] * (n - 1):
        ids = tokens[pos : pos + size]
        pos += len(ids)
        events.append((piece(ids, "length" if pos >= n else None), state.delay_s / 4))
    final = {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [],
        "usage": {"prompt_tokens": len(prompt), "completion_tokens": n, "total_tokens": len(prompt) + n},
    }
    if state.per_request:
        final["metrics"] = {
            "time_to_first_token_ms": 5.0,
            "generation_time_ms": 20.0,
            "queue_time_ms": 1.0,
            "mean_itl_ms": 1.0,
            "tokens_per_second": 100.0,
        }
        if state.spec:
            final["metrics"]["speculative_decoding"] = {
                "num_spec_tokens": state.k,
                "per_step_accepted": accepted,
                "per_step_drafted": [state.k] * len(accepted),
                "num_spec_steps": len(accepted),
            }
    return events, event(final), accepted


def make_handler(state: FakeState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def finish(self):
            try:
                super().finish()
            except (OSError, ValueError):  # a reset connection
                pass

        def _send(self, code: int, body: str, kind: str = "application/json") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        # ------------------------------------------------------------ hostile answers
        def _until(self) -> float:
            return time.monotonic() + state.max_s

        def _alive(self, until: float) -> bool:
            return not state.stop.is_set() and time.monotonic() < until

        def _headers(self, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()

        def _hostile(self, path: str, body: dict | None) -> bool:
            """Play this path's hostile behaviour or script; False when it has none."""
            if path in state.script:
                self.wfile.write(state.script[path])
                self.wfile.flush()
                self.close_connection = True
                return True
            behaviour = state.hostile.get(path)
            if behaviour is None:
                return False
            with state.lock:
                state.hostile_seen += 1  # tests wait for this: a request is in flight
                if os.environ.get("FAKE_SEEN_FILE"):  # the same, for a test in another process
                    with open(os.environ["FAKE_SEEN_FILE"], "a") as seen:
                        seen.write(f"{path}\n")
            self.close_connection = True
            stream = path in ("/v1/completions", "/completions")
            kind = "text/event-stream" if stream else ("text/plain" if path == "/metrics" else "application/json")
            until = self._until()
            try:
                if behaviour == "raw-bytes":
                    self.wfile.write(RAW_GARBAGE)
                elif behaviour == "hang":
                    while self._alive(until):
                        time.sleep(0.05)
                elif behaviour in ("wrong-json", "bad-chunk"):
                    payload = (
                        "{not json"
                        if behaviour == "wrong-json"
                        else (json.dumps({"choices": [1]}) if stream else json.dumps({"data": [1]}))
                    )
                    self._headers(kind)
                    self.wfile.write((f"data: {payload}\n\n" if stream else payload).encode())
                elif behaviour == "no-stream":
                    self._send(
                        200,
                        json.dumps(
                            {
                                "id": "cmpl-1",
                                "object": "text_completion",
                                "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                                "usage": {"prompt_tokens": 3, "completion_tokens": 0},
                            }
                        ),
                    )
                elif behaviour == "endless":
                    self._headers(kind)
                    filler = (
                        b'data: {"choices": [{"text": "a", "token_ids": [11]}]}\n\n' if stream else b"[" + b"0," * 32767
                    )
                    while self._alive(until):
                        self.wfile.write(filler)
                elif behaviour == "drip":
                    answer = self._answer_bytes(path, body)
                    self._headers(kind)
                    for i in range(len(answer)):
                        if not self._alive(until):
                            break
                        self.wfile.write(answer[i : i + 1])
                        self.wfile.flush()
                        time.sleep(state.drip_s)
                elif behaviour == "reset":
                    events = (
                        llamacpp_events(state, body or {"n_predict": 8})
                        if path == "/completions"
                        else completion_events(state, body or {"max_tokens": 8})
                    )[0]
                    self._headers(kind)
                    for data, _ in events[:2]:
                        self.wfile.write(data)
                    self.wfile.flush()
                    time.sleep(0.05)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()  # with linger 0: a TCP reset, mid-stream
                self.wfile.flush()
            except (OSError, ValueError):  # the client gave up (its deadline or cap): fine
                pass
            return True

        def _answer_bytes(self, path: str, body: dict | None) -> bytes:
            """The well-behaved answer body of ``path`` (what the drip sends a byte at a time)."""
            if path == "/v1/completions":
                events, final, _ = completion_events(state, body or {"max_tokens": 8})
                return b"".join(data for data, _ in events) + final + b"data: [DONE]\n\n"
            if path == "/v1/models":
                return json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
            with state.lock:
                return state.metrics_text().encode()

        # ------------------------------------------------------------ well-behaved answers
        def do_GET(self):
            path = self.path.split("?")[0]
            if self._hostile(path, None):
                return
            if path == "/health":
                self._send(200, "")
            elif path == "/props" and state.dialect == "llamacpp":
                self._send(
                    200,
                    json.dumps(
                        {
                            "build_info": "b0-fake",
                            "total_slots": state.hold,
                            "model_path": "fake",
                            "model_ftype": "Q4_1",
                            "default_generation_settings": {
                                "n_ctx": 4096,
                                "params": {"speculative.types": "draft-simple" if state.spec else "none"},
                            },
                        }
                    ),
                )
            elif path in ("/v1/models", "/metrics"):
                kind = "application/json" if path == "/v1/models" else "text/plain; version=0.0.4"
                self._send(200, self._answer_bytes(path, None).decode(), kind)
            else:
                self._send(404, json.dumps({"error": "not found"}))

        def do_POST(self):
            if self.path != ("/completions" if state.dialect == "llamacpp" else "/v1/completions"):
                self._send(404, json.dumps({"error": "not found"}))
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self._hostile(self.path, body):
                return
            with state.lock:
                state.bodies.append(body)
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
                state.lock.notify_all()
                state.lock.wait_for(lambda: state.in_flight >= state.hold, timeout=2.0)
            finished = []

            def finish() -> None:  # before the last bytes go out: the client may send its next request at once
                if not finished:
                    finished.append(True)
                    with state.lock:
                        state.in_flight -= 1
                        state.requests += 1

            try:
                self._complete(body, finish)
            finally:
                finish()

        def _complete(self, body: dict, finish) -> None:
            if state.dialect == "llamacpp":
                self._complete_llamacpp(body, finish)
                return
            events, final, accepted = completion_events(state, body)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for data, wait in events:
                time.sleep(wait)
                self.wfile.write(data)
                self.wfile.flush()
            with state.lock:
                state.drafts += len(accepted)
                state.draft_tokens += state.k * len(accepted)
                state.accepted += sum(accepted)
                for a in accepted:
                    for i in range(a):
                        state.per_pos[i] += 1
            finish()
            self.wfile.write(final)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _complete_llamacpp(self, body: dict, finish) -> None:
            events, final, accepted, drafted, tokens = llamacpp_events(state, body)
            if not body.get("stream"):
                self._count(accepted, drafted)
                finish()
                self._send(
                    200,
                    json.dumps(
                        {
                            "content": "",
                            "tokens": tokens,
                            "stop": True,
                            "tokens_predicted": len(tokens),
                            "timings": {"predicted_n": len(tokens)},
                        }
                    ),
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for data, wait in events:
                time.sleep(wait)
                self.wfile.write(data)
                self.wfile.flush()
            self._count(accepted, drafted)
            finish()
            self.wfile.write(final)
            self.wfile.flush()

        def _count(self, accepted: list[int], drafted: list[int]) -> None:
            with state.lock:
                state.drafts += len(accepted)
                state.draft_tokens += sum(drafted)
                state.accepted += sum(accepted)
                for a in accepted:
                    for i in range(a):
                        state.per_pos[i] += 1

    return Handler


class FakeServer:
    """The fake server in a thread on 127.0.0.1 (port 0: a free port)."""

    def __init__(self, port: int = 0, **state_options):
        self.state = FakeState(**state_options)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(self.state))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.state.stop.set()  # hostile answers in progress end now
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: list[str]) -> None:
    port = int(argv[argv.index("--port") + 1])
    ignore_s = float(os.environ.get("FAKE_IGNORE_TERM_S", "0"))
    if ignore_s > 0:
        until = time.monotonic() + ignore_s

        def on_term(signum, frame):
            left = until - time.monotonic()
            if left > 0:
                time.sleep(left)  # hold on for a while, as a busy engine does
            os._exit(0)

        signal.signal(signal.SIGTERM, on_term)
    child = None
    if os.environ.get("FAKE_SPAWN_CHILD"):
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)",
            ]
        )
    if os.environ.get("FAKE_PID_FILE"):
        with open(os.environ["FAKE_PID_FILE"], "w") as f:
            json.dump({"pid": os.getpid(), "child": child.pid if child else None}, f)
    if os.environ.get("FAKE_EXIT_AFTER_S"):
        threading.Timer(float(os.environ["FAKE_EXIT_AFTER_S"]), lambda: os._exit(3)).start()
    if "--metrics" in argv:  # launched as llama-server: its speculation flags, its dialect
        spec = "--spec-type" in argv
        gamma_flag = next(
            (
                a
                for a in argv
                if a in ("--spec-draft-n-max", "--spec-ngram-mod-n-max")
                or (a.startswith("--spec-ngram-") and a.endswith("-size-m"))
            ),
            None,
        )
        k = int(argv[argv.index(gamma_flag) + 1]) if gamma_flag else 2
        dialect, path = "llamacpp", "/completions"
    else:
        spec = "--speculative-config" in argv
        k = json.loads(argv[argv.index("--speculative-config") + 1])["num_speculative_tokens"] if spec else 2
        dialect, path = "openai", "/v1/completions"
    hostile = {path: os.environ["FAKE_HOSTILE"]} if os.environ.get("FAKE_HOSTILE") else None
    server = FakeServer(port, spec=spec, k=k, hostile=hostile, max_s=600.0, dialect=dialect)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
