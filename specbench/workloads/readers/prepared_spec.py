"""Workloads whose data other projects prepare: the ``prepared:`` section of a workload YAML → `PreparedSpec`.

Some prompt sets cannot ship with specbench: SPEED-Bench's prompts are materialised from their
sources by NVIDIA's own script, speculator_benchmarks lives on the Hugging Face hub. Their workload
files say what the set is (configs, categories) and where its data comes from; a reader per layout
(`specbench.workloads.readers.prepared`) turns a prepared folder, or the hub, into prompts::

    name: speed-bench
    chat: true
    max_new_tokens: 256
    sampling: {count: null, seed: 0}
    train_percent: 0
    prepared:
      layout: speed-bench                  # which reader (workload_prepared.READERS)
      folder_variable: SPECBENCH_SPEED_BENCH   # the data folder, unless the name says data=DIR (else
                                               # <cache>/datasets/speed-bench, when it exists)
      hub: {dataset: nvidia/SPEED-Bench, split: test}   # used where the hub is reachable
      get: "how to prepare the folder"     # the one line shown when neither is available
      configs:                             # the set's configs (name option config=), in order; the first is the default
        qualitative: {categories: [coding, writing, ...]}
        throughput_1k: {bin: 1k, categories: [low_entropy, mixed, high_entropy]}   # bin: the records' context_bin

A set without configs lists ``categories:`` directly. A workload name selects configs, categories and
the data folder: ``speed-bench:config=throughput_1k,throughput_8k:category=mixed:data=DIR``; the
selected workload is named by its config and category choices (never by the folder, which is this
machine's), so records of one selection compare across machines.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from specbench.errors import SpecbenchError, check_keys, did_you_mean
from specbench.models.cache import cache_root
from specbench.workloads.spec_reader import Reader, workload_fields

DATA_FOLDER = "datasets"  # <cache>/datasets/<workload>: where a prepared folder is found when nothing names one

OPTIONS = ("config", "category", "data")  # what a workload name may select; data is left out of the name
NAMED_OPTIONS = ("config", "category")
_TOP_KEYS = ("name", "description", "chat", "max_new_tokens", "sampling", "train_percent", "prepared")
_SECTION_KEYS = ("layout", "folder_variable", "hub", "get", "configs", "categories")


@dataclass(frozen=True)
class PreparedConfig:
    """One config of a prepared set: its name, the context-length bin its prompts carry, its categories."""

    name: str
    categories: tuple[str, ...]
    bin: str | None = None


@dataclass(frozen=True)
class PreparedSpec:
    """A validated prepared-data workload; the attributes before ``layout`` are those of every workload."""

    name: str
    description: str
    chat: bool
    max_new_tokens: int
    count: int | None
    seed: int
    train_percent: int
    layout: str
    folder_variable: str
    get: str
    configs: tuple[PreparedConfig, ...]  # the selected ones (all of the file's, or a name's choice)
    categories: tuple[str, ...] | None = None  # the selected categories; None: all of each config's
    hub_dataset: str | None = None
    hub_split: str | None = None
    data: str | None = None  # the folder a name gave (data=DIR)
    id_prefix: str = ""  # prompt ids start with it: the workload file's name, whatever a name selects
    all_configs: tuple[PreparedConfig, ...] = ()
    origin: str = ""

    def folder(self) -> tuple[Path | None, str]:
        """(the data folder, what named it): the name's data=, else the folder variable, else
        ``<cache>/datasets/<workload>`` when it exists; (None, "") when none is there."""
        if self.data:
            return Path(self.data).expanduser(), "data="
        if os.environ.get(self.folder_variable):
            return Path(os.environ[self.folder_variable]).expanduser(), self.folder_variable
        default = cache_root() / DATA_FOLDER / self.id_prefix
        return (default, "the specbench cache") if default.is_dir() else (None, "")


def is_prepared(data: dict) -> bool:
    """Whether a parsed workload YAML mapping defines a prepared-data workload."""
    return isinstance(data, dict) and "prepared" in data


def _names(reader: Reader, key: str, where: str) -> tuple[str, ...]:
    values = reader.get(key, list, required=True)
    if not values or not all(isinstance(v, str) and v.strip() for v in values):
        reader.fail(f"'{key}'{where} must be a list of names")
    return tuple(values)


def parse_prepared(data: dict, *, origin: str) -> PreparedSpec:
    """Validate a prepared-data workload mapping (parsed YAML) into a `PreparedSpec`."""
    top = Reader(data, origin, "", _TOP_KEYS)
    common = workload_fields(top)
    section = top.mapping("prepared", _SECTION_KEYS)
    hub = section.mapping("hub", ("dataset", "split"))
    if ("configs" in section.data) == ("categories" in section.data):
        section.fail("needs exactly one of 'configs' (a mapping of configs) or 'categories' (a list)")
    if "configs" in section.data:
        raw = section.get("configs", dict)
        if not raw:
            section.fail("'configs' is empty")
        configs = []
        for config, entry in raw.items():
            part = Reader(
                entry if isinstance(entry, dict) else {},
                origin,
                f"prepared: configs: {config}: ",
                ("categories", "bin"),
            )
            configs.append(
                PreparedConfig(
                    section.text_key(config, "configs"),
                    _names(part, "categories", ""),
                    part.get("bin", str, None, nullable=True),
                )
            )
        configs = tuple(configs)
    else:
        configs = (PreparedConfig("", _names(section, "categories", "")),)
    return PreparedSpec(
        **common,
        layout=str(section.get("layout", str, required=True)),
        folder_variable=str(section.get("folder_variable", str, required=True)),
        get=str(section.get("get", str, required=True)).strip(),
        configs=configs[:1],  # the default: the first config
        hub_dataset=hub.get("dataset", str, None),
        hub_split=hub.get("split", str, None),
        id_prefix=common["name"],
        all_configs=configs,
        origin=origin,
    )


def select(spec: PreparedSpec, options: dict[str, str], text: str) -> PreparedSpec:
    """The spec restricted to what a workload name asks for (``config=``, ``category=``) and reading from
    ``data=``. The selected workload is named by its config and category choices, in that order."""
    check_keys(options, OPTIONS, f"unknown option '{{key}}' in '{text}'", listing="options")
    configs, categories, data = spec.configs, spec.categories, spec.data
    if "data" in options:
        data = options["data"] or None
        if data is None:
            raise SpecbenchError(f"'data=' in '{text}' names no folder")
    if "config" in options:
        known = [c.name for c in spec.all_configs]
        if known == [""]:
            raise SpecbenchError(
                f"workload {spec.name} has no configs to choose ('{text}'); choose categories with category="
            )
        wanted = _wanted(spec, options["config"], "config", text, known, "configs")
        configs = tuple(c for c in spec.all_configs if c.name in wanted)
    if "category" in options:
        known = sorted({c for config in configs for c in config.categories})
        where = f" in config {', '.join(c.name for c in configs)}" if configs[0].name else ""
        wanted = _wanted(spec, options["category"], "category", text, known, "categories", where)
        categories = tuple(wanted)
    chosen = {"config": ",".join(c.name for c in configs), "category": ",".join(categories or ())}
    name = spec.id_prefix + "".join(f":{key}={chosen[key]}" for key in NAMED_OPTIONS if key in options)
    return replace(spec, name=name, configs=configs, categories=categories, data=data)


def _wanted(
    spec: PreparedSpec, value: str, key: str, text: str, known: list[str], plural: str, where: str = ""
) -> list[str]:
    """The comma-separated names of ``key=value`` in workload name ``text``, each one of ``known``."""
    wanted = [v.strip() for v in value.split(",") if v.strip()]
    if not wanted:
        raise SpecbenchError(f"'{key}=' in '{text}' names no {key}")
    for name in wanted:
        if name not in known:
            raise SpecbenchError(
                f"workload {spec.name} has no {key} '{name}'{did_you_mean(name, known)}{where} "
                f"({plural}: {', '.join(known)})"
            )
    return wanted
