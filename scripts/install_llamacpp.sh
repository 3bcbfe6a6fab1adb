#!/usr/bin/env bash
# `make install-llamacpp`: build llama.cpp's `llama-server` and `llama-quantize` (nothing else) into a cached folder.
#
# Source: the llama.cpp tree vendored in the `llama-cpp-python` sdist on PyPI (vendor/llama.cpp), fetched with
# `pip download` — a package registry, so this works where GitHub does not. Only the `llama-server` and
# `llama-quantize` targets are built (static, no web UI, no tests/examples): the sweep drives the server over HTTP,
# and `llama-quantize` writes the GGUF types a quantization sweep runs (F16, Q8_0, Q4_K_M, ...). Adding
# `llama-quantize` to an existing build folder compiles one file and links it (seconds).
#
#   CPU build by default (GGML_NATIVE: the host's SIMD, AVX2 here).
#   CUDA when a GPU is usable (nvidia-smi lists one) and nvcc is present; LLAMACPP_CUDA=1 forces it, =0 refuses it.
#   An nvcc without a GPU (a CPU box with the toolkit installed) gets the CPU build.
#
# Writes DIR/bin/llama-server, DIR/bin/llama-quantize and DIR/build-info.json (llama.cpp commit, llama-cpp-python version, backend,
# build seconds); specbench reads the latter into run.json's environment. A finished build is kept: rerunning
# is a no-op until DIR is removed or LLAMACPP_VERSION changes.
#
# Usage: bash scripts/install_llamacpp.sh [DIR]      (DIR defaults to .llamacpp)
#   LLAMACPP_VERSION   llama-cpp-python sdist version (default 0.3.36)
#   LLAMACPP_JOBS      parallel compile jobs (default: nproc)
#   LLAMACPP_CUDA      1 / 0 / unset (auto)
#   PYTHON             the python whose pip downloads the sdist (default python3)
set -euo pipefail
DIR=${1:-.llamacpp}
VERSION=${LLAMACPP_VERSION:-0.3.36}
PYTHON=${PYTHON:-python3}
JOBS=${LLAMACPP_JOBS:-$(nproc 2>/dev/null || echo 2)}
say() { echo "install_llamacpp: $*"; }
fail() { echo "install_llamacpp: cannot build llama-server: $*" >&2; exit 1; }

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
INFO="$DIR/build-info.json"
if [ -x "$DIR/bin/llama-server" ] && [ -x "$DIR/bin/llama-quantize" ] && [ -f "$INFO" ] && grep -q "\"llama_cpp_python\": \"$VERSION\"" "$INFO"; then
    say "$DIR/bin/llama-server is ready ($(tr -d '\n' < "$INFO")); remove $DIR to rebuild"
    exit 0
fi

command -v cmake >/dev/null 2>&1 || fail "cmake is not installed (apt-get install cmake, or pip install cmake)"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || fail "no C++ compiler (apt-get install g++)"
"$PYTHON" -m pip --version >/dev/null 2>&1 || fail "$PYTHON has no pip (set PYTHON= to one that has)"

start=$(date +%s)
SRC="$DIR/src"
SDIST="$SRC/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
    say "downloading the llama-cpp-python==$VERSION sdist from PyPI (~75 MB; pip prepares its metadata, a few minutes)"
    mkdir -p "$SRC"
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$SRC" \
        || fail "pip download llama-cpp-python==$VERSION failed (no access to PyPI?)"
fi
TREE="$SRC/llama_cpp_python-$VERSION"
if [ ! -f "$TREE/vendor/llama.cpp/CMakeLists.txt" ]; then
    say "unpacking vendor/llama.cpp"
    rm -rf "$TREE"
    tar -xzf "$SDIST" -C "$SRC" "llama_cpp_python-$VERSION/vendor/llama.cpp" "llama_cpp_python-$VERSION/CHANGELOG.md" \
        || fail "$SDIST has no vendor/llama.cpp"
fi
LLAMA="$TREE/vendor/llama.cpp"
# The sdist carries no .git: the changelog's entry for this release names the llama.cpp commit it vendors.
COMMIT=$(awk -v v="## [$VERSION]" '$0==v{on=1;next} /^## \[/{on=0} on' "$TREE/CHANGELOG.md" \
    | grep -o 'llama.cpp@[0-9a-f]*' | head -1 | cut -d@ -f2 || true)
COMMIT=${COMMIT:-unknown}

backend=cpu
cuda_flags=()
gpu_present=false
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then gpu_present=true; fi
case "${LLAMACPP_CUDA:-auto}" in
    1) command -v nvcc >/dev/null 2>&1 || fail "LLAMACPP_CUDA=1 but nvcc is not on PATH"; backend=cuda ;;
    0) backend=cpu ;;
    *) if $gpu_present && command -v nvcc >/dev/null 2>&1; then backend=cuda
       elif command -v nvcc >/dev/null 2>&1; then say "nvcc found but no usable GPU (nvidia-smi): CPU build (LLAMACPP_CUDA=1 forces CUDA)"
       fi ;;
esac
if [ "$backend" = cuda ]; then cuda_flags=(-DGGML_CUDA=ON); fi

BUILD="$DIR/build-$backend"
say "configuring llama.cpp@$COMMIT ($backend build, $JOBS jobs)"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S "$LLAMA" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_COMMIT="$COMMIT" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    "${cuda_flags[@]}" > "$DIR/configure.log" 2>&1 \
    || fail "cmake configure failed; see $DIR/configure.log (last line: $(tail -1 "$DIR/configure.log"))"
say "building the llama-server and llama-quantize targets (log: $DIR/build.log)"
cmake --build "$BUILD" --target llama-server llama-quantize -j "$JOBS" > "$DIR/build.log" 2>&1 \
    || fail "the build failed; see $DIR/build.log (last line: $(tail -1 "$DIR/build.log"))"
mkdir -p "$DIR/bin"
cp "$BUILD/bin/llama-server" "$DIR/bin/llama-server"
cp "$BUILD/bin/llama-quantize" "$DIR/bin/llama-quantize"
"$DIR/bin/llama-server" --version > "$DIR/version.txt" 2>&1 || fail "the built llama-server does not run: $(tail -1 "$DIR/version.txt")"
seconds=$(( $(date +%s) - start ))
cat > "$INFO" <<EOF
{"llama_cpp_commit": "$COMMIT", "llama_cpp_python": "$VERSION", "backend": "$backend", "build_seconds": $seconds, "jobs": $JOBS}
EOF
say "llama-server and llama-quantize (llama.cpp@$COMMIT, $backend) in $DIR/bin ($seconds s)"
