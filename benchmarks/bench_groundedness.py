"""Benchmark: the groundedness stage as built (batched, deduplicated, cached) against a paper-faithful
sequential order (one request at a time, no reuse) on the same ExpertQA conversations and the same model
(the bundled SmolLM2-135M in llama.cpp on CPU, temperature 0), checking that both give identical labels;
then retrieval time per conversation with the bundled embedding model. One JSON line.

    python benchmarks/bench_groundedness.py [--conversations 2]"""
import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from groundbench.collect.expertqa import import_expertqa
from groundbench.core import load_settings
from groundbench.embed import embedder_from_settings
from groundbench.groundedness.judge import SCOPES, Verdict, judge_units, retrieve, source_chunks
from groundbench.groundedness.units import VERIFIED, Decontextualised, UnitList, decontextualise, extract_units
from groundbench.llm import llm_from_settings, parse_json_answer

ap = argparse.ArgumentParser()
ap.add_argument("--conversations", type=int, default=2)
args = ap.parse_args()

eqa = import_expertqa(systems=["rr_gs_gpt4", "post_hoc_gs_gpt4"])
convs = sorted(eqa.conversations, key=lambda c: (len(c.answer_text), c.conversation_id))[: args.conversations]
ids = {c.conversation_id for c in convs}
cit = {(c.conversation_id, x.url): x.index for c in convs for x in c.citations}
src = eqa.sources[eqa.sources.conversation_id.isin(ids)].copy()
src["citation_index"] = [cit[(a, b)] for a, b in zip(src.conversation_id, src.url)]
src["score"] = np.where(np.arange(len(src)) % 3 == 2, -1.0, 1.0)  # some non-credible sources, so every scope is exercised
settings = load_settings(overrides={"paths.cache_dir": tempfile.mkdtemp()})

# -- as built: one batch per step, duplicates sent once, no-evidence scopes skipped, everything cached
llm = llm_from_settings(settings)
emb = embedder_from_settings(settings)
t0 = time.perf_counter()
units = extract_units(convs, llm, progress=False)
units, _ = decontextualise(units, convs, llm, progress=False)
ours = [u for u in units if u.label in VERIFIED]
chunks = source_chunks(src)
t_r = time.perf_counter()
ev = retrieve(ours, chunks, emb)
t_retrieval = time.perf_counter() - t_r
judg = judge_units(ours, ev, llm, SCOPES, progress=False)
t_built = time.perf_counter() - t0
steps = ("extract_units", "decontextualise", "judge")
built = {k: sum(llm.stats[s][k] for s in steps) for k in ("requests", "calls", "deduplicated", "prompt_tokens", "completion_tokens")}
built["seconds"] = round(t_built, 1)

# -- paper-faithful sequential order: the same requests, one at a time, in document order, every duplicate sent again
from groundbench.llm import ChatRequest, load_prompt, request
from groundbench.groundedness.units import _context
seq = {"requests": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
backend = llm.backend
def one(req, model):
    out = backend.generate([req])[0]
    seq["requests"] += 1; seq["calls"] += 1; seq["prompt_tokens"] += out.prompt_tokens; seq["completion_tokens"] += out.completion_tokens
    return parse_json_answer(out.text, model)[0]
import json as _j
t0 = time.perf_counter()
pe, pd_, pj = load_prompt("extract_units"), load_prompt("decontextualise"), load_prompt("judge")
schema = lambda m: _j.dumps(m.model_json_schema(), sort_keys=True)
seq_units = []
for c in convs:
    for s in c.segments:
        r = request(llm, pe.render(context=_context(c, 1500), sentence=s.text), max_tokens=320)
        v = one(ChatRequest(r.messages, schema(UnitList), r.max_tokens, r.temperature, r.seed), UnitList)
        seq_units += [(it["text"], it["label"]) for it in (v["units"] if v else [])]
by_id = {c.conversation_id: c for c in convs}
seq_labels = []
for u in ours:
    r = request(llm, pd_.render(context=_context(by_id[u.conversation_id], 1500), unit=u.text), max_tokens=200)
    one(ChatRequest(r.messages, schema(Decontextualised), r.max_tokens, r.temperature, r.seed), Decontextualised)
for u in ours:
    for s in SCOPES:
        e = ev[(u.unit_id, s)]
        if not e.chunks: seq_labels.append("Unverifiable"); continue
        r = request(llm, pj.render(statement=u.decontextualised or u.text, evidence="\n".join(f"[{i}] {x}" for i, x in enumerate(e.chunks, 1))), max_tokens=300)
        v = one(ChatRequest(r.messages, schema(Verdict), r.max_tokens, r.temperature, r.seed), Verdict)
        seq_labels.append(v["label"] if v else "")
seq["seconds"] = round(time.perf_counter() - t0, 1)
identical = [j.label for j in judg] == seq_labels and [(u.text, u.label) for u in units if u.parse_status != "failed"] == seq_units

# -- a rerun as built: everything from the cache
llm2 = llm_from_settings(settings)
t0 = time.perf_counter()
u2 = extract_units(convs, llm2, progress=False); u2, _ = decontextualise(u2, convs, llm2, progress=False)
judge_units([u for u in u2 if u.label in VERIFIED], ev, llm2, SCOPES, progress=False)
rerun = {"calls": sum(llm2.stats[s]["calls"] for s in steps), "seconds": round(time.perf_counter() - t0, 2)}

n_v = max(len(ours), 1)
print(json.dumps({"benchmark": "groundedness", "model": "smollm2-135m-instruct (llama.cpp, CPU)", "conversations": len(convs),
                  "answer_words": sum(len(c.answer_text.split()) for c in convs), "segments": sum(len(c.segments) for c in convs),
                  "units": len(units), "verified_units": len(ours), "as_built": built, "sequential_no_reuse": seq, "rerun_as_built": rerun,
                  "calls_per_verified_unit": {"as_built": round(built["calls"] / n_v, 2), "sequential": round(seq["calls"] / n_v, 2)},
                  "tokens_per_verified_unit": {"as_built": round((built["prompt_tokens"] + built["completion_tokens"]) / n_v),
                                               "sequential": round((seq["prompt_tokens"] + seq["completion_tokens"]) / n_v)},
                  "identical_labels": identical, "retrieval_s_per_conversation": round(t_retrieval / len(convs), 3),
                  "chunks": len(chunks), "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}))
