"""vLLM as a sweep backend (``backend: vllm``): vLLM's offline engine in a worker process.

vLLM pins its own torch and transformers, so it lives in ``.venv-vllm`` (``make install-vllm``)
and runs in `specbench.backends.vllm_worker`, which this module starts with that environment's
python and talks to over JSON lines on a pipe. specbench's environment never imports vLLM.

One engine per `speculative_config`, in a worker of its own. Up to ``engines_kept`` workers stay
alive (default 1): when a configuration needs an engine that is not running, the least recently
used one is stopped (the target-only engine, which every look of an adaptive sweep needs first,
is kept while another can go) and a new one started. The runner orders units so that this
happens once per configuration in a fixed grid, and runs the engines still alive first in each
look of an adaptive sweep (`specbench.measure.serving.groups`); ``engine_starts`` counts the starts. Requests of a (configuration, concurrency) group go to the worker together,
and the worker keeps ``concurrency`` of them in flight. Results are mapped onto specbench's
`GenerationResult` by `specbench.backends.vllm.results`; per-request acceptance is checked
against vLLM's aggregate ``vllm:spec_decode_*`` counters after every batch.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.backends.base import (
    GenerationResult,
    Request,
    RoundCallback,
    ServingBackend,
    StatusCallback,
    TimingScope,
    cpu_engine_cores,
)
from specbench.backends.kept_engines import make_room
from specbench.backends.vllm.config import (
    check_options,
    engine_kwargs,
    speculative_config,
    worker_env,
)
from specbench.backends.vllm.env import vllm_python
from specbench.backends.vllm.results import check_counters, result_from_output
from specbench.catalogue import drafters as catalogue
from specbench.engine.device import cpu_name
from specbench.errors import SpecbenchError
from specbench.models.resolve import model_folder
from specbench.safe_files import open_appending

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

WORKER = Path(__file__).parents[1] / "vllm_worker.py"
STOP_WAIT_S = 20.0


def _draft_steps(config) -> int:
    """Drafter forwards per round inside vLLM: the catalogue's (γ for autoregressive drafters, 0 for
    n-gram, 1 for Medusa)."""
    if config.drafter is None:
        return 0
    return catalogue.get(config.drafter.type).forwards_per_round(int(config.gamma))


class WorkerProcess:
    """One worker: a child process in its own session, so that it and vLLM's engine core stop together."""

    def __init__(self, python: Path, env: dict, log_path: Path):
        self.log_path = log_path
        self._log = open_appending(log_path)  # never through a symlink (`specbench.safe_files`)
        self.proc = proc = subprocess.Popen(
            [str(python), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, **env},
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes (PIPE above)
        self.stdin, self.stdout = proc.stdin, proc.stdout

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        useful = [t for t in text if t.strip()][-lines:]
        return " | ".join(t.strip()[:200] for t in useful)

    def ask(self, message: dict) -> dict:
        """Send one request, wait for its answer; a dead worker is a one-line error."""
        try:
            self.stdin.write(json.dumps(message) + "\n")
            self.stdin.flush()
            line = self.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = self.proc.wait(timeout=30) if self.proc.poll() is None else self.proc.returncode
            tail = self.log_tail()
            raise SpecbenchError(
                f"the vLLM worker stopped (exit {code}) during '{message.get('op')}'"
                f"{': ' + tail if tail else ''} (log: {self.log_path})"
            )
        try:
            return json.loads(line)
        except ValueError:
            raise SpecbenchError(f"the vLLM worker answered something that is not JSON: {line[:120]!r}") from None

    def stop(self) -> None:
        """Ask politely, then SIGTERM and SIGKILL the whole process group: no orphaned engine core."""
        if self.proc.poll() is None:
            try:
                self.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
                self.stdin.flush()
                self.proc.wait(timeout=STOP_WAIT_S)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                continue
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
        self._log.close()


class VLLMBackend(ServingBackend):
    """vLLM's offline engine (``backend: vllm``), one worker per speculative configuration."""

    name = "vllm"

    def __init__(self, options: dict, *, target: str, device: str, dtype: str, seed: int):
        self.options = check_options(dict(options or {}))
        self.target_spec, self.device, self.dtype, self.seed = target, device, dtype, seed
        self.python = vllm_python(venv=self.options.get("venv"), python=self.options.get("python"))  # fails now
        self.device_name = ""
        self.tokenizer: PreTrainedTokenizerBase | None = None  # loaded by `start`
        self.vllm_version: str | None = None
        self._status: StatusCallback = lambda message: None
        self._folder: str | None = None
        self._workers: OrderedDict[str, WorkerProcess] = OrderedDict()  # speculative_config JSON -> its engine
        self._worker: WorkerProcess | None = None  # the one serving the current configuration
        self.engines_kept = int(self.options.get("engines_kept", 1))
        self.engine_starts = 0
        self._folders: dict[str, str] = {}
        self.ran_configs: dict[str, dict | None] = {}  # RunConfig label -> the speculative_config that ran
        self.counter_problems: list[str] = []
        self.log_dir = Path(tempfile.mkdtemp(prefix="specbench-vllm-"))
        self._failed = False

    # ------------------------------------------------------------------ setup
    def _resolve(self, spec: str) -> str:
        if spec not in self._folders:
            self._folders[spec] = model_folder(spec)
        return self._folders[spec]

    def start(self, status: StatusCallback) -> None:
        from transformers import AutoTokenizer  # lazy: loads torch

        self._status = status
        status(f"resolving target {self.target_spec} to a model folder")
        self._folder = self._resolve(self.target_spec)
        self.tokenizer = AutoTokenizer.from_pretrained(self._folder)
        self.device_name = cpu_name() if not str(self.device).startswith("cuda") else f"{self.device} (vLLM)"

    def speculative_config(self, config) -> dict | None:
        return speculative_config(config, self._resolve, self.options)

    def _key(self, config) -> str:
        return json.dumps(self.speculative_config(config), sort_keys=True)

    def is_warm(self, config) -> bool:
        """Whether ``config``'s engine is running now (no start needed)."""
        return self._key(config) in self._workers

    def _ensure_worker(self, config) -> WorkerProcess:
        """``config``'s engine, started unless it runs already; it serves the next requests."""
        spec_config = self.speculative_config(config)
        key = json.dumps(spec_config, sort_keys=True)
        self.ran_configs[config.label] = spec_config
        if key in self._workers:
            self._workers.move_to_end(key)
            self._worker = self._workers[key]
            return self._worker
        self._make_room()
        what = "target only" if spec_config is None else json.dumps(spec_config)
        self._status(f"starting a vLLM engine ({what}); minutes on a CPU")
        log = self.log_dir / f"worker-{len(list(self.log_dir.iterdir())):03d}.log"
        worker = WorkerProcess(self.python, worker_env(self.options, self.device), log)
        self._workers[key], self._worker = worker, worker
        self.engine_starts += 1
        kwargs = engine_kwargs(
            self.options,
            device=self.device,
            dtype=self.dtype,
            seed=self.seed,
            max_concurrency=int(self.options.get("max_num_seqs", 1)),
        )
        try:
            answer = worker.ask(
                {
                    "op": "start",
                    "model": self._folder,
                    "engine": kwargs,
                    "speculative_config": spec_config,
                    "warmup_tokens": int(self.options.get("warmup_tokens", 8)),
                }
            )
        except SpecbenchError:
            self._failed = True
            raise
        if not answer.get("ok"):
            self._failed = True
            self._stop(key)
            raise SpecbenchError(f"vLLM could not start {config.label}: {answer.get('error')} (log: {log})")
        self.vllm_version = answer.get("vllm_version")
        return worker

    def _make_room(self) -> None:
        """Stop engines until one more fits: least recently used first, the target-only engine last."""
        make_room(self._workers, self.engines_kept, self._stop)

    def _stop(self, key: str) -> None:
        worker = self._workers.pop(key, None)
        if worker is not None:
            worker.stop()
        if self._worker is worker:
            self._worker = None

    def _stop_worker(self) -> None:
        for key in list(self._workers):
            self._stop(key)

    def prepare(self, config, requests: list[Request]) -> None:
        """Start ``config``'s engine before its batch is timed."""
        self._ensure_worker(config)

    def timing_scope(self) -> TimingScope:
        """The workers' sessions are the engine's own CPU; on a CPU the engine computes on every core."""
        cores = cpu_engine_cores() if not str(self.device).startswith("cuda") else 1
        return TimingScope(
            tuple(w.proc.pid for w in self._workers.values()),
            cores,
            "machine state of this machine, vLLM's worker and engine core counted as the sweep's own",
        )

    # ------------------------------------------------------------------ generation
    def generate_batch(self, config, requests: list[Request], concurrency: int) -> list[GenerationResult]:
        if concurrency < 1:
            raise SpecbenchError(f"concurrency must be >= 1, got {concurrency}")
        worker = self._ensure_worker(config)
        payload = [
            {
                "prompt_token_ids": list(r.prompt_ids),
                "max_tokens": int(r.max_new_tokens),
                "temperature": config.temperature,
                "top_p": config.top_p,
                "top_k": config.top_k,
                "seed": int(r.seed),
                "ignore_eos": not r.stop_at_eos,
                "arrival_s": r.arrival_s,
            }
            for r in requests
        ]
        try:
            answer = worker.ask({"op": "generate", "requests": payload, "concurrency": int(concurrency)})
        except SpecbenchError:
            self._failed = True
            raise
        if not answer.get("ok"):
            self._failed = True
            raise SpecbenchError(f"vLLM failed on {config.label}: {answer.get('error')} (log: {worker.log_path})")
        outputs = answer["outputs"]
        speculative = config.drafter is not None and config.gamma > 0
        if speculative:
            problems = check_counters(outputs, answer.get("counters_before") or {}, answer.get("counters_after") or {})
            if problems:
                self.counter_problems.extend(problems)
                self._status(
                    f"warning: vLLM's counters disagree with per-request metrics ({config.label}): "
                    + "; ".join(problems)
                )
        steps = _draft_steps(config)
        return [
            result_from_output(out, len(r.prompt_ids), speculative, draft_steps_per_round=steps)
            for out, r in zip(outputs, requests)
        ]

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
        return self.generate_batch(config, [Request(list(prompt_ids), max_new_tokens, seed, stop_at_eos)], 1)[0]

    def describe(self) -> dict:
        """What ran, for the results folder's backend.json: versions, engine arguments and, per
        configuration label, the exact speculative_config (null: target only)."""
        return {
            "backend": self.name,
            "vllm_version": self.vllm_version,
            "model": self._folder,
            "engine": engine_kwargs(
                self.options,
                device=self.device,
                dtype=self.dtype,
                seed=self.seed,
                max_concurrency=int(self.options.get("max_num_seqs", 1)),
            ),
            "configs": dict(self.ran_configs),
            "counter_problems": list(self.counter_problems),
            "engine_starts": self.engine_starts,
            "engines_kept": self.engines_kept,
        }

    def close(self) -> None:
        """Stop the worker; its logs are kept only when something failed (the error names them)."""
        self._stop_worker()
        if not self._failed:
            shutil.rmtree(self.log_dir, ignore_errors=True)
