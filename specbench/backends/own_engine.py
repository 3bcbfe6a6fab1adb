"""specbench's own engine as a backend: the target and every drafter in this process.

`OwnEngineBackend` is the sweep's default backend (``backend: own``): it loads the target once,
builds one drafter per drafter setting and one engine per configuration (each warmed up,
untimed, through every shape its generations will meet: `specbench.engine.warm_up`; a sweep's worker
asks for it before timing starts, `warm_shapes`), and measures every round (draft and verify time, accepted
tokens). It also offers replay (`specbench.measure.replay.replayer`), which needs the engine's
drafters and the target's decoder. `run_prompt` is the work behind ``specbench run``.

CPU threads (option ``threads``): unset, torch's count serves everything; a number, the process
computes with that many; ``auto``, each engine's target forwards run at the count measured
fastest for its verify step (`specbench.engine.cpu.threads.probe_threads`, once per verify size) and
its drafter's at the count fastest for the drafter's decode step (once per drafter with a model;
model-free drafters take the target's). `thread_report` is what run.json records.

CPU weight layout and dtype (option ``layout``, and ``dtype: auto``): unset, the decoder's default for
the dtype (`specbench.engine.cpu.weight_layout.default_layout`); ``auto``, the layouts of the dtype measured
on this machine (`specbench.engine.cpu.layout_probe`, cached per machine and model); a layout name, that
layout. ``dtype: auto`` loads the target in float32, casts a copy to each 16-bit dtype this CPU runs
natively, measures every dtype × layout and keeps the fastest lossless one: the drafters load in that
dtype too. `cpu_target_decoder` does it for sweeps and ``specbench run``; `layout_report` is what run.json
records.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable

import torch

from specbench.backends.base import GenerationResult, Request, RoundCallback, StatusCallback
from specbench.backends.options import check_backend_options
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.engine.cpu.layout_probe import (
    LayoutChoice,
    auto_dtypes,
    check_cpu_settings,
    choose_layout,
    default_choice,
    forced_choice,
)
from specbench.engine.cpu.threads import RoleThreads, ThreadProbe, available_cores, probe_threads
from specbench.engine.decoder import NativeDecoder, make_decoder
from specbench.engine.device import device_info
from specbench.engine.drafters import check_params, make_drafter
from specbench.engine.drafters.base import check_draft_depth
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.engine.strategies.nested import NestedDriver
from specbench.engine.strategies.online_drafting import OnlineDriver
from specbench.engine.tree import shape_for
from specbench.engine.warm_up import WARMUP_TOKENS, warm_engine
from specbench.errors import SpecbenchError
from specbench.models import limits
from specbench.models.prompting import encode_conversation
from specbench.models.resolve import LoadedModel, load_model, torch_dtype

PROBE_VERIFY_TOKENS = 5  # the verify size the layout probe measures when the caller names none (γ = 4)


def cpu_target_decoder(
    target,
    *,
    dtype: str,
    layout: str | None,
    verify_tokens: int,
    kernels: str = "auto",
    compile: bool = False,
    thread_counts: tuple[int, ...] | None = None,
    status: StatusCallback = lambda message: None,
) -> tuple:
    """The target's decoder in the CPU layout (and, for ``dtype`` auto, the dtype) the settings ask for, and
    the `LayoutChoice` (None off the CPU or on a non-native architecture). ``target`` (a `LoadedModel`,
    loaded in float32 for dtype auto) is switched to the chosen dtype's model."""
    decoder = make_decoder(target.model, kernels=kernels, compile=compile and dtype != "auto" and layout is None)
    if not isinstance(decoder, NativeDecoder) or decoder.device.type != "cpu":
        if dtype == "auto" or layout is not None:
            raise SpecbenchError(
                f"dtype auto and layout need specbench's native decoder on the CPU; '{target.name}' "
                "runs through the generic one"
            )
        return decoder, None
    if layout is None and dtype != "auto":
        return decoder, default_choice(decoder.dtype, verify_tokens)
    if layout not in (None, "auto"):
        choice = forced_choice(layout, decoder.dtype, verify_tokens)
        decoder.use_layout(choice.layout)
    else:
        decoders = {target.dtype: decoder}
        for name in auto_dtypes() if dtype == "auto" else []:
            if name not in decoders:  # a 16-bit copy of the float32 weights, as loading in that dtype gives
                decoders[name] = make_decoder(copy.deepcopy(target.model).to(torch_dtype(name)), kernels=kernels)
        choice = choose_layout(
            decoders, verify_tokens, target.weights_sha256 or target.name, thread_counts=thread_counts, status=status
        )
        decoder = decoders[choice.dtype]
        target.model, target.dtype = decoder.model, choice.dtype
    if compile:
        decoder.compile_steps()
    return decoder, choice


class OwnEngineBackend:
    """The target and drafters in this process, through `SpeculativeEngine`."""

    name = "own"

    def __init__(
        self,
        *,
        target: str,
        device: str,
        dtype: str,
        kernels: str = "auto",
        compile: bool = False,
        seed: int = 0,
        threads: int | str | None = None,
        layout: str | None = None,
        verify_tokens: int = PROBE_VERIFY_TOKENS,
    ):
        check_cpu_settings(device, dtype, layout, "backend own")
        self.target_spec, self.device, self.dtype = target, device, dtype
        self.layout_setting, self.verify_tokens = layout, verify_tokens
        self.layout_choice: LayoutChoice | None = None
        self.kernels, self.compile, self.seed = kernels, compile, seed
        if threads is not None and device != "cpu":
            raise SpecbenchError(f"threads: CPU threads are chosen for device cpu only, not '{device}'")
        self.thread_setting = threads  # None, a count or "auto"
        self._probes: dict[str, ThreadProbe] = {}  # "target k" / drafter label -> its probe
        self._used: dict[str, dict[str, int]] = {"target": {}, "drafters": {}}  # what run.json records
        self.device_name = ""
        self.target: LoadedModel | None = None  # loaded by `start`
        self.decoder = None
        self._drafters: dict = {}
        self._engines: dict = {}
        self._warmed: dict[str, dict] = {}  # configuration label -> what its warm-up ran (`warm_up_report`)
        self._status: StatusCallback = lambda message: None

    def start(self, status: StatusCallback) -> None:
        self._status = status
        torch.manual_seed(self.seed)
        if isinstance(self.thread_setting, int):
            torch.set_num_threads(self.thread_setting)
        status(f"loading target {self.target_spec}")
        self.target = target = load_model(
            self.target_spec, device=self.device, dtype="fp32" if self.dtype == "auto" else self.dtype
        )
        if target.tokenizer is None:
            raise SpecbenchError(f"target '{self.target_spec}' has no tokenizer; sweeps need text prompts")
        counts = None
        if self.thread_setting == "auto":
            counts = tuple(range(1, available_cores() + 1))
        elif isinstance(self.thread_setting, int):
            counts = (self.thread_setting,)
        self.decoder, self.layout_choice = cpu_target_decoder(
            self.target,
            dtype=self.dtype,
            layout=self.layout_setting,
            verify_tokens=self.verify_tokens,
            kernels=self.kernels,
            compile=self.compile,
            thread_counts=counts,
            status=status,
        )
        if self.layout_choice is not None and self.layout_choice.setting != "default":
            status(f"CPU: {self.layout_choice.summary()}")
        self.device_name = device_info(self.device)["device_name"]

    @property
    def dtype_used(self) -> str:
        """The dtype the target's weights run in (dtype auto: the measured choice, once started)."""
        return self.target.dtype if self.target is not None else self.dtype

    def layout_report(self) -> dict | None:
        """run.json's ``cpu_layout``: the setting, the dtype and layout chosen, why, and the probe's
        measurements (`LayoutChoice.to_dict`). None off the CPU."""
        return None if self.layout_choice is None else self.layout_choice.to_dict()

    @property
    def tokenizer(self):
        return self.target.tokenizer

    @property
    def threads(self) -> int:
        if self.device != "cpu":
            return 0
        chosen = [*self._used["target"].values(), *self._used["drafters"].values()]
        return max(chosen) if self.thread_setting == "auto" and chosen else int(torch.get_num_threads())

    def _probe(self, key: str, decoder, verify_tokens: int) -> ThreadProbe:
        if key not in self._probes:
            self._status(f"timing CPU threads for {key}")
            self._probes[key] = probe_threads(decoder, verify_tokens)
        return self._probes[key]

    def _role_threads(self, engine: SpeculativeEngine, setting) -> RoleThreads | None:
        """The engine's thread counts under ``threads: auto`` (None otherwise), noted for run.json."""
        verify_tokens = 1 + (engine.shape.num_nodes if engine.shape is not None else 0)
        if self.thread_setting != "auto":
            count = int(torch.get_num_threads())
            self._used["target"][str(verify_tokens)] = count
            if setting is not None:
                self._used["drafters"][setting.label] = count
            return None
        target = self._probe(f"target {verify_tokens}", self.decoder, verify_tokens).best(verify_tokens)
        self._used["target"][str(verify_tokens)] = target
        drafter = target
        decoder = getattr(engine.drafter, "decoder", None)
        if setting is not None and isinstance(decoder, NativeDecoder):  # a draft model's own decoder
            drafter = self._probe(setting.label, decoder, 2).best(1)
        if setting is not None:
            self._used["drafters"][setting.label] = drafter
        return RoleThreads(target=target, drafter=drafter)

    def thread_report(self) -> dict | None:
        """run.json's ``threads``: the setting, the count each target verify size and each drafter ran
        with, and (auto) the probes' timings. None off the CPU."""
        if self.device != "cpu":
            return None
        report: dict[str, object] = {
            "setting": "default" if self.thread_setting is None else self.thread_setting,
            "target": dict(self._used["target"]),
            "drafters": dict(self._used["drafters"]),
        }
        if self._probes:
            report["probes"] = {key: probe.to_dict() for key, probe in self._probes.items()}
        return report

    @property
    def _loaded(self) -> LoadedModel:
        assert self.target is not None, "start() loads the target"
        return self.target

    @property
    def context_window(self) -> int | None:
        return limits.context_window(self._loaded.model)

    def model_hashes(self, drafters: list) -> dict[str, str]:
        sha256 = self._loaded.weights_sha256
        hashes = {self.target_spec: sha256} if sha256 else {}
        for setting in drafters:
            model = getattr(self.drafter(setting), "model", None)
            weights = getattr(model, "specbench_weights_sha256", None)
            if weights:
                hashes[setting.label] = weights
        return hashes

    def check_configs(self, configs) -> None:
        """Refuse, before run.json is written, a configuration deeper than its drafter drafts (a γ beyond
        Medusa's heads or MTP's modules): the record would hold a γ that never ran."""
        for config in dict.fromkeys(c for c in configs if not c.is_baseline):
            check_draft_depth(self.drafter(config.drafter), shape_for(config.tree, config.gamma))

    def drafter(self, setting):
        """The drafter of a `DrafterSetting`, built once per sweep."""
        if setting not in self._drafters:
            self._status(f"preparing drafter {setting.label}")
            self._drafters[setting] = make_drafter(
                setting.type, self.target, setting.params_dict, device=self.device, dtype=self.dtype_used
            )
            if self.compile:
                self._drafters[setting].compile_steps()
        return self._drafters[setting]

    def warm_shapes(self, configs, prompt_ids: list[int], context: int) -> None:
        """Before timing: build every configuration of ``configs`` and run, untimed, every shape its timed
        generations will meet on prompts like ``prompt_ids`` holding up to ``context`` tokens (prompt + new
        ones): its verify sizes after a short and a long cache, the cache sized for ``context``, a short
        generation (`specbench.engine.warm_up.warm_engine`). An engine built before is warmed again (a new
        call may reach a longer context); an online one, already learning, is not."""
        for config in dict.fromkeys(configs):
            built = config in self._engines
            engine = self._engine(config, prompt_ids, context)
            strategy = getattr(config, "strategy", None)
            if built and not (strategy is not None and strategy.is_online):
                self._note_warm(config, warm_engine(engine, prompt_ids, context))

    def _note_warm(self, config, shapes) -> None:
        label = config.label
        before = self._warmed.get(label)
        context = max(shapes.context, before["context"]) if before else shapes.context
        self._warmed[label] = {**shapes.to_dict(), "context": context}

    def warm_up_report(self) -> dict:
        """run.json's ``warm_up``: per configuration, the verify sizes (tokens per target forward) its
        warm-up ran, the longest context it reached and the KV-cache capacity it left."""
        return {"configurations": dict(self._warmed)}

    def _engine(self, config, warmup_ids: list[int], context: int) -> SpeculativeEngine:
        """The engine of ``config``, built on first use and warmed up then (`warm_engine`) for
        generations of up to ``context`` tokens on prompts like ``warmup_ids``."""
        if config not in self._engines:
            strategy = getattr(config, "strategy", None)
            online = strategy is not None and strategy.is_online
            drafter = (
                None
                if config.is_baseline
                else (self._own_drafter(config.drafter) if online else self.drafter(config.drafter))
            )
            sampling = SamplingParams(config.temperature, config.top_k, config.top_p)
            driver: NestedDriver | OnlineDriver | None = None  # None: sequential rounds
            learner: OnlineDriver | None = None
            if strategy is not None and strategy.nested:
                driver = NestedDriver(prepared=strategy.prepared)
            elif strategy is not None and strategy.online is not None:  # `online` above
                driver = learner = OnlineDriver(strategy.online)
            engine = SpeculativeEngine(
                self.target,
                drafter,
                gamma=config.gamma,
                tree=config.tree,
                sampling=sampling,
                decoder=self.decoder,
                schedule=config.schedule,
                driver=driver,
            )
            engine.threads = self._role_threads(engine, config.drafter)
            self._note_warm(config, warm_engine(engine, warmup_ids, context))  # untimed, before any learning
            if learner is not None:
                learner.arm()  # learning starts with the first measured prompt
            self._engines[config] = engine
        return self._engines[config]

    def _own_drafter(self, setting):
        """A drafter of ``setting`` for one configuration alone (an online one changes its weights)."""
        self._status(f"preparing drafter {setting.label} (online: a copy of its own)")
        return make_drafter(setting.type, self.target, setting.params_dict, device=self.device, dtype=self.dtype_used)

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
        engine = self._engine(config, prompt_ids, len(prompt_ids) + max_new_tokens)
        return engine.generate(prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos, on_round=on_round)

    def generate_batch(self, config, requests: list[Request], concurrency: int) -> list[GenerationResult]:
        if concurrency != 1:
            raise SpecbenchError(
                f"the own engine runs one request at a time (concurrency {concurrency} asked): "
                "measure concurrency with a serving-engine backend (backend: vllm)"
            )
        return [
            self.generate(config, r.prompt_ids, r.max_new_tokens, seed=r.seed, stop_at_eos=r.stop_at_eos)
            for r in requests
        ]

    def close(self) -> None:
        self._engines.clear()
        self._drafters.clear()


def own_backend(options: dict, *, target: str, device: str, dtype: str, seed: int = 0) -> OwnEngineBackend:
    """The own engine through the registry's common constructor (options: kernels, compile, threads, layout,
    verify_tokens: the verify size the layout probe measures; checked by `specbench.backends.options`)."""
    options = check_backend_options("own", options)
    return OwnEngineBackend(
        target=target,
        device=device,
        dtype=dtype,
        seed=seed,
        kernels=options.get("kernels", "auto"),
        compile=options.get("compile", False),
        threads=options.get("threads"),
        layout=options.get("layout"),
        verify_tokens=options.get("verify_tokens", PROBE_VERIFY_TOKENS),
    )


def timed_generation(
    engine: SpeculativeEngine, prompt_ids: list[int], max_new_tokens: int, *, seed: int, stop_at_eos: bool
):
    """A short untimed warm-up on the same prompt, then the measured generation."""
    engine.generate(prompt_ids, min(WARMUP_TOKENS, max_new_tokens), seed=seed, stop_at_eos=stop_at_eos)
    return engine.generate(prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos)


def run_prompt(
    *,
    target: str,
    drafter: str,
    params: dict,
    gamma: int,
    sampling: SamplingParams,
    prompt: str,
    tree: str = "chain",
    kernels: str = "auto",
    compile: bool = False,
    max_new_tokens: int,
    seed: int = 0,
    baseline: bool = False,
    chat: bool = True,
    stop_at_eos: bool = True,
    device: str = "cpu",
    dtype: str = "fp32",
    layout: str | None = None,
    status: Callable[[str], None] | None = None,
) -> dict:
    """Run ``prompt`` with the given drafter (and optionally the γ=0 baseline); return a report dict."""
    say = status or (lambda message: None)
    if drafter != TARGET_ONLY:
        check_params(drafter, params)  # bad parameters fail before any model loads
    check_cpu_settings(device, dtype, layout, "run")
    if gamma > 0 and drafter == TARGET_ONLY:
        raise SpecbenchError("gamma > 0 needs a drafter")
    say(f"loading target {target}")
    target_model = load_model(target, device=device, dtype="fp32" if dtype == "auto" else dtype)
    prompt_ids = encode_conversation(target_model.tokenizer, [prompt], chat=chat)
    tokenizer = target_model.tokenizer
    assert tokenizer is not None  # encode_conversation refused a model without one
    limits.check_context(target_model.model, target, len(prompt_ids), max_new_tokens)
    verify_tokens = 1 if gamma == 0 else 1 + shape_for(tree, gamma).num_nodes
    decoder, choice = cpu_target_decoder(
        target_model,
        dtype=dtype,
        layout=layout,
        verify_tokens=min(verify_tokens, 64),
        kernels=kernels,
        compile=compile,
        status=say,
    )
    dtype = target_model.dtype
    draft = None
    if gamma > 0:
        say(f"preparing drafter {drafter}")
        draft = make_drafter(drafter, target_model, params, device=device, dtype=dtype)
    say("generating")
    engine = SpeculativeEngine(
        target_model,
        draft,
        gamma=gamma,
        tree=tree,
        sampling=sampling,
        kernels=kernels,
        compile=compile,
        decoder=decoder,
    )
    result = timed_generation(engine, prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos)
    report = {
        "target": target,
        "drafter": drafter if gamma > 0 else TARGET_ONLY,
        "drafter_params": params,
        "gamma": gamma,
        "tree": tree if gamma > 0 else "chain",
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "device": str(engine.device),
        "dtype": dtype,
        "layout": None if choice is None else choice.summary(),
        "cpu_layout": None if choice is None else choice.to_dict(),
        "text": tokenizer.decode(result.tokens, skip_special_tokens=True),
        "output_sha1": hashlib.sha1(str(result.tokens).encode()).hexdigest(),
        "metrics": result.metrics(max(gamma, 1)),
    }
    if baseline:
        say("generating the target-only baseline")
        base_engine = SpeculativeEngine(target_model, None, gamma=0, sampling=sampling, decoder=engine.decoder)
        base = timed_generation(base_engine, prompt_ids, max_new_tokens, seed=seed, stop_at_eos=stop_at_eos)
        report["baseline"] = base.metrics(1)
        report["speedup"] = result.tokens_per_s / base.tokens_per_s
        report["identical_to_baseline"] = base.tokens == result.tokens
    return report
