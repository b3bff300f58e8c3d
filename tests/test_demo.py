"""The main job end to end (issue 8) on a smaller copy of the demo's parameter file (same stages, smaller samples, so
the test takes minutes): run A goes straight through (the session's shared small demo, conftest.small_demo); run B, with
its own caches holding A's answers of every model call but up to three consecutive calls of a stage, all drawn at
random, is killed with SIGKILL in that stage, a random fraction of a second after a random one of those calls (seeded:
the seed, stage and calls are printed, and GROUNDBENCH_KILL_SEED replays them), then rerun to the end, computing what it
lacks. The groundedness stage of the same shared run is checked, and rerun on a copy without a model call (all tests of
the shared run live in this file: pytest-xdist's loadfile keeps them on one worker, so the run is made once).

Checks: B's tables equal A's (every stage's CSV tables and the report's), no model call was paid twice (the calls B had
cached when it was killed plus the calls its rerun made equal the calls A made), the report folder has its tables,
figures and HTML page, and the explorer notebook ran against the run."""
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import time

import pandas as pd
import psutil
import pytest
import yaml

from conftest import BIN, ROOT, groundbench, small_demo_spec
from groundbench.runfolder import Run
from groundbench.runner import run_summary

pytestmark = pytest.mark.slow


def cached(db):
    try:
        with sqlite3.connect(db, timeout=5) as c: return c.execute("select count(*) from completions").fetchone()[0]
    except sqlite3.Error: return 0


def model_calls(manifest, earlier=None):
    """Model calls of the stage executions recorded after those in `earlier` (an older copy of the same manifest; the
    history is append-only), embeddings excluded. Not by start time: the manifest's times have whole seconds, so a stage
    started in the second of the kill would compare as earlier than the kill."""
    seen = {k: len(st["history"]) for k, st in ((earlier or {}).get("stages") or {}).items()}
    return sum(v.get("calls", 0) for name, st in manifest["stages"].items() for e in st["history"][seen.get(name, 0):]
               for k, v in e["llm"].items() if k != "embedding")


def tables(run):
    # the report names its run (run_id dropped); the estimate depends on what the cache held when each run started:
    # checked on its own below
    return {p.relative_to(run).as_posix(): pd.read_csv(p).drop(columns=["run_id"], errors="ignore")
            for p in sorted(run.glob("*/*.csv")) if "fetch" not in p.parts and p.name != "estimate_vs_actual.csv"}


def check_estimate(run, manifest, exact):
    """Issue 17: the estimate printed before the run, beside what each step spent (the report's table): every step's
    calls and completion tokens inside the printed ranges; with a fresh cache, the built steps' requests were all made,
    and where no answer needed the repair round their prompt tokens are exactly what llama.cpp reported (the model's own
    tokenizer)."""
    assert (run / "estimate.csv").exists() and "estimate_error" not in manifest
    t = pd.read_csv(run / "report" / "estimate_vs_actual.csv")
    steps = {"question_rewrite", "extract_units", "decontextualise", "judge", "sourcebench_content", "sourcecheckup"}
    assert steps <= set(t.step)
    assert (t.within_range == "yes").all(), t.to_string()
    if not exact: return
    for r in t[t.basis == "built"].itertuples():
        st = manifest["stages"][r.stage]["llm"][r.step]
        # exact where no answer needed a second call: a repair, or a cut extraction asked again with twice the budget
        if st["parse_repaired"] + st["parse_failed"] + st.get("cut_retried", 0) == 0:
            assert (r.calls, r.prompt_tokens) == (r.calls_low, r.prompt_tokens_expected), (r.stage, r.step)


def stage_calls(manifest):
    "The model calls of each stage of a straight run, in run order (the order its cache keeps their answers in)."
    return [(name, sum(v.get("calls", 0) for e in st["history"] for k, v in e["llm"].items() if k != "embedding"))
            for name, st in sorted(manifest["stages"].items())]


def seed_all_but(manifest, db_a, db_b, stage, first, n):
    """Copy into b's empty cache run a's answers of every model call but `n` consecutive calls of `stage` from its call
    `first` (0-based) on: b's model calls, and its kill, then fall in that stage, while every stage still runs all its
    work but the model's. The cache keeps a's answers in the order they were made, stage by stage, so the stage's
    answers are the rows after those of the stages before it. Returns the rows copied."""
    start = sum(k for name, k in stage_calls(manifest) if name < stage) + first
    db_b.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db_a) as a, sqlite3.connect(db_b) as b:
        rows = a.execute("select * from completions order by rowid").fetchall()
        part = rows[:start] + rows[start + n:]
        cols = [r[1] for r in a.execute("pragma table_info(completions)")]
        schema = a.execute("select sql from sqlite_master where name = 'completions'").fetchone()[0]
        b.execute(schema)
        b.executemany(f"insert into completions ({','.join(cols)}) values ({','.join('?' * len(cols))})", part)
    assert len(part) + n == len(rows) and first + n <= dict(stage_calls(manifest))[stage], (stage, first, n, len(rows))
    return len(part)


@pytest.mark.slow
@pytest.mark.timeout(2400)  # two demo runs with the CPU smoke model: well over the default 900 s on a busy machine
def test_demo_killed_and_resumed_gives_the_same_outputs_without_repeated_calls(small_demo, tmp_path):
    runs_a, _, db_a = small_demo
    runs = runs_a  # b beside a: b's estimate reads a's measurements as history
    ma = json.loads((runs_a / "a" / "manifest.json").read_text())
    calls_a = model_calls(ma)
    assert calls_a > 0 and cached(db_a) == calls_a  # every call made once and kept
    check_estimate(runs_a / "a", ma, exact=True)

    b, db_b = small_demo_spec(tmp_path, "b")
    seed = int(os.environ.get("GROUNDBENCH_KILL_SEED") or time.time_ns() % 1000)
    rng = random.Random(seed)
    calls = dict(stage_calls(ma))
    stage = rng.choice([name for name, n in calls.items() if n >= 2])   # a stage with a call after the kill
    m = min(3, calls[stage])                                             # b computes m of its calls, from call `first`
    first = rng.randint(0, calls[stage] - m)
    seeded = seed_all_but(ma, db_a, db_b, stage, first, m)
    k, delay = rng.randint(1, m - 1), rng.uniform(0, 1)
    print(f"GROUNDBENCH_KILL_SEED={seed}: run b starts with run a's answers of every call but calls {first + 1}-"
          f"{first + m} of {calls[stage]} in {stage} ({seeded} answers) and is killed {delay:.2f} s after the answer "
          f"of call {first + k} is cached")
    proc = subprocess.Popen([str(BIN / "groundbench"), "run", str(b), "--runs-dir", str(runs)], cwd=ROOT,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None and cached(db_b) < seeded + k: time.sleep(0.05)
    time.sleep(delay)
    assert proc.poll() is None, "run b finished before it could be killed: raise the sample sizes"
    kids = psutil.Process(proc.pid).children(recursive=True)   # its Jupyter kernel: in a session of its own
    os.killpg(proc.pid, signal.SIGKILL); proc.wait()
    # ipykernel's parent poller ends the orphaned kernel within about a second, time enough to finish a short call and
    # record its stage (seen once): what the killed run left is read when nothing of it runs any more
    _, alive = psutil.wait_procs(kids, timeout=15)
    assert not alive, f"processes of the killed run still running 15 s after it was killed: {alive}"
    before = cached(db_b)
    mfile = runs / "b" / "manifest.json"
    left = json.loads(mfile.read_text()) if mfile.exists() else {}  # what the killed run recorded
    groundbench("run", b, "--runs-dir", runs, check=True, timeout=1800, store=False)  # computes what it lacks
    mb = json.loads((runs / "b" / "manifest.json").read_text())
    assert before + model_calls(mb, left) == calls_a, (before, model_calls(mb, left), calls_a)

    check_estimate(runs / "b", mb, exact=False)   # estimated at the rerun, with run a's measurements as history
    ta, tb = tables(runs / "a"), tables(runs / "b")
    assert set(ta) == set(tb) and any(k.startswith("report/") for k in ta)
    for k in ta: pd.testing.assert_frame_equal(ta[k], tb[k], check_exact=False, rtol=1e-9, obj=k)

    rep = runs / "b" / "report"
    for f in ("table_1.csv", "table_1.tex", "table_2.md", "table_4.csv", "table_14.csv", "table_15.csv", "figure_2.png",
              "figure_3.pdf", "figure_9.png", "profile.csv", "paper_vs_run.csv", "index.html"):
        assert (rep / f).exists(), f
    assert "SMOKE RUN" in (rep / "index.html").read_text() and "SMOKE RUN" in (rep / "table_4.md").read_text()
    for f in ("table_1.md", "table_2.md", "table_11.md", "rules_effect.md"):  # credibility uses no model: never marked
        assert "SMOKE RUN" not in (rep / f).read_text(), f
    assert "table_1" not in json.loads((rep / "report.json").read_text())["smoke_items"]
    # no figure with overlapping tick labels
    assert json.loads((rep / "report.json").read_text())["layout_problems"] == {}
    # the researcher's explorer, in the run folder (issue 18)
    ex = json.loads((runs / "b" / "explore.ipynb").read_text())
    first_html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in ex["cells"][0].get("outputs", []))
    assert "<h1>Run b</h1>" in first_html
    nb = json.loads((runs / "b" / "notebooks" / "85_explorer.ipynb").read_text())
    assert any("Sources" in "".join(o.get("data", {}).get("text/html", ""))
               for c in nb["cells"] for o in c.get("outputs", []))


def test_groundedness_stage_with_real_model_and_rerun_without_calls(small_demo, tmp_path):
    """The groundedness stage of the session's small demo (real bundled model, empty cache at its start): calls made,
    failures recorded as such; the stage rerun on a copy of the run makes no model call and encodes nothing."""
    runs, spec, db = small_demo
    out = runs / "a" / "50_groundedness"
    m = json.loads((runs / "a" / "manifest.json").read_text())
    first = m["stages"]["50_groundedness"]["history"][0]["llm"]
    assert first["extract_units"]["calls"] > 0 and m["smoke_run"] is True
    units = [json.loads(l) for l in (out / "units.jsonl").read_text().splitlines()]
    judgments = [json.loads(l) for l in (out / "judgments.jsonl").read_text().splitlines()]
    assert units and all(u["parse_status"] in ("ok", "repaired", "failed") for u in units)
    # failures are recorded, never a default label
    assert all((u["label"] == "") == (u["parse_status"] == "failed") for u in units)
    for j in judgments:
        assert j["label"] in ("Supported", "Contradicted", "Unverifiable", "")
        assert (j["label"] == "") == (j["parse_status"] == "failed")
    assert "SMOKE RUN" in (out / "table_4.md").read_text()
    assert (out / "figure_3.png").exists() and (out / "table_14.csv").exists()
    # issue 26: Tables 14 and 15 compare three methods, each from its own pipeline, each with its own calls in
    # the manifest
    assert {"FActScore", "VERIFY", "ours"} <= set(pd.read_csv(out / "table_14.csv").columns)
    assert {"VERIFY", "ours"} <= set(pd.read_csv(out / "table_15.csv").columns)
    assert first["verify_extract"]["calls"] > 0 and first["factscore_facts"]["calls"] > 0
    assert "FActScore init_score" in pd.read_csv(out / "table_14.csv").columns     # FActScore's gamma, and without it
    # issue 41: the bundled model repeats its unit lines until its budget ends, so its extractions are cut: each is
    # asked again with twice the budget, and the cuts are counted in the manifest, the status and the report
    assert first["extract_units"]["cut_at_limit"] > 0 and first["extract_units"]["cut_retried"] > 0
    cuts = pd.read_csv(runs / "a" / "report" / "outputs_cut.csv").set_index(["stage", "step"])
    assert cuts.loc[("50_groundedness", "extract_units"), "cut_at_limit"] == first["extract_units"]["cut_at_limit"]
    assert "cut at their token limit: extract_units" in run_summary(Run(runs / "a"))
    assert (out / "verify_units.jsonl").exists() and (out / "factscore_judgments.jsonl").exists()
    copy = tmp_path / "runs"  # the shared run stays as it was: the rerun works on a copy of the run and of its cache
    shutil.copytree(runs / "a", copy / "a")
    shutil.copytree(db.parent, tmp_path / "cache")
    d = yaml.safe_load(spec.read_text())
    d["settings"]["paths.cache_dir"] = str(tmp_path / "cache")
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(d))
    groundbench("run", tmp_path / "a.yaml", "--runs-dir", copy, "--stages", "50_groundedness", check=True, timeout=900)
    again = json.loads((copy / "a" / "manifest.json").read_text())["stages"]["50_groundedness"]["llm"]
    assert sum(again[s]["calls"] for s in ("extract_units", "decontextualise", "judge")) == 0
    assert again["embedding"]["encoded"] == 0


def test_the_report_opens_with_the_paper_s_findings_and_shows_no_number_off_its_scale(small_demo):
    """Issues 51 and 54: the report's results open with every finding of the paper's data file and its verdict; and no
    table the page shows holds a score outside its metric's scale (the smoke judge's 10^16 SourceBench scores are kept
    in the files, shown as off-scale) or a share outside 0-100%."""
    import io
    from groundbench.findings.paper import load_paper_findings
    runs = small_demo[0]
    rep = runs / "a" / "report"
    items = json.loads((rep / "report.json").read_text())["items"]
    s = pd.read_csv(rep / "paper_findings_summary.csv")
    # issue 63: the small demo's answers are ExpertQA's systems, none the paper's: no finding of the paper is testable,
    # and the run's own findings open its report, the paper's after them
    assert (s.verdict == "not testable here").all(), s.verdict.tolist()
    assert items[0] == "findings" and items.index("paper_findings_summary") > items.index("figure_2"), items
    assert list(s.finding_id) == list(dict.fromkeys(load_paper_findings().finding_id))
    kinds = ("supported", "contradicted", "smaller than the paper reported", "consistent but underpowered",
             "inconclusive", "not testable here", "consistent with the paper's value", "differs from the paper's value")
    assert s.verdict.str.startswith(kinds).all(), s.verdict.tolist()
    page = (rep / "index.html").read_text()
    assert "The paper&#x27;s findings in this run" in page or "The paper's findings in this run" in page
    scales = {**{m: (1, 5) for m in ("CRel", "FA", "NE", "FR", "AA", "OA", "DA", "LC", "Avg", "avg8")},
              **{m: (0, 100) for m in ("weighted", "weighted_script", "weighted_complete", "SourceBench")}}
    checked = 0
    for t in pd.read_html(io.StringIO(page)):
        for c in t.columns:
            c = str(c)
            lo, hi = scales.get(c, (0, 100) if c.endswith(("_pct", "%")) else (None, None))
            if lo is None: continue
            v = pd.to_numeric(t[c].astype(str).str.replace(",", "").str.split(" ").str[0], errors="coerce").dropna()
            assert v.between(lo, hi).all(), (c, v[~v.between(lo, hi)].tolist())
            checked += len(v)
    assert checked > 0


def test_every_exported_latex_table_is_escaped(small_demo):
    """Issue 54: captions left % and _ unescaped (a % commented out the rest of Table 1's caption), cells held NaN.
    Issue 63: every table parses (pylatexenc), is ASCII or names the package it needs, and every row has its cells."""
    from latex_check import tex_problems
    runs = small_demo[0]
    files = sorted((runs / "a").rglob("*.tex"))
    assert len(files) > 20
    bad = {str(f.relative_to(runs)): p for f in files if (p := tex_problems(f.read_text(encoding="utf-8")))}
    assert not bad, bad
    t1 = (runs / "a" / "40_credibility" / "table_1.tex").read_text()
    assert "\\caption{Credibility Rate" in t1 and "Table 1:" not in t1      # LaTeX numbers the table itself
    assert tex_problems("\\caption{CR % of x_y}") and tex_problems("a & NaN \\\\")   # the check can tell
    assert tex_problems("% needs: \\usepackage{booktabs}\n\\begin{tabular}{lr}\na & b & c \\\\\n\\end{tabular}")
    assert tex_problems("% needs: \\usepackage{booktabs}\n\\caption{a \u2265 b}")      # a raw \u2265: pdflatex stops


def test_the_estimate_of_a_second_demo_is_within_a_quarter_of_the_first_demo_s_calls(small_demo, tmp_path):
    """Issue 55: the demo's estimate expected 177 calls and the run made 86 (the smoke model writes the same unit many
    times: asked once). With an earlier run of the same model in the runs folder, the estimate calibrates each step
    from it (requests per first-round request, the share not asked twice, facts per sentence): a new run of the same
    parameter file, with a cache of its own, is expected within 25% of the calls the first run made."""
    import re
    runs, spec, _ = small_demo
    d = yaml.safe_load(spec.read_text())
    d["run_id"], d["settings"]["paths.cache_dir"] = "again", str(tmp_path / "empty-cache")
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(d))
    out = groundbench("estimate", tmp_path / "again.yaml", "--runs-dir", runs, check=True).stdout
    expected = float(re.search(r"^total: calls ([\d,.]+) ", out, re.M).group(1).replace(",", ""))
    actual = model_calls(json.loads((runs / "a" / "manifest.json").read_text()))
    assert abs(expected - actual) <= 0.25 * actual, (expected, actual, out[-3000:])
    assert "not asked twice" in out                     # the calibration is said, step by step


def test_a_first_demo_s_estimate_is_within_a_quarter_of_its_calls(small_demo):
    """Issue 55: a first demo in an empty runs folder has no earlier run to calibrate on; its estimate reads the
    bundled record of the smoke model (data/estimate_history, a demo run's usage) and is within 25% of the calls the
    run then makes (it was 177 expected against 86 made before any calibration)."""
    runs, _, _ = small_demo
    est = pd.read_csv(runs / "a" / "estimate.csv")
    expected = float(est.calls_expected.sum())
    actual = model_calls(json.loads((runs / "a" / "manifest.json").read_text()))
    assert abs(expected - actual) <= 0.25 * actual, (expected, actual, est[["step", "calls_expected"]].to_string())
    assert est.note.str.contains("the bundled record data/estimate_history/smollm2-135m-instruct.json").any()
