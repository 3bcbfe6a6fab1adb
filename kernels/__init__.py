"""Triton kernels (imported as ``specbench.kernels``), each beside its torch reference."""
