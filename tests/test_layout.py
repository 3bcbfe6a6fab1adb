"""The tree's size guards, at every level of specbench/ and specbench_kernels/: no module over 600 lines, no
package folder holding more than 12 modules (``__init__.py`` not counted), and every package says what it owns.

Each rule is a function over a folder, so a planted tree proves that it fails where it should.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatch
from pathlib import Path

import tomllib

from tests.import_graph import ROOT

MAX_LINES = 600
MAX_MODULES = 12
ROOTS = ("specbench", "specbench_kernels")

# Modules that others are splitting or rewriting right now, with the reason. The list only shrinks: delete a line
# once its work has landed.
LONG_MODULES_ALLOWED: dict[str, str] = {}
# Folders over 12 modules that scripts/restructure.py cuts into sub-packages (issue 48, item 1). Its move table is
# run once the edits in flight in these folders have landed; then this list is emptied.
CROWDED_FOLDERS_ALLOWED: dict[str, str] = {}


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Every module under ``root`` longer than ``limit`` lines → its line count (paths relative to ``root``)."""
    counts = {
        p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in python_files(root)
    }
    return {path: n for path, n in counts.items() if n > limit}


def crowded_folders(root: Path, limit: int = MAX_MODULES) -> dict[str, list[str]]:
    """Every folder under ``root`` holding more than ``limit`` modules besides ``__init__.py`` → their names."""
    folders: dict[str, list[str]] = {}
    for path in python_files(root):
        if path.name != "__init__.py":
            folders.setdefault(path.parent.relative_to(root).as_posix(), []).append(path.stem)
    return {folder: sorted(names) for folder, names in folders.items() if len(names) > limit}


def silent_packages(root: Path, min_chars: int = 60) -> list[str]:
    """Every package folder under ``root`` (one holding a module) whose ``__init__.py`` is missing or has no
    docstring of at least ``min_chars`` characters saying what it owns."""
    folders = sorted({p.parent for p in python_files(root)})
    silent = []
    for folder in folders:
        init = folder / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) if init.exists() else None
        if not doc or len(doc) < min_chars:
            silent.append(folder.relative_to(root).as_posix())
    return silent


def _allowed(path: str, allowed: dict[str, str]) -> bool:
    return any(fnmatch(path, pattern) for pattern in allowed)


def _offenders(found: dict, allowed: dict[str, str]) -> dict:
    return {path: what for path, what in found.items() if not _allowed(path, allowed)}


def test_no_module_is_over_600_lines():
    found = {f"{root}/{path}": n for root in ROOTS for path, n in long_modules(ROOT / root).items()}
    offenders = _offenders(found, LONG_MODULES_ALLOWED)
    assert not offenders, f"modules over {MAX_LINES} lines (split them along their sections): {offenders}"


def test_no_package_folder_holds_over_12_modules():
    found = {
        (f"{root}/{folder}" if folder != "." else root): names
        for root in ROOTS
        for folder, names in crowded_folders(ROOT / root).items()
    }
    offenders = _offenders(found, CROWDED_FOLDERS_ALLOWED)
    assert not offenders, f"folders over {MAX_MODULES} modules (cut them into sub-packages): {offenders}"


def test_every_package_at_every_level_says_what_it_owns():
    silent = [
        f"{root}/{folder}" if folder != "." else root for root in ROOTS for folder in silent_packages(ROOT / root)
    ]
    assert not silent, f"packages whose __init__.py has no docstring saying what they own: {silent}"


def test_every_allowance_names_something_that_exists():
    """A typo in an allowance would silently allow nothing; an allowance whose target is gone is stale."""
    for pattern in LONG_MODULES_ALLOWED:
        assert any(
            _allowed(p.relative_to(ROOT).as_posix(), {pattern: ""}) for r in ROOTS for p in python_files(ROOT / r)
        ), pattern
    for folder in CROWDED_FOLDERS_ALLOWED:
        assert (ROOT / folder).is_dir(), folder


def package_folders(root: Path, names: tuple[str, ...] = ROOTS) -> set[str]:
    """The dotted name of every folder under ``root``'s ``names`` that holds an ``__init__.py``."""
    return {
        ".".join(init.parent.relative_to(root).parts)
        for name in names
        for init in (root / name).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_every_package_at_every_level_is_installed():
    """`[tool.setuptools] packages` lists packages one by one: a sub-package missing there is missing from a
    wheel, and only an installed (non-editable) copy would show it."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    builtin = {name for name in listed if name.startswith("specbench.builtin_")}  # data folders mapped by package-dir
    assert package_folders(ROOT) == listed - builtin


def _plant(root: Path, files: dict[str, int]) -> Path:
    for name, lines in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"x{i} = {i}\n" for i in range(lines)))
    return root


def test_the_line_rule_fails_on_a_planted_long_module(tmp_path):
    root = _plant(tmp_path, {"pkg/__init__.py": 1, "pkg/fine.py": MAX_LINES, "pkg/deep/__init__.py": 1})
    assert long_modules(root) == {}
    _plant(root, {"pkg/deep/long.py": MAX_LINES + 1})
    assert long_modules(root) == {"pkg/deep/long.py": MAX_LINES + 1}
    assert _offenders({"pkg/deep/long.py": 601}, {"pkg/deep/*": "planted"}) == {}
    assert _offenders({"pkg/deep/long.py": 601}, {"pkg/other.py": "planted"}) == {"pkg/deep/long.py": 601}


def test_the_folder_rule_fails_on_a_planted_crowded_folder_at_any_depth(tmp_path):
    twelve = {f"pkg/a/b/m{i}.py": 1 for i in range(MAX_MODULES)}
    root = _plant(tmp_path, {"pkg/__init__.py": 1, "pkg/a/__init__.py": 1, "pkg/a/b/__init__.py": 1, **twelve})
    assert crowded_folders(root) == {}  # twelve modules and an __init__.py: allowed
    _plant(root, {"pkg/a/b/m12.py": 1})
    assert crowded_folders(root) == {"pkg/a/b": sorted(f"m{i}" for i in range(MAX_MODULES + 1))}


def test_the_docstring_rule_fails_on_a_planted_silent_package(tmp_path):
    root = tmp_path
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(f'"""{"Owns the planted things, and says so at length. " * 3}"""\n')
    (root / "pkg" / "sub" / "__init__.py").write_text('"""Short."""\n')
    (root / "pkg" / "sub" / "m.py").write_text("x = 1\n")
    assert silent_packages(root) == ["pkg/sub"]
