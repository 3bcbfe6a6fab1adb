"""The backend seam: what a sweep needs from whatever generates tokens.

A backend is started once per sweep (models load, servers start), then asked to generate one
unit at a time, and closed on every exit path. It answers with a `GenerationResult` — the
same type for every backend — so `specbench.measure.grid.units.make_record` writes the same
columns whoever measured. A figure a backend cannot observe (per-round timings of a serving
engine, say) is left empty in the result and becomes null in the record, never invented.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from specbench.engine.stats import GenerationResult, RoundLog

__all__ = [
    "Backend",
    "GenerationResult",
    "OwnDrafterBackend",
    "Request",
    "RoundLog",
    "RoundCallback",
    "ServingBackend",
    "StatusCallback",
    "TimingScope",
]

RoundCallback = Callable[[object], None]  # called after every round with the running result
StatusCallback = Callable[[str], None]  # one-line status messages while starting


@dataclass(frozen=True)
class Request:
    """One generation request of a unit: what `Backend.generate_batch` is given per request."""

    prompt_ids: list[int]
    max_new_tokens: int
    seed: int
    stop_at_eos: bool
    # open loop: when the request arrives, s after the batch starts (`specbench.measure.serving.arrivals`); it is sent
    # then, or as soon as a slot frees when the batch's in-flight cap is reached. None: closed loop (sent as
    # soon as fewer than `concurrency` requests are in flight)
    arrival_s: float | None = None


def cpu_engine_cores() -> int:
    """Cores an engine launched from this process computes on: this process's CPU affinity (what a worker or
    server it starts inherits; ``taskset -c 0`` gives 1), else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class TimingScope:
    """What a backend's machine-state reading covers (`specbench.measure.timing.machine_state`).

    ``sessions``: process sessions whose CPU time is the engine's own (a worker, a launched server), not
    interference; ``cores``: cores the engine keeps busy on this machine (the interference rule leaves the
    rest to other processes); ``observed``: one line saying what was and was not observed.
    """

    sessions: tuple[int, ...]
    cores: int
    observed: str


class Backend(Protocol):
    """One sweep's token generator. ``name`` goes into every record's ``backend`` column."""

    name: str
    device_name: str  # set by `start`
    tokenizer: object  # the target's (Hugging Face) tokenizer, set by `start`; prompts are encoded with it
    context_window: int | None  # the target's positions (None: unknown), set by `start`
    threads: int  # CPU threads this process computes with (0: the work runs elsewhere, a GPU or a server)

    def start(self, status: StatusCallback) -> None:
        """Load the target (and what every configuration shares); called once before any unit."""

    def model_hashes(self, drafters: list) -> dict[str, str]:
        """sha256 of the weights that will run: the target's (under its spec) and each drafter's (under its
        label) where the backend can prove them; builds the drafters, so bad drafter settings fail here."""

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
        """Generate with ``config`` (a `specbench.measure.grid.sweep_spec.RunConfig`) and measure it."""

    def generate_batch(self, config, requests: list[Request], concurrency: int) -> list[GenerationResult]:
        """Generate every request with ``config``, keeping up to ``concurrency`` requests in flight; a request
        with an ``arrival_s`` is not sent before it (open loop).

        One result per request, in order, each with its ``arrival_s`` and ``finish_s`` within the batch. A
        backend that measures one request at a time raises `SpecbenchError` for ``concurrency > 1``.
        """

    def close(self) -> None:
        """Release what `start` took (models, processes, ports); safe to call twice."""


class OwnDrafterBackend(Backend, Protocol):
    """A backend whose entry says ``own_drafters`` (`specbench.backends.registry`): it runs specbench's own
    drafters in this process, so replay (`specbench.measure.replay.replayer`) can use the same target and drafters."""

    target: object  # the loaded target (`specbench.models.resolve.LoadedModel`), set by `start`
    decoder: object  # the target's decoder (`specbench.engine.decoder`), set by `start`

    def drafter(self, config):
        """The engine drafter a `DrafterConfig` builds (built once per sweep)."""


class ServingBackend:
    """What a serving-engine backend (vLLM in a worker, an OpenAI-compatible server) shares.

    The work runs in another process, so this process computes with no threads of its own; the
    server enforces its own context length (``max_model_len``) and loads its own weights, whose
    content specbench cannot prove from here: no hashes are claimed.
    """

    threads = 0
    context_window: int | None = None

    def model_hashes(self, drafters: list) -> dict[str, str]:
        return {}

    def prepare(self, config, requests: list[Request]) -> None:
        """Start what ``config``'s batch of ``requests`` needs (an engine, a server, a warm-up) before it is
        timed (default: nothing)."""

    def timing_scope(self) -> TimingScope:
        """What the machine state of a batch covers: by default the client alone (the engine runs elsewhere)."""
        return TimingScope(
            (), 1, "machine state of this machine, the client's side only: the engine's own machine was not observed"
        )
