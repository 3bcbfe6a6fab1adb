#!/usr/bin/env bash
# The mechanical style pass of issue 40 ("style everywhere"), run once by whoever merges the branches, after the
# last one is in (`make style-pass`): every file formatted, imports sorted, the pyupgrade rewrites, and the rules
# I, B and UP turned on. It changes no behaviour: the formatter keeps the AST, and the fixes it applies (import
# order, UP's typing spellings) are the safe ones; what B finds is listed for a person to fix by hand.
#
#   1. pyproject.toml: [tool.ruff.lint] selects E, F, W, I, B, UP (B905 off: zip(strict=) would be a
#      behaviour change at each call; typer.Option / typer.Argument are immutable calls for B008, since Typer
#      declares options as defaults), isort knows the first-party packages, and [tool.ruff.format] formats
#      every file; the Makefile's FORMATTED list goes, `make lint` checks the format of the whole tree.
#   2. `ruff format .` on the whole tree.
#   3. `ruff check --select I,UP --fix .` (import order, deprecated typing imports, quoted annotations), then
#      `ruff format .` again (sorted imports can rewrap).
#   4. The list of what is left: the UP findings without a safe fix, and every B finding (B023: a closure
#      over a loop variable, B007: an unused loop variable, ...), with counts, for the commit that fixes them.
#
# Idempotent: a second run changes nothing and lists what is still left. Commit after step 3, fix the list,
# then `make lint` passes with the new rules.
set -euo pipefail
cd "$(dirname "$0")/.."
RUFF=${RUFF:-.venv/bin/ruff}
PY=${PY:-.venv/bin/python}

echo "== 1. the rules (pyproject.toml) and the format check of every file (Makefile)"
"$PY" - <<'EOF'
import re
from pathlib import Path

pyproject = Path("pyproject.toml")
text = pyproject.read_text()
start = text.index("[tool.ruff.lint]")
end = text.index("[tool.pytest.ini_options]")
rules = '''[tool.ruff.lint]
# `make lint` (and .ci/run, and the pre-commit hooks) runs `ruff check .` with these rules and `ruff format --check .`
# on every file. Chosen on purpose:
# * F (pyflakes), E, W (pycodestyle errors and warnings), I (import order), B (bugbear: likely bugs) and UP
#   (pyupgrade: the spellings of the Python version we support).
# * E501 (line length) is ignored: the formatter owns line length (120).
# * B905 (zip without strict=) is off: adding strict=True changes what a call does when lengths differ, a
#   decision per call, not a style rule.
select = ["E", "F", "W", "I", "B", "UP"]
ignore = ["E501", "B905"]

[tool.ruff.lint.flake8-bugbear]
# Typer declares a command's options as parameter defaults: these calls build immutable descriptions.
extend-immutable-calls = ["typer.Option", "typer.Argument"]

[tool.ruff.lint.isort]
known-first-party = ["specbench", "specbench_kernels", "tests"]

[tool.ruff.format]
# Every file (`make lint` checks it; scripts/style_pass.sh formatted the tree once).

'''
if "extend-immutable-calls" not in text:
    pyproject.write_text(text[:start] + rules + text[end:])
    print("pyproject.toml: rules E, F, W, I, B, UP; format on every file")
else:
    print("pyproject.toml: already done")

makefile = Path("Makefile")
text = makefile.read_text()
if "FORMATTED :=" in text:
    text = re.sub(r"# Files whose format `make lint` enforces.*?\n\n", "", text, count=1, flags=re.S)
    text = re.sub(r"FORMATTED := (?:.*\\\n)*.*\n\n", "", text, count=1)
    text = text.replace("$(VENV)/bin/ruff format --check $(FORMATTED)", "$(VENV)/bin/ruff format --check .")
    text = text.replace("ruff (lint every file, check the format of FORMATTED)", "ruff (lint and format check, every file)")
    makefile.write_text(text)
    print("Makefile: FORMATTED dropped, `make lint` checks the format of every file")
else:
    print("Makefile: already done")
EOF

echo "== 2. ruff format (the whole tree)"
"$RUFF" format .

echo "== 3. ruff check --select I,UP --fix, then ruff format again"
"$RUFF" check --select I,UP --fix --exit-zero . >/dev/null
"$RUFF" format .

echo "== 4. what is left for a person: every finding of the new rules (UP without a safe fix, B), with counts"
"$RUFF" check --statistics --exit-zero .
"$RUFF" check --output-format concise --exit-zero .
