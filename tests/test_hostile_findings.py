"""Issue 62 (7-10): findings and drift on degenerate data. Identical sides and full separation get the small-sample
interval of issue 60 (never p = 1e-180 between identical sides, never [100, 100]); dates are read as dates, an
ambiguous one refused with its run named; runs are named by their manifest's run id, the same run twice refused; drift
over runs of one claim, eleven assistants, a run at 100% credible and a run without `collected_at` ends with its
page."""
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import groundbench
from groundbench.core import RecordError
from groundbench.findings.drift import parse_date
from groundbench.findings.models import difference


def test_identical_and_separated_sides_get_a_small_sample_interval_not_a_zero_standard_error():
    claim, side = np.repeat(np.arange(20), 2), np.tile(["A", "B"], 20)
    for y in (np.ones(40), np.full(40, 0.9999999999999999)):     # both 100% credible, as float sums leave them
        d = difference(y, side, claim, "A", "B", "binomial", check=False)
        assert d.diff == 0 and d.p == 1 and d.low < 0 < d.high, d
    d = difference(np.where(side == "A", 1.0, 0.0), side, claim, "A", "B", "binomial", check=False)
    assert d.diff == -1 and d.high > -0.9 and d.low >= -1 and 1e-8 < d.p < 1e-3, d    # separated: wide, p > 0


def test_dates_are_read_as_dates_and_an_ambiguous_one_is_refused_naming_its_run():
    assert parse_date("15.01.2024", "r") > parse_date("2023-12-01", "r")         # not by the text of the dates
    assert parse_date("2024-01-15T23:30:00-02:00", "r") == pd.Timestamp("2024-01-16 01:30")
    with pytest.raises(RecordError, match="run march: date '03.04.2024' is ambiguous"):
        parse_date("03.04.2024", "run march")


def _run(tmp_path, name, date, urls, assistants=11, questions=1, stages=("20_collect", "40_credibility"), first=0):
    "`assistants` answering `questions` questions; the date column left out when `date` is None."
    rows = [{"assistant": f"bot{k:02d}", "question": f"Is claim {q} true?", "answer": "No [1].", "urls": urls,
             **({"date": date} if date else {})} for k in range(assistants) for q in range(first, first + questions)]
    src = tmp_path / f"{name}.csv"
    pd.DataFrame(rows).to_csv(src, index=False)
    table = {"path": str(src), "answer": "answer", "assistant": "assistant", "question": "question", "urls": "urls",
             **({"collected_at": "date"} if date else {})}
    spec = {"run_id": name, "stages": list(stages),
            "parameters": {"source": "table", "sample": 0, "import_tables": [table]}}
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    groundbench("run", tmp_path / f"{name}.yaml", "--runs-dir", tmp_path / "runs", "--no-estimate", check=True)
    return tmp_path / "runs" / name


@pytest.mark.slow
def test_drift_over_one_claim_eleven_assistants_a_full_run_and_no_dates_names_runs_by_their_run_id(tmp_path):
    early = _run(tmp_path, "early", "2024-01-15", "https://www.bbc.com/x")          # 100% credible
    late = _run(tmp_path, "late", None, "https://www.infowars.com/z")               # no collected_at: its start
    a, b = tmp_path / "A" / "study", tmp_path / "B" / "study"                      # one folder name for both
    shutil.copytree(late, a); shutil.copytree(early, b)
    p = groundbench("compare", a, b, "--out", tmp_path / "drift", check=True)
    assert "drift over 2 runs (paired by claim on the 1 claims the runs share)" in p.stdout, p.stdout
    info = json.loads((tmp_path / "drift" / "drift.json").read_text())
    assert info["runs"] == ["early", "late"]                      # run ids, in date order (the copy's start is later)
    changes = pd.read_csv(tmp_path / "drift" / "drift.csv")
    cr = changes[(changes.metric == "CR") & (changes.test == "change")]
    assert len(cr) == 11 and set(cr.assistant) == {f"bot{k:02d}" for k in range(11)}
    assert (cr.change == -100).all() and not cr.significant.any()        # one claim: no test can say more
    assert (tmp_path / "drift" / "index.html").exists()
    first = json.loads((b / "20_collect" / "conversations.jsonl").read_text().splitlines()[0])["conversation_id"]
    (b / "60_sourcebench").mkdir(exist_ok=True)             # a corrupt score: refused by name, never averaged
    pd.DataFrame({"conversation_id": [first], "weighted": [float("inf")]}).to_parquet(
        b / "60_sourcebench" / "page_scores.parquet")
    inf = groundbench("compare", a, b, "--out", tmp_path / "drift2")
    assert inf.returncode == 2 and "metric SourceBench: 1 observations are not finite" in inf.stderr, inf.stderr
    twice = groundbench("compare", a, tmp_path / "A" / "study")
    assert twice.returncode == 2 and "is the same run as" in twice.stderr and "give each run once" in twice.stderr
    shutil.copytree(a, tmp_path / "C" / "study")
    copy = groundbench("compare", a, tmp_path / "C" / "study")
    assert copy.returncode == 2 and "(given twice, or a copy of it)" in copy.stderr, copy.stderr


@pytest.mark.slow
def test_findings_on_a_run_of_one_assistant_without_roles_or_topics_ends_and_says_what_it_can(tmp_path):
    "Issue 63 (1): one assistant, no factor: the levels table, an empty differences table, the stage done."
    run = _run(tmp_path, "solo", "2024-11-01", "https://www.bbc.com/x", assistants=1, questions=12,
               stages=("20_collect", "40_credibility", "75_findings"))
    levels = pd.read_csv(run / "75_findings" / "levels.csv")
    assert "CR" in set(levels.metric) and (levels[levels.metric == "CR"].value == 100).all()
    assert pd.read_csv(run / "75_findings" / "findings.csv").empty
    status = groundbench("status", run, check=True).stdout
    assert "75_findings" in status and "failed" not in status, status


@pytest.mark.slow
def test_compare_of_runs_sharing_no_prompt_says_it_is_unpaired(tmp_path):
    "Issue 63 (3): two audits of different questions: drift and --a/--b both say nothing is paired."
    r1 = _run(tmp_path, "nov", "2024-11-01", "https://www.bbc.com/x", assistants=2, questions=6)
    r2 = _run(tmp_path, "mar", "2025-03-01", "https://www.infowars.com/z", assistants=2, questions=6, first=100)
    out = groundbench("compare", r1, r2, check=True).stdout
    assert "UNPAIRED: these runs share no claim" in out, out
    p = groundbench("compare", r1, r2, "--a", "nov", "--b", "mar", check=True)
    assert "the sides share no claim" in p.stderr and "independent-samples" in p.stderr, p.stderr


@pytest.mark.slow
def test_an_outcome_column_of_your_own_is_tested_like_credibility(tmp_path):
    """Issue 63 (6): an auditor's correctness code per answer (the mapping's `outcomes`) goes through the tested
    differences as `own:correct`, paired by question, and into the tidy export of every observation."""
    rows = [{"assistant": bot, "question": f"Is claim {q} true?", "answer": "No [1].", "urls": "https://www.bbc.com/x",
             "correct": ("yes" if bot == "BotA" or q % 3 == 0 else "no")}
            for bot in ("BotA", "BotB") for q in range(12)]
    src = tmp_path / "audit.csv"
    pd.DataFrame(rows).to_csv(src, index=False)
    table = {"path": str(src), "answer": "answer", "assistant": "assistant", "question": "question", "urls": "urls",
             "outcomes": ["correct"], "collected_on": "2025-03"}
    spec = {"run_id": "audit", "stages": ["20_collect", "40_credibility", "75_findings"],
            "parameters": {"source": "table", "sample": 0, "import_tables": [table]}}
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump(spec))
    groundbench("run", tmp_path / "audit.yaml", "--runs-dir", tmp_path / "runs", "--no-estimate", check=True)
    f = pd.read_csv(tmp_path / "runs" / "audit" / "75_findings" / "findings.csv")
    own = f[(f.metric == "own:correct") & (f.factor == "assistant")].iloc[0]
    assert (own.a, own.b, own.paired, own.unit) == ("BotA", "BotB", 12, "points")
    assert abs(own["diff"] - (4 / 12 - 1) * 100) < 1e-9 and own.high < 0 and own.p < 0.05, own
    obs = pd.read_parquet(tmp_path / "runs" / "audit" / "75_findings" / "observations.parquet")
    assert (obs.metric == "own:correct").sum() == 24 and set(obs.collected_at) == {"2025-03"}
