"""Module-level import graph of specbench, read from the source (no imports executed).

Used by tests/test_architecture.py: imports at module level form the graph whose cycles
matter (an import inside a function runs later and hides a cycle, so the rule is that such
imports are kept for start-up time only).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"specbench": ROOT / "specbench", "specbench_kernels": ROOT / "specbench_kernels"}


def module_files() -> dict[str, Path]:
    """Dotted module name → source file, for specbench and the top-level kernels package."""
    modules = {}
    for prefix, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([prefix, *parts])] = path
    return modules


def _targets(node: ast.AST, modules: dict[str, Path], here: str) -> set[str]:
    """The specbench modules one import statement names (``from pkg import mod`` counts as pkg.mod)."""
    found = set()
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    else:
        return found
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != here:
            found.add(name)
    return found


def module_level_graph() -> dict[str, set[str]]:
    """module → specbench modules it imports at module level (``if TYPE_CHECKING`` blocks excluded)."""
    modules = module_files()
    graph = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            for inner in [node] if not isinstance(node, (ast.Try, ast.If)) else ast.walk(node):
                edges |= _targets(inner, modules, name)
        # a submodule's import runs its package's __init__ first
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def function_level_imports() -> list[tuple[str, int, str, str]]:
    """(module, line, imported module, the line's text) for every import inside a function or class (an
    ``if TYPE_CHECKING`` block's are for type checkers only and never run)."""
    out = []
    for name, path in module_files().items():
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for n in ast.walk(block)
        }  # imports for type checkers only: never run
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.col_offset > 0 and id(node) not in typing_only:
                target = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                out.append((name, node.lineno, target or "", lines[node.lineno - 1]))
    return out


def heavy_modules(
    graph: dict[str, set[str]], heavy_external=("torch", "transformers", "matplotlib", "vllm")
) -> set[str]:
    """specbench modules whose module-level imports reach one of ``heavy_external``."""
    direct = set()
    for name, path in module_files().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots = [node.module.split(".")[0]]
            else:
                continue
            if any(r in heavy_external for r in roots):
                direct.add(name)
    heavy = set(direct)
    changed = True
    while changed:
        changed = False
        for name, edges in graph.items():
            if name not in heavy and edges & heavy:
                heavy.add(name)
                changed = True
    return heavy
