"""Move modules into sub-packages by a table, and rewrite every reference to them (issue 48, item 1).

The table is data (scripts/restructure_moves.yaml): whole folders renamed (``packages``), single modules moved
(``modules``), the docstring of each new sub-package (``new_packages``) and the exact edits a move needs beyond
references (``edits``: a file's depth in ``Path(__file__).parents[n]``, a contract naming a dissolved package).

    python scripts/restructure.py [--table FILE] [--dry-run]

What it does, in order:

1. checks the table: no module moves twice, no new name lies inside an old one's dotted name (``a.b`` → ``a.b.c``
   would be rewritten again on every run), no new name is another move's old name;
2. ``git mv`` of every folder and module whose old path exists (absent ones are skipped with a note: the table
   may name modules another branch adds; modules not in the table stay where they are), creating each new
   sub-package's ``__init__.py`` with its one-line docstring, and removing an ``__init__.py`` left alone in a folder
   every module moved out of;
3. rewrites references in specbench/, specbench_kernels/, tests/, scripts/, docs/, pyproject.toml, Makefile,
   README.md and CONTRIBUTING.md: dotted names (``specbench.a.b``, and ``a.b`` between backquotes), ``from
   specbench.a import b`` where ``b`` is a moved module, and paths (``specbench/a/b.py``, and ``a/b.py`` between
   backquotes);
4. applies the edits, lists every package folder in ``[tool.setuptools] packages`` (and drops the ones gone);
5. sorts the imports and formats the changed Python files with ruff, when ruff is installed.

Every step looks at the tree as it is, so a second run changes nothing.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "scripts" / "restructure_moves.yaml"
REWRITTEN_FOLDERS = ("specbench", "specbench_kernels", "tests", "scripts", "docs")
REWRITTEN_FILES = ("pyproject.toml", "Makefile", "README.md", "CONTRIBUTING.md")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".ini", ".sh", ".json"}
TOP_PACKAGES = ("specbench", "specbench_kernels")


@dataclass(frozen=True)
class Move:
    """One rename: a module (``.py``) or a whole folder, as paths relative to the root."""

    old: str
    new: str

    @property
    def is_folder(self) -> bool:
        return not self.old.endswith(".py")

    @property
    def old_dotted(self) -> str:
        return dotted(self.old)

    @property
    def new_dotted(self) -> str:
        return dotted(self.new)


@dataclass(frozen=True)
class Edit:
    file: str
    old: str
    new: str


@dataclass(frozen=True)
class Table:
    moves: tuple[Move, ...]
    docstrings: dict[str, str]
    edits: tuple[Edit, ...]
    dissolved: tuple[str, ...]  # folders every module moves out of: their __init__.py goes once they are empty


def dotted(path: str) -> str:
    """``specbench/a/b.py`` → ``specbench.a.b``; a folder ``specbench/a`` → ``specbench.a``."""
    return path.removesuffix(".py").strip("/").replace("/", ".")


def load_table(path: Path) -> Table:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    moves = tuple(Move(old, new) for old, new in (data.get("packages") or {}).items()) + tuple(
        Move(old, new) for old, new in (data.get("modules") or {}).items()
    )
    edits = tuple(Edit(e["file"], e["old"], e["new"]) for e in data.get("edits") or ())
    table = Table(moves, dict(data.get("new_packages") or {}), edits, tuple(data.get("dissolved") or ()))
    check_table(table)
    return table


def check_table(table: Table) -> None:
    """Refuse a table whose rewriting would not be idempotent or whose moves would collide."""
    problems = []
    olds = [m.old for m in table.moves]
    news = [m.new for m in table.moves]
    problems += [f"{p} moves twice" for p in sorted({p for p in olds if olds.count(p) > 1})]
    problems += [f"{p} is the target of two moves" for p in sorted({p for p in news if news.count(p) > 1})]
    for move in table.moves:
        for other in table.moves:
            if other.new_dotted.startswith(move.old_dotted + ".") and not move.is_folder:
                problems.append(f"{other.new} lies inside {move.old}'s dotted name: it would be rewritten again")
            if other.new == move.old:
                problems.append(f"{move.old} is both moved and a target (chain the moves into one)")
    if problems:
        sys.exit("restructure: the move table is refused:\n  " + "\n  ".join(problems))


def git(*args: str, dry_run: bool = False) -> None:
    if dry_run:
        print("  git", *args)
        return
    subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True)


def tracked(folder: Path) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--", str(folder.relative_to(ROOT))], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return [ROOT / line for line in out.stdout.splitlines() if line]


def ensure_package(folder: Path, docstrings: dict[str, str], notes: list[str], dry_run: bool) -> None:
    """Create ``folder`` and its parents up to an existing package, each with an ``__init__.py`` docstring."""
    missing = []
    while not (folder / "__init__.py").exists() and folder != ROOT:
        missing.append(folder)
        folder = folder.parent
    for package in reversed(missing):
        rel = package.relative_to(ROOT).as_posix()
        doc = docstrings.get(rel)
        if doc is None:
            sys.exit(f"restructure: new package {rel} has no docstring in the table's new_packages")
        notes.append(f"created {rel}/__init__.py")
        if dry_run:
            continue
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(f'"""{doc}"""\n', encoding="utf-8")
        git("add", str((package / "__init__.py").relative_to(ROOT)))


def has_files(path: Path, move: Move) -> bool:
    return bool(tracked(path)) if move.is_folder else path.exists()


def remove_if_empty(folder: Path) -> None:
    """Remove a folder left with nothing but compiled caches (a namespace package otherwise)."""
    if folder.is_dir() and all(p.name == "__pycache__" for p in folder.iterdir()):
        shutil.rmtree(folder)


def move_files(table: Table, dry_run: bool) -> tuple[list[Move], list[str]]:
    """The moves done now or earlier (their new path exists) and the notes on the rest."""
    done, notes = [], []
    for move in table.moves:
        old, new = ROOT / move.old, ROOT / move.new
        if not has_files(old, move):
            if new.exists():
                done.append(move)
            else:
                notes.append(f"skipped {move.old}: not on this branch")
            continue
        if new.exists() and not move.is_folder:
            sys.exit(f"restructure: {move.new} exists already beside {move.old}; move one by hand")
        ensure_package(new.parent, table.docstrings, notes, dry_run)
        for source in tracked(old) if move.is_folder else [old]:
            target = new / source.relative_to(old) if move.is_folder else new
            if not dry_run:
                target.parent.mkdir(parents=True, exist_ok=True)
            git("mv", str(source.relative_to(ROOT)), str(target.relative_to(ROOT)), dry_run=dry_run)
        if move.is_folder and not dry_run:
            remove_if_empty(old)
        notes.append(f"moved {move.old} → {move.new}")
        done.append(move)
    for folder in map(ROOT.joinpath, table.dissolved):
        left = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
        notes += [f"left {p.relative_to(ROOT)}: not in the move table" for p in left]
        if not left and (folder / "__init__.py").exists():
            git("rm", "-q", str((folder / "__init__.py").relative_to(ROOT)), dry_run=dry_run)
            notes.append(f"removed {folder.relative_to(ROOT)}/__init__.py: every module moved out")
            if not dry_run:
                remove_if_empty(folder)
    return done, notes


def reference_patterns(moves: list[Move]) -> tuple[list[tuple[re.Pattern, str]], list[tuple[re.Pattern, str]]]:
    """(pattern, replacement) for every spelling of every moved name, longest names first: the full spellings
    (``specbench.a.b``, ``specbench/a/b.py``), rewritten everywhere, and the short ones prose uses (``a.b``,
    ``a/b.py``), rewritten in Python only inside comments and strings (in code ``engine.strategies.schedule`` may be an
    attribute)."""
    full, short = [], []
    for move in sorted(moves, key=lambda m: -len(m.old)):
        old_d, new_d = move.old_dotted, move.new_dotted
        old_p, new_p = move.old.removesuffix(".py"), move.new.removesuffix(".py")
        suffix, new_suffix = ("", "") if move.is_folder else (r"\.py", ".py")
        full.append((re.compile(rf"(?<![\w.]){re.escape(old_d)}(?!\w)"), new_d))
        full.append((re.compile(rf"(?<![\w.-]){re.escape(old_p)}{suffix}(?!\w)"), new_p + new_suffix))
        top = next((t for t in TOP_PACKAGES if old_d.startswith(t + ".")), None)
        if top is not None and old_d.count(".") >= 2:  # `a.b`: two names at least, never a bare package
            cut = len(top) + 1
            short.append((re.compile(rf"(?<![\w./-]){re.escape(old_d[cut:])}(?!\w)"), new_d[cut:]))
            short.append((re.compile(rf"(?<![\w./-]){re.escape(old_p[cut:])}{suffix}(?!\w)"), new_p[cut:] + new_suffix))
    return full, short


def substitute(text: str, patterns: list[tuple[re.Pattern, str]]) -> str:
    for pattern, replacement in patterns:
        text = pattern.sub(replacement, text)
    return text


def in_prose(text: str, patterns: list[tuple[re.Pattern, str]]) -> str:
    """``patterns`` applied only inside the comments and strings of Python source ``text``."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = [
        (starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1])
        for t in tokens
        if t.type in (tokenize.COMMENT, tokenize.STRING)
    ]
    for start, end in reversed(spans):
        text = text[:start] + substitute(text[start:end], patterns) + text[end:]
    return text


IMPORT_LINE = re.compile(
    r"^(?P<indent>[ \t]*)from (?P<module>[\w.]+) import (?P<names>[\w ,]+?)(?P<rest>[ \t]*(#.*)?)$", re.M
)


def split_from_import(
    indent: str, module: str, names: list[tuple[str, str | None]], moved: dict[str, str], rest: str
) -> str | None:
    """``from module import names`` as one line per parent package once moved modules are followed; None when
    no name is a moved module. A moved module keeps its local name (``from b import new as old``)."""
    if not any(f"{module}.{name}" in moved for name, _ in names):
        return None
    groups: dict[str, list[str]] = {}
    for name, asname in names:
        parent, new_name, new_as = module, name, asname
        if f"{module}.{name}" in moved:
            parent, _, new_name = moved[f"{module}.{name}"].rpartition(".")
            new_as = asname or (name if new_name != name else None)
        groups.setdefault(parent, []).append(new_name + (f" as {new_as}" if new_as else ""))
    return "\n".join(f"{indent}from {parent} import {', '.join(items)}{rest}" for parent, items in groups.items())


def rewrite_import_lines(text: str, moved: dict[str, str]) -> str:
    """One-line ``from specbench.a import b`` anywhere: code, code held in strings, examples in docs."""

    def one(match: re.Match) -> str:
        parts = [name.split() for name in match["names"].split(",")]
        if any(len(p) not in (1, 3) or (len(p) == 3 and p[1] != "as") for p in parts):
            return match[0]  # not a plain import list (a sentence that starts like one)
        names = [(p[0], p[2] if len(p) == 3 else None) for p in parts]
        new = split_from_import(match["indent"], match["module"], names, moved, match["rest"])
        return match[0] if new is None else new

    return IMPORT_LINE.sub(one, text)


def rewrite_from_imports(text: str, moved: dict[str, str]) -> str:
    """``from specbench.a import b, c`` where ``specbench.a.b`` moved → one import per new parent package."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        first = lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        comment = next(
            (
                "  #" + line.split("#", 1)[1].rstrip("\n")
                for line in lines[node.lineno - 1 : node.end_lineno]
                if "#" in line
            ),
            "",
        )
        new = split_from_import(indent, node.module, [(a.name, a.asname) for a in node.names], moved, comment)
        if new is not None:
            edits.append((node.lineno, node.end_lineno, new + "\n"))
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1 : end] = [new]
    return "".join(lines)


def text_files() -> list[Path]:
    files = [ROOT / name for name in REWRITTEN_FILES if (ROOT / name).exists()]
    for folder in REWRITTEN_FOLDERS:
        files += [
            p
            for p in sorted((ROOT / folder).rglob("*"))
            if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts
        ]
    return [p for p in files if p.resolve() != TABLE.resolve()]


def rewrite_references(moves: list[Move], dry_run: bool) -> list[Path]:
    full, short = reference_patterns(moves)
    moved = {m.old_dotted: m.new_dotted for m in moves}
    changed = []
    for path in text_files():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            new = in_prose(substitute(rewrite_import_lines(rewrite_from_imports(text, moved), moved), full), short)
        else:
            new = substitute(substitute(rewrite_import_lines(text, moved), full), short)
        if new != text:
            changed.append(path)
            if not dry_run:
                path.write_text(new, encoding="utf-8")
    return changed


def apply_edits(edits: tuple[Edit, ...], dry_run: bool) -> list[Path]:
    changed = []
    for edit in edits:
        path = ROOT / edit.file
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        if edit.old in text:
            changed.append(path)
            if not dry_run:
                path.write_text(text.replace(edit.old, edit.new), encoding="utf-8")
    return changed


def sync_installed_packages(dry_run: bool) -> bool:
    """``[tool.setuptools] packages``: every package folder listed, no folder that is gone."""
    path = ROOT / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    block = re.search(r"(?ms)^\[tool\.setuptools\]\n.*?^packages = \[\n(?P<body>.*?)^\]", text)
    if block is None:
        return False
    body = block["body"]
    listed = re.findall(r'"([\w.]+)"', body)
    folders = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in TOP_PACKAGES
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    keep = [name for name in dict.fromkeys(listed) if name in folders or name.startswith("specbench.builtin_")]
    keep += sorted(folders - set(keep))
    new_body = "".join(f'    "{name}",\n' for name in keep)
    if new_body == body:
        return False
    if not dry_run:
        path.write_text(text[: block.start("body")] + new_body + text[block.end("body") :], encoding="utf-8")
    return True


def tidy_python(paths: list[Path]) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    python = [str(p) for p in paths if p.suffix == ".py" and p.exists()]
    if not python or not Path(ruff).exists():
        print("ruff not found: imports not sorted, changed files not formatted" if python else "", end="")
        return
    subprocess.run([ruff, "check", "-q", "--select", "I", "--fix", *python], cwd=ROOT, check=False)
    subprocess.run([ruff, "format", "-q", *python], cwd=ROOT, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=TABLE, help="the move table (YAML)")
    parser.add_argument("--dry-run", action="store_true", help="say what would move; change nothing")
    args = parser.parse_args(argv)
    table = load_table(args.table)
    done, notes = move_files(table, args.dry_run)
    changed = rewrite_references(done, args.dry_run) if done else []
    changed += apply_edits(table.edits, args.dry_run)
    packages = sync_installed_packages(args.dry_run)
    if not args.dry_run:
        tidy_python(sorted(set(changed)))
    for note in notes:
        print(note)
    print(f"{len(changed)} file(s) rewritten" + ("; pyproject's package list updated" if packages else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
