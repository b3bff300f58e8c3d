"""Benchmark: rate 1,000,000 citation URLs over about 50,000 distinct hosts and compute Table 1, with the run's rule set
(settings.ini, `full` by default) and with `paper` (the seed authors' code, exactly): both held to the same target.
Target (issue 5): at most 10 s and 1 GiB on one core. Prints one JSON line with the measurements.

    python benchmarks/bench_credibility.py [--urls 1000000] [--hosts 50000]"""
import argparse
import json
import os
import platform
import resource
import time

import numpy as np
import pandas as pd

from groundbench.credibility.metrics import table_1
from groundbench.credibility.paper import rater_from_settings

ap = argparse.ArgumentParser()
ap.add_argument("--urls", type=int, default=1_000_000)
ap.add_argument("--hosts", type=int, default=50_000)
ap.add_argument("--seed", type=int, default=0)
args = ap.parse_args()
rng = np.random.default_rng(args.seed)

rater = rater_from_settings()
# hosts: rated keys from the tables (with www. and subdomains), path-entry sites, and unrated hosts
known = pd.read_csv(rater.root / "derived" / "mbfc.csv").key.tolist() + pd.read_csv(
    rater.root / "derived" / "fimi.csv").key.tolist()
n_known = min(len(known), args.hosts // 2)
hosts = [("www." if i % 3 == 0 else "news." if i % 7 == 0 else "") + k for i,
         k in enumerate(rng.choice(known, n_known, replace=False))]
hosts += [f"site{i}.example{i % 97}.co.uk" if i % 2 else f"www.unrated-{i}.com" for i in range(args.hosts - n_known)]
hosts = np.array(hosts)
# every host once, then a long tail
pick = np.concatenate([np.arange(len(hosts)), rng.zipf(1.3, args.urls - len(hosts)) % len(hosts)])
urls = [f"https://{hosts[h]}/article/{i % 1000}" for i, h in enumerate(pick)]
conv = np.arange(args.urls) // 14
topics = np.array(["Health", "Climate Change", "U.S. Politics", "Russia-Ukraine War", "Local"])

rss0 = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
result = {"benchmark": "credibility", "urls": args.urls, "distinct_hosts": int(len(np.unique(pick))),
          "rss_before_rating_mib": rss0}
for name in ("full", "paper"):
    t0 = time.perf_counter()
    rater = rater_from_settings(rules=name)
    t_load = time.perf_counter() - t0
    t1 = time.perf_counter()
    r = rater.rate_many(urls)
    t_rate = time.perf_counter() - t1
    cit = pd.DataFrame({"conversation_id": conv,
                        "assistant": np.where(conv % 4 == 0, "A",
                                              np.where(conv % 4 == 1, "B", np.where(conv % 4 == 2, "C", "D"))),
                        "topic": topics[conv % 5], "role": np.where(conv % 2, "fact_checker", "claim_believer"),
                        "score": r.score.values,
                        "classified": (r.decided_by != "unrated").values})
    t2 = time.perf_counter()
    tidy, wide, pooled = table_1(cit, n_boot=0)  # both estimators
    t_table = time.perf_counter() - t2
    result[name] = {"load_tables_s": round(t_load, 2), "rate_s": round(t_rate, 2), "table_1_s": round(t_table, 2),
                    "rate_plus_table_1_s": round(t_rate + t_table, 2),
                    "classified_share": round(float(cit.classified.mean()), 3)}
    del r, cit
print(json.dumps({**result, "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "target": "<= 10 s and <= 1024 MiB",
                  "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}))
