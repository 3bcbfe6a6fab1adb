"""Each fact once (issue 48, item 5): vLLM's ``speculative_config`` has one builder and the null energy columns one
writer. Each rule is an AST scan over the package, proven on a planted second one.

* ``speculative_config``: its keys (``num_speculative_tokens``, the per-batch-size ranges, the adaptive K, the
  prompt-lookup bounds, ...) are written — as a dict literal's key or a subscript assignment — only in
  `specbench.analysis.settings.vllm_speculative.speculative_config`; every other place that hands vLLM a config
  (both vLLM backends, `recommend`, the load and profile schedules, the exporter) asks it.
* the energy columns: a dict that sets two or more of `records.store.ENERGY_COLUMNS` to None is written only by
  `records.store.null_energy_columns`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specbench.records.store import ENERGY_COLUMNS

PACKAGE = Path(__file__).resolve().parents[1] / "specbench"
SPECULATIVE_CONFIG_KEYS = {
    "num_speculative_tokens",
    "num_speculative_tokens_per_batch_size",
    "enable_adaptive_verification",
    "prompt_lookup_min",
    "prompt_lookup_max",
}  # (not draft_tensor_parallel_size: also the name of the vLLM backend's option that sets it)
SPECULATIVE_CONFIG_BUILDER = "specbench/analysis/settings/vllm_speculative.py"
ENERGY_WRITER = "specbench/records/store.py"


def _modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE.parent)): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _is_string(node, values) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values


def speculative_config_writes(tree: ast.Module) -> list[int]:
    """Lines writing a speculative_config key: ``{"num_speculative_tokens": ...}`` or ``c["..."] = ...``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(_is_string(k, SPECULATIVE_CONFIG_KEYS) for k in node.keys):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and _is_string(node.slice, SPECULATIVE_CONFIG_KEYS)
        ):
            lines.append(node.lineno)
    return lines


def null_energy_writes(tree: ast.Module) -> list[int]:
    """Lines of a dict literal setting two or more energy columns, all to None (a writer of the null columns)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            energy = [v for k, v in zip(node.keys, node.values) if _is_string(k, ENERGY_COLUMNS)]
            if len(energy) >= 2 and all(isinstance(v, ast.Constant) and v.value is None for v in energy):
                lines.append(node.lineno)
    return lines


def test_speculative_config_has_one_builder():
    found = [
        f"{name}:{line}"
        for name, tree in _modules().items()
        if name != SPECULATIVE_CONFIG_BUILDER
        for line in speculative_config_writes(tree)
    ]
    assert not found, f"speculative_config keys written outside {SPECULATIVE_CONFIG_BUILDER}:\n" + "\n".join(found)


def test_the_null_energy_columns_have_one_writer():
    found = [
        f"{name}:{line}"
        for name, tree in _modules().items()
        if name != ENERGY_WRITER
        for line in null_energy_writes(tree)
    ]
    assert not found, "null energy columns written outside records.store.null_energy_columns:\n" + "\n".join(found)
    store = _modules()[ENERGY_WRITER]
    assert not null_energy_writes(store), "the writer is dict.fromkeys(ENERGY_COLUMNS), not a second literal"


@pytest.mark.parametrize(
    "source,scanner,expected",
    [
        ('config = {**setting.config, "num_speculative_tokens_per_batch_size": ranges}\n', "spec", [1]),
        ('out = dict(built)\nout["enable_adaptive_verification"] = True\n', "spec", [2]),
        ('k = config.get("num_speculative_tokens")\nok = "prompt_lookup_min" in config\n', "spec", []),  # reads
        ('cols = {"energy_j": None, "idle_w": None, "timing_ok": True}\n', "energy", [1]),
        ('cols = {"energy_j": joules, "idle_w": None}\n', "energy", []),  # a measured reading
    ],
)
def test_each_scanner_finds_a_planted_second_writer(source, scanner, expected):
    tree = ast.parse(source)
    assert (speculative_config_writes(tree) if scanner == "spec" else null_energy_writes(tree)) == expected
