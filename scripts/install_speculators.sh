#!/usr/bin/env bash
# `make install-speculators`: the speculators package (vllm-project/speculators) in its own environment,
# .venv-speculators, never in specbench's. It is used only to check that a speculators-format export reads
# back in the library that defines the format (tests/test_speculators_format.py; docs/speculators.md).
# speculators 0.9.0 asks for torchvision and torchaudio, which its config and model code do not import and
# the index has no builds of for this torch: the package goes in with --no-deps, next to the dependencies
# it imports (torch, transformers <= 5.19, pydantic, ...).
set -euo pipefail
VENV=${1:-.venv-speculators}
PYTHON=${PYTHON:-python3}
STAMP="$VENV/.speculators-installed"
source "$(dirname "$0")/venv_ready.sh"
venv_ready install_speculators "$VENV" "$STAMP"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
bash scripts/install_torch.sh "$VENV/bin/python"
"$VENV/bin/python" -m pip install -q aiohttp click "datasets>=4,<=5.1.0" httpx huggingface-hub \
    "loguru>=0.7.2,<=0.7.3" "numpy>=2,<=2.5.4" "openai>=2" protobuf psutil "pydantic>=2" pydantic-settings rich \
    safetensors "tqdm>=4.66.3,<=4.70.1" "transformers>=5.0,<=5.19.0" "typer>=0.12"
"$VENV/bin/python" -m pip install -q --no-deps "speculators==0.9.0" "hs-connectors==0.9.0"
"$VENV/bin/python" -c "import speculators.models.eagle3; import importlib.metadata as m; print(m.version('speculators'))" \
    | tail -1 > "$STAMP"
echo "install_speculators: speculators $(cat "$STAMP") in $VENV"
