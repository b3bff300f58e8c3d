"""Findings (issue 51): differences tested on the study's design. Simulations check what the statistics promise
(intervals that cover, Holm that controls false findings, power at the detectable difference); real and constructed
runs check what the stage, `compare` and `estimate` print; the drift page is looked at in headless Chromium."""
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import ROOT, groundbench, user_docs
from groundbench.findings.models import difference, holm, independent_difference
from groundbench.findings.power import VARIANCE_FILE, bundled_variance, detectable, planned_power, variance_table

SHOTS = ROOT / "_screenshots"


def citations(rng, deltas, claims=50, prompts=6):
    """Citations of len(deltas) sides on `claims` claims x `prompts` prompts: claim, prompt and side effects on the
    probability scale (a prompt's effect shared by the sides: the pairing), 1 + Poisson(6) citations an answer; side
    k's probability raised by deltas[k], so the true difference of pooled shares is exactly deltas[1] - deltas[0]."""
    S = len(deltas)
    p = (rng.uniform(0.32, 0.55, (claims, 1, 1)) + rng.uniform(-0.1, 0.1, (claims, 1, prompts))
         + rng.uniform(-0.12, 0.12, (claims, S, 1)) + rng.uniform(-0.08, 0.08, (claims, S, prompts))
         + np.asarray(deltas).reshape(1, S, 1))
    m = 1 + rng.poisson(6, (claims, S, prompts))
    claim = np.repeat(np.arange(claims).repeat(S * prompts), m.ravel())
    side = np.repeat(np.tile(np.repeat(np.arange(S), prompts), claims), m.ravel())
    y = (rng.random(m.sum()) < np.repeat(p.ravel(), m.ravel())).astype(float)
    return y, np.array(list("ABCD"))[side], claim


@pytest.mark.slow
def test_claim_clustered_intervals_cover_and_holm_keeps_false_findings_at_five_percent():
    rng = np.random.default_rng(2026)
    n, cover, cover_old = 400, 0, 0
    for _ in range(n):
        y, side, claim = citations(rng, (0.0, 0.1))
        d = difference(y, side, claim, "A", "B", n_boot=0)
        cover += d.low <= 0.1 <= d.high
        lo, hi = independent_difference(y, side, "A", "B")       # what `compare` used before: citations independent
        cover_old += lo <= 0.1 <= hi
    assert 0.93 <= cover / n <= 0.97, cover / n
    assert cover_old / n <= cover / n - 0.05, (cover_old / n, cover / n)   # clearly less
    # no difference among four assistants: the six pairwise tests of a family, Holm-adjusted
    n, any_false = 200, 0
    for _ in range(n):
        y, side, claim = citations(rng, (0.0, 0.0, 0.0, 0.0), claims=40, prompts=3)
        ps = [difference(y, side, claim, a, b, n_boot=0).p for a, b in
              (("A", "B"), ("A", "C"), ("A", "D"), ("B", "C"), ("B", "D"), ("C", "D"))]
        any_false += bool((holm(ps) < 0.05).any())
    assert any_false / n <= 0.05, any_false / n


@pytest.mark.slow
def test_power_is_eighty_percent_at_the_difference_estimate_prints():
    """gpt-4o.yaml's design (100 claims x 6 prompts) under the CR variance measured on the real answers (paper rules),
    simulated on the probability scale around one half (where a rate seldom meets 0 or 1)."""
    out = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", check=True).stdout
    line = next(l for l in out.splitlines()
                if l.startswith("power: two assistants (or two dates) asking these 100 claims x 6"))
    printed = float(line.split("CR ")[1].split(" points")[0])
    for m in ("NCR", "GS"): assert f"{m} " in line.split("detect is ")[1]
    v = bundled_variance("CR", "paper")
    delta = detectable(v, 100, 6)
    assert round(100 * delta, 1) == printed
    small = planned_power(20, 6, "paper").set_index("metric").detectable_pp["CR"]
    said = f"it is about {printed:.1f} points of CR; for 20 claims, about {small:.1f}"
    assert said in user_docs(), said                                    # the user guide quotes what the code says
    rng, n, hits, mu = np.random.default_rng(7), 300, 0, 0.5
    k = v.per_answer - 1   # rated citations an answer: 1 + a negative binomial with the measured mean and variance
    nb_p = k / v.answer_var
    for _ in range(n):   # a claim's rate: a part both assistants share and each one's own; its six prompts alike
        s = rng.normal(0, np.sqrt(v.pairing * v.between), (100, 1))
        q = np.clip(mu + s + rng.normal(0, np.sqrt((1 - v.pairing) * v.between), (100, 2)) + [0, delta], 0, 1)
        m = 1 + rng.negative_binomial(k * nb_p / (1 - nb_p), nb_p, (100, 2, 6))
        y = (rng.random(m.sum()) < np.repeat(np.repeat(q[:, :, None], 6, 2).ravel(), m.ravel())).astype(float)
        side = np.repeat(np.tile(np.repeat(["A", "B"], 6), 100), m.ravel())
        claim = np.repeat(np.arange(100).repeat(12), m.ravel())
        hits += difference(y, side, claim, "A", "B", n_boot=0).p < 0.05
    print("power at the printed difference:", hits / n)
    assert 0.75 <= hits / n <= 0.85, hits / n


@pytest.mark.slow
def test_real_answers_paired_differences_and_the_bootstrap_agrees(tmp_path):
    "The ai-search-benchmark answers (ChatGPT Search and Perplexity, 55 questions both answered) through 75_findings."
    spec = yaml.safe_load((ROOT / "papermill_params" / "ai-search-benchmark.yaml").read_text())
    spec["stages"] = ["20_collect", "40_credibility", "75_findings"]
    spec["parameters"].pop("compare")
    spec["parameters"]["n_boot"] = 4000
    (tmp_path / "asb.yaml").write_text(yaml.safe_dump(spec))
    groundbench("run", tmp_path / "asb.yaml", "--runs-dir", tmp_path / "runs", check=True)
    f = pd.read_csv(tmp_path / "runs" / spec["run_id"] / "75_findings" / "findings.csv")
    ab = f[f.factor == "assistant"].set_index("metric")
    for m in ("CR", "NCR", "CR_conv", "NCR_conv"):
        r = ab.loc[m]
        assert (r.a, r.b) == ("ChatGPT Search", "Perplexity") and r.paired >= 30 and r.clusters > 150
        assert r.low < r["diff"] < r.high and r.p_holm >= r.p
        # the claim-level bootstrap and the model: the same interval within the bootstrap's Monte-Carlo error and the
        # model's small-sample terms (t quantiles, the G/(G-1) correction): widths within 10%, centres within a tenth
        width, bwidth = r.high - r.low, r.boot_high - r.boot_low
        assert abs(bwidth / width - 1) < 0.10, (m, width, bwidth)
        assert abs((r.boot_low + r.boot_high) / 2 - (r.low + r.high) / 2) < 0.1 * width, m
        if m.startswith("CR"):   # citations as if independent: a narrower interval
            assert r.indep_high - r.indep_low < width or m == "CR_conv"
    # the variance table estimate uses is what the bundled answers give
    assert variance_table().equals(pd.read_csv(ROOT / VARIANCE_FILE, keep_default_na=False))


def _run(tmp_path, name, date, urls_b):
    "A run of two assistants answering the same 40 questions on `date`; BotB cites `urls_b(i)` for question i."
    rows = []
    for i in range(40):
        rows.append({"assistant": "BotA", "question": f"Is claim {i} true?", "answer": "No [1][2].",
                     "urls": "https://www.reuters.com/a; https://apnews.com/b", "date": date})
        rows.append({"assistant": "BotB", "question": f"Is claim {i} true?", "answer": "Yes [1][2].",
                     "urls": urls_b(i), "date": date})
    src = tmp_path / f"{name}.csv"
    pd.DataFrame(rows).to_csv(src, index=False)
    spec = {"run_id": name, "stages": ["20_collect", "40_credibility"], "parameters": {
        "source": "table", "sample": 0,
        "import_tables": [{"path": str(src), "answer": "answer", "assistant": "assistant", "question": "question",
                           "urls": "urls", "collected_at": "date"}]}}
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    groundbench("run", tmp_path / f"{name}.yaml", "--runs-dir", tmp_path / "runs", "--no-estimate", check=True)
    return tmp_path / "runs" / name


@pytest.mark.slow
@pytest.mark.chromium
def test_compare_over_three_dated_runs_draws_drift_and_names_the_changes(tmp_path):
    good = lambda i: "https://www.bbc.com/x; https://www.nasa.gov/y"
    bad = lambda i: ("https://www.infowars.com/z; https://www.rt.com/w" if i % 4 else good(i))
    runs = [_run(tmp_path, "june", "2026-06-01", good), _run(tmp_path, "march", "2026-03-01", good),
            _run(tmp_path, "sept", "2026-09-01", bad)]
    out = groundbench("compare", *runs, "--n-boot", "200", check=True).stdout
    assert "drift over 3 runs; " in out and "changes significant after Holm" in out
    sig = out.split("significant after Holm")[1]
    assert "BotB" in sig and "june" in sig and "sept" in sig and "BotA" not in sig   # only BotB changed, in September
    page = tmp_path / "runs" / "drift" / "index.html"
    d = json.loads((page.parent / "drift.json").read_text())
    assert d["runs"] == ["march", "june", "sept"]                                   # in date order, not as given
    changes = pd.read_csv(page.parent / "drift.csv")
    cr = changes[(changes.metric == "CR") & (changes.assistant == "BotB")].set_index("to_run")
    assert cr.loc["sept", "significant"] and not cr.loc["june", "significant"] and cr.loc["sept", "change"] < -50
    assert cr.loc["sept", "paired"] == 40 and (changes.low >= -100).all() and (changes.high <= 100).all()
    values = pd.read_csv(page.parent / "drift_values.csv")
    assert values[values.metric.isin(["CR", "NCR"])].low.min() >= 0 and values.high.max() <= 100
    from selenium.webdriver.common.by import By
    from groundbench.collect.browser import make_driver
    drv = make_driver(None, headless=True, window=(1366, 1000))
    try:
        drv.get(page.as_uri())
        imgs = drv.find_elements(By.TAG_NAME, "img")
        assert imgs and all(drv.execute_script("return arguments[0].naturalWidth", i) > 300 for i in imgs)
        assert "Significant changes (" in drv.find_element(By.TAG_NAME, "body").text
        SHOTS.mkdir(exist_ok=True)
        drv.save_screenshot(str(SHOTS / "drift.png"))
    finally:
        drv.quit()
