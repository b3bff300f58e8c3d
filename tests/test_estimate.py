"""Issue 17: `groundbench estimate PARAMS.yaml` before a run, in seconds and without loading a model. Its figures are
checked against what runs spend in tests/test_demo.py (the demo's estimate vs actual, every step inside its ranges)."""
import time

import pandas as pd

from conftest import ROOT, groundbench


def test_estimate_of_the_whole_expertqa_file_prints_every_llm_step_in_seconds(tmp_path):
    t0 = time.time()
    p = groundbench("estimate", ROOT / "papermill_params" / "expertqa.yaml", "--runs-dir", tmp_path / "runs",
                    "--out", tmp_path / "est.csv", check=True, timeout=300)
    took = time.time() - t0
    assert took < 120, f"estimate took {took:.0f} s"   # about 10 s here: the tokenizer alone, no weights
    t = pd.read_csv(tmp_path / "est.csv")
    steps = set(zip(t.stage, t.step))
    assert {("50_groundedness", "extract_units"), ("50_groundedness", "decontextualise"), ("50_groundedness", "judge"),
            ("60_sourcebench", "sourcebench_content"), ("65_sourcecheckup", "sourcecheckup")} <= steps
    ex = t.set_index(["stage", "step"]).loc[("50_groundedness", "extract_units")]
    assert ex.basis == "built" and ex.requests > 1000 and ex.calls_low <= ex.calls_high   # one request per segment of 331 answers
    assert "the model's own tokenizer" in p.stdout and "no money per token" in p.stdout
    assert "settings [estimate]" in p.stdout    # the ratios' source is printed


def test_estimate_prices_a_hosted_model_and_says_when_it_cannot(tmp_path):
    spec = tmp_path / "gpt.yaml"
    spec.write_text("run_id: gpt\nstages: [10_claims]\nparameters: {question_rewrite_sample: 4}\n"
                    "settings: {llm.backend: openai, llm.model: gpt-4o, llm.base_url: 'http://127.0.0.1:9/v1'}\n")
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs", "--out", tmp_path / "est.csv", check=True)
    t = pd.read_csv(tmp_path / "est.csv")
    assert t.requests.tolist() == [4] and 0 < t.cost_usd_low.iloc[0] < t.cost_usd_high.iloc[0]
    assert "$2.5 in / $10.0 out per million tokens" in p.stdout and "characters / 4" in p.stdout   # no tokenizer offline
    spec.write_text(spec.read_text().replace("gpt-4o", "a-model-nobody-prices"))
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs", check=True)
    assert "no price in" in p.stdout and "tokens only" in p.stdout
