"""Preflight (issue 54): a run that cannot succeed stops before its first stage, within seconds, with one line per
problem naming the setting, and writes no stage folder."""
import re
import time

import pytest

from conftest import ROOT, groundbench


def stopped(p, t0, runs, *needles):
    assert p.returncode != 0 and time.monotonic() - t0 < 30, (p.returncode, time.monotonic() - t0)
    for n in needles: assert n in p.stderr, (n, p.stderr)
    assert "Traceback" not in p.stderr and "no stage was run" in p.stderr
    assert not runs.exists() or not [d for d in runs.rglob("*") if re.match(r"\d\d_", d.name)]


def test_gpu_yaml_without_vllm_stops_naming_the_backend(tmp_path):
    import importlib.util
    if importlib.util.find_spec("vllm") is not None: pytest.skip("vllm is installed here")
    t0 = time.monotonic()
    p = groundbench("run", ROOT / "papermill_params" / "gpu.yaml", "--runs-dir", tmp_path / "runs")
    stopped(p, t0, tmp_path / "runs", "llm.backend = vllm", "pip install -e '.[gpu]'")


def test_gpt_4o_yaml_without_its_key_stops_naming_the_variable(tmp_path):
    t0 = time.monotonic()
    p = groundbench("run", ROOT / "papermill_params" / "gpt-4o.yaml", "--runs-dir", tmp_path / "runs",
                    env={"OPENAI_API_KEY": ""})
    stopped(p, t0, tmp_path / "runs", "OPENAI_API_KEY is not set")
    # estimate says the same before a run
    e = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", env={"OPENAI_API_KEY": ""})
    assert "PREFLIGHT" in e.stdout and "OPENAI_API_KEY is not set" in e.stdout, e.stdout[-2000:]


def test_the_readme_s_hosted_judge_recipe_with_an_unreachable_endpoint_stops_naming_the_endpoint(tmp_path):
    "The README's recipe as written, its endpoint a port nothing listens on: the embedder it names suits the judge."
    readme = (ROOT / "README.md").read_text()
    recipe = re.search(r"`groundbench run (papermill_params/\S+) ((?:--setting \S+ ?)+)`", readme)
    assert recipe, "the README's hosted-judge recipe"
    settings = [s.replace("https://api.openai.com/v1", "http://127.0.0.1:9/v1")
                for s in recipe.group(2).split() if s != "--setting"]
    t0 = time.monotonic()
    p = groundbench("run", ROOT / recipe.group(1), "--runs-dir", tmp_path / "runs",
                    *[x for s in settings for x in ("--setting", s)], env={"OPENAI_API_KEY": "sk-test"})
    stopped(p, t0, tmp_path / "runs", "llm.base_url = http://127.0.0.1:9/v1: the endpoint does not answer")
    assert "embed.model" not in p.stderr                     # the recipe's embedder is allowed beside a real judge
