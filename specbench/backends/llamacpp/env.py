"""Where llama.cpp's ``llama-server`` is, and what build it is: one place, one variable.

``make install-llamacpp`` (scripts/install_llamacpp.sh) builds it into ``.llamacpp/`` at the repository root:
``bin/llama-server``, ``build-info.json`` (the llama.cpp commit, the llama-cpp-python sdist it came from, cpu or
cuda, build seconds) and ``version.txt`` (the binary's own ``--version``). In order:

1. the backend option ``binary`` (a ``llama-server`` executable);
2. ``$SPECBENCH_LLAMACPP``: an install folder (holding ``bin/llama-server``);
3. ``.llamacpp`` at the repository root, then in the working directory.

Standard library only: nothing here starts the server.
"""

from __future__ import annotations

import os
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.safe_files import read_json

FOLDER_ENV = "SPECBENCH_LLAMACPP"
REPO = Path(__file__).resolve().parents[3]
INSTALL_HINT = (
    f"run `make install-llamacpp` in the specbench checkout, or set {FOLDER_ENV} to a folder holding "
    "bin/llama-server and bin/llama-quantize (or the backend option binary)"
)


def install_folders() -> list[Path]:
    named = os.environ.get(FOLDER_ENV)
    if named:
        return [Path(named).expanduser()]
    return [REPO / ".llamacpp", Path.cwd() / ".llamacpp"]


def server_binary(binary: str | Path | None = None) -> Path:
    """The ``llama-server`` executable, or a one-line error saying how to get one."""
    candidates = (
        [Path(binary).expanduser()] if binary else [folder / "bin" / "llama-server" for folder in install_folders()]
    )
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
    raise SpecbenchError(f"llama.cpp's llama-server is not installed ({candidates[0]} not found): {INSTALL_HINT}")


def tool_binary(name: str, binary: str | Path | None = None) -> Path:
    """Another llama.cpp tool built by the install (``llama-quantize``): ``binary`` when given, else beside
    ``llama-server`` in the install folders (``bin/NAME``), else its build folder's ``build-*/bin/NAME``."""
    candidates = [Path(binary).expanduser()] if binary else []
    for folder in install_folders():
        candidates += [folder / "bin" / name, *sorted(folder.glob(f"build-*/bin/{name}"))]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
    raise SpecbenchError(f"llama.cpp's {name} is not installed ({candidates[0]} not found): {INSTALL_HINT}")


def build_info(binary: Path) -> dict:
    """What the install recorded beside ``binary`` (build-info.json, version.txt), or {} for a binary from
    elsewhere; ``binary`` is always named."""
    folder = binary.parent.parent
    info: dict = {"binary": str(binary)}
    try:
        recorded = read_json(folder / "build-info.json", "llama.cpp build record")
        if isinstance(recorded, dict):
            info.update({str(k): v for k, v in recorded.items() if isinstance(v, (str, int, float))})
    except SpecbenchError:
        pass
    try:
        lines = [line.strip() for line in (folder / "version.txt").read_text().splitlines() if line.strip()]
        info["version"] = "; ".join(lines[:2])
    except OSError:
        pass
    return info
