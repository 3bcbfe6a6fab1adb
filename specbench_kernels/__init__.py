"""Triton kernels (imported as ``specbench_kernels``), each beside its torch reference."""
