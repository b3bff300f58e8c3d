#!/usr/bin/env bash
# Sets up groundbench on a fresh Debian machine with Python 3.11 (as root, or with sudo).
# Idempotent: a second run only checks what is there.
#   - Debian chromium + chromium-driver (browser collection and its tests)
#   - a virtual environment in .venv with groundbench and every dependency
#   - llama-cpp-python compiled for portable x86-64 (the native build crashes on AMX CPUs)
#   - the Jupyter kernel "groundbench" that papermill runs the stage notebooks with
set -euo pipefail
cd "$(dirname "$0")"
VENV=${GROUNDBENCH_VENV:-.venv}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip)   # an array: a path with a space stays one word
"${PIP[@]}" install -q --upgrade pip

# llama-cpp-python first, compiled from source without -march=native and never from pip's
# wheel cache (the cache ignores CMAKE_ARGS, so a wheel built natively elsewhere would be reused). The wheel we build is
# kept in our own cache, keyed by version, build flags, Python and machine, so a second checkout on this machine (or a
# second CI run on it) installs it in seconds instead of compiling again.
LLAMA_VERSION=0.3.36
LLAMA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
LLAMA_KEY=$(printf '%s|%s|%s|%s' "$LLAMA_VERSION" "$LLAMA_FLAGS" "$("$PY" -c 'import sys; print(sys.version[:7])')" \
            "$(uname -m)" | sha256sum | cut -c1-16)
WHEELS="${GROUNDBENCH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/groundbench/wheels}/llama-cpp-python-$LLAMA_VERSION-$LLAMA_KEY"
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  if ! ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    # said before it starts: pip is quiet while it compiles (about 10 minutes on an idle 2-core machine, far longer on
    # a busy one); once per machine: the wheel is kept in $WHEELS
    echo "setup: compiling llama-cpp-python from source, once per machine (about 10 minutes on 2 idle cores) ..."
    mkdir -p "$WHEELS.part"
    CMAKE_ARGS="$LLAMA_FLAGS" "${PIP[@]}" wheel -q --no-cache-dir --no-deps -w "$WHEELS.part" \
      "llama-cpp-python==$LLAMA_VERSION"
    rm -rf "$WHEELS" && mv "$WHEELS.part" "$WHEELS"
  else
    echo "setup: llama-cpp-python from the wheel built on this machine before ($WHEELS)"
  fi
  "${PIP[@]}" install -q "$(ls "$WHEELS"/llama_cpp_python-*.whl | head -1)[server]"
fi

# torch pinned in the same call: 2.13.0 is the CPU build available here; an unpinned torch
# pulls a multi-GB CUDA build.
echo "setup: installing groundbench and its dependencies (CPU torch, JupyterLab, ...) ..."
"${PIP[@]}" install -q "torch==2.13.0" -e ".[dev,server,docs]"

"$VENV/bin/python" -m ipykernel install --sys-prefix --name groundbench --display-name "groundbench" >/dev/null
echo "groundbench set up in $VENV ($("$VENV/bin/python" -c 'import groundbench; print(groundbench.__version__)'))"
