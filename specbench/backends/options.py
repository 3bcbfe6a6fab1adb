"""One validated options model per backend: what ``backend: {name: NAME, ...}`` may hold.

`BACKEND_OPTIONS` lists every option of every backend with its check and meaning. The sweep
spec checks a backend's options when it is parsed (so ``--dry-run`` refuses what the run
would), and each backend builds from `check_backend_options`'s result before anything starts:
numbers against the bounds table (`specbench.bounds`: ``timeout_s``, ``port``, ...), booleans
strictly (``warmup: "false"`` is refused, not true), URLs parsed (http/https, a host, a port in
range, no credentials, query or fragment, no spaces or control characters), an ``api_key``
that can go into an HTTP header (printable ASCII, no CR/LF), names and paths non-empty
without control characters. Unknown option names are refused with a did-you-mean.

Modes. A backend that can attach to a server the user runs (its registry entry's ``attach_option``, ``url``) is
in attach mode when that option is given, else in launch mode. Each option says the mode it means something in
(`Option.mode`): a ``launch`` option (``parallel``, ``port``, ...) configures a server specbench starts, an
``attach`` option (``baseline_url``, ``api_key``) a server someone else started. `check_option_mode` refuses the
other mode's options as the user gave them (`applies`), and the registry adds its launch default (the batch size)
only to a backend that launches (`specbench.backends.registry.attaching`): never applied to, nor refused in, an
attached one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from specbench.backends import registry
from specbench.bounds import BOUNDS, violation
from specbench.catalogue import drafters as catalogue
from specbench.engine.cpu.layout_probe import parse_layout_setting
from specbench.engine.cpu.threads import parse_thread_setting
from specbench.errors import SpecbenchError, check_keys, did_you_mean
from specbench.models.resolve import DTYPES

MAX_TEXT = 4096
LAUNCH, ATTACH = "launch", "attach"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Option:
    """One option: ``check(value, label)`` returns the value to use or raises a one-line error."""

    check: Callable[[object, str], object]
    meaning: str
    required: bool = False
    mode: str = "any"  # "launch": a server specbench starts; "attach": a server the user runs (url); "any": both


def _fail(label: str, problem: str, value) -> SpecbenchError:
    shown = repr(value)
    return SpecbenchError(f"{label} {problem}, got {shown if len(shown) <= 60 else shown[:57] + '...'}")


def number(row: str):
    """A number checked against the bounds table's row ``row``."""

    def check(value, label: str):
        problem = violation(row, value)
        if problem is not None:
            raise SpecbenchError(f"{label} {problem}")
        return int(value) if BOUNDS[row].integer else float(value)

    return check


def flag(value, label: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(label, "must be true or false", value)
    return value


def text(value, label: str) -> str:
    """A name: a non-empty string without control characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise _fail(label, f"must be a non-empty string (at most {MAX_TEXT} characters)", value)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _fail(label, "must not contain control characters or line breaks", value)
    return value


def secret(value, label: str) -> str:
    """What goes into an HTTP header: printable ASCII, no spaces, no CR/LF (never echoed back)."""
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise SpecbenchError(f"{label} must be a non-empty string")
    if not all(33 <= ord(c) <= 126 for c in value):
        raise SpecbenchError(
            f"{label} must be printable ASCII without spaces or line breaks (it is sent in an "
            "HTTP header); check it for a stray newline"
        )
    return value


def url(value, label: str) -> str:
    """http(s)://HOST[:PORT][/PATH], returned without a trailing '/'."""
    text(value, label)
    if any(c.isspace() for c in value):
        raise _fail(label, "must not contain spaces", value)
    try:  # urllib's parse raises ValueError for a malformed bracketed host ("[::1:8000", "[zz]")
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parses (and checks) the host and port
    except ValueError as exc:
        if "port" in str(exc).lower():
            raise _fail(label, "has a port outside 1-65535", value) from None
        raise _fail(
            label,
            f"is not a valid URL ({str(exc).rstrip('.')}; an IPv6 host goes in brackets, e.g. http://[::1]:8000)",
            value,
        ) from None
    if parts.scheme not in ("http", "https"):
        raise _fail(label, "must start with http:// or https://", value)
    try:
        port = parts.port
    except ValueError:
        raise _fail(label, "has a port outside 1-65535", value) from None
    if not parts.hostname or port == 0:
        raise _fail(label, "needs a host (and a port from 1 to 65535, if any), e.g. http://127.0.0.1:8000", value)
    if parts.username is not None or parts.password is not None:
        raise SpecbenchError(f"{label} must not hold a user name or password (use the option api_key)")
    if parts.query or parts.fragment:
        raise _fail(label, "must be the server's base address, without a query or fragment", value)
    return value.rstrip("/")


def choice(*names: str):
    def check(value, label: str):
        if not isinstance(value, str) or value not in names:
            hint = did_you_mean(str(value), list(names)) if isinstance(value, str) else ""
            raise _fail(f"{label}{hint}", f"must be one of {', '.join(names)}", value)
        return value

    return check


def path(value, label: str) -> str:
    text(value, label)
    return value


def words(value, label: str, *, non_empty: bool = False) -> list[str]:
    """A list of command-line words (numbers are written as text)."""
    if not isinstance(value, list) or (non_empty and not value):
        raise _fail(label, "must be a list of strings" + (" (at least one)" if non_empty else ""), value)
    out = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)) or "\x00" in str(item):
            raise _fail(f"{label}[{i}]", "must be a string", item)
        out.append(str(item))
    return out


def command(value, label: str) -> list[str]:
    return words(value, label, non_empty=True)


def environment(value, label: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _fail(label, "must be a mapping of environment variables", value)
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not ENV_NAME.match(key):
            raise _fail(f"{label}", "needs variable names of letters, digits and _", key)
        if isinstance(item, (dict, list)) or item is None or "\x00" in str(item):
            raise _fail(f"{label}.{key}", "must be a string or a number", item)
        out[key] = str(item).lower() if isinstance(item, bool) else str(item)
    return out


def mapping(value, label: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _fail(label, "must be a mapping of keyword arguments", value)
    return value


def threads(value, label: str):
    return parse_thread_setting(value, label.split(": '")[0])


def layout(value, label: str):
    return parse_layout_setting(value, label.split(": '")[0])


def launch(check: Callable[[object, str], object], meaning: str) -> Option:
    """An option of a server specbench launches (refused with ``url``)."""
    return Option(check, meaning, mode=LAUNCH)


def attach(check: Callable[[object, str], object], meaning: str) -> Option:
    """An option of a server the user runs (refused without ``url``)."""
    return Option(check, meaning, mode=ATTACH)


_TIMEOUT = Option(number("timeout_s"), "total deadline of one request in seconds (default 600)")
_WARMUP = Option(flag, "one short untimed request per server before measuring (default true)")
_TOKENIZER = Option(text, "tokenizer to encode prompts with (default: the sweep's target)")

BACKEND_OPTIONS: dict[str, dict[str, Option]] = {
    "own": {
        "kernels": Option(choice("auto", "triton", "torch"), "verification kernels (the sweep's kernels key)"),
        "compile": Option(flag, "torch.compile the decode/verify steps (the sweep's compile key)"),
        "threads": Option(threads, "CPU threads: a count or auto (the sweep's threads key)"),
        "layout": Option(layout, "CPU weight layout: auto (measured) or a layout name (the sweep's layout key)"),
        "verify_tokens": Option(number("verify_tokens"), "the verify size the layout probe measures (default 5)"),
    },
    "vllm": {
        "max_num_seqs": Option(
            number("max_num_seqs"), "requests the engine batches at once (default: the sweep's largest concurrency)"
        ),
        "enforce_eager": Option(flag, "skip torch.compile / CUDA graphs (default: true on CPU, false on GPU)"),
        "dtype": Option(choice(*DTYPES), "vLLM dtype (default: the sweep's dtype, fp32 -> float32)"),
        "kv_cache_gib": Option(
            number("kv_cache_gib"),
            "KV cache size in GiB (CPU: VLLM_CPU_KVCACHE_SPACE, default 2; GPU: kv_cache_memory_bytes)",
        ),
        "max_model_len": Option(number("max_model_len"), "context length the engine reserves for (default 2048)"),
        "tensor_parallel_size": Option(number("parallel_size"), "GPUs the target is split over"),
        "draft_tensor_parallel_size": Option(
            number("parallel_size"), "GPUs a draft model is split over (speculative_config)"
        ),
        "pipeline_parallel_size": Option(
            number("parallel_size"), "pipeline stages (multi-node: with distributed_executor_backend ray)"
        ),
        "distributed_executor_backend": Option(
            choice("mp", "ray"), "mp (one node) or ray (a Ray cluster spanning nodes)"
        ),
        "gpu_memory_utilization": Option(number("gpu_memory_utilization"), "fraction of GPU memory vLLM may take"),
        "venv": Option(
            path, "the vLLM environment's folder (default: $SPECBENCH_VLLM_VENV, else .venv-vllm of the checkout)"
        ),
        "python": Option(path, "interpreter of the vLLM environment (instead of venv)"),
        "engine_args": Option(mapping, "extra keyword arguments for vllm.LLM, passed through as given"),
        "warmup_tokens": Option(number("warmup_tokens"), "untimed tokens generated when an engine starts (default 8)"),
        "engines_kept": Option(
            number("engines_kept"),
            "engines kept alive between configurations (default 1): a "
            "later look of an adaptive sweep reuses a kept engine instead "
            "of starting it again; each holds its own memory, so on a GPU "
            "give each its share with gpu_memory_utilization",
        ),
    },
    "openai": {
        "url": Option(url, "the running server's base address, e.g. http://127.0.0.1:8000", required=True),
        "model": Option(text, "served model name (default: the first of /v1/models)"),
        "tokenizer": _TOKENIZER,
        "api_key": Option(secret, "sent as 'Authorization: Bearer KEY'"),
        "timeout_s": _TIMEOUT,
        "baseline_url": Option(url, "a server without speculation for the γ = 0 units"),
        "warmup": _WARMUP,
    },
    "vllm-server": {
        "venv": Option(path, "vLLM environment (default $SPECBENCH_VLLM_VENV, else .venv-vllm)"),
        "model": Option(text, "what vLLM loads (default: the target; an alias resolves to its folder)"),
        "port": Option(number("port"), "the server's port on 127.0.0.1 (default: a free one)"),
        "startup_timeout_s": Option(number("startup_timeout_s"), "seconds to wait for /health (default 900)"),
        "max_model_len": Option(number("max_model_len"), "--max-model-len (default 2048)"),
        "enforce_eager": Option(flag, "--enforce-eager (default: on for CPU)"),
        "kv_cache_gib": Option(number("kv_cache_gib"), "CPU KV cache, VLLM_CPU_KVCACHE_SPACE (default 2)"),
        "extra_args": Option(words, "more server flags, as a list"),
        "env": Option(environment, "environment variables for the server"),
        "log_dir": Option(path, "folder of the server logs (default: a temporary folder)"),
        "timeout_s": _TIMEOUT,
        "server_command": Option(command, "replaces <venv>/bin/python -m vllm.entrypoints.openai.api_server"),
        "warmup": _WARMUP,
        "tokenizer": _TOKENIZER,
        "stop_grace_s": Option(number("stop_grace_s"), "SIGTERM to SIGKILL when stopping a server (default 15)"),
        "engines_kept": Option(
            number("engines_kept"),
            "servers kept running between configurations (default 1): a later look of an adaptive sweep reuses "
            "a kept server instead of starting it again; each holds its own memory (not with a fixed port)",
        ),
    },
    "llamacpp-server": {
        "url": attach(url, "a running llama-server to measure as it is (instead of launching one per configuration)"),
        "baseline_url": attach(url, "with url: a llama-server without speculation for the γ = 0 units"),
        "api_key": attach(secret, "with url: sent as 'Authorization: Bearer KEY'"),
        "model": launch(text, "the target GGUF llama.cpp loads (default: the sweep's target: an alias's GGUF)"),
        "tokenizer": _TOKENIZER,
        "binary": launch(path, "the llama-server executable (default: $SPECBENCH_LLAMACPP/bin, else .llamacpp/bin)"),
        "port": launch(number("port"), "the server's port on 127.0.0.1 (default: a free one)"),
        "parallel": launch(
            number("slots"), "slots: requests decoded at once, -np (default: the sweep's largest concurrency)"
        ),
        "ctx_size": launch(number("max_model_len"), "context per slot in tokens (-c is this × parallel; default 4096)"),
        "threads": launch(number("threads"), "CPU threads, -t (default: llama.cpp's own choice)"),
        "cache_prompt": Option(flag, "let requests reuse a cached prompt prefix (default false: every prefill runs)"),
        "weights": launch(
            choice("gguf", "dtype"),
            "gguf: the GGUF's own tensor types (default); dtype: the GGUFs dequantized once to the sweep's dtype "
            "(fp32 or bf16), the weights the other engines run",
        ),
        "startup_timeout_s": launch(number("startup_timeout_s"), "seconds to wait for /health (default 900)"),
        "extra_args": launch(words, "more llama-server flags, as a list"),
        "env": launch(environment, "environment variables for the server"),
        "log_dir": launch(path, "folder of the server logs (default: a temporary folder)"),
        "timeout_s": _TIMEOUT,
        "server_command": launch(command, "replaces the llama-server executable (tests use it)"),
        "warmup": _WARMUP,
        "stop_grace_s": launch(number("stop_grace_s"), "SIGTERM to SIGKILL when stopping a server (default 15)"),
        "engines_kept": launch(
            number("engines_kept"),
            "servers kept running between configurations (default 1): a later look of an adaptive sweep reuses "
            "a kept server instead of starting it again; each holds its own memory (not with a fixed port)",
        ),
    },
}


def check_own_sweep(options: dict, configs: list, where: str) -> None:
    """The own engine's check of a sweep (its registry entry's ``check``): its options, and drafters it can build
    (a kind only serving engines run, llama.cpp's ngram-mod say, is refused in one line)."""
    check_backend_options("own", options, f"{where}: backend own")
    for config in configs:
        kind = None if config.drafter is None else catalogue.get(config.drafter.type)
        if kind is not None and not kind.buildable:
            engines = " or ".join(catalogue.serving_engines(kind.name)) or "no engine"
            raise SpecbenchError(
                f"{where}: drafter {kind.name} runs on {engines} only, not on specbench's own engine "
                "(choose that engine's backend)"
            )


def check_openai_sweep(options: dict, configs: list, where: str) -> None:
    """The openai backend's check of a sweep (its registry entry's ``check``): its options."""
    check_backend_options("openai", options, f"{where}: backend openai")


def check_backend_options(backend: str, options, where: str | None = None) -> dict:
    """``options`` (the ``backend:`` mapping without ``name``) checked against the backend's model: the
    values to use, unknown names and bad values refused in one line."""
    where = where or f"backend {backend}"
    model = BACKEND_OPTIONS.get(backend)
    if model is None:
        return dict(options or {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise SpecbenchError(f"{where}: options must be a mapping")
    check_keys(
        [key for key in options if key != "name"], model, f"{where}: unknown option '{{key}}'", listing="options"
    )
    checked = {}
    for key, value in options.items():
        if key == "name":
            continue
        if value is None:
            continue  # left unset: the default applies
        checked[key] = model[key].check(value, f"{where}: '{key}'")
    for key, option in model.items():
        if option.required and key not in checked:
            raise SpecbenchError(f"{where} needs the option {key}: {option.meaning}")
    return checked


def attaching(backend: str, options: dict) -> bool:
    """Whether ``options`` attach ``backend`` to a server the user runs (its registry entry's attach_option)."""
    return backend in registry.names() and registry.attaching(backend, options)


def applies(backend: str, key: str, options: dict) -> bool:
    """Whether option ``key`` means something for ``backend`` in the mode ``options`` pick (a default of an
    option that does not apply is never added)."""
    option = BACKEND_OPTIONS.get(backend, {}).get(key)
    if option is None or option.mode == "any":
        return True
    return (option.mode == ATTACH) == attaching(backend, options)


def check_option_mode(backend: str, options: dict, where: str) -> None:
    """The options the user gave that belong to the other mode, refused in one line: launch options with ``url``
    (the server is the one running there), attach options without it (specbench launches the servers)."""
    wrong = sorted(key for key, value in options.items() if value is not None and not applies(backend, key, options))
    if not wrong:
        return
    if attaching(backend, options):
        raise SpecbenchError(
            f"{where}: option(s) {', '.join(wrong)} are for a server specbench launches; with url "
            "the server is the one running there (leave them out, or leave url out)"
        )
    raise SpecbenchError(
        f"{where}: option(s) {', '.join(wrong)} are for a server you run (with url); "
        "without url specbench launches the servers itself"
    )
