"""Benchmark: the findings machinery at the sizes a large audit reaches (issue 62: 50 assistants took 1,164 s; drift
over 500 runs 256 s with an unreadable figure).

- `findings`: every tested difference of 50 assistants x 100 claims (two roles, 0-4 citations an answer, CR), the
  findings table as the 75_findings stage computes it (every assistant pair, role, topic).
- `drift`: `groundbench compare` over 500 dated run folders (2 assistants x 20 questions each: one imported run
  copied with its run id, creation time and answers' dates changed), as a user runs it: reading the runs, every trend
  and consecutive change, the figures and the page. Peak memory: compare's own.

Targets: each at most 120 s (issue 62 measured 1,164 s and 256 s), at most 1 GiB. Prints one JSON line.

    python benchmarks/bench_findings.py [--assistants 50] [--claims 100] [--runs 500]"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from groundbench.stages import COLLECT, CREDIBILITY

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

ap = argparse.ArgumentParser()
ap.add_argument("--assistants", type=int, default=50)
ap.add_argument("--claims", type=int, default=100)
ap.add_argument("--runs", type=int, default=500)
args = ap.parse_args()
result = {"benchmark": "findings"}
RSS_OF_CHILD = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")


def findings_part() -> dict:
    from groundbench.findings.stage import DESIGN, findings_table
    rng = np.random.default_rng(0)
    rows = [{"metric": "CR", "y": float(rng.random() < 0.8), "assistant": f"bot{a:02d}", "claim_id": f"c{c}",
             "role": role, "topic": f"t{c % 5}", "thinking": False, "conversation_id": f"{a}-{c}-{role}"}
            for a in range(args.assistants) for c in range(args.claims) for role in ("fact_checker", "claim_believer")
            for _ in range(int(rng.integers(0, 5)))]
    obs = pd.DataFrame(rows)
    for col in DESIGN:
        if col not in obs: obs[col] = ""
    t0 = time.perf_counter()
    t = findings_table(obs)
    return {"assistants": args.assistants, "claims": args.claims, "observations": len(obs), "rows": len(t),
            "seconds": round(time.perf_counter() - t0, 1)}


def drift_part(tmp: Path) -> dict:
    q = 20
    urls = ["https://www.bbc.com/news/x", "https://www.infowars.com/z", "https://apnews.com/a; https://www.rt.com/b"]
    src = tmp / "audit.csv"
    pd.DataFrame([{"assistant": f"bot{k}", "question": f"Is claim {i} true?", "answer": "No [1].",
                   "urls": urls[(i + k) % 3], "date": "2024-01-01"} for k in range(2) for i in range(q)]).to_csv(
        src, index=False)
    spec = {"run_id": "base", "stages": [COLLECT, CREDIBILITY],
            "parameters": {"source": "table", "sample": 0, "import_tables": [
                {"path": str(src), "answer": "answer", "assistant": "assistant", "question": "question",
                 "urls": "urls", "collected_at": "date"}]}}
    (tmp / "base.yaml").write_text(yaml.safe_dump(spec))
    subprocess.run([str(BIN / "groundbench"), "run", tmp / "base.yaml", "--runs-dir", tmp / "base", "--no-estimate"],
                   check=True, capture_output=True, cwd=ROOT)
    base, dirs = tmp / "base" / "base", []
    for i in range(args.runs):
        d = tmp / "runs" / f"r{i:03d}"
        shutil.copytree(base, d)
        day = (pd.Timestamp("2024-01-01") + pd.Timedelta(days=i)).strftime("%Y-%m-%d")
        m = json.loads((d / "manifest.json").read_text())
        m["run_id"], m["created_at"] = f"r{i:03d}", f"{day}T00:00:00+00:00"
        (d / "manifest.json").write_text(json.dumps(m))
        f = d / COLLECT / "conversations.jsonl"
        f.write_text("".join(json.dumps({**json.loads(x), "collected_at": day}) + "\n"
                             for x in f.read_text().splitlines()))
        dirs.append(d)
    t0 = time.perf_counter()   # through a helper whose only child is compare: its peak memory alone
    p = subprocess.run([sys.executable, "-c", RSS_OF_CHILD, str(BIN / "groundbench"), "compare", *dirs, "--out",
                        tmp / "drift"], capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if p.returncode: raise SystemExit(f"compare exited {p.returncode}: {p.stderr[-2000:]}")
    from PIL import Image
    sizes = {f.name: Image.open(f).size for f in sorted((tmp / "drift").glob("drift_*.png"))}
    return {"runs": args.runs, "answers_a_run": 2 * q, "seconds": round(seconds, 1),
            "peak_rss_mib": round(int(p.stdout.strip().splitlines()[-1]) / 1024, 1),
            "rows": len(pd.read_csv(tmp / "drift" / "drift.csv")), "figure_px": sizes}


result["findings"] = findings_part()
with tempfile.TemporaryDirectory() as t:
    result["drift"] = drift_part(Path(t))
print(json.dumps(result))
