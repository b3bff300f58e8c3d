"""Benchmark: how SourceBench page scores move with the page text the judge sees (`text_chars` 1,000 / 3,000 / 6,000),
on the same ExpertQA pages and the bundled smoke model (SmolLM2-135M, llama.cpp, temperature 0): mean of each metric
and of the weighted score per limit, pages truncated, calls, prompt tokens and seconds. A cost/quality knob: a longer
text costs prompt tokens on every content and layout call. SMOKE: the 135M model's scores show how the code path
responds to the knob, not how a real judge would; rerun with a real judge (settings) for real numbers. One JSON line.

    python benchmarks/bench_sourcebench.py [--pages 3] [--limits 1000 3000 6000]"""
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
from groundbench.llm.client import llm_from_settings
from groundbench.sourcebench import METRICS, score_pages

ap = argparse.ArgumentParser()
ap.add_argument("--pages", type=int, default=3)
ap.add_argument("--limits", type=int, nargs="*", default=[1000, 3000, 6000])
args = ap.parse_args()

e = import_expertqa()
conv = {c.conversation_id: c for c in e.conversations}
# ExpertQA's passages are short (about 1,000 characters): a page is one conversation's cited passage followed by the
# next
# passages of the import until it is longer than the largest limit, so every limit cuts a real text at a different place
src = e.sources.drop_duplicates("url").reset_index(drop=True)
texts, rows_src = [], []
for i in range(0, len(src), max(1, len(src) // args.pages))[: args.pages]:
    t, j = "", i
    while len(t) <= max(args.limits) and j < len(src): t, j = (t + "\n\n" + src.text[j]).strip(), j + 1
    texts.append(t); rows_src.append(src.iloc[i])
src = pd.DataFrame(rows_src).assign(text=texts, n=[len(t) for t in texts])
settings = load_settings(overrides={"paths.cache_dir": tempfile.mkdtemp()})   # a fresh cache: every call is made
pages = pd.DataFrame({"query": [conv[c].prompt_text for c in src.conversation_id], "url": src.url.values,
                      "text": src.text.values,
                      **{k: "" for k in ("published", "updated", "author", "site_name")}})
llm = llm_from_settings(settings)
rows = []
for lim in args.limits:
    before = {k: dict(v) for k, v in llm.stats.items()}
    t0 = time.perf_counter()
    sc = score_pages(pages, llm, today="2026-01-15", text_chars=lim, progress=False)
    secs = time.perf_counter() - t0
    calls = sum(v.get("calls", 0) - before.get(k, {}).get("calls", 0) for k, v in llm.stats.items())
    ptok = sum(v.get("prompt_tokens", 0) - before.get(k, {}).get("prompt_tokens", 0) for k, v in llm.stats.items())
    rows.append({"text_chars": lim, "pages": len(sc), "pages_truncated": int(sc.text_truncated.sum()),
                 **{m: round(float(sc[m].mean()), 2) for m in METRICS}, "weighted": round(float(sc.weighted.mean()), 1),
                 "pages_missing_a_score": int((sc.missing_metrics > 0).sum()), "calls": int(calls),
                 "prompt_tokens": int(ptok),
                 "seconds": round(secs, 1)})
w = [r["weighted"] for r in rows]
print(json.dumps({"benchmark": "sourcebench", "smoke_model": llm.backend.model, "smoke": llm.smoke,
                  "reference_date": "2026-01-15",
                  "mean_page_chars": int(src.n.mean()), "by_text_chars": rows,
                  "weighted_range": round(float(np.nanmax(w) - np.nanmin(w)), 1) if rows else None,
                  "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}))
