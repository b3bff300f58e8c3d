"""Benchmark: the groundedness stage as built (batched, deduplicated, cached) against a paper-faithful
sequential order (one request at a time, no reuse) on the same ExpertQA conversations and the same model
(the bundled SmolLM2-135M in llama.cpp on CPU, temperature 0), checking that both give identical labels;
then the `grouped` variant (8 units a call) on the same conversations: its calls per verified unit, and its
agreement with the paper variant (its judge on the paper's own units and evidence, label for label; its units
against the paper's; GS per answer); then retrieval time per conversation with the bundled embedding model. One
JSON line.

    python benchmarks/bench_groundedness.py [--conversations 2]"""
import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np
import pandas as pd

from groundbench.collect.expertqa import import_expertqa
from groundbench.core import load_settings
from groundbench.embed import embedder_from_settings
from groundbench.groundedness.judge import SCOPES, judge_units, retrieve, source_chunks
from groundbench.groundedness.units import VERIFIED, decontextualise, extract_units
from groundbench.llm.client import llm_from_settings

ap = argparse.ArgumentParser()
# the 6 shortest answers: on the 3 of median length the smoke model's paper extraction labels no unit Fact or Claim
# (0 verified units: nothing to judge, no figure per verified unit)
ap.add_argument("--conversations", type=int, default=6)
ap.add_argument("--pick", choices=["median", "shortest"], default="shortest",
                help="answers nearest the median length, or the shortest")
args = ap.parse_args()

eqa = import_expertqa(systems=["rr_gs_gpt4", "post_hoc_gs_gpt4"])
with_text = set(eqa.sources[eqa.sources.text.fillna("").str.strip() != ""].conversation_id)
pool = sorted((c for c in eqa.conversations if c.conversation_id in with_text),
              key=lambda c: (len(c.answer_text.split()), c.conversation_id))
if args.pick == "median":
    mid = len(pool) // 2
    convs = pool[max(0, mid - args.conversations // 2): max(0, mid - args.conversations // 2) + args.conversations]
else: convs = pool[: args.conversations]
ids = {c.conversation_id for c in convs}
cit = {(c.conversation_id, x.url): x.index for c in convs for x in c.citations}
src = eqa.sources[eqa.sources.conversation_id.isin(ids)].copy()
src["citation_index"] = [cit[(a, b)] for a, b in zip(src.conversation_id, src.url)]
# some non-credible sources, so every scope is exercised
src["score"] = np.where(np.arange(len(src)) % 3 == 2, -1.0, 1.0)
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
built = {k: sum(getattr(llm.stats[s], k) for s in steps) for k in ("requests", "calls", "deduplicated", "prompt_tokens",
                                                          "completion_tokens")}
built["seconds"] = round(t_built, 1)

# -- paper-faithful sequential order: the same code, but every request sent on its own, one at a time, in document
# order:
#    each conversation's extraction, then each unit's decontextualisation, then each unit's judgments; nothing
#    deduplicated or cached
from groundbench.llm.client import LLM


class NoReuse(LLM):
    "Sends every request to the backend, one at a time: no cache, no deduplication; keeps the requests per step."
    sent: dict = {}
    def complete(self, requests, step="default", progress=True):
        st, outs = self.step_stats(step), []
        for r in requests:
            self.sent.setdefault(step, []).append(r)
            t = time.perf_counter(); o = self.backend.generate([r])[0]; st.seconds += time.perf_counter() - t
            st.requests += 1; st.calls += 1; st.prompt_tokens += o.prompt_tokens
            st.completion_tokens += o.completion_tokens
            outs.append(o)
        return outs


seq_llm = NoReuse(llm.backend)
seq_llm.smoke = llm.smoke      # the same output budgets as built (the smoke model's extraction: 64 tokens)
t0 = time.perf_counter()
seq_units = [u for c in convs for u in extract_units([c], seq_llm, progress=False)]
seq_units = [v for u in seq_units for v in decontextualise([u], convs, seq_llm, progress=False)[0]]
seq_ours = [u for u in seq_units if u.label in VERIFIED]
seq_judg = [j for u in seq_ours for j in judge_units([u], ev, seq_llm, SCOPES,
                                                     progress=False)] if [u.unit_id for u in seq_ours] == [
                                                         u.unit_id for u in ours] else []
seq = {k: sum(getattr(seq_llm.step_stats(s), k) for s in steps) for k in ("requests", "calls", "prompt_tokens",
                                                                 "completion_tokens")}
seq["seconds"] = round(time.perf_counter() - t0, 1)
same_units = [(u.text, u.label, u.decontextualised) for u in units] == [(u.text, u.label,
                                                                         u.decontextualised) for u in seq_units]
if not same_units:
    import sys
    for a, b in zip(units, seq_units):
        if (a.text, a.label, a.decontextualised) != (b.text, b.label, b.decontextualised):
            print("differs:", a, b, file=sys.stderr)
identical = same_units and [(j.unit_id, j.scope, j.label) for j in judg] == [(j.unit_id, j.scope,
                                                                              j.label) for j in seq_judg]

# -- a rerun as built: everything from the cache
llm2 = llm_from_settings(settings)
t0 = time.perf_counter()
u2 = extract_units(convs, llm2, progress=False); u2, _ = decontextualise(u2, convs, llm2, progress=False)
judge_units([u for u in u2 if u.label in VERIFIED], ev, llm2, SCOPES, progress=False)
rerun = {"calls": sum(llm2.stats[s].calls for s in steps), "seconds": round(time.perf_counter() - t0, 2)}

# -- the grouped variant: several units a call, on the same conversations (its prompts share nothing with the paper's)
from groundbench.groundedness.grouped import decontextualise_grouped, extract_grouped, judge_grouped
from groundbench.groundedness.metrics import response_scores
from groundbench.groundedness.units import VARIANTS
from groundbench.labels.pairs import cohen_kappa

G = VARIANTS["grouped"]
g_llm = llm_from_settings(settings)
t0 = time.perf_counter()
g_units = extract_grouped(convs, g_llm, G, progress=False)
g_units, _ = decontextualise_grouped(g_units, convs, g_llm, G, progress=False)
g_ours = [u for u in g_units if u.label in VERIFIED]
g_ev = retrieve(g_ours, chunks, emb)
g_judg = judge_grouped(g_ours, g_ev, g_llm, SCOPES, G, progress=False)
g_stats = {k: sum(getattr(g_llm.step_stats(s), k) for s in steps) for k in ("requests", "calls", "prompt_tokens",
                                                                             "completion_tokens")}
g_stats["seconds"] = round(time.perf_counter() - t0, 1)
# its judge on the paper's own units and evidence: label for label against the paper variant's judge
gj_llm = llm_from_settings(settings)
on_paper = judge_grouped(ours, ev, gj_llm, SCOPES, G, progress=False)
pairs = [(a.label, b.label) for a, b in zip(judg, on_paper) if not a.skipped and a.label and b.label]
# the same work as the paper's: its extraction's calls, then the paper's own verified units decontextualised and judged
# its way (a variant whose model finds more Fact and Claim units would otherwise look cheaper per unit)
pd_units, _ = decontextualise_grouped(units, convs, gj_llm, G, progress=False)
same_work = (g_llm.step_stats("extract_units").calls + gj_llm.step_stats("decontextualise").calls
             + gj_llm.step_stats("judge").calls)
JL = ("Supported", "Contradicted", "Unverifiable")
key = lambda u: (u.conversation_id, u.text.strip().lower())
paper_units = {key(u): u.label for u in units}
same_text = [u for u in g_units if key(u) in paper_units]
def gs(us, js):   # GS per answer, in %
    d = response_scores(us, js, "ours")
    return 100 * d.set_index("conversation_id")["gs"] if len(d) else pd.Series(dtype=float)
gs_p, gs_g = gs(units, judg), gs(g_units, g_judg)
grouped = {"variant": G.name, "units_per_call": G.group, **g_stats, "units": len(g_units),
           "verified_units": len(g_ours), "judgments": len(g_judg),
           "judgments_failed": sum(not j.skipped and not j.label for j in g_judg),
           "calls_per_verified_unit": round(g_stats["calls"] / max(len(g_ours), 1), 2),
           "fewer_calls_than_sequential_x": round((seq["calls"] / max(len(ours), 1)) / max(
               g_stats["calls"] / max(len(g_ours), 1), 1e-9), 2),
           "same_work_as_paper": {"calls": same_work, "calls_per_paper_verified_unit": round(
               same_work / max(len(ours), 1), 2), "fewer_calls_than_sequential_x": round(seq["calls"] / max(
                   same_work, 1), 2)},
           "judge_on_paper_units": {"calls": gj_llm.step_stats("judge").calls,
                                    "calls_paper_as_built": llm.step_stats("judge").calls,
                                    "pairs": len(pairs),
                                    "agreement": round(sum(a == b for a, b in pairs) / max(len(pairs), 1), 3),
                                    "cohen_kappa": round(cohen_kappa([a for a, _ in pairs], [b for _, b in pairs],
                                                                     JL), 3)},
           "units_same_text_share": round(len(same_text) / max(len(g_units), 1), 3),
           "unit_label_agreement_same_text": round(sum(paper_units[key(u)] == u.label for u in same_text) / max(
               len(same_text), 1), 3),
           "mean_gs": {"paper": round(float(gs_p.mean()), 1), "grouped": round(float(gs_g.mean()), 1)},
           "mean_abs_gs_difference": round(float((gs_p - gs_g).abs().mean()), 1)}

n_v = max(len(ours), 1)
per_call = {st: {"calls": seq_llm.step_stats(st).calls,
                 "prompt_tokens_per_call": round(seq_llm.step_stats(st).prompt_tokens / max(seq_llm.step_stats(
                     st).calls, 1)),
                 "completion_tokens_per_call": round(seq_llm.step_stats(st).completion_tokens / max(
                     seq_llm.step_stats(st).calls, 1))} for st in steps}

# -- prefix caching (vLLM's automatic prefix caching, 16-token blocks): the share of each step's prompt tokens that are
# not
#    a prefix already computed for an earlier request of the step (few-shot instructions; the same answer's context)
def tokens(r):
    return backend_tokens(("\n".join(f"<|{role}|>\n{text}" for role, text in r.messages)).encode())
backend_tokens = lambda b: llm.backend.llm.tokenize(b, add_bos=False, special=False)
def uncached_share(reqs, block=16):
    seen, total, new = [], 0, 0
    # distinct requests: a repeated request is not counted as cached here (the estimate counts calls apart)
    for r in dict.fromkeys(reqs):
        t = tokens(r)
        lcp = max((next((i for i, (a, b) in enumerate(zip(t, u)) if a != b), min(len(t), len(u))) for u in seen),
                  default=0)
        total += len(t); new += len(t) - (lcp // block) * block
        seen.append(t)
    return new / max(total, 1)
uncached = {st: round(uncached_share(seq_llm.sent.get(st, [])), 3) for st in steps}

# -- GPU-hours for the seed study (4 assistants x 600 conversations) with a 70B judge under vLLM on one H200.
#    Structure of a paper-sized answer: the seed paper's mean answer length (its Table 2: 363, 466, 297, 124 words ->
#    312.5);
#    one extraction call per segment (words per segment measured on all ExpertQA answers); one unit per 8 answer words
#    (on the high side of atomic-fact densities), 82.5% of them Fact or Claim (the paper: 11-24% are not); every
#    verified
#    unit decontextualised once. Judge calls per verified unit: "all" and "credible" counted as two calls (no credit for
#    the
#    deduplication that merges them when every cited source is credible) and the non-credible scope judged for 5% of
#    units
#    (the paper's NCR is 0.7-2.3% of citations; a scope without evidence makes no call) -> 2.05; the upper bound judges
#    all 3.
#    Tokens per call: the prompt and completion tokens measured here for each step (same prompts; a Llama-style
#    tokenizer);
#    prompt tokens that vLLM's prefix cache serves are taken out at the share measured above; the upper bound takes
#    none out and puts every completion at its step's max_tokens (extract 320, decontextualise 200, judge 300).
#    Throughput assumptions for Llama-3.x-70B in FP8 on one H200 under vLLM: prefill 5,000 tokens/s, decode 3,000
#    tokens/s
#    at large batch. Reference: NVIDIA's TensorRT-LLM H200 launch figures for FP8 Llama-70B on one GPU (input/output
#    128/128 at batch 512: 3,014 output tokens/s; 2,048/128 at batch 32: 303 output tokens/s, i.e. about 5,000 input
#    tokens/s); we take vLLM to be no faster than that. The upper bound uses the same rates.
ANSWER_WORDS, WORDS_PER_UNIT, VERIFIED_SHARE, CONVERSATIONS = 312.5, 8.0, 0.825, 2400
PREFILL_TPS, DECODE_TPS, JUDGE_CALLS_PER_UNIT = 5000.0, 3000.0, 2.05
MAX_TOKENS = {"extract_units": 320, "decontextualise": 200, "judge": 300}
words_per_segment = float(np.mean([len(c.answer_text.split()) / max(len(c.segments),
                                                                    1) for c in eqa.conversations if c.segments]))
verified_per_conv = ANSWER_WORDS / WORDS_PER_UNIT * VERIFIED_SHARE
def gpu_hours(judge_per_unit, prefix_cache, max_completions):
    n = {"extract_units": ANSWER_WORDS / words_per_segment, "decontextualise": verified_per_conv,
         "judge": judge_per_unit * verified_per_conv}
    pre = sum(n[st] * per_call[st]["prompt_tokens_per_call"] * (uncached[st] if prefix_cache else 1.0) for st in steps)
    dec = sum(n[st] * (MAX_TOKENS[st] if max_completions else per_call[st][
        "completion_tokens_per_call"]) for st in steps)
    return n, pre, dec, (pre / PREFILL_TPS + dec / DECODE_TPS) * CONVERSATIONS / 3600
n_exp, pre_exp, dec_exp, h_exp = gpu_hours(JUDGE_CALLS_PER_UNIT, True, False)
_, pre_max, dec_max, h_max = gpu_hours(3.0, False, True)
estimate = {"answer_words": ANSWER_WORDS, "words_per_segment_expertqa": round(words_per_segment, 1),
            "calls_per_conversation": {k: round(v, 1) for k, v in n_exp.items()},
            "prompt_tokens_not_prefix_cached_share": uncached,
            "prefill_tokens_per_conversation": round(pre_exp), "decode_tokens_per_conversation": round(dec_exp),
            "prefill_tokens_per_conversation_upper": round(pre_max),
            "decode_tokens_per_conversation_upper": round(dec_max),
            "conversations": CONVERSATIONS, "assumed_prefill_tokens_per_s": PREFILL_TPS,
            "assumed_decode_tokens_per_s": DECODE_TPS,
            "gpu_hours": round(h_exp, 2), "gpu_hours_upper_bound": round(h_max, 2), "paper_gpu_hours": 1100}
print(json.dumps({"benchmark": "groundedness", "model": "smollm2-135m-instruct (llama.cpp, CPU)",
                  "conversations": len(convs),
                  "answer_words": sum(len(c.answer_text.split()) for c in convs),
                  "segments": sum(len(c.segments) for c in convs),
                  "units": len(units), "verified_units": len(ours), "as_built": built, "sequential_no_reuse": seq,
                  "rerun_as_built": rerun,
                  "calls_per_verified_unit": {"as_built": round(built["calls"] / n_v, 2),
                                              "sequential": round(seq["calls"] / n_v, 2)},
                  "tokens_per_verified_unit": {"as_built": round((built["prompt_tokens"] + built[
                      "completion_tokens"]) / n_v),
                                               "sequential": round((seq["prompt_tokens"] + seq[
                                                   "completion_tokens"]) / n_v)},
                  "grouped": grouped,
                  "identical_labels": identical, "identical_units": same_units, "judgments": len(judg),
                  "judgments_skipped_no_evidence": sum(j.skipped == "no evidence" for j in judg),
                  "retrieval_s_per_conversation": round(t_retrieval / len(convs), 3),
                  "chunks": len(chunks), "per_call_sequential": per_call, "gpu_estimate_seed_study": estimate,
                  "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}))
