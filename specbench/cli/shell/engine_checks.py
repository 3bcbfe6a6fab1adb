"""Check emitted engine settings with the engines themselves, where they are installed
(``specbench recommend``'s last step: it starts processes and finds model folders, so it lives
with the command, not in analysis or among the backends).

`specbench.analysis.settings.engine_settings` writes the settings (analysis stays pure: no processes,
no engines). Here they are checked:

* vLLM: every ``speculative_config`` is built as vLLM's ``SpeculativeConfig`` by the
  interpreter of ``.venv-vllm`` (a subprocess: vLLM pins its own torch and transformers).
  Unknown keys fail there (vLLM's ``@config`` forbids extra fields). Configs naming a model
  that is not available locally (a hub id on an offline machine) are checked for their keys
  only, and say so.
* SGLang: the command line's flags are parsed by SGLang's own argument parser
  (``ServerArgs.add_cli_args``) when ``sglang`` is importable in specbench's environment.
* llama.cpp: the speculation flags are parsed by the installed ``llama-server`` (``make install-llamacpp``):
  ``llama-server FLAGS --version`` parses every flag before it (an unknown flag or a bad value is an error)
  and exits without loading a model.

Without an engine the setting keeps its ``checked`` text: the versions its keys were read from.
Results are cached per (engine version, config) in specbench's cache folder, since importing
vLLM takes half a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
from importlib.metadata import version as package_version
from pathlib import Path

from specbench.backends.llamacpp.env import build_info, server_binary
from specbench.backends.vllm.env import default_venv
from specbench.catalogue import engines as catalogue_engines
from specbench.errors import SpecbenchError
from specbench.models.cache import cache_root
from specbench.models.resolve import model_folder
from specbench.safe_files import read_json, write_json

SKIP_ENV = "SPECBENCH_NO_ENGINE_CHECK"
CHECK_TIMEOUT_S = 300

# Run by .venv-vllm's python: JSON [{"config": {...}, "target": "folder or null"}] on stdin,
# JSON {"version": ..., "results": [{"ok": bool, "how": str, "error": str}]} on stdout.
VLLM_CHECK_SCRIPT = r'''
import dataclasses, json, os, sys, logging
logging.disable(logging.WARNING)
items = json.load(sys.stdin)
import vllm
from vllm.config import SpeculativeConfig
fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
out = []
def first_line(exc):
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
def schedule_error(config):
    """vLLM's own check of num_speculative_tokens_per_batch_size (its scheduler runs it, not the config)."""
    ranges = config.get("num_speculative_tokens_per_batch_size")
    if ranges is None:
        return None, ""
    try:
        from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup
    except ImportError:
        return None, "; per-batch-size schedule not validated (no vLLM schedule check in this version)"
    try:
        largest = max(int(r[1]) for r in ranges)
        build_dynamic_sd_schedule_lookup(ranges, largest, int(config.get("num_speculative_tokens") or 1))
    except Exception as exc:
        return first_line(exc), ""
    return None, "; per-batch-size schedule validated by vLLM's scheduler check"
for item in items:
    config = dict(item["config"])
    unknown = sorted(set(config) - fields)
    if unknown:
        out.append({"ok": False, "how": "fields", "error": "unknown key(s) " + ", ".join(unknown)})
        continue
    bad, schedule = schedule_error(config)
    if bad:
        out.append({"ok": False, "how": "schedule", "error": "num_speculative_tokens_per_batch_size: " + bad})
        continue
    try:
        SpeculativeConfig(**config)
        out.append({"ok": True, "how": "built" + schedule, "error": ""})
        continue
    except Exception as exc:
        error = first_line(exc)
    target = item.get("target")
    model = config.get("model")
    local = lambda p: isinstance(p, str) and os.path.isdir(p)
    if target and local(target) and (model is None or local(model)):
        try:
            from vllm.config import ModelConfig, ParallelConfig
            SpeculativeConfig(target_model_config=ModelConfig(model=target), target_parallel_config=ParallelConfig(),
                              **config)
            out.append({"ok": True, "how": "built with the target" + schedule, "error": ""})
        except Exception as exc:
            out.append({"ok": False, "how": "built with the target", "error": first_line(exc)})
    else:
        out.append({"ok": None, "how": "fields", "error": "keys valid; not built (needs the target and draft "
                    "models locally): " + error})
print("SPECBENCH-CHECK " + json.dumps({"version": vllm.__version__, "results": out}))
'''


def _cache_file() -> Path:
    return cache_root() / "engine-checks.json"


def _venv_stamp(python: Path) -> str:
    """Identifies the vLLM install (its package folder's mtime), so the cache follows upgrades."""
    site = sorted(python.parent.parent.glob("lib/python*/site-packages/vllm"))
    return f"{python}:{site[0].stat().st_mtime if site else 0}"


def check_vllm_configs(items: list[dict], python: Path) -> tuple[str, list[dict]]:
    """Build each ``{"config", "target"}`` as vLLM's SpeculativeConfig with ``python``: (version, results)."""
    try:
        cache = read_json(_cache_file(), "engine-check cache")
    except SpecbenchError:
        cache = {}  # absent or damaged: checked again
    cache = cache if isinstance(cache, dict) else {}
    stamp = _venv_stamp(python)
    keys = [hashlib.sha1(json.dumps([stamp, it], sort_keys=True).encode()).hexdigest() for it in items]
    todo = [(k, it) for k, it in zip(keys, items) if k not in cache]
    if todo:
        proc = subprocess.run(
            [str(python), "-c", VLLM_CHECK_SCRIPT],
            input=json.dumps([it for _, it in todo]),
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
        )
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SPECBENCH-CHECK ")), None)
        if line is None:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            return "", [{"ok": None, "how": "failed", "error": f"the vLLM check did not run: {tail}"}] * len(items)
        answer = json.loads(line[len("SPECBENCH-CHECK ") :])
        for (k, _), result in zip(todo, answer["results"]):
            cache[k] = {**result, "version": answer["version"]}
        with contextlib.suppress(OSError):  # a cache that cannot be written costs a check next time
            write_json(_cache_file(), cache, indent=None)
    results = [cache[k] for k in keys]
    return (results[0].get("version", "") if results else ""), results


def sglang_parser():
    """SGLang's own server argument parser, or None when SGLang is not importable here."""
    if importlib.util.find_spec("sglang") is None:
        return None
    try:
        from sglang.srt.server_args import ServerArgs  # lazy: an optional engine (loads torch), only where installed

        parser = argparse.ArgumentParser(exit_on_error=False)
        ServerArgs.add_cli_args(parser)
        return parser
    except Exception:  # an SGLang that cannot be imported here is the same as none
        return None


class _ParseError(Exception):
    pass


def _raise(message: str):
    raise _ParseError(message)


def check_sglang_flags(snippet: str, parser) -> tuple[bool, str]:
    """Parse the flags of a ``python -m sglang.launch_server ...`` snippet with SGLang's parser:
    (True, '') or (False, the parser's message)."""
    words = shlex.split(snippet)
    args = words[words.index("sglang.launch_server") + 1 :] if "sglang.launch_server" in words else words
    previous = parser.error
    parser.error = _raise  # argparse would print usage and exit
    try:
        _, unknown = parser.parse_known_args(args)
    except (_ParseError, argparse.ArgumentError, ValueError, TypeError) as exc:
        return False, (str(exc).splitlines() or ["rejected"])[0][:300]
    finally:
        parser.error = previous
    if unknown:
        return False, "unrecognized arguments: " + " ".join(unknown)[:300]
    return True, ""


def validate_settings(entries: list[tuple[dict, str | None]], *, vllm_python: Path | None) -> None:
    """Check the `EngineSetting`s of each ``({engine: setting}, target folder or None)`` in place:
    ``checked`` says how; a failure turns ``supported`` off with the engine's own message as a note.

    ``vllm_python``: .venv-vllm's interpreter (None or missing: no vLLM check); the target folder
    lets configs that need the target (draft_model, EAGLE) be built, not only key-checked.
    """
    if os.environ.get(SKIP_ENV):
        return
    for engine in catalogue_engines.names():
        check = catalogue_engines.checker(engine)
        pairs = [(settings[engine], target) for settings, target in entries if engine in settings]
        if check is not None and pairs:
            check(pairs, vllm_python)


def check_vllm_settings(pairs: list[tuple], vllm_python: Path | None) -> None:
    """vLLM's entry's check: each config built as vLLM's ``SpeculativeConfig`` by .venv-vllm's interpreter."""
    vllm_pairs = [(setting, target) for setting, target in pairs if setting.config]
    if not vllm_pairs or vllm_python is None or not vllm_python.exists():
        return
    items = [{"config": setting.config, "target": target} for setting, target in vllm_pairs]
    version, results = check_vllm_configs(items, vllm_python)
    for (setting, _), result in zip(vllm_pairs, results):
        if result["ok"] is True:
            how = result["how"]
            schedule = how[how.index(";") :] if ";" in how else ""  # what vLLM said about a per-batch schedule
            setting.checked = (
                f"built as SpeculativeConfig by vLLM {version} ({vllm_python.parent.parent.name}){schedule}"
            )
        elif result["ok"] is False:
            setting.checked = f"rejected by vLLM {version}'s SpeculativeConfig"
            setting.supported = False
            setting.notes.append(f"vLLM {version}: {result['error']}")
        else:
            setting.checked = (
                f"keys checked against vLLM {version}'s SpeculativeConfig fields; not built ({result['error']})"
            )


def check_llamacpp_settings(pairs: list[tuple], vllm_python: Path | None) -> None:
    """llama.cpp's entry's check: the flags parsed by the installed llama-server (none installed: unchecked)."""
    settings = [setting for setting, _ in pairs if setting.config]
    if not settings:
        return
    try:
        binary = server_binary()
    except SpecbenchError:
        return  # not installed: the setting keeps the version its flags were read from
    check_llamacpp_flags(settings, binary)


def check_sglang_settings(pairs: list[tuple], vllm_python: Path | None) -> None:
    """SGLang's entry's check: each command line parsed by SGLang's own argument parser, where importable."""
    settings = [setting for setting, _ in pairs if setting.snippet]
    parser = sglang_parser() if settings else None
    if parser is None:
        return
    sglang_version = package_version("sglang")
    for setting in settings:
        ok, error = check_sglang_flags(setting.snippet, parser)
        setting.checked = (
            f"parsed by SGLang {sglang_version}'s argument parser"
            if ok
            else f"rejected by SGLang {sglang_version}'s argument parser"
        )
        if not ok:
            setting.supported = False
            setting.notes.append(f"SGLang {sglang_version}: {error}")


def local_model_folder(spec: str) -> str | None:
    """A target spec's local folder when it exists already; None otherwise — checking settings
    never converts or downloads a model (`models.resolve.model_folder` with ``build=False``)."""
    return model_folder(spec, build=False)


def default_vllm_python() -> Path:
    """.venv-vllm's interpreter (`specbench.backends.vllm.env`: $SPECBENCH_VLLM_VENV, else .venv-vllm at the
    repository root); it may not exist."""
    return default_venv() / "bin" / "python"


def check_llamacpp_flags(settings: list, binary: Path) -> None:
    """Have ``binary`` (llama-server) parse each setting's flags: ``checked`` says it did, a rejection turns
    ``supported`` off with llama.cpp's own error line."""
    commit = build_info(binary).get("llama_cpp_commit", "")
    name = f"llama-server{' (llama.cpp@' + commit + ')' if commit else ''}"
    for setting in settings:
        try:
            done = subprocess.run(
                [str(binary), *setting.config["flags"], "--version"],
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            setting.checked = f"not parsed: {name} did not run ({type(exc).__name__})"
            continue
        if done.returncode == 0:
            setting.checked = f"parsed by {name}"
        else:
            lines = [line for line in (done.stderr + done.stdout).splitlines() if "error" in line.lower()]
            setting.checked = f"rejected by {name}"
            setting.supported = False
            setting.notes.append(f"llama.cpp: {(lines or ['exit ' + str(done.returncode)])[0][:200]}")


def check_engine_settings(entries: list[tuple[dict, str | None]]) -> None:
    """`validate_settings` with the default .venv-vllm (what ``specbench recommend`` runs)."""
    validate_settings(entries, vllm_python=default_vllm_python())
