"""The flags of ``specbench sweep``, each declared once: `FLAGS` is the table.

A `Flag` holds everything about one flag: its Python name, its spellings, the type Typer parses,
the sweep-file key it puts its value over (a dotted path: ``gammas``, ``workloads[].count``,
``adaptive.budget``), the bounds row its values are checked against (`specbench.bounds`), and its help.
From the table

* the CLI builds the command's Typer options (`specbench.cli.shell.flag_options.typer_parameters`), in table
  order, so ``specbench sweep --help`` lists them as written here, and hands the command its parsed values as
  one frozen `SweepValues` (`values_class`: a field per flag, typed as the flag; a misspelt name is an
  AttributeError, not a silent None);
* `SweepFlags` (the values given) puts them over the sweep file's mapping (`SweepFlags.over`), which
  `specbench.measure.grid.sweep.build_spec` then checks like any sweep file, reading each flagged key's
  bounds row from here (`bound_of`);
* the bounds tables' rows of the flag and of its key (``sweep --gamma`` and ``sweep: gammas`` → ``gamma``:
  `declared_rows`), which `flag_rows` and `key_rows` join to the rows `specbench.bounds` writes for
  everything else (bounds.py imports nothing of specbench but errors, so the joining happens here).

A flag whose ``key`` is None is the command's own (``--out``, ``--dry-run``, ...): the table declares it
so that the command's options come from one place, and the command reads its value.

Adding a sweep flag is one `Flag` in `FLAGS` plus its use: a flag over a key the sweep file already
has needs nothing else (``over`` writes the key, ``build_spec`` checks it); a new key also needs its
reading in ``build_spec``.

Imports nothing heavy (no torch): ``specbench --help`` builds the options from this table.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path

from specbench import bounds
from specbench.backends.registry import DEFAULT as DEFAULT_BACKEND
from specbench.backends.registry import choices_help as backend_choices
from specbench.errors import SpecbenchError
from specbench.measure.grid.executor import executor_over


@dataclass(frozen=True)
class Flag:
    """One command-line flag: how it is spelled and parsed, and which sweep-file key it sets."""

    name: str  # the value's name (the Typer parameter, the `SweepFlags` field)
    decls: tuple[str, ...]  # "--gamma", "-g"; a switch pair "--compile/--no-compile"
    type: type  # what Typer parses: str, int, float, bool, Path; a repeatable flag: list[str]
    key: str | None = None  # the sweep-file key it overrides (dotted path); None: the command's own flag
    help: str | None = None
    items: builtins.type | None = None  # the flag's text is a comma-separated list of these (--gamma 1,2,4 → [1, 2, 4])
    bound: str | None = None  # the `specbench.bounds` row its value (each item) is checked against
    default: object = None  # None: not given (the sweep file's value, else the spec's default, stands)
    argument: bool = False  # a positional argument, not an option
    path: bool = False  # a folder path: refused when empty (`specbench.cli.shell.params.folder_path`)
    min: int | None = None  # Typer's own lower limit (checked as the flag is parsed)
    metavar: str | None = None

    @property
    def top(self) -> str | None:
        """The top-level sweep-file key the flag's value lands under (``adaptive`` for ``adaptive.budget``)."""
        return None if self.key is None else self.key.split(".")[0].removesuffix("[]")


_LAYOUT_HELP = (
    "CPU weight layout of the own engine: auto (measured, cached per machine and model) or a layout name "
    "(docs/benchmarks.md)."
)

FLAGS: tuple[Flag, ...] = (
    Flag("spec_file", (), Path, help="Sweep YAML file (flags below override its fields).", argument=True),
    Flag("name", ("--name",), str, "name", "Sweep name (results go to results/NAME)."),
    Flag("target", ("--target", "-t"), str, "target", "Target model."),
    Flag("drafters", ("--drafter", "-d"), list[str], "drafters", "Drafter TYPE or TYPE:key=value,... (repeatable)."),
    Flag("gammas", ("--gamma", "-g"), str, "gammas", "Draft lengths, e.g. 1,2,4,8.", items=int, bound="gamma"),
    Flag("trees", ("--tree",), str, "trees", "Draft shapes, comma separated (chain).", items=str),
    Flag(
        "temperatures",
        ("--temperature",),
        str,
        "temperatures",
        "Temperatures, e.g. 0,0.7.",
        items=float,
        bound="temperature",
    ),
    Flag("top_p", ("--top-p",), float, "top_p", bound="top_p"),
    Flag("top_k", ("--top-k",), int, "top_k", bound="top_k"),
    Flag("workloads", ("--workload", "-w"), list[str], "workloads", "Workload (repeatable)."),
    Flag(
        "prompts",
        ("--prompts",),
        int,
        "workloads[].count",
        "Prompts per workload (an adaptive sweep: its cap, said in a note when below max_prompts).",
        bound="prompts",
    ),
    Flag("max_new_tokens", ("--max-new-tokens", "-n"), int, "max_new_tokens", bound="max_new_tokens"),
    Flag("repeats", ("--repeats",), int, "repeats", bound="repeats"),
    Flag("seed", ("--seed",), int, "seed", bound="seed"),
    Flag("device", ("--device",), str, "device"),
    Flag(
        "dtype",
        ("--dtype",),
        str,
        "dtype",
        "fp32, bf16, fp16, or auto: the fastest lossless dtype and CPU weight layout measured on this machine "
        "(own engine, CPU).",
    ),
    Flag("layout", ("--layout",), str, "layout", _LAYOUT_HELP),
    Flag("ignore_eos", ("--ignore-eos/--stop-at-eos",), bool, "ignore_eos", "Fixed-length generations."),
    Flag(
        "compile",
        ("--compile/--no-compile",),
        bool,
        "compile",
        "torch.compile the target's decode/verify steps (and a draft model's steps).",
    ),
    Flag("kernels", ("--kernels",), str, "kernels", "Verification kernels: auto (Triton on CUDA), triton, torch."),
    Flag(
        "threads",
        ("--threads",),
        str,
        "threads",
        "CPU threads of the own engine: a count, or auto (the fastest measured per model and step; recorded in "
        "run.json).",
    ),
    Flag("out", ("--out", "-o"), Path, help="Results folder (default results/NAME).", path=True),
    Flag("shard", ("--shard",), str, help="Run slice I/N of the prompts (e.g. 0/4)."),
    Flag(
        "force",
        ("--force",),
        bool,
        help="Allow a folder holding a different sweep spec (its records move to records/old-SPECHASH/) or a "
        "profile (moved to old-KIND-TAG/).",
        default=False,
    ),
    Flag("dry_run", ("--dry-run",), bool, help="Print the grid and a cost estimate, then stop.", default=False),
    Flag("yes", ("--yes", "-y"), bool, help="Run a grid over the size limit (see --dry-run first).", default=False),
    Flag(
        "mode",
        ("--mode",),
        str,
        "mode",
        "live (default), replay (every γ from the baseline's trajectory + live calibration units) or both.",
    ),
    Flag(
        "json_out",
        ("--json",),
        bool,
        help="End with the summary as JSON on stdout (results show's rows, the timing summary, the replay summary).",
        default=False,
    ),
    Flag(
        "backend",
        ("--backend",),
        str,
        "backend.name",
        f"Who generates: {backend_choices()} (docs/backends.md).",
    ),
    Flag(
        "concurrency",
        ("--concurrency",),
        str,
        "concurrency",
        "Requests in flight, e.g. 1,4,16 (serving backends); with --request-rate one value, the cap.",
        items=int,
        bound="concurrency",
    ),
    Flag(
        "request_rates",
        ("--request-rate",),
        str,
        "request_rates",
        "Open-loop load: requests per second arriving, e.g. 1,2,4 (serving backends; YAML request_rates).",
        items=float,
        bound="request_rate",
    ),
    Flag(
        "arrivals",
        ("--arrivals",),
        str,
        "arrivals",
        "Arrivals of --request-rate: poisson (default) or constant (seeded).",
    ),
    Flag(
        "until_decided",
        ("--until-decided/--fixed-grid",),
        bool,
        "adaptive",
        "Measure in looks until each workload's verdict is confident, dropping configurations confidently below "
        "the best (YAML key adaptive).",
    ),
    Flag(
        "budget",
        ("--budget",),
        str,
        "adaptive.budget",
        "Wall-time budget of an adaptive sweep: 90s, 20m, 1.5h (implies --until-decided).",
    ),
    Flag(
        "tolerance",
        ("--tolerance",),
        float,
        "tolerance",
        "ε of the choice: the recommended option is within ε of the best option's speedup with probability "
        "≥ 95 % (0.05: 5 %; an adaptive sweep stops once both the direction and the choice are settled).",
        bound="tolerance",
    ),
    Flag(
        "max_prompts",
        ("--max-prompts",),
        int,
        "adaptive.max_prompts",
        "Prompts per workload an adaptive sweep may use at most (implies --until-decided; not with a different "
        "--prompts).",
        bound="prompts",
    ),
    Flag(
        "batch",
        ("--batch",),
        int,
        "adaptive.batch",
        "Prompts added per look of an adaptive sweep (implies --until-decided).",
        bound="prompts",
    ),
    Flag(
        "target_quant",
        ("--target-quant",),
        str,
        "quantization.target",
        "GGUF types the target runs at on llama.cpp, comma separated (F16, Q8_0, Q6_K, Q4_K_M, Q3_K_M, Q2_K, ...; "
        "built once with llama-quantize from the shipped weights); two or more run one sweep per type and merge them.",
        items=str,
    ),
    Flag(
        "drafter_quants",
        ("--drafter-quant",),
        str,
        "quantization.drafters",
        "GGUF types of the draft model on llama.cpp, comma separated (each a drafter of its own), e.g. Q8_0,Q4_K_M.",
        items=str,
    ),
    Flag(
        "executor",
        ("--executor",),
        str,
        "executor.name",
        "Who runs the pieces of work: inprocess (default, one after another) or ray (docs/scale-out.md).",
    ),
    Flag(
        "address",
        ("--address",),
        str,
        "executor.address",
        "Ray cluster to use: auto or HOST:PORT (implies --executor ray; without it a local Ray instance is started).",
    ),
    Flag(
        "workers",
        ("--workers",),
        int,
        "executor.workers",
        "Ray workers (implies --executor ray; on one machine a local Ray instance with N workers).",
        bound="parallel_size",
    ),
)


@functools.cache
def values_class(flags: tuple[Flag, ...]) -> type:
    """The type of a command's parsed values: a frozen dataclass ``FlagValues`` with one keyword field per flag of
    ``flags``, in table order, typed as the flag (``T | None`` where the flag's default is None: not given) and
    defaulting to the flag's default. Built once per table, so the same table gives the same class."""
    return make_dataclass(
        "FlagValues",
        [(f.name, f.type if f.default is not None else f.type | None, field(default=f.default)) for f in flags],
        frozen=True,
        kw_only=True,
    )


def spec_flags() -> tuple[Flag, ...]:
    """The flags that set a sweep-file key (read at call time: a test may add a descriptor to `FLAGS`)."""
    return tuple(flag for flag in FLAGS if flag.key is not None)


def bound_of(key: str) -> str:
    """The bounds row of the flag over sweep-file key ``key`` (``gammas`` → ``gamma``): one row for the flag
    and the file's key alike."""
    for flag in spec_flags():
        if flag.key == key and flag.bound is not None:
            return flag.bound
    raise KeyError(f"no sweep flag with a bounds row sets '{key}'")


COMMAND = "sweep"  # the command whose options `FLAGS` are


def declared_rows() -> tuple[dict[str, str], dict[str, str]]:
    """The bounds rows the flags with a ``bound`` declare, as the tables name them: the flag's
    (``{"sweep --gamma": "gamma", ...}``, `specbench.bounds.FLAG_ROWS`'s form for one command's flag) and its
    sweep-file key's (``{"sweep: gammas": "gamma", "sweep: workloads.count": "prompts", ...}``, `KEY_ROWS`'s)."""
    flag_rows, key_rows = {}, {}
    for flag in spec_flags():
        if flag.bound is not None and flag.key is not None:
            flag_rows[f"{COMMAND} {flag.decls[0].split('/')[0]}"] = flag.bound
            key_rows[f"{COMMAND}: {flag.key.replace('[]', '')}"] = flag.bound
    return flag_rows, key_rows


def flag_rows() -> dict[str, str]:
    """The row of every flag of every command: `specbench.bounds.FLAG_ROWS` joined with the rows `FLAGS` declares
    (a row stated in both is refused: `specbench.bounds.joined`)."""
    return bounds.joined(bounds.FLAG_ROWS, declared_rows()[0], "FLAG_ROWS")


def key_rows() -> dict[str, str]:
    """The row of every key of every YAML file: `specbench.bounds.KEY_ROWS` joined with the sweep-file keys' rows
    `FLAGS` declares (a row stated in both is refused)."""
    return bounds.joined(bounds.KEY_ROWS, declared_rows()[1], "KEY_ROWS")


def _items(text: str, cast) -> list:
    try:
        return [cast(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SpecbenchError(f"could not read '{text}' as a comma-separated list") from None


class SweepFlags:
    """What ``specbench sweep``'s flags say, typed: one value per `Flag` of `spec_flags()` that was given.

    ``SweepFlags(gammas=[1, 2, 4])`` (values already parsed) or ``SweepFlags.from_command(values)`` (the
    command's raw values, a `SweepValues`: comma lists still text). `over` merges them into the sweep file's mapping, which
    `build_spec` then checks, so ``--gamma 1,2,4`` is ``SweepFlags.gammas`` → the ``gammas`` key →
    `SweepSpec.gammas` → each `RunConfig.gamma` → the backend → the engine's ``config_gamma``.
    """

    def __init__(self, **given):
        unknown = sorted(set(given) - {flag.name for flag in spec_flags()})
        if unknown:
            raise TypeError(f"SweepFlags: no sweep flag named {', '.join(unknown)}")
        # not given: None, or a repeatable flag given no times
        self.given = {name: value for name, value in given.items() if value is not None and value != []}

    @classmethod
    def from_command(cls, values) -> SweepFlags:
        """The flags among the command's ``values`` (a `values_class` instance holding at least every flag of
        `spec_flags()`), comma lists read into their items (in table order)."""
        parsed = {}
        for flag in spec_flags():
            value = getattr(values, flag.name)
            if value is not None and flag.items is not None:
                value = _items(value, flag.items)
            elif isinstance(value, (list, tuple)):
                value = list(value)
            parsed[flag.name] = value
        return cls(**parsed)

    def __getattr__(self, name: str):
        if name in {flag.name for flag in spec_flags()}:
            return self.__dict__.get("given", {}).get(name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"SweepFlags({', '.join(f'{k}={v!r}' for k, v in self.given.items())})"

    def over(self, raw: dict) -> dict:
        """The sweep file's mapping ``raw`` (may be empty) with the given flags put over it."""
        raw = dict(raw)
        _check_prompt_counts(self.given.get("prompts"), self.given.get("max_prompts"))
        flags = spec_flags()
        for flag in flags:
            if flag.key is not None and flag.name in self.given and flag.top not in _MERGED:
                _put(raw, flag.key, self.given[flag.name])
        for top, merge in _MERGED.items():
            group = {f.name: self.given.get(f.name) for f in flags if f.top == top}
            if any(value is not None for value in group.values()):
                merge(raw, **group)
        return raw


def _put(raw: dict, key: str, value) -> None:
    """``value`` at ``key`` of the sweep mapping: a top-level key is replaced; a dotted one (``timing.warmup_s``)
    goes over the file's mapping at its top key."""
    top, _, rest = key.partition(".")
    if not rest:
        raw[top] = value
        return
    inner = raw.get(top)
    raw[top] = {**(inner if isinstance(inner, dict) else {}), rest: value}


# How the flags over the keys below merge with the file's value: they take several flags, or keep what the file
# says beside them (every other flag goes in with `_put`).


def _backend_over(raw: dict, backend: str) -> None:
    """``--backend NAME`` keeps the file's backend options when the file names the same backend."""
    named = raw.get("backend")
    if isinstance(named, dict) and named.get("name", DEFAULT_BACKEND) == backend:
        raw["backend"] = {**named, "name": backend}
    else:
        raw["backend"] = backend


def _workloads_over(raw: dict, workloads: list[str] | None, prompts: int | None) -> None:
    """``--workload`` replaces the file's workloads; ``--prompts`` sets every workload's count."""
    if workloads:
        raw["workloads"] = list(workloads)
    if prompts is not None:
        raw["workloads"] = [
            {**(w if isinstance(w, dict) else {"name": w}), "count": prompts} for w in raw.get("workloads") or []
        ]


def _check_prompt_counts(prompts: int | None, max_prompts: int | None) -> None:
    """``--prompts`` and ``--max-prompts`` both say how many prompts a workload gets: different values would let one
    silently cap the other (docs/fit.md)."""
    if prompts is not None and max_prompts is not None and prompts != max_prompts:
        raise SpecbenchError(
            f"--prompts {prompts} and --max-prompts {max_prompts} contradict each other: an adaptive sweep measures "
            f"up to --max-prompts prompts per workload, in looks; give --max-prompts {max_prompts} alone to measure up "
            f"to {max_prompts}, or --prompts {prompts} --fixed-grid to measure exactly {prompts}"
        )


def _adaptive_over(raw: dict, until_decided: bool | None, budget, max_prompts, batch) -> None:
    """``--until-decided`` / ``--fixed-grid`` switch the file's ``adaptive`` on or off; the knobs go over its
    mapping and imply it."""
    knobs = {k: v for k, v in (("budget", budget), ("max_prompts", max_prompts), ("batch", batch)) if v is not None}
    if until_decided is False:
        if knobs:
            raise SpecbenchError(
                "--fixed-grid cannot take --budget, --max-prompts or --batch (they belong to --until-decided)"
            )
        raw["adaptive"] = None
    elif until_decided or knobs:
        base = raw.get("adaptive")
        raw["adaptive"] = {**(base if isinstance(base, dict) else {}), **knobs} or True


def _executor_over(raw: dict, executor: str | None, address: str | None, workers: int | None) -> None:
    merged = executor_over(raw.get("executor"), executor, address, workers)
    if merged is not None:
        raw["executor"] = merged


_MERGED: dict[str, Callable[..., None]] = {  # top key → how its flags merge (keyword per flag name)
    "backend": _backend_over,
    "workloads": _workloads_over,
    "adaptive": _adaptive_over,
    "executor": _executor_over,
}

SweepValues = values_class(FLAGS)  # what ``specbench sweep``'s command function receives
