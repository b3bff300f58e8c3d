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
# wheel cache (the cache ignores CMAKE_ARGS, so a wheel built natively elsewhere would be reused).
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  # said before it starts: pip is quiet while it compiles (4-5 minutes on an idle 2-core machine, far longer on a busy one)
  echo "setup: compiling llama-cpp-python from source (4-5 minutes on 2 idle cores; longer on a busy machine) ..."
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
    "${PIP[@]}" install -q --no-cache-dir "llama-cpp-python[server]==0.3.36"
fi

# torch pinned in the same call: 2.13.0 is the CPU build available here; an unpinned torch
# pulls a multi-GB CUDA build.
echo "setup: installing groundbench and its dependencies (CPU torch, JupyterLab, ...) ..."
"${PIP[@]}" install -q "torch==2.13.0" -e ".[dev,server,docs]"

"$VENV/bin/python" -m ipykernel install --sys-prefix --name groundbench --display-name "groundbench" >/dev/null
echo "groundbench set up in $VENV ($("$VENV/bin/python" -c 'import groundbench; print(groundbench.__version__)'))"
