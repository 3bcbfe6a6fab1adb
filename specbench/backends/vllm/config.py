"""What a sweep asks of vLLM: engine options and one `speculative_config` per configuration.

No vLLM import here: the mapping is checked when the spec is built, before any engine starts,
so a drafter or tree that vLLM cannot run fails in one line (exit 2) instead of after minutes.
Both vLLM backends (in process, and ``vllm-server``) take their config from `speculative_config`
here; the drafter → config mapping itself is `specbench.analysis.settings.vllm_speculative`, the one that
``specbench recommend --engine vllm`` prints and ``export-drafter`` writes.

* ngram → ``{"method": "ngram", "num_speculative_tokens": γ, "prompt_lookup_min": n_min,
  "prompt_lookup_max": n_max}`` (specbench's defaults n_min 1, n_max 3);
* draft-model → ``{"method": "draft_model", "model": <local folder of the drafter>, ...}``;
* eagle / eagle3 / eagle3.1 / medusa → ``{"method": ..., "model": checkpoint}`` only when ``checkpoint`` is
  a folder vLLM loads for the kind (its own layout, or the speculators format holding this kind) or a hub
  id, passed through (`checkpoint_problem`);
* mtp → refused: vLLM's MTP runs layers that live inside the target's checkpoint;
* trees other than ``chain`` → refused: vLLM 0.32's `SpeculativeConfig` has no tree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specbench.analysis.settings.vllm_speculative import draft_model_spec
from specbench.analysis.settings.vllm_speculative import speculative_config as build_speculative_config
from specbench.backends.options import check_backend_options
from specbench.catalogue import drafters as catalogue
from specbench.engine.drafters.checkpoints.checkpoint_location import is_shipped, is_speculators, looks_like_hub_id
from specbench.engine.strategies.schedule import ADAPTIVE_K, BATCH_SIZE, SERVING_SCHEDULES, schedule_ranges
from specbench.errors import SpecbenchError
from specbench.models.resolve import DTYPES
from specbench.safe_files import read_json


def check_options(options: dict, where: str = "backend vllm") -> dict:
    """The vLLM backend's options checked against its model (`specbench.backends.options`)."""
    return check_backend_options("vllm", options, where)


def engine_kwargs(options: dict, *, device: str, dtype: str, seed: int, max_concurrency: int) -> dict:
    """Keyword arguments for `vllm.LLM` (the model and speculative_config are added per configuration)."""
    cpu = not str(device).startswith("cuda")
    vllm_dtype = DTYPES.get(str(options.get("dtype", dtype)), str(options.get("dtype", dtype)))
    kwargs = {
        "dtype": vllm_dtype,
        "seed": int(seed),
        "max_model_len": int(options.get("max_model_len", 2048)),
        "max_num_seqs": int(options.get("max_num_seqs", max(1, max_concurrency))),
        "enforce_eager": bool(options.get("enforce_eager", cpu)),
    }
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "distributed_executor_backend",
        "gpu_memory_utilization",
    ):
        if key in options:
            kwargs[key] = options[key]
    if not cpu and "kv_cache_gib" in options:
        kwargs["kv_cache_memory_bytes"] = int(float(options["kv_cache_gib"]) * 2**30)
    kwargs.update(options.get("engine_args") or {})
    return kwargs


def worker_env(options: dict, device: str) -> dict:
    """Environment variables for the worker (CPU: the KV cache size vLLM must be told)."""
    if str(device).startswith("cuda"):
        return {}
    return {"VLLM_CPU_KVCACHE_SPACE": str(int(float(options.get("kv_cache_gib", 2))) or 1)}


def checkpoint_problem(kind: str, checkpoint: str | None) -> str | None:
    """Why vLLM cannot load drafter ``kind`` from ``checkpoint`` (None: it can). It can load a folder in its
    own layout of the kind (`export-drafter --format vllm`), a folder in the speculators format holding
    this kind (its ``speculators_model_type`` and flags name it: `catalogue.from_speculators`), or a hub id,
    passed through as given (vLLM downloads and reads it; its kind is not checked offline)."""
    entry = catalogue.get(kind)
    formats = (
        "a folder in vLLM's layout" + (" or the speculators format" if entry.speculators else "") + ", or a hub id"
    )
    if not checkpoint:
        return f"it needs checkpoint=<{formats}>"
    if is_shipped(checkpoint):
        how = "speculators" if entry.speculators else "vllm"
        return (
            f"checkpoint {checkpoint} is in specbench's own format, which vLLM cannot load; export it: "
            f"specbench export-drafter {kind} --checkpoint {checkpoint} --format {how} --out DIR"
        )
    folder = Path(str(checkpoint)).expanduser()
    if not folder.is_dir():
        return None if looks_like_hub_id(checkpoint) else f"checkpoint {checkpoint} is not a folder here nor a hub id"
    try:
        data = read_json(folder / "config.json", "drafter config")
    except SpecbenchError:
        return f"{folder} has no readable config.json (it needs {formats})"
    if not isinstance(data, dict) or data.get("format") == "specbench-drafter":
        how = "speculators" if entry.speculators else "vllm"
        return (
            f"{folder} is in specbench's own format, which vLLM cannot load; export it: "
            f"specbench export-drafter {kind} --checkpoint {folder} --format {how} --out DIR"
        )
    if is_speculators(data):
        found = catalogue.from_speculators(data)  # one line when no kind has it
        return None if found == kind else f"{folder} holds a speculators {found} head, not {kind}"
    if entry.export is None:
        return f"{folder} is not in the speculators format, the only one vLLM runs {kind} from"
    return None


def check_runnable(config) -> None:
    """Refuse, in one line, a configuration a vLLM engine started by specbench cannot run: a tree,
    a kind whose layers live in the target's checkpoint (MTP), a draft model without a model, a
    trained head without a checkpoint in vLLM's layout, a drafter vLLM has no method for (the
    drafter's catalogue entry says which it is: ``vllm_weights``, ``vllm_method``)."""
    name, params = config.drafter.type, config.drafter.params_dict
    kind = catalogue.get(name)
    if config.tree != "chain":
        raise SpecbenchError(
            f"tree '{config.tree}' cannot run on vLLM: vLLM 0.32's SpeculativeConfig has no token "
            "tree (use trees: [chain] with backend vllm)"
        )
    if kind.vllm_weights == "target":
        raise SpecbenchError(
            f"drafter {name} cannot run on vLLM: vLLM's {(kind.vllm_method or name).upper()} uses layers inside the "
            "target's own checkpoint (DeepSeek-V3, Qwen3-Next, ...), which specbench's targets do "
            "not have"
        )
    if kind.vllm_weights == "model" and not draft_model_spec(name, params):
        raise SpecbenchError(f"drafter {name} cannot run on vLLM without a model (params: {{model: NAME}})")
    if kind.vllm_weights == "checkpoint":
        problem = checkpoint_problem(name, draft_model_spec(name, params))
        if problem:
            raise SpecbenchError(f"drafter {name} cannot run on vLLM: {problem}")
    if kind.vllm_method is None:
        raise SpecbenchError(f"drafter {name} cannot run on vLLM")


def check_engine_sweep(options: dict, configs: list, where: str) -> None:
    """The in-process vLLM backend's check of a sweep: its options, then every configuration's config."""
    check_options(options, f"{where}: backend vllm")
    for config in configs:
        speculative_config(config, None, options)  # fails here, not after the engine started


def check_server_sweep(options: dict, configs: list, where: str) -> None:
    """The vllm-server backend's check of a sweep: its options, then every configuration's speculative_config
    (the same as the in-process backend's)."""
    check_backend_options("vllm-server", options, f"{where}: backend vllm-server")
    for config in configs:
        speculative_config(config)


def speculative_config(
    config, resolve_model: Callable[[str], str] | None = None, options: dict | None = None
) -> dict | None:
    """vLLM's ``speculative_config`` for a `RunConfig` (None for the target-only baseline), as both
    vLLM backends run it: `check_runnable`, then the one mapping (`analysis.settings.vllm_speculative`).

    ``resolve_model`` turns a model spec (alias, checkpoint folder) into what vLLM loads (a local
    folder); without it the spec is sent as given (enough for validation). ``options``: the
    backend's options (``draft_tensor_parallel_size``).
    """
    if config.drafter is None or config.gamma == 0:
        return None
    check_runnable(config)
    resolve = resolve_model or str
    parallel = (options or {}).get("draft_tensor_parallel_size")
    per_batch_size, adaptive = serving_schedule(config.schedule)
    return build_speculative_config(
        config.drafter.type,
        config.drafter.params_dict,
        int(config.gamma),
        model_name=lambda spec: resolve(str(spec)),
        draft_tensor_parallel_size=parallel,
        per_batch_size=per_batch_size,
        adaptive=adaptive,
    )


def serving_schedule(schedule) -> tuple[list[list[int]] | None, bool]:
    """A configuration's schedule (`specbench.engine.strategies.schedule`) as vLLM takes it: the per-batch-size ranges
    (``num_speculative_tokens_per_batch_size``; None: none) and whether K adapts to acceptance
    (``enable_adaptive_verification``); the own engine's schedules cannot run in vLLM."""
    if schedule is None or schedule.is_fixed:
        return None, False
    if schedule.name not in SERVING_SCHEDULES:
        raise SpecbenchError(
            f"schedule '{schedule.label}' cannot run in vLLM: schedules other than fixed run in "
            "specbench's own engine, live (vLLM takes its own: batch-size, adaptive-k)"
        )
    ranges = schedule_ranges(schedule) if schedule.name == BATCH_SIZE else None
    return ranges, schedule.name == ADAPTIVE_K or bool(schedule.params_dict.get("adaptive"))
