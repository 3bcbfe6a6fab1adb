"""Serving-engine servers that specbench launches itself, one per engine configuration, kept between
configurations: what ``vllm-server`` and ``llamacpp-server`` share.

A backend that mixes `LaunchedServers` in before its measuring class (`OpenAIServerBackend` or a subclass)
says three things: the engine setup a configuration needs (`engine_spec`: None for target-only decoding, else
a JSON value — vLLM's speculative config, llama.cpp's flags — whose text is the server's key), the command
that serves it (`command`) and the client that talks to it (`make_client`). The rest is here, once:

* **start**: a free port on 127.0.0.1 (or the ``port`` option, checked free), the server in its own process
  group (`specbench.backends.servers.server_process`), a wait for its health path, then the client; every launch is
  recorded (``describe()["launched"]``) with its log;
* **keep**: up to ``engines_kept`` servers stay up between configurations (`specbench.backends.kept_engines`:
  the least recently used goes first, the target-only one last), so an adaptive sweep's later looks reuse
  them; a fixed port holds one;
* **stop**: every server — kept ones too — on ``close()`` (the runner's ``finally``), at once on Ctrl-C or
  SIGTERM; a server that died while measuring is one error line naming its log;
* **timing scope**: the launched servers' process sessions are the sweep's own CPU; on a CPU the engine
  computes on every core this process may use.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from typing import TYPE_CHECKING

from specbench.backends.base import TimingScope, cpu_engine_cores
from specbench.backends.kept_engines import make_room
from specbench.backends.servers.server_process import (
    INTERRUPT_GRACE_S,
    STOP_GRACE_S,
    ServerProcess,
    check_port_free,
    free_port,
)
from specbench.errors import SpecbenchError

DEFAULT_STARTUP_S = 900.0

if TYPE_CHECKING:  # the measuring class the mixin goes before, for its `super()` calls and attributes
    from specbench.backends.servers.openai_server import OpenAIServerBackend as _MeasuringClass
else:
    _MeasuringClass = object


class LaunchedServers(_MeasuringClass):
    """One server per engine configuration, launched, kept and stopped by the backend (a mixin: see the module)."""

    engine_label = "server"  # the engine's name in messages and logs ("vLLM", "llama.cpp")
    spec_name = "engine_spec"  # what `describe()["launched"]` calls a configuration's engine setup
    server_config_name = "engine_spec"  # what `describe()["servers"]` calls it
    health_path = "/health"

    # ------------------------------------------------------------------ what a backend says
    def engine_spec(self, config):
        """The engine setup ``config`` needs: None for target-only decoding, else a JSON value."""
        raise NotImplementedError

    def command(self, port: int, spec) -> list[str]:
        """The command line that serves ``spec`` (from `engine_spec`) on 127.0.0.1:``port``."""
        raise NotImplementedError

    def make_client(self, server: ServerProcess):
        """The client of a healthy ``server`` (its model name set)."""
        raise NotImplementedError

    def server_env(self) -> dict:
        """Environment variables for every server (besides this process's own)."""
        return {str(k): str(v) for k, v in (self.server_options.get("env") or {}).items()}

    # ------------------------------------------------------------------ setup
    def _launcher(self, options: dict) -> None:
        """What the launcher holds, from checked options (``port``, ``engines_kept``, ``log_dir``, ...)."""
        self.server_options = options
        if options.get("port") is not None:
            check_port_free(int(options["port"]))
        self.engines_kept = int(options.get("engines_kept", 1))
        if options.get("port") is not None and self.engines_kept > 1:
            raise SpecbenchError(
                f"backend {self.name}: a fixed port holds one server: engines_kept must be 1 "
                f"with port (got {self.engines_kept}); leave port out to keep several"
            )
        self.server: ServerProcess | None = None  # the server of the configuration measured now
        self._server_key: str | None = None
        self._servers: OrderedDict[str, tuple[ServerProcess, object]] = OrderedDict()  # kept, LRU first
        self.engine_starts = 0
        self.launched: list[dict] = []

    def _key(self, config) -> str:
        return json.dumps(self.engine_spec(config), sort_keys=True)

    # ------------------------------------------------------------------ lifecycle
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

    def is_warm(self, config) -> bool:
        """Whether ``config``'s server is running now (no start needed)."""
        return self._key(config) in self._servers

    def client_for(self, config):
        return self._ensure_server(config)

    def _ensure_server(self, config):
        spec = self.engine_spec(config)
        key = json.dumps(spec, sort_keys=True)
        if key in self._servers:
            self._servers.move_to_end(key)
            (self.server, self.client), self._server_key = self._servers[key], key
            self.server.check_alive()
            return self.client
        make_room(self._servers, self.engines_kept, self._stop_one)
        fixed = self.server_options.get("port")
        port = int(fixed) if fixed is not None else free_port()
        if fixed is not None:
            check_port_free(port)
        what = "target only" if spec is None else json.dumps(spec)
        self._status(f"starting {self.engine_label} on 127.0.0.1:{port} for {what}")
        self.server = ServerProcess(
            self.command(port, spec),
            port=port,
            env=self.server_env(),
            log_dir=self.server_options.get("log_dir"),
            name=f"{self.engine_label} server",
            grace=float(self.server_options.get("stop_grace_s", STOP_GRACE_S)),
        )
        self.server.start()
        self._server_key = key
        self.engine_starts += 1
        startup = float(self.server_options.get("startup_timeout_s", DEFAULT_STARTUP_S))
        self.server.wait_healthy(startup, status=self._status, path=self.health_path)
        self.client = self.make_client(self.server)
        self._servers[key] = (self.server, self.client)
        self._warm.discard(self.client.url)
        self.launched.append(
            {
                "config": getattr(config, "label", ""),
                self.spec_name: spec,
                "port": port,
                "log": str(self.server.log_path),
            }
        )
        self.server_configs[self.client.url] = {self.server_config_name: spec}
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

    def engine_cores(self) -> int:
        """Cores a launched server keeps busy on a CPU: every core this process may use, unless told otherwise."""
        return cpu_engine_cores()

    def timing_scope(self) -> TimingScope:
        """The launched servers' sessions are the sweep's own CPU; on a CPU the engine computes on its cores."""
        cores = self.engine_cores() if self.device == "cpu" else 1
        servers = [server for server, _ in self._servers.values()]
        if self.server is not None and self.server not in servers:
            servers.append(self.server)
        sessions = tuple(server.pgid for server in servers if server.pgid)  # kept servers are the sweep's too
        return TimingScope(
            sessions,
            cores,
            f"machine state of this machine, the {self.engine_label} server launched here counted as the sweep's own",
        )

    # ------------------------------------------------------------------ measuring
    def generate_batch(self, config, requests: list, concurrency: int) -> list:
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
            raise SpecbenchError(
                f"{exc} (while measuring; finished units are saved: rerun the sweep to resume)"
            ) from None
