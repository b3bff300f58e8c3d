"""Run every benchmark in this folder (bench_*.py, each printing one JSON line) and rewrite RESULTS.md with
their figures, the targets they are held to, and the machine they ran on.

    .venv/bin/python benchmarks/run_all.py [--only credibility sources ...] [--out benchmarks/RESULTS.md]

Run it on an otherwise idle machine: the benchmarks time CPU work, and two jobs on 2 cores distort each other."""
import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (json path, target description, check) per benchmark: checks are evaluated on the measured line
TARGETS = {
    "demo": [("wall_s", "at most 300 s, cold cache", lambda v: v <= 300),
             ("model_share", "at least 90% of the wall time in the model", lambda v: v >= 0.9),
             ("outside_model_unnamed_s", "or every second outside the model named, with why (table below)",
              lambda v: abs(v) <= 0.5)],
    "credibility": [("full.rate_plus_table_1_s", "at most 10 s, rules full", lambda v: v <= 10),
                    ("paper.rate_plus_table_1_s", "at most 10 s, rules paper", lambda v: v <= 10),
                    ("peak_rss_mib", "at most 1,024 MiB", lambda v: v <= 1024)],
    "engines": [("llamacpp.ratio", "groundbench at least 0.9 of llama.cpp's own tokens/s", lambda v: v >= 0.9),
                ("vllm.ratio", "groundbench at least 0.9 of vLLM's own tokens/s", lambda v: v >= 0.9),
                ("vllm.judge_2.guidance.verify.seconds", "two judgments in seconds (llguidance)", lambda v: v <= 60)],
    "groundedness": [("identical_labels", "identical units and labels, as built vs sequential", lambda v: v is True),
                     ("rerun_as_built.calls", "0 model calls on rerun", lambda v: v == 0),
                     ("gpu_estimate_seed_study.gpu_hours", "at most 10 GPU-hours for the seed study (estimate)",
                      lambda v: v <= 10),
                     ("grouped.fewer_calls_than_sequential_x",
                      "calls per verified unit at least 3x fewer than sequential (grouped variant; agreement beside)",
                      lambda v: v >= 3)],
    "findings": [("findings.seconds", "50 assistants x 100 claims: at most 120 s", lambda v: v <= 120),
                 ("drift.seconds", "compare over 500 dated runs: at most 120 s", lambda v: v <= 120),
                 ("drift.peak_rss_mib", "at most 1,024 MiB", lambda v: v <= 1024)],
    "vllm_run": [("head.sequential_steps", "no step with more than one first-round call sends them one at a time",
                  lambda v: v == []),
                 ("speedup_x", "wall time at least 2x shorter than the baseline commit's, same server",
                  lambda v: v >= 2)],
}


def machine() -> str:
    "CPU model, cores, memory, OS and Python of this machine."
    cpu = next((l.split(":", 1)[1].strip() for l in Path(
        "/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), platform.processor()) \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    mem = next((int(l.split()[1]) / 2 ** 20 for l in Path(
        "/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")), 0) \
        if Path("/proc/meminfo").exists() else 0
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, Python "
            f"{platform.python_version()}")


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict): out.update(flatten(v, f"{prefix}{k}."))
        else: out[f"{prefix}{k}"] = v
    return out


def records_table(key: str, rows: list[dict]) -> list[str]:
    "A measure that is a list of records (each a dict, such as a part, its seconds and why) as a table of its own."
    cols = list(dict.fromkeys(k for r in rows for k in r))
    return [f"`{key}`:", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + [
        "| " + " | ".join(str(r.get(c, "")).replace("|", "/") for c in cols) + " |" for r in rows] + [""]


def section(name: str, result: dict, seconds: float, doc: str) -> str:
    records = {k: v for k, v in result.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    flat = flatten({k: v for k, v in result.items() if k not in records})
    lines = [f"## {name} (`bench_{name}.py`)", "", doc, "",
             f"Measured on {dt.date.today().isoformat()}; wall time of the benchmark: "
             f"{seconds:.0f} s.", ""]
    if name in TARGETS:
        lines += ["| target | measured | met |", "|---|---|---|"]
        for key, desc, ok in TARGETS[name]:
            v = flat.get(key)
            lines.append(f"| {desc} (`{key}`) | {v} | {'yes' if v is not None and ok(v) else 'NO'} |")
        lines.append("")
    for k, rows in records.items(): lines += records_table(k, rows)
    lines += ["| measure | value |", "|---|---|"] + [f"| `{k}` | {v} |" for k, v in flat.items()]
    lines += ["", "Raw line: `" + json.dumps(result) + "`", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="benchmark names (credibility, sources, groundedness); default: all")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = ap.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only: scripts = [s for s in scripts if s.stem[len("bench_"):] in args.only]
    if not scripts: sys.exit(f"no benchmark matches {args.only}")
    parts, failed = [], []
    for s in scripts:
        name = s.stem[len("bench_"):]
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, str(s)], capture_output=True, text=True, cwd=HERE.parent)
        secs = time.perf_counter() - t0
        line = next((l for l in reversed(p.stdout.splitlines()) if l.startswith("{")), None)
        if p.returncode != 0 or line is None:
            failed.append(name); print(p.stderr[-3000:], file=sys.stderr)
            parts.append(
                f"## {name} (`bench_{name}.py`)\n\nFAILED (exit {p.returncode}); see the command's error output.\n")
            continue
        doc = (s.read_text().split('"""')[1].strip().split("\n\n")[0]).replace("\n", " ")
        parts.append(section(name, json.loads(line), secs, doc))
        print(f"[bench] {name} done in {secs:.0f} s", file=sys.stderr)
    if args.only and args.out.exists():  # keep the sections of the benchmarks not run this time
        old = {m.group(1): m.group(0) for m in re.finditer(r"^## (\w+) \(`bench_.*?(?=^## |\Z)", args.out.read_text(),
                                                           re.M | re.S)}
        done = {s.stem[len("bench_"):] for s in scripts}
        ran = dict(zip(sorted(done), parts))
        parts = [ran[n] if n in ran else old[n].rstrip("\n") + "\n" for n in sorted(set(old) | done)]
    head = ["# Benchmark results", "", f"Written by `benchmarks/run_all.py`, last on {dt.date.today().isoformat()}"
            + (f" (only {', '.join(args.only)})" if args.only else "") + ".", "",
            f"Machine: {machine()}.", "",
            "Every figure below was measured by the command above on this machine; nothing is typed in by hand.", ""]
    if args.out.exists():  # sections written by other scripts (benchmarks/test_times.py) stay as they are
        parts += [m.group(0).rstrip("\n") + "\n" for m in re.finditer(r"^## (?!\w+ \(`bench_).*?(?=^## |\Z)",
                                                                       args.out.read_text(), re.M | re.S)]
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("\n".join(head + parts), encoding="utf-8"); tmp.replace(args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
