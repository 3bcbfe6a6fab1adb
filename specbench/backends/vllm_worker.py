"""The vLLM worker: runs in ``.venv-vllm`` and answers JSON lines on stdin/stdout.

`specbench.backends.vllm.engine` starts it as ``.venv-vllm/bin/python vllm_worker.py``. It
imports nothing of specbench (vLLM pins its own torch and transformers), only the standard
library and, when asked to start an engine, vLLM. One engine per process: the backend starts
a new worker when the speculative configuration changes.

Protocol: one JSON object per line each way, one answer per request.

* ``{"op": "start", "model": DIR, "engine": {LLM kwargs}, "speculative_config": {...} | null,
  "warmup_tokens": 8}`` → ``{"ok": true, "vllm_version": ..., "start_s": ...}``
* ``{"op": "generate", "concurrency": N, "requests": [{"prompt_token_ids", "max_tokens",
  "temperature", "top_p", "top_k", "seed", "ignore_eos", "arrival_s"}]}`` → ``{"ok": true, "outputs": [...],
  "counters_before": {...}, "counters_after": {...}, "wall_s": ...}``; every output has
  ``token_ids``, ``finish_reason``, ``spec`` (vLLM's per-request spec-decode metrics as a dict,
  or null), ``arrival_s`` and ``submit_s`` (seconds after the batch began: when the request
  arrived, when it was added to the engine), ``token_times_s`` (seconds since submission at which
  each delta of tokens arrived) and ``token_counts`` (tokens in each delta). Up to N requests are
  in flight. Closed loop (no ``arrival_s``): the next is added as soon as one finishes, and it
  arrives when it is added. Open loop: a request is added at its ``arrival_s`` (checked after every
  engine step, so up to one step late; the worker sleeps when nothing is in flight), or later
  when N are in flight — that wait counts in its latency.
* ``{"op": "shutdown"}`` → ``{"ok": true}`` and the process exits.

A failure is answered ``{"ok": false, "error": "one line", "kind": "..."}``; the worker keeps
serving after a failed ``generate`` and exits after a failed ``start``.

vLLM logs to stdout, so the protocol uses a private duplicate of the original stdout and
file descriptor 1 is pointed at stderr before vLLM is imported.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import TypedDict


def _without_own_folder(path: list[str]) -> list[str]:
    """``sys.path`` without this script's folder, which Python puts first when it runs a file.

    That folder is ``specbench/backends``: its ``vllm`` package (specbench's backend) would hide
    the real vLLM from ``import vllm``. vLLM's spawned engine core inherits the cleaned path.
    """
    own = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    return [entry for entry in path if os.path.realpath(entry or os.getcwd()) != own]


sys.path[:] = _without_own_folder(sys.path)

SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
)
SPEC_VECTOR = "vllm:spec_decode_num_accepted_tokens_per_pos"
OTHER_COUNTERS = ("vllm:prompt_tokens", "vllm:generation_tokens")


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


class RequestResult(TypedDict):
    """One request's answer in the worker's ``generate`` reply (read by `specbench.backends.vllm.results`)."""

    token_ids: list[int]
    finish_reason: str | None
    spec: dict | None  # vLLM's per-request spec-decode metrics, when it reports them
    token_times_s: list[float]  # after submission, when each output chunk arrived
    token_counts: list[int]  # tokens in each chunk
    submit_s: float | None  # after the batch started, when the request was sent
    arrival_s: float | None  # when it arrived (open loop), else when it was sent


class VLLMEngine:
    """vLLM's offline `LLM`, driven step by step so that N requests stay in flight."""

    def __init__(self, model: str, engine: dict, speculative_config: dict | None):
        import vllm
        from vllm import LLM

        kwargs = dict(engine)
        kwargs["model"] = model
        kwargs.setdefault("disable_log_stats", False)  # get_metrics() needs the stat loggers
        if speculative_config:
            kwargs["speculative_config"] = speculative_config
            kwargs.setdefault("per_request_spec_decode_metrics", "detailed")
        self.version = vllm.__version__
        self.llm = LLM(**kwargs)

    def counters(self) -> dict:
        """Cumulative counters: name -> int, or list of ints for the per-position vector."""
        found: dict = {}
        for metric in self.llm.get_metrics():
            if metric.name in SPEC_COUNTERS or metric.name in OTHER_COUNTERS:
                found[metric.name] = found.get(metric.name, 0) + int(metric.value)
            elif metric.name == SPEC_VECTOR:
                values = [int(v) for v in metric.values]
                old = found.get(SPEC_VECTOR, [0] * len(values))
                found[SPEC_VECTOR] = [a + b for a, b in zip(old, values)]
        return found

    def _params(self, request: dict):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        kwargs = dict(
            max_tokens=int(request["max_tokens"]),
            temperature=float(request.get("temperature", 0.0)),
            ignore_eos=bool(request.get("ignore_eos", False)),
            output_kind=RequestOutputKind.DELTA,
        )
        if float(request.get("top_p", 1.0)) < 1.0:
            kwargs["top_p"] = float(request["top_p"])
        if int(request.get("top_k", 0)) > 0:
            kwargs["top_k"] = int(request["top_k"])
        if request.get("seed") is not None and kwargs["temperature"] > 0:
            kwargs["seed"] = int(request["seed"])
        return SamplingParams(**kwargs)

    def generate(self, requests: list[dict], concurrency: int) -> list[RequestResult]:
        engine = self.llm.llm_engine
        results = [
            RequestResult(
                token_ids=[],
                finish_reason=None,
                spec=None,
                token_times_s=[],
                token_counts=[],
                submit_s=None,
                arrival_s=None,
            )
            for _ in requests
        ]
        arrivals = [r.get("arrival_s") for r in requests]  # None: closed loop
        start = time.perf_counter()
        submitted: dict[str, float] = {}
        waiting = sorted(range(len(requests)), key=lambda i: arrivals[i] or 0.0)
        in_flight = 0

        def submit() -> None:
            nonlocal in_flight
            while waiting and in_flight < max(1, concurrency):
                i = waiting[0]
                if (arrivals[i] or 0.0) > time.perf_counter() - start:
                    return  # open loop: not arrived yet
                waiting.pop(0)
                rid = f"sb-{i}-{start:.6f}"
                submitted[rid] = time.perf_counter()
                submit_s, arrival = submitted[rid] - start, arrivals[i]
                results[i]["submit_s"] = submit_s
                results[i]["arrival_s"] = submit_s if arrival is None else float(arrival)
                engine.add_request(
                    rid, {"prompt_token_ids": list(requests[i]["prompt_token_ids"])}, self._params(requests[i])
                )
                in_flight += 1

        submit()
        while waiting or engine.has_unfinished_requests():
            if not engine.has_unfinished_requests():  # open loop, nothing in flight: wait for the next arrival
                time.sleep(max(0.0, (arrivals[waiting[0]] or 0.0) - (time.perf_counter() - start)))
                submit()
                continue
            for out in engine.step():
                now = time.perf_counter()
                i = int(out.request_id.split("-")[1])
                res = results[i]
                completion = out.outputs[0] if out.outputs else None
                if completion is not None and completion.token_ids:
                    res["token_ids"].extend(int(t) for t in completion.token_ids)
                    res["token_times_s"].append(now - submitted[out.request_id])
                    res["token_counts"].append(len(completion.token_ids))
                if completion is not None and getattr(completion, "spec_decode_metrics", None) is not None:
                    res["spec"] = completion.spec_decode_metrics.to_dict()
                if out.finished:
                    res["finish_reason"] = completion.finish_reason if completion is not None else None
                    in_flight -= 1
            submit()
        return results


class Worker:
    """The request/response handling, separate from the pipe so tests can drive it with a fake engine."""

    def __init__(self, engine_factory=None):
        self.engine_factory = engine_factory or VLLMEngine
        self.engine = None
        self.done = False

    def handle(self, message: dict) -> dict:
        op = message.get("op") if isinstance(message, dict) else None
        try:
            if op == "start":
                return self._start(message)
            if op == "generate":
                return self._generate(message)
            if op == "shutdown":
                self.done = True
                return {"ok": True, "op": "shutdown"}
            return {"ok": False, "kind": "protocol", "error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - every failure becomes one answer line
            if op == "start":
                self.done = True
            return {"ok": False, "kind": "start" if op == "start" else "generate", "error": one_line(exc)}

    def _start(self, message: dict) -> dict:
        if self.engine is not None:
            return {"ok": False, "kind": "protocol", "error": "engine already started (one per worker)"}
        began = time.perf_counter()
        self.engine = self.engine_factory(
            message["model"], message.get("engine") or {}, message.get("speculative_config")
        )
        warmup = int(message.get("warmup_tokens", 0))
        if warmup:  # untimed: the first steps allocate and (on GPU) capture graphs
            self.engine.generate([{"prompt_token_ids": [1, 2, 3, 4], "max_tokens": warmup, "ignore_eos": True}], 1)
        return {
            "ok": True,
            "op": "start",
            "vllm_version": getattr(self.engine, "version", None),
            "start_s": time.perf_counter() - began,
        }

    def _generate(self, message: dict) -> dict:
        if self.engine is None:
            return {"ok": False, "kind": "protocol", "error": "generate before start"}
        requests = message.get("requests") or []
        before = self.engine.counters()
        began = time.perf_counter()
        outputs = self.engine.generate(requests, int(message.get("concurrency", 1)))
        wall = time.perf_counter() - began
        return {
            "ok": True,
            "op": "generate",
            "outputs": outputs,
            "counters_before": before,
            "counters_after": self.engine.counters(),
            "wall_s": wall,
        }

    def serve(self, reader, writer) -> None:
        for line in reader:
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                answer = {"ok": False, "kind": "protocol", "error": f"not JSON: {exc}"}
            else:
                answer = self.handle(message)
            writer.write(json.dumps(answer) + "\n")
            writer.flush()
            if self.done:
                return


def _engine_factory():
    """vLLM's engine, or a stand-in named by SPECBENCH_VLLM_WORKER_ENGINE=module:callable (tests)."""
    name = os.environ.get("SPECBENCH_VLLM_WORKER_ENGINE")
    if not name:
        return VLLMEngine
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # vLLM (and its engine-core children) log to stdout: send that to stderr
    sys.stdout = sys.stderr
    Worker(_engine_factory()).serve(sys.stdin, protocol)
    protocol.close()
    return 0


if __name__ == "__main__":  # vLLM spawns its engine core: the guard keeps the child from re-running main
    sys.exit(main())
