"""The architecture's walls, as tests: import-linter contracts, no module-level import cycle,
and imports inside functions only where start-up time needs them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
import tomllib

from tests.import_graph import ROOT, find_cycle, function_level_imports, module_level_graph

LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
LAZY_ALLOWED = (
    "torch",
    "transformers",
    "matplotlib",
    "vllm",
    "triton",
    "datasets",
    "tokenizers",
    "accelerate",
    "sglang",
    "ray",
    "pynvml",
)


def _lint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LINT, "--no-cache", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_import_linter_contracts_hold():
    result = _lint()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _lint_broken(tmp_path, roots: list[str], name: str, source: str, forbidden: str) -> subprocess.CompletedProcess:
    """`lint-imports` on one forbidden contract that the code breaks on purpose."""
    config = tmp_path / "broken.toml"
    config.write_text(
        f"[tool.importlinter]\nroot_packages = {roots!r}\n\n".replace("'", '"')
        + f'[[tool.importlinter.contracts]]\nname = "{name} (false on purpose)"\ntype = "forbidden"\n'
        f'source_modules = ["{source}"]\nforbidden_modules = ["{forbidden}"]\n'
    )
    return _lint("--config", str(config))


@pytest.mark.parametrize(
    "roots, source, forbidden",
    [
        (["specbench"], "specbench.measure", "specbench.records"),  # measure writes records
        (["specbench", "specbench_kernels"], "specbench.engine", "specbench_kernels"),  # the walls see the kernels
        (["specbench"], "specbench.measure.run", "specbench.measure.grid"),  # the runner runs the grid
        (["specbench"], "specbench.analysis.recommendation", "specbench.analysis.verdicts"),  # it reads verdicts
    ],
)
def test_a_broken_contract_fails(tmp_path, roots, source, forbidden):
    """The check can fail: a contract forbidding an import the code makes is reported broken."""
    result = _lint_broken(tmp_path, roots, f"{source} may not import {forbidden}", source, forbidden)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and source in result.stdout and forbidden in result.stdout


def test_kernels_import_only_torch_triton_and_the_standard_library():
    """What contract 'kernels import nothing but torch and triton' cannot list: every outside import."""
    graph = grimp.build_graph("specbench", "specbench_kernels", include_external_packages=True)
    imported = {
        target.split(".")[0]
        for module in graph.find_children("specbench_kernels") | {"specbench_kernels"}
        for target in graph.find_modules_directly_imported_by(module)
    }
    outside = imported - {"specbench_kernels", "torch", "triton"} - set(sys.stdlib_module_names) - {"__future__"}
    assert not outside, f"kernels import {sorted(outside)}"
    assert graph.find_modules_that_directly_import("specbench_kernels.tree_attention")  # the graph sees importers


def test_no_module_level_import_cycle():
    assert find_cycle(module_level_graph()) is None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_every_package_says_what_it_owns():
    for package in (
        "cli",
        "measure",
        "backends",
        "engine",
        "models",
        "records",
        "analysis",
        "figures",
        "profile",
        "training",
    ):
        init = ROOT / "specbench" / package / "__init__.py"
        assert init.exists(), package
        assert len(init.read_text().strip()) > 80, f"specbench/{package}/__init__.py needs its docstring"


def test_imports_inside_functions_are_lazy_heavy_imports_with_a_reason():
    """Module-level imports everywhere, except lazy imports of heavy libraries (and, in the CLI,
    of modules that load them), each marked with a reason on its line."""
    offenders = []
    for module, line, target, text in function_level_imports():
        root = target.split(".")[0]
        if root in LAZY_ALLOWED:
            continue
        if module.startswith("specbench.cli") and "# lazy:" in text:
            continue
        offenders.append(f"{module}:{line}: {text.strip()}")
    assert not offenders, "imports hidden in functions:\n" + "\n".join(offenders)


@pytest.mark.parametrize("package", ["specbench.analysis", "specbench.figures", "specbench.records"])
def test_result_readers_do_not_load_torch(package):
    code = (
        f"import importlib, pkgutil, sys, {package} as p\n"
        "for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_measure_contract_forbids_every_backend_module_but_the_seam():
    """The contract 'measure reaches backends only through the registry and the Backend protocol' lists
    modules (import-linter has no 'all but'): a new backend module must be added to it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    contract = next(c for c in config if c["name"].startswith("Measure reaches backends only"))
    backends = ROOT / "specbench" / "backends"
    modules = {
        "specbench.backends." + ".".join(p.relative_to(backends).with_suffix("").parts)
        for p in backends.rglob("*.py")
        if p.name != "__init__.py"
    }  # at every depth: a module moved into a sub-package stays forbidden
    assert set(contract["forbidden_modules"]) == modules - {"specbench.backends.base", "specbench.backends.registry"}


def shadowed_packages(root: Path, owners: dict[str, list[str]]) -> dict[str, list[str]]:
    """Top-level folders of ``root`` named as a package another installed distribution provides.

    pytest and ``python -m`` put the checkout first on ``sys.path``, so such a folder is imported in
    place of that distribution's package by everything that imports it (transformers imports PyPI's
    ``kernels``)."""
    return {
        folder.name: others
        for folder in sorted(root.iterdir())
        if folder.is_dir() and (others := [d for d in owners.get(folder.name, []) if d != "specbench"])
    }


def test_no_folder_of_the_checkout_shadows_an_installed_package():
    from importlib.metadata import packages_distributions

    owners = packages_distributions()
    assert shadowed_packages(ROOT, owners) == {}
    planted = {**owners, "workloads": ["someone-elses-workloads"]}  # the check can fail
    assert shadowed_packages(ROOT, planted) == {"workloads": ["someone-elses-workloads"]}
