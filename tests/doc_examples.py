"""The examples of README.md and docs/*.md, read out of the Markdown: every ```console block as the commands it
shows, every ```yaml block as its text, and whether the doc marks it as an illustration.

An illustration is a block the docs show but no test can run here (a GPU cluster, a download, another program's
command line). It is marked twice, so that a reader of the page and the test both see it: the line right before
the fence is the HTML comment ``<!-- illustration: REASON -->``, and the paragraph above it says "illustration"
in words. Every other block is run by tests/test_doc_examples.py.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
ILLUSTRATION = re.compile(r"^\s*<!--\s*illustration:\s*(?P<reason>\S.*?)\s*-->\s*$")
VISIBLE_WORD = re.compile(r"\billustration\b", re.IGNORECASE)
PROMPT = re.compile(r"^\s*(?:[\w-]*\$)\s")  # "$ ", "gpu$ ", "laptop$ ": a command; other lines are its output
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
WRAPPERS = {"taskset": 2, "nice": 2}  # a wrapper and how many of its own words precede the command it runs
SEPARATORS = {"&&", ";", "||"}


def doc_files() -> list[Path]:
    """README.md and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Command:
    """One simple command of a console block: its words (without environment assignments, wrappers,
    redirections and the rest of a pipe), its environment, and the output the doc shows for it."""

    words: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    shown_output: tuple[str, ...] = ()

    @property
    def program(self) -> str:
        return self.words[0] if self.words else ""

    def __str__(self) -> str:
        return shlex.join(self.words)


@dataclass(frozen=True)
class Block:
    """A fenced block of a doc: where it starts (1-based line of the fence), its language and its text."""

    doc: str
    line: int
    lang: str
    text: str
    illustration: str | None  # the reason given in the marker comment; None: the block must run
    visibly_marked: bool  # the paragraph above the marker says "illustration" in words

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    def commands(self) -> list[Command]:
        return console_commands(self.text)


def read_blocks(path: Path, langs: tuple[str, ...] = ("console", "yaml")) -> list[Block]:
    """The fenced blocks of ``path`` in ``langs``, with their illustration marks."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        if opened.group(2) in langs:
            reason, visible = _illustration_mark(lines, i)
            body = "\n".join(line[len(opened.group(1)) :] for line in lines[i + 1 : end])
            doc = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
            blocks.append(Block(doc, i + 1, opened.group(2), body, reason, visible))
        i = end + 1
    return blocks


def _illustration_mark(lines: list[str], fence: int) -> tuple[str | None, bool]:
    """The marker's reason if the line before the fence (blank lines skipped) is the marker comment, and whether
    the paragraph above the marker says "illustration"."""
    above = fence - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    marker = ILLUSTRATION.match(lines[above]) if above >= 0 else None
    if marker is None:
        return None, False
    paragraph = []
    above -= 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    while above >= 0 and lines[above].strip() and not FENCE.match(lines[above]):
        paragraph.append(lines[above])
        above -= 1
    return marker.group("reason"), bool(VISIBLE_WORD.search(" ".join(paragraph)))


def all_blocks(langs: tuple[str, ...] = ("console", "yaml")) -> list[Block]:
    return [block for path in doc_files() for block in read_blocks(path, langs)]


def console_commands(text: str) -> list[Command]:
    """The simple commands of a console block. With prompts (``$ ``), only prompted lines are commands and the
    lines after one are its shown output; without, every line that is not a comment is a command. A line ending
    in a backslash continues on the next."""
    lines = text.splitlines()
    prompted = any(PROMPT.match(line) for line in lines)
    entries: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if prompted and not PROMPT.match(line):
            if entries and line.strip():
                entries[-1][1].append(line.strip())
            i += 1
            continue
        line = PROMPT.sub("", line, count=1) if prompted else line
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        if line.strip() and not line.strip().startswith("#"):
            entries.append((line, []))
    commands = []
    for line, output in entries:
        simple = split_simple(line)
        commands += [
            Command(c.words, c.env, tuple(output) if k == len(simple) - 1 else ()) for k, c in enumerate(simple)
        ]
    return commands


def split_simple(line: str) -> list[Command]:
    """``a && b; c | tail -1 > out`` → the commands a, b and c: separators split, the first stage of a pipe is
    the command (the rest reads its output), redirections and comments are dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    groups: list[list[str]] = [[]]
    skip_rest = False
    redirect = False
    for token in lexer:
        if token in SEPARATORS:
            groups.append([])
            skip_rest = redirect = False
        elif token == "|":
            skip_rest = True
        elif token in (">", ">>", "2>", "<"):
            redirect = True
        elif redirect:
            redirect = False
        elif not skip_rest:
            groups[-1].append(token)
    return [_strip_prefixes(words) for words in groups if words]


def _strip_prefixes(words: list[str]) -> Command:
    env = {}
    while words and ENV_ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    while words and words[0] in WRAPPERS:
        words = words[1 + WRAPPERS[words[0]] :]
    return Command(tuple(words), env)
