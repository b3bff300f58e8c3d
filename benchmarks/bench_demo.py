"""Benchmark: the README's main job (`groundbench run papermill_params/demo.yaml`) with an empty LLM and embedding
cache, in a temporary runs folder: wall time, each stage's seconds, model calls, prompt and completion tokens and the
seconds spent in model calls, and the llama.cpp threads used; every second outside the model named, with why it stays
(`outside_model_named`, a table in RESULTS.md: the seconds add up to the wall time less the model's). Targets: at most
5 minutes on an idle 2-core machine after set-up (issue 27); at least 90% of it in the model, or each second outside
the model named (issue 55). One JSON line.

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
from groundbench.stages import (CLAIMS, COLLECT, CREDIBILITY, EXPLORER, FINDINGS, GROUNDEDNESS, PROFILE,
                                REPORT, SOURCEBENCH, SOURCECHECKUP, SOURCES, VALIDATION)

ROOT = Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--params", type=Path, default=ROOT / "papermill_params" / "demo.yaml")
ap.add_argument("--keep", type=Path, default=os.environ.get("BENCH_DEMO_KEEP") or None,
                help="an empty folder that keeps the run and its caches, to compare outputs "
                     "(default: $BENCH_DEMO_KEEP)")
args = ap.parse_args()

def notebook_times(folder: Path) -> dict:
    """Per executed stage notebook, from papermill's own cell records: {stage: (seconds from papermill's start to its
    end, seconds inside the cells)}."""
    from datetime import datetime
    out = {}
    for f in sorted(folder.glob("*.ipynb")):
        nb = json.loads(f.read_text(encoding="utf-8"))
        pm = nb.get("metadata", {}).get("papermill", {})
        if not pm.get("start_time") or not pm.get("end_time"): continue
        span = (datetime.fromisoformat(pm["end_time"]) - datetime.fromisoformat(pm["start_time"])).total_seconds()
        cells = sum(c.get("metadata", {}).get("papermill", {}).get("duration") or 0 for c in nb["cells"])
        out[f.stem] = (span, cells)
    return out


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
    nb_times = notebook_times(tmp / "runs" / spec["run_id"] / "notebooks")

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
         # the runner's time for a stage, split: the notebook's cells besides the stage's own seconds (definitions,
         # worked examples and tests before the parameters, the tables shown after); papermill between the cells
         # (its kernel client's start, each cell's round trip, the notebook saved at each cell's start and end); the
         # runner around papermill (the shared namespace cleaned, the notebook read and parameterised, secrets
         # scrubbed from the executed notebook)
         "notebook_cells_s": round(sum(nb_times[k][1] - stages[k] for k in stages if k in nb_times), 1),
         "papermill_between_cells_s": round(sum(a - b for a, b in nb_times.values()), 1),
         "runner_around_notebook_s": round(sum(runner_s[k] - nb_times[k][0] for k in stages
                                               if k in runner_s and k in nb_times), 1),
         "embedding_s": emb_s,
         "runner_rest_s": round(wall - sum(runner_s.values()) - (float(est.group(1)) if est else 0), 1)}
# every second outside the model, named with why it stays (the sum is the wall time less the model's seconds)
WHY = {
    CLAIMS: "the 600 prompts and the claims written (Parquet, CSV); the model's question rewrites count apart",
    COLLECT: "the bundled answer sets read and written as conversations: the run's input",
    SOURCES: "offline, every cited URL not pre-supplied waits for the resolver to give up (5-10 s, all hosts "
             "at once, 256 threads); a shorter deadline of ours would call slow hosts dead on a machine online",
    CREDIBILITY: "every citation rated, Tables 1 (Agresti-Coull), 2, 3, 11-13 and Figures 2 and 9 written: "
                 "the paper's own outputs, the same size for any judge",
    GROUNDEDNESS: "retrieval (the embedder, its load included, and Faiss), bootstrap intervals, Tables 4, 14, 15 "
                  "and Figure 3: outputs that do not grow with the model",
    SOURCEBENCH: "the pages' metadata and the tables written",
    SOURCECHECKUP: "statements and their sources paired, the tables written",
    PROFILE: "the per-assistant profile tables",
    VALIDATION: "the agreement tables (kappa, confusion) and the labels written",
    FINDINGS: "the findings' models (binomial GLM and OLS with claim-clustered errors, the claim bootstrap, the "
              "paper's conclusions checked): what the run is for",
    REPORT: "the tables recomputed over the runs the report combines (one or several: Table 1's intervals, the "
            "credibility corrections step by step), its figures drawn as PNG and PDF, and its page",
    EXPLORER: "the explorer notebook written and executed once, so a reader opens it with outputs",
}
named = [{"part": f"{k}: not the model", "s": v, "why": WHY.get(k, "the stage's own work")}
         for k, v in other_s.items() if v >= 0.05]
named += [{"part": "the stage notebooks' own cells", "s": parts["notebook_cells_s"],
           "why": "each notebook is its stage's documentation and test: its imports (pandas, statsmodels, seaborn, "
                  "torch load once, in the one kernel that serves every stage), definitions and worked examples run "
                  "before the parameters, and after the run it shows and checks the stage's tables; a run executes "
                  "the notebook whole, so `notebooks/<stage>.ipynb` is the record a reader opens"},
          {"part": "papermill between the cells", "s": parts["papermill_between_cells_s"],
           "why": "papermill's kernel client starting (jupyter_client waits 0.2 s for the kernel's output channel "
                  "to fall quiet, each notebook), each cell's round trip, and the executed notebook saved at each "
                  "cell's start and end (papermill's own: a failed stage leaves its notebook up to the failing cell)"},
          {"part": "the runner around each notebook", "s": parts["runner_around_notebook_s"],
           "why": "the shared kernel's namespace cleaned before each stage (IPython's %reset: its garbage "
                  "collection took 0.5 s a stage with torch loaded until what survives it is frozen, gc.freeze), "
                  "papermill reading and parameterising the notebook, every executed notebook scrubbed of secrets "
                  "(a key must never reach a run folder)"},
          {"part": "estimate", "s": parts["estimate_s"] or 0.0,
           "why": "printed before anything is spent (`--no-estimate` leaves it out)"},
          {"part": "the command's start", "s": parts["runner_rest_s"],
           "why": "Python and groundbench imported, the parameter file checked, the kernel started"}]
print(json.dumps({
    "benchmark": "demo", "params": str(args.params.relative_to(ROOT)), "wall_s": round(wall, 1),
    "stage_s": stages, "llm_calls": llm["calls"], "prompt_tokens": llm["prompt_tokens"],
    "completion_tokens": llm["completion_tokens"], "llm_s": round(llm["seconds"], 1),
    "model_share": round(llm["seconds"] / wall, 3), "stage_model_s": model_s, "stage_other_s": other_s,
    "outside_stages_s": round(wall - sum(stages.values()), 1), "outside_model_parts": parts,
    "outside_model_s": round(wall - llm["seconds"], 1), "outside_model_named": named,
    "outside_model_unnamed_s": round(wall - llm["seconds"] - sum(x["s"] for x in named), 1),
    "llm_threads": llama_threads(),
    "target": "<= 300 s wall on an idle 2-core machine, cold cache",
    "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}))
