"""Where vLLM's own environment is: one place, one variable.

vLLM pins its own torch and transformers, so it lives in a virtual environment of its own
(``make install-vllm`` creates ``.venv-vllm`` at the repository root). Everything that runs
vLLM finds it here: the in-process backend's worker (`specbench.backends.vllm.engine`), the
``vllm-server`` backend (`specbench.backends.vllm.server`) and ``specbench recommend``'s check of
the emitted settings (`specbench.cli.shell.engine_checks`).

In order:

1. an explicit folder or interpreter (the backend options ``venv`` / ``python``);
2. ``$SPECBENCH_VLLM_VENV``: the environment's folder;
3. ``$SPECBENCH_VLLM_PYTHON``: its interpreter — the former name, still read, with a warning;
4. ``.venv-vllm`` at the repository root, then in the working directory.

Standard library only: nothing here starts or imports vLLM.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from specbench.errors import SpecbenchError

VENV_ENV = "SPECBENCH_VLLM_VENV"  # the one name: the vLLM environment's folder
OLD_PYTHON_ENV = "SPECBENCH_VLLM_PYTHON"  # deprecated: an interpreter path
REPO = Path(__file__).resolve().parents[3]
INSTALL_HINT = (
    f"run `make install-vllm` in the specbench checkout, or set {VENV_ENV} to a virtual environment with vLLM"
)


_NOTED: set[str] = set()


def _note_once(text: str) -> None:
    """One plain line on stderr per process (a Python warning would print its source line too)."""
    if text not in _NOTED:
        _NOTED.add(text)
        print(text, file=sys.stderr)


def _interpreter(venv: Path) -> Path:
    return venv / "bin" / "python"


def _from_environment() -> Path | None:
    """The interpreter the environment variables name (None: they name none)."""
    venv = os.environ.get(VENV_ENV)
    if venv:
        return _interpreter(Path(venv).expanduser())
    old = os.environ.get(OLD_PYTHON_ENV)
    if old:
        _note_once(
            f"note: {OLD_PYTHON_ENV} is deprecated: set {VENV_ENV} to the vLLM environment's folder instead "
            f"({VENV_ENV}={Path(old).expanduser().parent.parent})"
        )
        return Path(old).expanduser()
    return None


def default_venv() -> Path:
    """The vLLM environment's folder: ``$SPECBENCH_VLLM_VENV`` (or the folder of ``$SPECBENCH_VLLM_PYTHON``),
    else ``.venv-vllm`` at the repository root."""
    named = _from_environment()
    return named.parent.parent if named is not None else REPO / ".venv-vllm"


def vllm_python(*, venv: str | Path | None = None, python: str | Path | None = None) -> Path:
    """The vLLM environment's interpreter, or a one-line error saying how to get one."""
    if python:
        candidates = [Path(python).expanduser()]
    elif venv:
        candidates = [_interpreter(Path(venv).expanduser())]
    else:
        named = _from_environment()
        candidates = (
            [named]
            if named is not None
            else [_interpreter(REPO / ".venv-vllm"), _interpreter(Path.cwd() / ".venv-vllm")]
        )
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise SpecbenchError(f"vLLM is not installed ({candidates[0]} not found): {INSTALL_HINT}")
