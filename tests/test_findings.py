"""Findings (issues 51 and 60): differences tested on the study's design. Simulations check what the statistics promise
(intervals that cover and Holm that keeps false findings at 5% with 20 claims as with 100, an estimand no longer moved
by how many sources an assistant cites, power at the difference `estimate` prints, a slow drift found); real and
constructed runs check what the stage, `compare` and `estimate` print; the drift page is looked at in headless
Chromium."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import ROOT, groundbench, user_docs
from groundbench.findings.models import difference, holm
from groundbench.findings.power import (VARIANCE_FILE, bundled_variance, logit_normal_cov, logit_normal_mu, logit_sd,
                                        planned_power, variance_table)

SHOTS = ROOT / "_screenshots"


def study(rng, claims, rate, sides=4, pairing=0.3, volume=None, shift=None):
    """Citations of `sides` assistants on `claims` claims: a claim's difficulty normal on the logit scale (sd 1),
    correlated 0.3 between the assistants (the within-claim correlation), 0 to 30 citations a claim and assistant
    (`volume(q, m, rng)` may change them), each side's rate `rate` (plus `shift[k]` on the logit scale)."""
    u = rng.normal(0, math.sqrt(pairing), (claims, 1)) + rng.normal(0, math.sqrt(1 - pairing), (claims, sides))
    q = 1 / (1 + np.exp(-(math.log(rate / (1 - rate)) + u + (np.asarray(shift) if shift is not None else 0))))
    m = rng.integers(0, 31, (claims, sides))
    if volume is not None: m = volume(q, m, rng)
    claim = np.repeat(np.repeat(np.arange(claims), sides), m.ravel())
    side = np.repeat(np.tile(np.arange(sides), claims), m.ravel())
    y = (rng.random(m.sum()) < np.repeat(q.ravel(), m.ravel())).astype(float)
    return y, np.array(list("ABCDEFGH"))[side], claim


def error_rates(claims, rate, n, seed):
    "Coverage of the A-B interval and Holm's family-wise false-positive rate over the 6 pairs, with no difference."
    rng = np.random.default_rng(seed)
    cover = false = 0
    for _ in range(n):
        y, side, claim = study(rng, claims, rate)
        ps = []
        for i, a in enumerate("ABCD"):
            for b in "ABCD"[i + 1:]:
                keep = (side == a) | (side == b)
                d = difference(y[keep], side[keep], claim[keep], a, b, check=False)
                ps.append(1.0 if d.p != d.p else d.p)
                if (a, b) == ("A", "B"): cover += d.low <= 0 <= d.high
        false += bool((holm(ps) < 0.05).any())
    return cover / n, false / n


@pytest.mark.slow
@pytest.mark.parametrize("claims,rate", [(20, 0.78), (100, 0.78), (20, 0.015), (100, 0.015)])
def test_claim_weighted_intervals_cover_and_holm_keeps_false_findings_at_five_percent(claims, rate):
    """Issue 60's referee scenario: claims of 0-30 citations an assistant, within-claim correlation 0.3, CR near 78%
    and NCR at 1.5%, 20 and 100 claims, no difference: the findings' estimator (claim-weighted, paired, CR2 with
    Bell-McCaffrey df) covers 93-97% and Holm over the 6 pairs of 4 assistants keeps the family-wise error at most
    6%. 300 simulated studies (Monte-Carlo sd about 1.3 points); the seed fixes them, so a failure is the code's."""
    cover, fwer = error_rates(claims, rate, 300, 60 + claims)
    print(f"{claims} claims, rate {rate}: coverage {cover:.3f}, family-wise error {fwer:.3f}")
    # NCR at 1.5% on 20 claims has about 5 events a side: every valid test errs wide there (2,000 simulations put this
    # one at 97.4% coverage, 0.8% family-wise error); elsewhere 94.6-95.9% and 3.0-4.5% (2,000 each, 2026-12-07)
    assert 0.93 <= cover <= (0.985 if claims == 20 and rate < 0.05 else 0.97), cover
    assert fwer <= 0.06, fwer


@pytest.mark.slow
def test_the_estimand_is_not_moved_by_how_many_sources_an_assistant_cites_or_when_it_thinks():
    """Two assistants with the same credibility on every claim, B citing 30 sources on its harder half of the claims
    and 0-5 on the easier: the pooled difference is many points and 'significant' in most studies; the claim-weighted
    paired difference rejects at most 7%. The same for thinking, chosen more often on easy claims with no effect."""
    rng, n = np.random.default_rng(61), 200
    def more_on_hard(q, m, rng):
        hard = q[:, 0] < np.median(q[:, 0])
        m[:, 1] = np.where(hard, 30, rng.integers(0, 6, len(q)))
        return m
    rejected = pooled_rejected = 0
    pooled = []
    for _ in range(n):
        y, side, claim = study(rng, 100, 0.75, sides=2, pairing=1.0, volume=more_on_hard)
        d = difference(y, side, claim, "A", "B", check=False)
        rejected += d.p < 0.05
        pooled_rejected += d.pooled_p < 0.05
        pooled.append(d.pooled_diff)
    print("volume: claim-weighted rejects", rejected / n, "pooled rejects", pooled_rejected / n,
          "pooled mean", np.mean(pooled))
    assert rejected / n <= 0.07 and pooled_rejected / n >= 0.5 and abs(np.mean(pooled)) > 0.05
    # thinking: 6 answers a claim, each thinking with probability 0.9 on easy claims and 0.1 on hard, no effect
    rejected = pooled_rejected = 0
    for _ in range(n):
        q = 1 / (1 + np.exp(-(1.1 + rng.normal(0, 1, 100))))
        think = rng.random((100, 6)) < np.where(q > np.median(q), 0.9, 0.1)[:, None]
        m = 1 + rng.poisson(4, (100, 6))
        claim = np.repeat(np.arange(100).repeat(6), m.ravel())
        side = np.repeat(np.where(think, "with thinking", "without thinking").ravel(), m.ravel())
        y = (rng.random(m.sum()) < q[claim]).astype(float)
        d = difference(y, side, claim, "without thinking", "with thinking", check=False)
        rejected += d.p < 0.05
        pooled_rejected += d.pooled_p < 0.05
    print("thinking: claim-weighted rejects", rejected / n, "pooled rejects", pooled_rejected / n)
    assert rejected / n <= 0.07 and pooled_rejected / n >= 0.5


def share_study(rng, v, sigma, pa, pb, claims=100, prompts=6):
    "Two assistants as `estimate`'s power assumes them: logit-normal claims (sd sigma, pairing r), Bernoulli citations."
    k = v.per_answer - 1
    nb_p = k / v.answer_var
    mu = np.array([logit_normal_mu(pa, sigma), logit_normal_mu(pb, sigma)])
    z = math.sqrt(v.pairing) * rng.normal(0, 1, (claims, 1)) + math.sqrt(1 - v.pairing) * rng.normal(0, 1, (claims, 2))
    q = 1 / (1 + np.exp(-(mu + sigma * z)))
    m = (1 + rng.negative_binomial(k * nb_p / (1 - nb_p), nb_p, (claims, 2, prompts))).sum(2)
    side = np.repeat(np.tile(["A", "B"], claims), m.ravel())
    claim = np.repeat(np.repeat(np.arange(claims), 2), m.ravel())
    return (rng.random(m.sum()) < np.repeat(q.ravel(), m.ravel())).astype(float), side, claim


@pytest.mark.slow
@pytest.mark.parametrize("metric,rules", [("CR", "paper"), ("NCR", "paper"), ("NCR", "full"), ("GS", "paper")])
def test_power_is_eighty_percent_at_the_difference_estimate_prints_at_the_verdicts_level(metric, rules):
    """gpt-4o.yaml's design (100 claims x 6 prompts): at the MDE `estimate` prints at the level the paper's findings are
    tested at (Holm's first step), the findings' own test has 80% power within 20% (asserted: 72-88%), simulated as
    the power model assumes; NCR from the paper's 1.5%, with the variance under the alternative."""
    import dataclasses
    out = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("power: two assistants (or two dates) asking these 100 "
                                                            "claims x 6"))
    t = planned_power(100, 6, rules).set_index("metric")
    if rules == "paper": assert f"{metric} {t.detectable_pp[metric]:.1f} points" in line, line
    delta, level = t.detectable_pp[metric] / 100, float(t.alpha.iloc[0])
    rng, n, hits = np.random.default_rng(62), 250, 0
    for _ in range(n):
        if metric == "GS":
            b = rng.normal(0, math.sqrt(t.between.GS), (100, 2))
            y = np.repeat((0.8 + np.array([0, delta]) + b)[:, :, None], 6, 2) + rng.normal(
                0, math.sqrt(t.within.GS), (100, 2, 6))
            d = difference(y.ravel(), np.tile(np.repeat(["A", "B"], 6), 100), np.repeat(np.arange(100), 12), "A", "B",
                           "gaussian", check=False)
        else:
            v, cr = bundled_variance(metric, rules), bundled_variance("CR", rules)
            if not v.between > 0:
                v = dataclasses.replace(v, between=logit_normal_cov(v.mean, v.mean, logit_sd(cr), 1.0),
                                        pairing=cr.pairing)
            base = t.base[metric]
            step = 1 if base < 0.5 else -1
            d = difference(*share_study(rng, v, logit_sd(v), base, base + step * delta), "A", "B", check=False)
        hits += d.p < level
    print(f"{metric} ({rules}): power {hits / n:.3f} at {100 * delta:.2f} points, alpha {level:.4f}")
    assert 0.72 <= hits / n <= 0.88, hits / n
    if metric == "CR" and rules == "paper":
        small = planned_power(20, 6, "paper").set_index("metric").detectable_pp["CR"]
        said = f"it is about {100 * delta:.1f} points of CR; for 20 claims, about {small:.1f}"
        assert said in user_docs(), said                                 # the user guide quotes what the code says


@pytest.mark.slow
def test_a_slow_drift_is_found_and_no_drift_flags_at_most_six_percent_across_metrics():
    """Five dated runs of 100 claims x 6 prompts: CR falling from 76 to 65 (under 3 points a step, which no pair of
    consecutive dates can see) is flagged by the trend in at least 80% of studies; with no drift in CR or NCR, any
    flag across both metrics in at most 6% (Holm over the trends)."""
    from groundbench.findings.drift import drift_table
    rng, n = np.random.default_rng(63), 200
    order = [f"r{k}" for k in range(5)]
    dates = {r: pd.Timestamp("2026-01-01") + pd.Timedelta(days=60 * k) for k, r in enumerate(order)}
    def runs(cr_by_date):
        u = rng.normal(0, 1, 100)                    # a claim's difficulty, the same on every date
        rows = []
        for k, r in enumerate(order):
            m = 1 + rng.poisson(2, (100, 6)).sum(1)
            for metric, rate in (("CR", cr_by_date[k]), ("NCR", 0.02)):
                q = 1 / (1 + np.exp(-(math.log(rate / (1 - rate)) + (u if metric == "CR" else -u)
                                      + rng.normal(0, 0.5, 100))))
                claim = np.repeat(np.arange(100), m)
                rows.append(pd.DataFrame({"metric": metric, "y": (rng.random(m.sum()) < q[claim]).astype(float),
                                          "claim_id": claim.astype(str), "assistant": "X", "run_id": r}))
        return pd.concat(rows, ignore_index=True)
    found = steps = false = 0
    for k in range(n):   # the consecutive changes (exploratory) on the first 50 studies: slower to test
        t = drift_table(runs(np.linspace(0.76, 0.65, 5)), order, dates, changes=k < 50)
        found += bool(t[(t.test == "trend") & (t.metric == "CR")].significant.iloc[0])
        steps += bool(t[(t.test == "change") & (t.metric == "CR")].significant.any())
        false += bool(drift_table(runs([0.76] * 5), order, dates, changes=False).significant.any())
    print("slow drift found by the trend", found / n, "by a consecutive change", steps / 50, "no drift flagged",
          false / n)
    assert found / n >= 0.80 and false / n <= 0.06 and steps / 50 < found / n


@pytest.mark.slow
def test_real_answers_paired_differences_and_the_randomisation_check_agrees(tmp_path):
    "The ai-search-benchmark answers (ChatGPT Search and Perplexity, 37-55 questions both answered), 75_findings."
    spec = yaml.safe_load((ROOT / "papermill_params" / "ai-search-benchmark.yaml").read_text())
    spec["stages"] = ["20_collect", "40_credibility", "75_findings"]
    spec["parameters"].pop("compare")
    (tmp_path / "asb.yaml").write_text(yaml.safe_dump(spec))
    groundbench("run", tmp_path / "asb.yaml", "--runs-dir", tmp_path / "runs", check=True)
    f = pd.read_csv(tmp_path / "runs" / spec["run_id"] / "75_findings" / "findings.csv")
    ab = f[f.factor == "assistant"].set_index("metric")
    for m in ("CR", "NCR", "CR_conv", "NCR_conv"):
        r = ab.loc[m]
        assert (r.a, r.b, r.estimand, r.analysis) == ("ChatGPT Search", "Perplexity", "claim-weighted, paired",
                                                      "exploratory")
        assert r.paired >= 30 and r.clusters > 150 and r.p_fdr >= r.p
        assert r.low <= r["diff"] <= r.high and r.low_fcr <= r.low and r.high_fcr >= r.high
        # the model's t test and the claims' randomisation test of the same paired differences reach the same decision
        # (NCR's few events make their p-values differ in size, not in what they decide)
        assert (r.p < 0.05) == (r.p_check < 0.05), (m, r.p, r.p_check)
        if m.startswith("CR"): assert abs(r.p - r.p_check) < 0.1, (m, r.p, r.p_check)
        if m in ("CR", "NCR"):   # citations as if independent: a narrower interval than the claims'
            assert r.indep_high - r.indep_low < r.high - r.low
    # issue 60: the paper's findings tested on general-knowledge questions (paper_assistants maps the two) say so
    s = pd.read_csv(tmp_path / "runs" / spec["run_id"] / "75_findings" / "paper_findings_summary.csv")
    tested = s[~s.verdict.str.startswith("not testable")]
    assert len(tested) and tested.verdict.str.contains("(not the paper's claims)", regex=False).all(), tested
    assert (tested.data == "not the paper's claims").all()
    # the variance table estimate uses is what the bundled answers give
    assert variance_table().equals(pd.read_csv(ROOT / VARIANCE_FILE))


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
    out = groundbench("compare", *runs, check=True).stdout
    assert "drift over 3 runs (paired by claim on the 40 claims the runs share): " in out, out
    assert "trends significant after Holm across metrics and assistants" in out
    sig = out.split("(exploratory)")[1]
    assert "BotB" in sig and "june" in sig and "sept" in sig and "BotA" not in sig   # only BotB changed, in September
    page = tmp_path / "runs" / "drift" / "index.html"
    d = json.loads((page.parent / "drift.json").read_text())
    assert d["runs"] == ["march", "june", "sept"]                                   # in date order, not as given
    changes = pd.read_csv(page.parent / "drift.csv")
    cr = changes[(changes.metric == "CR") & (changes.assistant == "BotB") & (changes.test == "change")].set_index(
        "to_run")
    assert cr.loc["sept", "significant"] and not cr.loc["june", "significant"] and cr.loc["sept", "change"] < -50
    assert cr.loc["sept", "paired"] == 40 and (changes.low.dropna() >= -100).all()
    assert (changes.high.dropna() <= 100).all()
    values = pd.read_csv(page.parent / "drift_values.csv")
    assert values[values.metric.isin(["CR", "NCR"])].low.min() >= 0 and values.high.max() <= 100
    from selenium.webdriver.common.by import By
    from groundbench.collect.browser import make_driver
    drv = make_driver(None, headless=True, window=(1366, 1000))
    try:
        drv.get(page.as_uri())
        imgs = drv.find_elements(By.TAG_NAME, "img")
        assert imgs and all(drv.execute_script("return arguments[0].naturalWidth", i) > 300 for i in imgs)
        assert "Significant trends and changes (" in drv.find_element(By.TAG_NAME, "body").text
        SHOTS.mkdir(exist_ok=True)
        drv.save_screenshot(str(SHOTS / "drift.png"))
    finally:
        drv.quit()
