"""Credibility: the derived rating tables are exactly what the build script makes; the CLI; the stage on ExpertQA."""
import json
import subprocess
import sys

import pandas as pd
import yaml

from conftest import ROOT, groundbench


def test_derived_tables_are_reproducible(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts/build_credibility_tables.py"), "--out", str(tmp_path)], check=True, capture_output=True)
    committed = ROOT / "data/credibility/derived"
    names = sorted(p.name for p in committed.glob("*.csv"))
    assert names == sorted(p.name for p in tmp_path.glob("*.csv")) and "mbfc.csv" in names
    for n in names:
        assert (tmp_path / n).read_bytes() == (committed / n).read_bytes(), f"{n} differs from what scripts/build_credibility_tables.py makes"
    mbfc = pd.read_csv(committed / "mbfc.csv")
    assert mbfc.key.is_unique and set(mbfc.label) <= {"very high", "high", "mostly factual", "mixed", "low", "very low", "satire", "not rated"}


def test_cli_json_lines():
    p = groundbench("credibility", "https://fr.news-pravda.com/x", "https://pubmed.ncbi.nlm.nih.gov/1/", "https://x.com/a/status/1",
                    "https://www.usatoday.com/news/factcheck/a", "http://169.254.169.254/", "", check=True)
    rows = [json.loads(l) for l in p.stdout.splitlines()]
    assert [r["category"] for r in rows[:4]] == ["disinformation", "publication", "social_media", "fact_checker"]
    assert set(rows[0]) == {"url", "host", "domain", "matched_key", "label", "score", "category", "decided_by"}
    assert rows[4]["decided_by"] == "unrated" or rows[4]["decided_by"].startswith("invalid URL")
    assert rows[5]["decided_by"].startswith("invalid URL") and rows[5]["score"] is None
    alt = json.loads(groundbench("credibility", "--table", "lin2023", "https://www.reuters.com/x", check=True).stdout)
    assert alt["decided_by"].startswith("lin2023") and alt["label"] == "high"
    assert groundbench("credibility", "--table", "nope", "https://a.org").returncode == 2


def test_stage_on_expertqa_sample(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "c", "stages": ["20_collect", "40_credibility"], "parameters": {"source": "expertqa", "sample": 40, "n_boot": 200}}))
    groundbench("run", spec, "--runs-dir", tmp_path / "runs", check=True)
    out = tmp_path / "runs/c/40_credibility"
    for name in ("table_1", "table_2", "table_3", "table_11", "table_12", "table_13", "expert_reliability_crosstab"):
        for ext in ("csv", "md", "tex"): assert (out / f"{name}.{ext}").exists(), f"{name}.{ext}"
    for name in ("figure_2", "figure_9"):
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG" and (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"
    cit = pd.read_parquet(out / "citations.parquet")
    convs = [json.loads(l) for l in (tmp_path / "runs/c/20_collect/conversations.jsonl").read_text().splitlines()]
    assert len(cit) == sum(len(c["citations"]) for c in convs)
    rates = pd.read_csv(out / "rates.csv")
    overall = rates[rates.breakdown == "overall"]
    assert set(overall.assistant) == set(cit.assistant)
    for r in overall.itertuples():
        assert r.classified == int(cit[(cit.assistant == r.assistant) & cit.classified].shape[0])
        assert r.cr_ac_low <= r.cr <= r.cr_ac_high
