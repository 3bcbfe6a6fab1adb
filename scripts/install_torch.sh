#!/usr/bin/env bash
# Install torch into the given python's environment without ever replacing a torch the
# user already has (e.g. a CUDA build), and without pulling a multi-GB CUDA build onto a
# CPU-only machine.
set -euo pipefail
PY=${1:-python}
if "$PY" -c "import torch" 2>/dev/null; then
    echo "install_torch: keeping installed torch $("$PY" -c 'import torch; print(torch.__version__)')"
    exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "install_torch: CUDA device found, installing the default (CUDA) torch build"
    "$PY" -m pip install "torch>=2.5"
    exit 0
fi
# CPU only: the CPU wheel (on this workplace's disk, else from PyTorch's CPU index).
"$PY" -m pip install "torch==2.13.0+cpu" 2>/dev/null \
  || "$PY" -m pip install "torch==2.13.0" 2>/dev/null \
  || "$PY" -m pip install torch --index-url https://download.pytorch.org/whl/cpu
