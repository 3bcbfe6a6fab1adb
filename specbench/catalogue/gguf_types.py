"""GGUF weight types as sweep values: the names llama.cpp's ``llama-quantize`` takes, and how a model spec names
one (``smollm2-135m@Q4_K_M``: the alias's weights stored as Q4_K_M).

A spec without ``@TYPE`` runs the GGUF as it ships. A spec with it runs a variant built once by llama.cpp's own
``llama-quantize`` (`specbench.backends.llamacpp.quantized`) from the shipped file's weights dequantized to F32:
a model that ships as Q4_1 gives "F16" = F16 of those Q4_1 weights, never the original checkpoint's.

Imports nothing of specbench but errors: the grid, the backends and the analysis all read a spec's type here.
"""

from __future__ import annotations

from specbench.errors import SpecbenchError, did_you_mean

SEPARATOR = "@"
# llama-quantize's type names, widest first (the order tables and the drop detector list them in)
TYPES = ("F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_0", "Q4_K_M", "Q4_K_S", "Q4_0", "Q3_K_M", "Q2_K")


def check_type(name, where: str) -> str:
    """``name`` as a GGUF type (case-insensitive: ``q8_0`` is Q8_0), else one line naming the choices."""
    text = str(name).strip().upper()
    if text not in TYPES:
        raise SpecbenchError(
            f"{where}: unknown GGUF type '{name}'{did_you_mean(text, list(TYPES))} (choose from: {', '.join(TYPES)})"
        )
    return text


def named_types(value, where: str) -> list[str]:
    """The GGUF types a sweep value names — one type or a list of them (``quantization.target: [F16, Q8_0]``) —
    checked, in order, each once; [] for None."""
    if value is None:
        return []
    kinds = value if isinstance(value, list) else [value]
    return list(dict.fromkeys(check_type(k, where) for k in kinds))


def split(spec: str) -> tuple[str, str | None]:
    """A model spec → (the model as shipped, its GGUF type or None)."""
    base, sep, kind = str(spec).rpartition(SEPARATOR)
    if not sep:
        return str(spec), None
    return base, check_type(kind, f"model '{spec}'")


def with_type(spec: str, kind: str | None) -> str:
    """``spec`` stored as ``kind`` (a type already named is replaced; None: as shipped)."""
    base, _ = split(spec)
    return base if kind is None else f"{base}{SEPARATOR}{kind}"


def rank(kind: str | None) -> int:
    """Widest first: F16 before Q8_0 before Q4_K_M; as shipped (None) last."""
    return TYPES.index(kind) if kind in TYPES else len(TYPES)
