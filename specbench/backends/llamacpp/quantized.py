"""A model's GGUF at another weight type (F16, Q8_0, Q6_K, Q4_K_M, ...), built with llama.cpp's own
``llama-quantize`` — the tool ``make install-llamacpp`` builds beside ``llama-server``.

The variant derives from the GGUF the model ships as, never from an original checkpoint: its tensors are first
dequantized exactly to F32 (`specbench.models.gguf_convert`, the copy every engine's fp32 runs use), then
``llama-quantize F32.gguf OUT.gguf TYPE`` writes the type. For SmolLM2-135M, shipped as Q4_1, "F16" is therefore
F16 of the Q4_1 weights, and "Q8_0" their Q8_0 rounding. (llama.cpp's ``convert_hf_to_gguf.py`` would write the
F16 from the dequantized safetensors folder instead, but it imports ``sentencepiece`` for every Llama model, which
specbench does not install; the F32 GGUF holds the same values, so ``llama-quantize`` writes every type.)

Cached like the dequantized copies: ``<cache>/gguf/quantized/<source stem>-<source key>-<TYPE>.gguf``, the key
being the source file's identity (path, size, mtime); written under a ``.part`` name and renamed into place, so a
killed build never leaves a file under its final name. Never copied into the repository.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from specbench.backends.llamacpp.env import tool_binary
from specbench.catalogue import gguf_types
from specbench.errors import SpecbenchError
from specbench.models.cache import QUANTIZED, cached_copy
from specbench.models.gguf_convert import dequantized
from specbench.models.gguf_files import gguf_file
from specbench.safe_files import move_into_place

QUANTIZE = "llama-quantize"


def model_gguf(spec: str, status=None, binary: str | Path | None = None) -> Path:
    """The GGUF a model spec runs from on llama.cpp: as shipped, or (``alias@TYPE``) its variant at that type."""
    base, kind = gguf_types.split(spec)
    source = gguf_file(base)
    return source if kind is None else variant(source, kind, status=status, binary=binary)


def variant(source: Path, kind: str, status=None, binary: str | Path | None = None) -> Path:
    """``source`` stored as ``kind``: built once with ``llama-quantize``, then found in the cache."""
    kind = gguf_types.check_type(kind, "quantization")
    target = cached_copy(Path(source), QUANTIZED, kind)
    if target.is_file():
        return target
    tool = tool_binary(QUANTIZE, binary)
    f32 = dequantized(Path(source), "fp32", status=status)
    if status is not None:
        status(f"writing {Path(source).name} as {kind} once with {QUANTIZE} ({target.parent})")
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        done = subprocess.run(
            [str(tool), str(f32), str(part), kind, "1"], capture_output=True, text=True, check=False, timeout=3600
        )
        if done.returncode != 0 or not part.is_file():
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SpecbenchError(f"{QUANTIZE} could not write {Path(source).name} as {kind}: {last[0][:200]}")
        move_into_place(part, target)
    except subprocess.TimeoutExpired:
        raise SpecbenchError(f"{QUANTIZE} did not finish writing {Path(source).name} as {kind} in an hour") from None
    finally:
        part.unlink(missing_ok=True)
    return target
