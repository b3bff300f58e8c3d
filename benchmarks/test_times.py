"""Put the figures of one test run (the log of `bash .ci/run` or `bash tests/run.sh`) into RESULTS.md: set-up, each
notebook's nbdev-test time, pytest's count and time and its slowest tests, the total.

    bash .ci/run 2>&1 | tee ci.log && .venv/bin/python benchmarks/test_times.py ci.log [--out benchmarks/RESULTS.md]

A measurement, not a timed test: the figures are what that run printed (nothing typed in by hand)."""
import argparse
import datetime as dt
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
TITLE = "## tests (the test command, timed)"


def parse(log: str) -> dict:
    "The figures a run of .ci/run or tests/run.sh printed."
    num = lambda pat: (int(m.group(1)) if (m := re.search(pat, log, re.M)) else None)
    summary = [l for l in log.splitlines() if re.search(r"\d+ passed.* in [\d.]+s", l)]
    return {"setup_s": num(r"^ci: set-up (\d+) s"), "total_s": num(r"^ci: total (\d+) s"),
            "nbdev_test_s": num(r"^nbdev-test: (\d+) s"), "vllm_env_s": num(r"^vLLM environment: (\d+) s"),
            "notebooks": re.findall(r"^(\S+\.ipynb): (\d+) secs$", log, re.M),
            "slowest": re.findall(r"^([\d.]+)s (call|setup|teardown) +(\S+)$", log, re.M),
            "pytest": " + ".join(l.strip("= ") for l in summary) if summary else None}


def section(f: dict, source: str) -> str:
    mins = lambda s: "-" if s is None else f"{s // 60} min {s % 60} s"
    lines = [TITLE, "", f"From `{source}`, written by `benchmarks/test_times.py` on {dt.date.today().isoformat()}.", "",
             "| part | time |", "|---|---|", f"| set-up (`setup.sh`) | {mins(f['setup_s'])} |",
             f"| notebook tests (`nbdev-test`, 2 workers) | {mins(f['nbdev_test_s'])} |",
             f"| pytest (main part, serial part, the real vLLM engine) | {f['pytest'] or '-'} |",
             f"| the vLLM environment (`scripts/setup_vllm_cpu.sh`, before its tests) | {mins(f['vllm_env_s'])} |",
             f"| total | {mins(f['total_s'])} |", "",
             "Notebooks (nbdev-test, seconds each):", "", "| notebook | s |", "|---|---|"]
    lines += [f"| {n} | {s} |" for n, s in f["notebooks"]] + ["", "Slowest pytest phases:", "", "| s | phase | test |",
                                                              "|---|---|---|"]
    lines += [f"| {s} | {ph} | `{t}` |" for s, ph, t in f["slowest"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--source", default="", help="what ran, e.g. 'bash .ci/run on a fresh clone of <commit>'")
    a = ap.parse_args()
    f = parse(a.log.read_text(errors="replace"))
    if f["pytest"] is None: raise SystemExit(f"{a.log}: no pytest summary line found (is it the log of tests/run.sh?)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    text = a.out.read_text() if a.out.exists() else "# Benchmark results\n"
    text = re.sub(rf"^{re.escape(TITLE)}.*?(?=^## |\Z)", "", text, flags=re.M | re.S).rstrip("\n") + "\n\n"
    a.out.write_text(text + section(f, a.source or f"bash .ci/run at {commit}"))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
