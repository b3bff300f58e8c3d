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


def test_bad_settings_and_variant_names_are_refused_before_the_first_stage_naming_their_source(tmp_path):
    """Issue 53: settings were typed by their default only (temperature 1e6, top_k 0 a bare faiss assertion, `ture`
    read as true), variant names checked when their stage started, after the stages before it had paid, and estimate
    exited 0. Now `run` and `estimate` refuse each before any stage, naming the key and where it came from: the
    parameter file and its line, --setting, or your own settings.ini and its line."""
    import shutil
    spec = tmp_path / "bad.yaml"
    spec.write_text("run_id: bad\nstages: [10_claims, 60_sourcebench]\nparameters:\n  question_rewrite_sample: 1\n"
                    "settings:\n  llm.temperature: 1000000.0\n")
    for cmd in ("run", "estimate"):
        t0 = time.monotonic()
        p = groundbench(cmd, spec, "--runs-dir", tmp_path / "runs")
        assert p.returncode != 0 and f"{spec}: line 6: setting [llm] temperature = 1000000.0: give a number >= 0 and "\
            "<= 2" in p.stderr, p.stderr[-1500:]
        assert time.monotonic() - t0 < 30 and "Traceback" not in p.stderr
        p = groundbench(cmd, spec, "--runs-dir", tmp_path / "runs", "--setting", "llm.temperature=0",
                        "--setting", "embed.top_k=0")
        assert p.returncode != 0 and "--setting: setting [embed] top_k = 0: give a whole number > 0" in p.stderr
        p = groundbench(cmd, spec, "--runs-dir", tmp_path / "runs", "--setting", "llm.temperature=0",
                        "--param", "variant=papr", "--setting", "llm.backend=mock")
        assert p.returncode != 0 and "variant = papr: not a variant of 60_sourcebench (use one of paper, extracted" \
            in p.stderr and "llm.backend = mock: not a judge's backend" in p.stderr, p.stderr[-1500:]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("10_claims"))
    home = tmp_path / "home"                      # your own settings.ini, with a typo: its file and line named
    home.mkdir()
    (home / "nbs").symlink_to(ROOT / "nbs")
    shutil.copy(ROOT / "settings.ini", home / "settings.ini")
    text = (home / "settings.ini").read_text().replace("\nseed = 0\n", "\nseed = 0\ntempreature = 0\n")
    (home / "settings.ini").write_text(text)
    line = text.splitlines().index("tempreature = 0") + 1
    p = groundbench("estimate", ROOT / "papermill_params" / "demo.yaml", env={"GROUNDBENCH_HOME": str(home)})
    assert p.returncode != 0 and f"settings.ini: line {line}: unknown setting llm.tempreature: did you mean " \
        "llm.temperature?" in p.stderr, p.stderr[-1500:]


def test_the_vllm_section_takes_no_argument_groundbench_sets_and_no_remote_code_unasked(tmp_path):
    "Issue 53: `seed` there was a TypeError when the engine started, `trust_remote_code` was passed silently."
    spec = tmp_path / "v.yaml"
    spec.write_text("run_id: v\nstages: [10_claims]\nparameters: {question_rewrite_sample: 1}\nsettings:\n"
                    "  vllm.seed: 3\n  vllm.trust_remote_code: true\n")
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs")
    assert p.returncode != 0 and "vllm.seed: groundbench sets it itself; use llm.seed" in p.stderr, p.stderr[-1500:]
    assert "vllm.trust_remote_code: runs code from the model's repository; set llm.trust_remote_code = true" \
        in p.stderr
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs", "--setting", "llm.trust_remote_code=true")
    assert "trust_remote_code" not in p.stderr and "vllm.seed" in p.stderr
