"""A GGUF file with its weights dequantized to one dtype (F32 or BF16), for engines that run GGUF files as they
are (llama.cpp): the same model at the same dtype as specbench's own engine and vLLM run it.

specbench's own engine loads an alias's GGUF through transformers, which dequantizes every tensor to fp32 with
gguf-py's ``dequantize``; this writes those same fp32 values (or their bf16 rounding) back into a GGUF with every
metadata key of the source (``general.file_type`` set to the new type), so llama.cpp computes on the very weights
the other engines do. The copy is built once into specbench's cache (``<cache>/gguf/dequantized/``), named by the
source file's identity and the dtype; a half-written copy is never left under its final name.
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

from specbench.errors import SpecbenchError
from specbench.models import cache as model_cache
from specbench.safe_files import move_into_place, writing

DTYPES = {"fp32": ("F32", 0), "float32": ("F32", 0), "bf16": ("BF16", 32), "bfloat16": ("BF16", 32)}
SKIPPED_KEYS = ("GGUF.", "general.file_type")  # the reader's own header fields; the type is written anew


def dequantized_path(source: Path, dtype: str) -> Path:
    """Where the ``dtype`` copy of ``source`` lives in the cache (it may not exist yet)."""
    if dtype not in DTYPES:
        raise SpecbenchError(f"cannot dequantize a GGUF to '{dtype}' (choose fp32 or bf16)")
    return model_cache.cached_copy(source, "dequantized", DTYPES[dtype][0])


def dequantized(source: Path, dtype: str, status=None) -> Path:
    """``source`` with every tensor stored as ``dtype`` (fp32 or bf16): built once, then found in the cache."""
    target = dequantized_path(Path(source), dtype)
    if target.is_file():
        return target
    if status is not None:
        status(f"writing {Path(source).name} as {DTYPES[dtype][0]} once ({target.parent})")
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        with writing(target, "the dequantized GGUF", remove=part):
            _write(Path(source), part, dtype)
            move_into_place(part, target)
    finally:
        part.unlink(missing_ok=True)
    return target


def _write(source: Path, out: Path, dtype: str) -> None:
    name, file_type = DTYPES[dtype]
    qtype = getattr(gguf.GGMLQuantizationType, name)
    try:
        reader = gguf.GGUFReader(str(source))
    except (OSError, ValueError) as exc:
        raise SpecbenchError(f"could not read GGUF file {source}: {str(exc).splitlines()[0][:200]}") from None
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(out), arch)
    for key, field in reader.fields.items():
        if key.startswith(SKIPPED_KEYS) or key == "general.architecture":
            continue
        sub_type = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(key, field.contents(), field.types[0], sub_type)
    writer.add_file_type(file_type)
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if tensor.tensor_type in (gguf.GGMLQuantizationType.F32,) and values.ndim == 1:
            writer.add_tensor(tensor.name, values)  # norms and biases stay F32 (llama.cpp wants them so)
        elif qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(tensor.name, values)
        else:
            writer.add_tensor(tensor.name, gguf.quants.quantize(values, qtype), raw_shape=values.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
