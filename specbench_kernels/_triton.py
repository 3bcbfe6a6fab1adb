"""Optional Triton: the import guard and the torch/Triton switch shared by the kernels.

Importing this module never fails: when Triton is missing (or broken) ``triton`` and ``tl`` are
None, ``triton_available()`` is False and the Triton wrappers raise `KernelUnavailable`.

Triton decides between compiling for the GPU and interpreting on the CPU when a kernel is
decorated, from the environment variable ``TRITON_INTERPRET``; set it before the first import
of a kernel module (the test suite runs with ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import os

import torch

try:  # pragma: no cover - depends on the environment
    import triton
    import triton.language as tl

    _IMPORT_ERROR: BaseException | None = None
except Exception as exc:  # ImportError, or a Triton build that fails to initialise
    triton = None
    tl = None
    _IMPORT_ERROR = exc

IMPLS = ("auto", "triton", "torch")

# float dtypes the kernels read, and the code they use for "round to this dtype" in a kernel
DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


class KernelUnavailable(RuntimeError):
    """The Triton implementation cannot run here (no Triton, or no CUDA and no interpreter)."""


def triton_available() -> bool:
    """True when ``import triton`` succeeded."""
    return triton is not None


def interpreter_enabled() -> bool:
    """True when Triton runs kernels on the CPU through its interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


def require_triton(*tensors: torch.Tensor) -> None:
    """Raise a clear `KernelUnavailable` unless the Triton kernels can run on ``tensors``."""
    if triton is None:
        raise KernelUnavailable(
            f"the Triton kernels need the 'triton' package, which could not be imported "
            f"({_IMPORT_ERROR!r}); install it (`pip install 'triton>=3.0'`) or use impl='torch'"
        )
    on_cuda = all(t.is_cuda for t in tensors)
    if not on_cuda and not interpreter_enabled():
        devices = sorted({str(t.device) for t in tensors})
        raise KernelUnavailable(
            f"the Triton kernels run on CUDA tensors (got {', '.join(devices)}); on the CPU set "
            "TRITON_INTERPRET=1 before importing them (tests only) or use impl='torch'"
        )


def resolve_impl(impl: str, *tensors: torch.Tensor) -> str:
    """'triton' or 'torch' for a requested impl: 'auto' is Triton on CUDA tensors, torch elsewhere.

    The interpreter is for tests: 'auto' never picks it; ask for impl='triton' explicitly.
    """
    if impl not in IMPLS:
        raise ValueError(f"unknown kernel impl '{impl}' (expected one of {', '.join(IMPLS)})")
    if impl != "auto":
        return impl
    if triton is not None and tensors and all(t.is_cuda for t in tensors) and not interpreter_enabled():
        return "triton"
    return "torch"


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device (a fixed guess elsewhere, e.g. under the interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4
