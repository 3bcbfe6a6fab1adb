"""Draft shapes. `chain` is a single path of γ tokens."""

from __future__ import annotations

from specbench.errors import SpecbenchError

SHAPES = ("chain",)


def parse_tree(spec: str) -> str:
    """Validate a tree spec; returns its canonical text."""
    text = str(spec).strip()
    if text != "chain":
        raise SpecbenchError(f"unknown tree shape '{text}' (supported: {', '.join(SHAPES)})")
    return text
