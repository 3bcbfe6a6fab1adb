"""The sweep spec as values: `SweepSpec` (the checked sweep, and its hash), its parts (`DrafterConfig`,
`WorkloadChoice`, `Calibration`), one configuration of the grid (`RunConfig`), and the keys and defaults of a
sweep file. `specbench.measure.grid.sweep` reads a file into them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.backends import registry as backends
from specbench.backends.registry import DEFAULT as DEFAULT_BACKEND
from specbench.engine.named_params import NamedParams
from specbench.engine.strategies.schedule import ScheduleSpec
from specbench.engine.tree import shape_for
from specbench.measure.grid.adaptive import AdaptivePlan
from specbench.measure.grid.executor import INPROCESS, ExecutorChoice
from specbench.measure.grid.strategy import SEQUENTIAL, Strategy
from specbench.measure.grid.timing import TimingProtocol

TOP_LEVEL_KEYS = (
    "name",
    "description",
    "target",
    "device",
    "dtype",
    "seed",
    "repeats",
    "max_new_tokens",
    "ignore_eos",
    "drafters",
    "gammas",
    "trees",
    "temperatures",
    "top_p",
    "top_k",
    "workloads",
    "mode",
    "calibration",
    "compile",
    "kernels",
    "timing",
    "backend",
    "concurrency",
    "strategy",
    "schedules",
    "threads",
    "adaptive",
    "layout",
    "request_rates",
    "arrivals",
    "executor",
    "price_per_hour",
    "tolerance",
    "quantization",
)
DEFAULTS = {
    "name": None,
    "description": "",
    "target": "smollm2-135m",
    "device": "cpu",
    "dtype": "fp32",
    "seed": 0,
    "repeats": 1,
    "max_new_tokens": None,
    "ignore_eos": False,
    "drafters": [],
    "gammas": [1, 2, 4],
    "trees": ["chain"],
    "temperatures": [0.0],
    "top_p": 1.0,
    "top_k": 0,
    "workloads": [],
    "mode": "live",
    "calibration": None,
    "compile": False,
    "kernels": "auto",
    "timing": None,
    "backend": None,
    "concurrency": None,
    "strategy": None,
    "schedules": ["fixed"],
    "threads": None,
    "adaptive": None,
    "layout": None,
    "request_rates": None,
    "arrivals": None,
    "executor": None,
    "price_per_hour": None,
    "tolerance": None,
    "quantization": None,
}
QUANTIZATION_KEYS = ("target", "drafters")  # GGUF types: the target's (one per sweep part), the draft model's
DRAFTER_KEYS = ("type", "params")  # one entry of 'drafters'
WORKLOAD_KEYS = ("name", "count", "split", "max_new_tokens")  # one entry of 'workloads'
CALIBRATION_KEYS = ("gammas", "prompts")
MODES = ("live", "replay", "both")
ARRIVALS = ("poisson", "constant")  # open-loop arrival processes (specbench.measure.serving.arrivals)
OPEN_LOOP_MAX_IN_FLIGHT = 64  # requests in flight at most under request_rates, unless concurrency says otherwise
CALIBRATION_PROMPTS = 2


@dataclass(frozen=True)
class DrafterConfig(NamedParams):
    type: str
    params: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        if not self.params:
            return self.type
        return f"{self.type}(" + ", ".join(f"{k}={v}" for k, v in self.params) + ")"


@dataclass(frozen=True)
class RunConfig:
    """One point of the configuration grid (the baseline has drafter None and γ = 0)."""

    drafter: DrafterConfig | None
    gamma: int
    tree: str
    temperature: float
    top_p: float
    top_k: int
    strategy: Strategy = SEQUENTIAL  # how rounds are driven (specbench.measure.grid.strategy)
    schedule: ScheduleSpec = ScheduleSpec()  # verify-length schedule; γ is its cap

    @property
    def is_baseline(self) -> bool:
        return self.drafter is None

    @property
    def drafter_label(self) -> str:
        """The record's ``drafter_label``: the drafter's, with the strategy when it is not sequential."""
        if self.drafter is None:
            return "none"
        return self.drafter.label + ("" if self.strategy.is_sequential else f" {self.strategy.label}")

    @property
    def label(self) -> str:
        name = "target only" if self.drafter is None else f"{self.drafter_label} γ={self.gamma}"
        if self.tree != "chain":
            name += f" tree={self.tree}"
        if not self.schedule.is_fixed:
            name += f" schedule={self.schedule.label}"
        return f"{name} T={self.temperature:g}"


@dataclass(frozen=True)
class WorkloadChoice:
    name: str
    count: int | None = None
    split: str = "eval"
    max_new_tokens: int | None = None  # overrides the sweep's and the workload file's

    def to_dict(self) -> dict:
        # max_new_tokens only when set, so that the hash of every spec written before it existed is unchanged.
        data = {"name": self.name, "count": self.count, "split": self.split}
        if self.max_new_tokens is not None:
            data["max_new_tokens"] = self.max_new_tokens
        return data


@dataclass(frozen=True)
class Calibration:
    """Live units of a replay sweep: these γ on the first ``prompts`` prompts of each workload."""

    gammas: tuple[int, ...]
    prompts: int


@dataclass
class SweepSpec:
    name: str
    target: str
    device: str
    dtype: str
    seed: int
    repeats: int
    max_new_tokens: int | None
    ignore_eos: bool
    drafters: list[DrafterConfig]
    gammas: list[int]
    trees: list[str]
    temperatures: list[float]
    top_p: float
    top_k: int
    workloads: list[WorkloadChoice]
    description: str = ""
    configs: list[RunConfig] = field(default_factory=list)
    mode: str = "live"
    calibration: Calibration | None = None
    compile: bool = False  # torch.compile the target's decode/verify steps (and a draft model's steps)
    kernels: str = "auto"  # verification kernels: auto (Triton on CUDA), triton or torch
    # filled once the models load (not part of the spec or its hash): sha256 of the target's weights,
    # and model name -> weights sha256 for run.json
    weights_sha256: str | None = None
    model_hashes: dict = field(default_factory=dict)
    timing: TimingProtocol = field(default_factory=TimingProtocol)  # how live units are timed
    backend: str = (
        DEFAULT_BACKEND  # who generates: own (specbench's engine), vllm, openai, vllm-server (backends.registry)
    )
    backend_options: dict = field(default_factory=dict)  # the rest of the YAML's backend: mapping
    concurrency: list[int] = field(default_factory=lambda: [1])  # requests in flight (serving backends)
    request_rates: list[float] = field(default_factory=list)  # open-loop arrival rates, requests/s ([]: closed loop)
    arrivals: str = "poisson"  # the open-loop arrival process: poisson or constant
    strategies: list[Strategy] = field(default_factory=lambda: [SEQUENTIAL])  # round drivers (strategy.py)
    schedules: list[ScheduleSpec] = field(default_factory=lambda: [ScheduleSpec()])  # verify-length axis
    threads: int | str | None = None  # own engine, CPU: torch threads (None: torch's), a count, or "auto" (measured)
    adaptive: AdaptivePlan | None = None  # measure in stages until decided (measure.run.adaptive); None: a fixed grid
    layout: str | None = None  # own engine, CPU: weight layout (None: the dtype's default), "auto" (measured) or a name
    dtype_used: str | None = (
        None  # filled once the target loads (not hashed): the dtype it runs in (dtype auto: chosen)
    )
    executor: ExecutorChoice = INPROCESS  # who runs the pieces of work (measure.executors.executor); not in the hash
    price_per_hour: float | None = None  # the machine's price, for cost per token (analysis.load.operating); not hashed
    tolerance: float = TOLERANCE  # ε of the choice (analysis.verdicts.choice); a decision setting: not hashed

    @property
    def runs_live(self) -> bool:
        """Every speculative configuration runs live on every prompt."""
        return self.mode in ("live", "both")

    @property
    def replays(self) -> bool:
        return self.mode in ("replay", "both")

    def to_dict(self) -> dict:
        """The spec as plain data (what run.json stores and what the hash covers)."""
        data = {
            "name": self.name,
            "description": self.description,
            "target": self.target,
            "device": self.device,
            "dtype": self.dtype,
            "seed": self.seed,
            "repeats": self.repeats,
            "max_new_tokens": self.max_new_tokens,
            "ignore_eos": self.ignore_eos,
            "drafters": [{"type": d.type, "params": d.params_dict} for d in self.drafters],
            "gammas": self.gammas,
            "trees": self.trees,
            "temperatures": self.temperatures,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "workloads": [w.to_dict() for w in self.workloads],
            "mode": self.mode,
            "calibration": None
            if self.calibration is None
            else {"gammas": list(self.calibration.gammas), "prompts": self.calibration.prompts},
            "compile": self.compile,
            "kernels": self.kernels,
            "timing": self.timing.to_dict(),
        }
        # Only when set, so that the hash of every spec written before these keys existed is unchanged.
        if self.backend != DEFAULT_BACKEND or self.backend_options:
            data["backend"] = {"name": self.backend, **self.backend_options}
        if self.concurrency != [1]:
            data["concurrency"] = list(self.concurrency)
        if self.request_rates:
            data["request_rates"] = list(self.request_rates)
            data["arrivals"] = self.arrivals
        if self.strategies != [SEQUENTIAL]:
            data["strategy"] = [s.to_dict() for s in self.strategies]
        if self.schedules != [ScheduleSpec()]:
            data["schedules"] = [{"name": s.name, **s.params_dict} for s in self.schedules]
        if self.threads is not None:
            data["threads"] = self.threads
        if self.adaptive is not None:
            data["adaptive"] = self.adaptive.to_dict()
        if self.layout is not None:
            data["layout"] = self.layout
        if self.executor.is_ray:
            data["executor"] = self.executor.to_dict()
        if self.price_per_hour is not None:
            data["price_per_hour"] = self.price_per_hour
        if self.tolerance != TOLERANCE:
            data["tolerance"] = self.tolerance
        return data

    @property
    def loads(self) -> list[tuple[int, float | None]]:
        """The load levels every configuration runs at: (concurrency, None) per closed-loop level, or
        (the in-flight cap, rate) per open-loop request rate."""
        if self.request_rates:
            return [(self.concurrency[0], rate) for rate in self.request_rates]
        return [(n, None) for n in self.concurrency]

    def max_new_tokens_for(self, workload) -> int:
        """New tokens per turn on ``workload`` (a loaded `Workload`): its entry's, else the sweep's, else its own."""
        entry = next((w.max_new_tokens for w in self.workloads if w.name == workload.name), None)
        return entry or self.max_new_tokens or workload.max_new_tokens

    @property
    def run_options(self) -> dict:
        """Options the backend is built with (the own engine also takes kernels and compile)."""
        if backends.get(self.backend).own_engine:
            threads = {} if self.threads is None else {"threads": self.threads}
            layout = {}
            if self.layout is not None or self.dtype == "auto":
                layout = {"layout": self.layout, "verify_tokens": self.probe_verify_tokens}
            return {"kernels": self.kernels, "compile": self.compile, **threads, **layout, **self.backend_options}
        return dict(self.backend_options)

    @property
    def probe_verify_tokens(self) -> int:
        """The verify size the CPU layout probe measures: the median over the sweep's speculative
        configurations of 1 + the nodes a round verifies (a chain: γ), at most 64."""
        sizes = sorted(1 + shape_for(c.tree, c.gamma).num_nodes for c in self.configs if not c.is_baseline)
        return min(sizes[len(sizes) // 2], 64) if sizes else 1

    @property
    def spec_hash(self) -> str:
        """Identity of what is measured (the name and description do not count)."""
        data = self.to_dict()
        for key in (
            "name",
            "description",
            "mode",
            "calibration",
            "timing",
            "concurrency",
            "adaptive",
            "request_rates",
            "arrivals",
            "executor",
            "price_per_hour",
            "tolerance",
        ):
            data.pop(key, None)
        return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def capped_workloads(spec) -> list[str]:
    """One note per workload of an adaptive sweep whose prompt count (``count``, or ``--prompts``) is below the
    plan's ``max_prompts``: the count wins, so that workload gets fewer looks than the plan reads — said, not
    silent."""
    plan = getattr(spec, "adaptive", None)
    if plan is None:
        return []
    notes = []
    for choice in spec.workloads:
        if choice.count is not None and choice.count < plan.max_prompts:
            looks = plan.looks_for(choice.count)
            notes.append(
                f"{choice.name}: its prompt count {choice.count} (the workload's count, or --prompts) caps "
                f"this adaptive sweep below max_prompts {plan.max_prompts}: {len(looks)} look"
                f"{'s' if len(looks) > 1 else ''} at {', '.join(map(str, looks))} prompts"
            )
    return notes
