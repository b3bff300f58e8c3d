"""`groundbench run`: papermill executes the stage notebooks into runs/<run_id>/, records the manifest,
and a rerun is served from the caches (zero model calls), while another model makes new calls."""
import json
import os
import signal
import sqlite3
import subprocess
import time

import pandas as pd
import yaml
import pytest

from conftest import BIN, ROOT, groundbench


def write_spec(path, run_id, cache, sample=3, **settings):
    path.write_text(yaml.safe_dump({"run_id": run_id, "stages": ["10_claims"],
                                    "parameters": {"question_rewrite_sample": sample},
                                    "settings": {"paths.cache_dir": str(cache), **settings}}))
    return path


def cached_keys(db) -> set:
    "The keys of the answers cached in `db` (none when it cannot be read)."
    try:
        with sqlite3.connect(db, timeout=5) as c: return {k for (k,) in c.execute("select key from completions")}
    except sqlite3.Error: return set()


def cached_completions(db) -> int: return len(cached_keys(db))


def manifest(runs, run_id):
    return json.loads((runs / run_id / "manifest.json").read_text())


def llm_usage(m, stage="10_claims"):
    return m["stages"][stage]["llm"]["question_rewrite"]


@pytest.mark.slow
def test_run_writes_manifest_and_prompts_then_resumes_from_cache(tmp_path):
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    spec = write_spec(tmp_path / "study.yaml", "study", cache)
    p = groundbench("run", spec, "--runs-dir", runs, check=True)
    assert "SMOKE RUN" in p.stdout
    # progress while the stage makes model calls (issue 29): the step's last line counts every call
    assert "[study 10_claims] question_rewrite: 3/3 model calls, 0 from the cache" in p.stderr, p.stderr
    assert not (runs / "study" / "progress.json").exists()
    m = manifest(runs, "study")
    assert m["stages"]["10_claims"]["status"] == "done"
    assert m["stages"]["10_claims"]["counts"]["prompts"] == 600
    assert m["environment"]["git"]["commit"] and "dirty" in m["environment"]["git"]
    assert m["environment"]["packages"]["pandas"] and m["models"]["llm"]["revision"]
    assert m["smoke_run"] is True and m["parameters"]["parameters"] == {"question_rewrite_sample": 3}
    first = llm_usage(m)
    assert first["calls"] == 3 and first["cache_hits"] == 0 and first["completion_tokens"] > 0
    prompts = pd.read_parquet(runs / "study/10_claims/prompts.parquet")
    assert len(prompts) == 600 and prompts.role.value_counts().to_dict() == {"fact_checker": 300, "claim_believer": 300}
    assert (runs / "study/notebooks/10_claims.ipynb").exists()
    assert not list((ROOT / "nbs").glob("*.ipynb.*"))  # nothing executed lands in nbs/
    q1 = pd.read_parquet(runs / "study/10_claims/questions_llm.parquet")
    # rerun with the same run id: the same outputs, zero model calls, all cache hits (--quiet: no progress lines)
    q = groundbench("run", spec, "--runs-dir", runs, "--quiet", check=True)
    assert "model calls" not in q.stderr and "10_claims done" in q.stderr, q.stderr
    m2 = manifest(runs, "study")
    again = llm_usage(m2)
    assert (again["calls"], again["cache_hits"]) == (0, 3)
    assert len(m2["stages"]["10_claims"]["history"]) == 2
    pd.testing.assert_frame_equal(q1, pd.read_parquet(runs / "study/10_claims/questions_llm.parquet"))
    # `groundbench status` reads it back
    s = groundbench("status", runs / "study", check=True)
    assert "10_claims" in s.stdout and "llm calls      0" in s.stdout


@pytest.mark.llama_server
@pytest.mark.slow
def test_switching_the_model_makes_new_calls(tmp_path, llama_server):
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    groundbench("run", write_spec(tmp_path / "a.yaml", "a", cache, sample=2), "--runs-dir", runs, check=True)
    assert llm_usage(manifest(runs, "a"))["calls"] == 2
    other = write_spec(tmp_path / "b.yaml", "b", cache, sample=2,
                       **{"llm.backend": "openai", "llm.base_url": llama_server, "llm.model": "smollm2-server",
                          "llm.structured": "json_object"})
    groundbench("run", other, "--runs-dir", runs, check=True)
    m = manifest(runs, "b")
    assert llm_usage(m)["calls"] == 2 and m["models"]["llm"]["backend"] == "openai"
    assert m["models"]["llm"]["base_url"] == llama_server


@pytest.mark.slow
def test_killed_run_resumes(tmp_path):
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    spec = write_spec(tmp_path / "k.yaml", "k", cache, sample=8)
    proc = subprocess.Popen([str(BIN / "groundbench"), "run", str(spec), "--runs-dir", str(runs)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    # kill the whole process group once the stage has begun and made at least one model call
    deadline = time.time() + 120
    db = cache / "llm.sqlite"
    while time.time() < deadline and proc.poll() is None:
        if db.exists() and cached_completions(db) > 0: break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # issue 54: `status` tells the killed stage from a running one (its process is gone)
    assert manifest(runs, "k")["stages"]["10_claims"]["status"] == "running"      # as the killed process left it
    deadline = time.time() + 30
    while time.time() < deadline and "stopped" not in groundbench("status", runs / "k").stdout: time.sleep(0.5)
    assert "10_claims          stopped" in groundbench("status", runs / "k").stdout
    groundbench("run", spec, "--runs-dir", runs, check=True)
    m = manifest(runs, "k")
    assert m["stages"]["10_claims"]["status"] == "done"
    usage = llm_usage(m)
    assert usage["cache_hits"] >= 1 and usage["calls"] + usage["cache_hits"] == 8  # what was paid for is not paid again
    assert len(pd.read_parquet(runs / "k/10_claims/prompts.parquet")) == 600


@pytest.mark.slow
def test_bad_parameter_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("stages: [10_claims]\nparameters: {question_rewrite_smaple: 0}\n")
    p = groundbench("run", bad, "--runs-dir", tmp_path / "runs")
    assert p.returncode == 1 and "question_rewrite_smaple" in p.stderr and "declared by none of the stages" in p.stderr
    p = groundbench("run", tmp_path / "missing.yaml")
    assert p.returncode == 1 and "no such parameter file" in p.stderr


@pytest.mark.slow
def test_failing_stage_names_stage_and_notebook(tmp_path):
    claims = tmp_path / "claims.csv"
    claims.write_text("id,topic,claim\nX1,T,foo\n")  # no question: the Claim Believer template 3 cannot be filled
    spec = tmp_path / "f.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "f", "stages": ["10_claims"],
                                    "parameters": {"claims_path": str(claims), "question_rewrite_sample": 0}}))
    p = groundbench("run", spec, "--runs-dir", tmp_path / "runs")
    assert p.returncode == 1
    assert "stage 10_claims failed" in p.stderr and "field 'question'" in p.stderr
    assert "notebooks/10_claims.ipynb" in p.stderr
    assert manifest(tmp_path / "runs", "f")["stages"]["10_claims"]["status"] == "failed"


@pytest.mark.slow
def test_several_parameter_files_in_parallel_processes(tmp_path):
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    specs = [write_spec(tmp_path / f"{name}.yaml", name, cache, sample=0) for name in ("p1", "p2")]
    p = groundbench("run", *specs, "--runs-dir", runs, "--parallel", "2", check=True)
    for name in ("p1", "p2"):
        m = manifest(runs, name)
        assert m["stages"]["10_claims"]["status"] == "done" and f"run {name} in" in p.stdout
        assert len(pd.read_parquet(runs / name / "10_claims/prompts.parquet")) == 600
    # two processes really ran at once: each run was opened before the other one's last manifest write
    a, b = manifest(runs, "p1"), manifest(runs, "p2")
    assert a["created_at"] <= b["updated_at"] and b["created_at"] <= a["updated_at"]
    # one file: in process
    p = groundbench("run", tmp_path / "p1.yaml", "--run-id", "x", "--runs-dir", runs, "--parallel", "2", check=True)
    assert "run x in" in p.stdout


def test_every_shipped_parameter_file_is_valid():
    """Each papermill_params/*.yaml names existing stage notebooks, and each of its parameters is declared by one of
    them."""
    from groundbench.runner import declared_parameters, load_run_spec
    files = sorted((ROOT / "papermill_params").glob("*.yaml"))
    shipped = {"demo.yaml", "gpt-4o.yaml", "gpt-5.yaml", "perplexity.yaml", "qwen-chat.yaml", "sourcebench.yaml",
               "gpu.yaml", "seed-report.yaml"}
    assert shipped <= {f.name for f in files}
    for f in files:
        spec = load_run_spec(f)
        declared = set().union(*(declared_parameters(s) for s in spec.stages))
        assert set(spec.parameters) <= declared, (f.name, set(spec.parameters) - declared)


@pytest.mark.slow
def test_a_budget_stops_the_run_before_the_call_past_it_and_a_larger_one_finishes_it_paying_nothing_twice(tmp_path):
    "Issue 17: max_calls below what the run needs stops it with the budget named; the rerun pays only for what is left."
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    spec = write_spec(tmp_path / "b.yaml", "budget", cache, sample=3, **{"budget.max_calls": 1})
    p = groundbench("run", spec, "--runs-dir", runs)
    assert p.returncode != 0 and "budget max_calls=1 reached" in p.stderr, p.stderr
    st = manifest(runs, "budget")["stages"]["10_claims"]
    assert st["status"] == "failed" and st["stopped_by_budget"]["budget"] == "max_calls"
    assert st["stopped_by_budget"]["spent"] == 1 and llm_usage({"stages": {"10_claims": st}})["calls"] == 1
    assert cached_completions(cache / "llm.sqlite") == 1                              # what was paid for is kept
    write_spec(spec, "budget", cache, sample=3, **{"budget.max_calls": 50})
    groundbench("run", spec, "--runs-dir", runs, check=True)
    st = manifest(runs, "budget")["stages"]["10_claims"]
    again = llm_usage({"stages": {"10_claims": st}})
    assert st["status"] == "done" and st["stopped_by_budget"] is None
    # zero repeated calls
    assert again["cache_hits"] >= 1 and again["calls"] + 1 == cached_completions(cache / "llm.sqlite")
    assert again["calls"] >= 2


@pytest.mark.slow
def test_a_cost_budget_stops_the_run_at_the_models_price_and_an_unpriced_model_is_refused(tmp_path):
    """Issue 17: stage_max_cost in dollars at the price table's price (a table of our own pricing the smoke model at
    $1,000 per million tokens both ways, so one question rewrite costs well under a cent): the stage stops before the
    call past the budget, names it, keeps what was paid; a larger budget finishes with zero repeated calls. A cost
    budget for a model the table does not price is refused before any call, naming the table and the model."""
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    prices = tmp_path / "prices.csv"
    prices.write_text("model,input_usd_per_mtok,output_usd_per_mtok,source,checked\n"
                      "smollm2-135m-instruct,1000,1000,a test price,2026-11-30\n")
    # a rewrite request is bounded at about 1,050 prompt characters / 4 + 160 max tokens = 420 tokens ($0.42) before
    # it is made, and costs about $0.3 once made: $0.60 admits the first call, not the second
    spec = write_spec(tmp_path / "c.yaml", "cost", cache, sample=3,
                      **{"budget.stage_max_cost": 0.60, "budget.prices": str(prices)})
    p = groundbench("run", spec, "--runs-dir", runs)
    assert p.returncode != 0 and "stage budget stage_max_cost=0.6 reached" in p.stderr, p.stderr
    st = manifest(runs, "cost")["stages"]["10_claims"]
    assert st["stopped_by_budget"]["budget"] == "stage_max_cost" and 0 < st["stopped_by_budget"]["spent"] <= 0.60
    paid = cached_completions(cache / "llm.sqlite")
    assert paid == llm_usage({"stages": {"10_claims": st}})["calls"] >= 1
    write_spec(spec, "cost", cache, sample=3, **{"budget.stage_max_cost": 50, "budget.prices": str(prices)})
    groundbench("run", spec, "--runs-dir", runs, check=True)
    again = llm_usage({"stages": {"10_claims": manifest(runs, "cost")["stages"]["10_claims"]}})
    # nothing paid twice
    assert again["cache_hits"] == paid and again["calls"] + paid == cached_completions(cache / "llm.sqlite")
    write_spec(spec, "unpriced", tmp_path / "cache2", sample=3, **{"budget.max_cost": 1})
    p = groundbench("run", spec, "--runs-dir", runs)
    assert p.returncode != 0 and "has no price in" in p.stderr and "llm_prices.csv" in p.stderr, p.stderr
    assert cached_completions(tmp_path / "cache2" / "llm.sqlite") == 0


@pytest.mark.slow
def test_a_run_kept_elsewhere_keeps_its_cache_beside_it_not_in_the_checkout(tmp_path):
    """Issue 45: a run in any folder once wrote its model answers into the checkout's runs/.cache. Other tests write
    to the checkout's cache while this one runs, so the test asks for a rewrite of a claim no other test has (its text
    names this test's folder) and looks for that answer's key, not at a count of the checkout's answers."""
    checkout = ROOT / "runs" / ".cache" / "llm.sqlite"
    claims = tmp_path / "claims.csv"
    seed = pd.read_csv(ROOT / "data" / "seed_study" / "claims.csv", dtype=str)
    seed.loc[0, "claim"] = f"{tmp_path.name} {seed.loc[0, 'claim']}"
    seed.to_csv(claims, index=False)
    spec = tmp_path / "elsewhere.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "elsewhere", "stages": ["10_claims"],
                                    "parameters": {"question_rewrite_sample": 1, "claims_path": str(claims),
                                                   "questions_path": str(ROOT / "data/seed_study/questions.csv")}}))
    runs = tmp_path / "study" / "runs"
    groundbench("run", spec, "--runs-dir", runs, "--quiet", check=True)
    ours = cached_keys(runs / ".cache" / "llm.sqlite")
    assert len(ours) == 1
    assert not ours & cached_keys(checkout)
    assert llm_usage(manifest(runs, "elsewhere"))["calls"] == 1
