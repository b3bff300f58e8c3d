"""Benchmark: the README's main job (`groundbench run papermill_params/demo.yaml`) with an empty LLM and embedding
cache,
in a temporary runs folder: wall time, each stage's seconds, model calls, prompt and completion tokens and the seconds
spent in model calls, and the llama.cpp threads used. Target (issue 27): at most 5 minutes on an idle 2-core machine,
after set-up. One JSON line.

    python benchmarks/bench_demo.py [--params papermill_params/demo.yaml] [--keep FOLDER]"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from groundbench.llm.backends import llama_threads

ROOT = Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--params", type=Path, default=ROOT / "papermill_params" / "demo.yaml")
ap.add_argument("--keep", type=Path, default=os.environ.get("BENCH_DEMO_KEEP") or None,
                help="an empty folder that keeps the run and its caches, to compare outputs "
                     "(default: $BENCH_DEMO_KEEP)")
args = ap.parse_args()

with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    if args.keep:
        if args.keep.exists() and any(args.keep.iterdir()): sys.exit(f"--keep {args.keep}: the folder is not empty")
        tmp = args.keep.resolve()
        tmp.mkdir(parents=True, exist_ok=True)
    spec = yaml.safe_load(args.params.read_text())
    spec["settings"] = {**(spec.get("settings") or {}), "paths.cache_dir": str(tmp / "cache")}
    (tmp / "p.yaml").write_text(yaml.safe_dump(spec))
    t0 = time.perf_counter()
    p = subprocess.run([str(Path(sys.executable).parent / "groundbench"), "run", str(tmp / "p.yaml"), "--runs-dir",
                        str(tmp / "runs")], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if p.returncode != 0: sys.exit(f"the demo failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    m = json.loads((tmp / "runs" / spec["run_id"] / "manifest.json").read_text())

stages, model_s, llm = {}, {}, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
for name, st in m["stages"].items():
    stages[name] = round(st["seconds"], 1)
    model_s[name] = 0.0
    for step, v in (st.get("llm") or {}).items():
        if step == "embedding": continue
        for k in llm: llm[k] += v.get(k, 0)
        model_s[name] += v.get("seconds", 0)
    model_s[name] = round(model_s[name], 1)
# what is not the model, stage by stage (imports, pages, embeddings, writing), and outside the stages: each stage's
# time as the runner saw it ("<stage> done in X s") beside the stage's own, the estimate, and the rest (the command's
# start, the parameter checks, the kernel's start)
other_s = {k: round(stages[k] - model_s[k], 1) for k in stages}
import re
said = p.stdout + p.stderr
runner_s = {n: float(x) for n, x in re.findall(r"\] (\w+) done in ([\d.]+) s", said)}
est = re.search(r"estimate made in ([\d.]+) s", said)
emb_s = round(sum((st.get("llm") or {}).get("embedding", {}).get("seconds", 0) for st in m["stages"].values()), 1)
parts = {"estimate_s": float(est.group(1)) if est else None,
         "papermill_around_stages_s": round(sum(runner_s.get(k, stages[k]) - stages[k] for k in stages), 1),
         # per stage: the notebook's own cells before and after its run (imports first of all), papermill's writing
         "around_stage_s": {k: round(runner_s[k] - stages[k], 1) for k in stages if k in runner_s},
         "embedding_s": emb_s,
         "runner_rest_s": round(wall - sum(runner_s.values()) - (float(est.group(1)) if est else 0), 1)}
print(json.dumps({
    "benchmark": "demo", "params": str(args.params.relative_to(ROOT)), "wall_s": round(wall, 1),
    "stage_s": stages, "llm_calls": llm["calls"], "prompt_tokens": llm["prompt_tokens"],
    "completion_tokens": llm["completion_tokens"], "llm_s": round(llm["seconds"], 1),
    "model_share": round(llm["seconds"] / wall, 3), "stage_model_s": model_s, "stage_other_s": other_s,
    "outside_stages_s": round(wall - sum(stages.values()), 1), "outside_model_parts": parts,
    "llm_threads": llama_threads(),
    "target": "<= 300 s wall on an idle 2-core machine, cold cache",
    "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}))
