"""Backend names → entries: what ``backend: NAME`` in a sweep (and ``--backend NAME``) builds.

One `specbench.catalogue.registry.Registry` of `BackendKind` entries, the mechanism the drafter
catalogue uses too. Every backend is built the same way, ``Cls(options, *, target=..., device=...,
dtype=..., seed=...)``, where ``options`` is the rest of the sweep's ``backend:`` mapping. Classes
are named by module path and imported only when asked for, so a backend whose module (or whose
engine) is absent costs nothing until a sweep names it, and then fails in one line.

`measure` reaches backends only through this module and `specbench.backends.base` (an
import-linter contract): the facts a sweep spec is checked against are entries' fields, and a
backend's own check of a sweep (`check_sweep`) is named by its entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from specbench.catalogue.registry import Registry, resolve

DEFAULT = "own"
# what an entry's "module:function" names, by field (`resolve` imports it as a plain object)
SweepCheck = Callable[[dict, list, str], None]  # ``check``: (options, configs, where)
MechanismsOf = Callable[[dict, str, int], Iterable["Mechanism"]]  # ``adaptive``: (options, drafter, gamma)


@dataclass(frozen=True)
class DeviceSeconds:
    """A start-up time on a CPU and on a GPU (an order of magnitude, for the dry-run estimate)."""

    cpu: float
    cuda: float

    def on(self, device: str) -> float:
        return self.cuda if device.startswith("cuda") else self.cpu


@dataclass(frozen=True)
class BackendKind:
    """One backend: how to build it and what a sweep may ask of it. Every fact measure/ and the CLI need about
    a backend is a field here; nothing outside this module compares backend names."""

    name: str
    cls: str  # "module:attribute" called as Cls(options, *, target, device, dtype, seed)
    # measures many requests in flight (serving engines): live units run in groups through generate_batch, timed
    # per batch; the own engine runs one request at a time, each unit timed in its prompt's block
    concurrent: bool = False
    own_drafters: bool = False  # runs specbench's own drafters (and so can replay them)
    gguf_types: bool = False  # runs GGUF files as they are: a GGUF type (quantization) is a sweep value
    # is specbench's own engine: its settings (threads, layout, dtype auto, kernels, compile) and its round
    # drivers (strategies nested and online, verify-length schedules) apply
    own_engine: bool = False
    keeps_engines: bool = False  # honours the option engines_kept (engines kept warm across configurations)
    start_s: DeviceSeconds | None = None  # one engine start, per configuration (None: no engine started per one)
    load_s: DeviceSeconds | None = None  # loading the models once per sweep (None: nothing loaded here)
    # "module:function"(options, configs, where): refuses, before anything starts, what the backend cannot run
    check: str | None = None
    batch_option: str | None = None  # the option sized from the sweep's largest concurrency unless given
    # the option that attaches the backend to a server the user runs ("url"): given, the backend launches nothing,
    # so no launch default (batch_option) is added and its launch options are refused (backends.options)
    attach_option: str | None = None
    # "module:function"(options, drafter, gamma) -> [Mechanism]: the adaptive mechanisms the engine ships, each
    # present (a schedule to run) or absent (why), for `specbench confirm`'s contenders
    adaptive: str | None = None


@dataclass(frozen=True)
class Mechanism:
    """One adaptive mechanism of an engine, at a configuration's γ: the schedule that runs it (the
    `specbench.engine.strategies.schedule` name and parameters, γ its cap), or the one line that says why it cannot."""

    name: str  # what the tables call it: "heuristic schedule", "vLLM adaptive K"
    schedule: str | None = None  # the schedule's name (None: absent)
    params: tuple[tuple[str, float], ...] = ()
    absent: str | None = None  # why it cannot run here


BACKENDS: Registry[BackendKind] = Registry(
    "backend",
    (
        BackendKind(
            "own",
            "specbench.backends.own_engine:own_backend",
            own_drafters=True,
            own_engine=True,
            load_s=DeviceSeconds(cpu=5.0, cuda=20.0),  # converted weights from the cache, once
            check="specbench.backends.options:check_own_sweep",
            adaptive="specbench.backends.adaptive_mechanisms:own_mechanisms",
        ),
        BackendKind(
            "vllm",
            "specbench.backends.vllm.engine:VLLMBackend",
            concurrent=True,
            keeps_engines=True,
            # SmolLM2-135M on a 2-core CPU measured 25-35 s; on a GPU, loading and compiling a multi-billion
            # target takes minutes
            start_s=DeviceSeconds(cpu=35.0, cuda=180.0),
            check="specbench.backends.vllm.config:check_engine_sweep",
            batch_option="max_num_seqs",
            adaptive="specbench.backends.adaptive_mechanisms:vllm_mechanisms",
        ),
        BackendKind(
            "openai",
            "specbench.backends.servers.openai_server:OpenAIServerBackend",
            concurrent=True,
            attach_option="url",
            check="specbench.backends.options:check_openai_sweep",
        ),
        BackendKind(
            "vllm-server",
            "specbench.backends.vllm.server:VLLMServerBackend",
            concurrent=True,
            keeps_engines=True,
            start_s=DeviceSeconds(cpu=40.0, cuda=200.0),  # SmolLM2-135M on a 2-core CPU: ~30 s to ready
            check="specbench.backends.vllm.config:check_server_sweep",
            adaptive="specbench.backends.adaptive_mechanisms:vllm_mechanisms",
        ),
        BackendKind(
            "llamacpp-server",
            "specbench.backends.llamacpp.server:LlamaCppServerBackend",
            concurrent=True,
            check="specbench.backends.llamacpp.server:check_sweep",
            batch_option="parallel",
            attach_option="url",
            gguf_types=True,
        ),
    ),
)


def get(name: str) -> BackendKind:
    """The entry called ``name``; unknown: one line with a did-you-mean."""
    return BACKENDS.get(name)


def names(**facts) -> list[str]:
    """Backend names whose entries have ``facts`` (``names(concurrent=True)``)."""
    return BACKENDS.names(lambda kind: all(getattr(kind, k) == v for k, v in facts.items()))


def choices_help() -> str:
    """The backends for a help text, the default marked: "own (default), vllm, ..."."""
    return ", ".join(name + (" (default)" if name == DEFAULT else "") for name in names())


def attaching(name: str, options: dict) -> bool:
    """Whether ``options`` attach backend ``name`` to a server the user runs (its entry's attach_option given)."""
    option = get(name).attach_option
    return option is not None and options.get(option) is not None


def backend_class(name: str):
    """The class registered as ``name``; a missing module is a one-line error."""
    return BACKENDS.load(name)


def check_sweep(name: str, options: dict, configs: list, where: str) -> None:
    """The backend's own refusal of a sweep's options and configurations (before any engine starts)."""
    kind = get(name)
    if kind.check is not None:
        cast(SweepCheck, resolve(kind.check, f"backend {name}"))(options, configs, where)


def adaptive_mechanisms(name: str, options: dict, drafter: str, gamma: int) -> list[Mechanism]:
    """The adaptive mechanisms backend ``name`` ships for ``drafter`` at γ ``gamma`` (present or absent, each
    with its reason); none for a backend whose entry declares none."""
    kind = get(name)
    if kind.adaptive is None:
        return [Mechanism(f"{name}'s own adaptivity", absent=f"backend {name} declares no adaptive mechanism")]
    return list(cast(MechanismsOf, resolve(kind.adaptive, f"backend {name}"))(options, drafter, gamma))


def make_backend(
    name: str,
    options: dict | None = None,
    *,
    target: str,
    device: str,
    dtype: str,
    seed: int = 0,
    max_concurrency: int = 1,
):
    """Build the backend ``name``. ``max_concurrency`` (the sweep's largest) sizes a serving
    engine's batch (vLLM's ``max_num_seqs``, its entry's ``batch_option``) unless the options set it — for an
    engine specbench starts only: a launched server's slots mean nothing to a server the user runs (``url``), so an
    attached backend never gets, nor is refused for, a default it was not given."""
    options = dict(options or {})
    batch_option = get(name).batch_option
    if batch_option is not None and batch_option not in options and not attaching(name, options):
        options[batch_option] = max(1, int(max_concurrency))
    cls = backend_class(name)
    return cls(options, target=target, device=device, dtype=dtype, seed=seed)
