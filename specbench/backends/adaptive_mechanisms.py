"""The adaptive mechanisms each engine ships, as contenders for `specbench confirm` (detected, never assumed).

A recommendation names a static configuration; the engine it runs in may adapt on its own. Each
backend's registry entry names a function here (``BackendKind.adaptive``) that lists, for a drafter
at the recommended γ, every mechanism the installed engine has — as a verify-length schedule to run,
γ its cap — or one line saying why it cannot run:

* the own engine: its schedules (`specbench.engine.strategies.schedule`): ``heuristic`` (transformers' length
  rule) for every chain drafter; ``threshold`` (confidence 0.4, transformers' default
  ``assistant_confidence_threshold``) and ``dspark`` only for drafters whose drafts carry
  probabilities (the drafter catalogue's ``confident``);
* vLLM: the acceptance-adaptive K (``speculative_config.enable_adaptive_verification``, an online
  acceptance estimator sizing each request's verification), detected in the installed vLLM's
  ``SpeculativeConfig``; vLLM 0.32 documents it for ``method: dspark`` only, so any other method
  gets the absent line. (vLLM's per-batch-size schedule is built from the sweep's verdicts by the
  confirmation itself: `specbench.measure.run.confirm`.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from specbench.backends.registry import Mechanism
from specbench.backends.vllm.env import vllm_python
from specbench.catalogue import drafters as catalogue
from specbench.errors import SpecbenchError
from specbench.models.cache import cache_root
from specbench.safe_files import read_json, write_json

THRESHOLD = 0.4  # transformers' default assistant_confidence_threshold
ADAPTIVE_K_FIELD = "enable_adaptive_verification"
ADAPTIVE_K_METHODS = ("dspark",)  # vLLM 0.32's SpeculativeConfig: "Currently only supported for method='dspark'"
BATCH_SCHEDULE_FIELD = "num_speculative_tokens_per_batch_size"
PROBE_TIMEOUT_S = 300

PROBE = r"""
import dataclasses, json, logging
logging.disable(logging.WARNING)
import vllm
from vllm.config import SpeculativeConfig
print("SPECBENCH-FIELDS " + json.dumps({"version": vllm.__version__,
                                        "fields": sorted(f.name for f in dataclasses.fields(SpeculativeConfig))}))
"""


def own_mechanisms(options: dict, drafter: str, gamma: int) -> list[Mechanism]:
    """The own engine's verify-length schedules at cap ``gamma``."""
    confident = catalogue.get(drafter).confident
    if gamma > 1:
        out = [Mechanism("heuristic schedule", "heuristic")]
    else:  # its length only moves between 1 and the cap
        out = [
            Mechanism(
                "heuristic schedule",
                absent=f"the own engine's heuristic schedule capped at γ = {gamma} drafts {gamma} every round: "
                "the recommendation itself",
            )
        ]
    for name, params in (("threshold", (("threshold", THRESHOLD),)), ("dspark", ())):
        if confident:
            out.append(Mechanism(f"{name} schedule", name, params))
        else:
            out.append(
                Mechanism(
                    f"{name} schedule",
                    absent=f"the own engine's {name} schedule reads the drafter's "
                    f"confidence, which {drafter} does not have (it proposes without probabilities)",
                )
            )
    return out


def vllm_mechanisms(options: dict, drafter: str, gamma: int) -> list[Mechanism]:
    """vLLM's acceptance-adaptive K, where the installed vLLM has it and it adapts this drafter's method."""
    name = "vLLM acceptance-adaptive K"
    try:
        found = vllm_features(vllm_python(venv=options.get("venv"), python=options.get("python")))
    except SpecbenchError as exc:
        return [Mechanism(name, absent=f"no vLLM to ask: {exc}")]
    version = found.get("version", "?")
    if ADAPTIVE_K_FIELD not in found.get("fields", []):
        return [
            Mechanism(
                name,
                absent=f"the installed vLLM {version} has no acceptance-adaptive K "
                f"(SpeculativeConfig has no {ADAPTIVE_K_FIELD})",
            )
        ]
    method = catalogue.get(drafter).vllm_method
    if method not in ADAPTIVE_K_METHODS:
        return [
            Mechanism(
                name,
                absent=f"the installed vLLM {version} has it ({ADAPTIVE_K_FIELD}) for method "
                f"{', '.join(ADAPTIVE_K_METHODS)} only, not {method} ({drafter})",
            )
        ]
    return [Mechanism(name, "adaptive-k")]


def vllm_features(python: Path) -> dict:
    """{"version", "fields"}: the installed vLLM's SpeculativeConfig fields (asked of its own interpreter once per
    install: importing vLLM takes half a minute), cached beside the engine checks."""
    site = sorted(python.parent.parent.glob("lib/python*/site-packages/vllm"))
    stamp = f"{python}:{site[0].stat().st_mtime if site else 0}"
    cache = cache_root() / "vllm-features.json"
    try:
        known = read_json(cache, "vLLM features cache")
    except SpecbenchError:
        known = {}
    known = known if isinstance(known, dict) else {}
    if stamp in known:
        return known[stamp]
    try:
        done = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecbenchError(f"{python} could not be asked for vLLM's features: {exc}") from None
    line = next((x for x in done.stdout.splitlines() if x.startswith("SPECBENCH-FIELDS ")), None)
    if line is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise SpecbenchError(f"{python} could not import vLLM: {tail}")
    found = json.loads(line.split(" ", 1)[1])
    known[stamp] = found
    try:
        write_json(cache, known, indent=None)
    except (OSError, SpecbenchError):  # a cache is a convenience: a folder that cannot hold it costs a probe
        pass
    return found
