"""Backend names → classes: what ``backend: NAME`` in a sweep (and ``--backend NAME``) builds.

Every backend is built the same way, ``Cls(options, *, target=..., device=..., dtype=..., seed=...)``,
where ``options`` is the rest of the sweep's ``backend:`` mapping. Classes are named by module
path and imported only when asked for, so a backend whose module (or whose engine) is absent
costs nothing until a sweep names it, and then fails in one line.
"""

from __future__ import annotations

import importlib

from specbench.errors import SpecbenchError, did_you_mean

DEFAULT = "own"
BACKENDS: dict[str, str] = {
    "own": "specbench.backends.own_engine:own_backend",
    "vllm": "specbench.backends.vllm_engine:VLLMBackend",
    "openai": "specbench.backends.openai_server:OpenAIServerBackend",
    "vllm-server": "specbench.backends.vllm_server:VLLMServerBackend",
}
# Backends that measure many requests in flight (the own engine runs one at a time).
CONCURRENT = ("vllm", "openai", "vllm-server")
# Backends that run specbench's own drafters (and so can replay).
OWN_DRAFTERS = ("own",)


def check_name(name: str) -> str:
    if name not in BACKENDS:
        raise SpecbenchError(f"unknown backend '{name}'{did_you_mean(str(name), list(BACKENDS))} "
                             f"(choose from: {', '.join(BACKENDS)})")
    return name


def backend_class(name: str):
    """The class registered as ``name``; a missing module is a one-line error."""
    module_name, _, attr = BACKENDS[check_name(name)].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise SpecbenchError(f"backend {name} is not available (module {module_name} is missing)") from None
        raise
    try:
        return getattr(module, attr)
    except AttributeError:
        raise SpecbenchError(f"backend {name} is not available ({module_name} has no {attr})") from None


def make_backend(name: str, options: dict | None = None, *, target: str, device: str, dtype: str, seed: int = 0,
                 max_concurrency: int = 1):
    """Build the backend ``name``. ``max_concurrency`` (the sweep's largest) sizes a serving
    engine's batch (vLLM's ``max_num_seqs``) unless the options set it."""
    options = dict(options or {})
    if name == "vllm" and "max_num_seqs" not in options:
        options["max_num_seqs"] = max(1, int(max_concurrency))
    cls = backend_class(name)
    return cls(options, target=target, device=device, dtype=dtype, seed=seed)

