"""Runs merged (issue 20): a run split into two shards (made apart, e.g. on two machines) and reported together gives
the same tables as the same run made whole."""
import pandas as pd
import yaml
import pytest

from conftest import groundbench

pytestmark = [pytest.mark.slow]

ANSWERS = pd.DataFrame({
    "tool": ["A", "A", "A", "B", "B", "B", "A", "B"],
    "question": [f"Q{i}?" for i in range(8)],
    "answer": ["X is false [1]. Y [2].", "Z [1].", "W is true.", "No [1].", "Yes [1][2].", "Maybe.", "Sure [1].",
               "Fine [1]."],
    "urls": ["https://www.reuters.com/a https://www.infowars.com/b", "https://www.facebook.com/c", "https://www.cdc.gov/d",
             "https://www.snopes.com/e", "https://www.who.int/f https://www.rt.com/g", "https://www.bbc.co.uk/h",
             "https://en.wikipedia.org/wiki/I", "https://www.nytimes.com/j"]})


def _run(tmp, run_id, stages, csv=None, **params):
    p = {"source": "table", "sample": 0, **params}
    if csv is not None:
        p["import_tables"] = [{"path": str(csv), "assistant": "tool", "question": "question", "answer": "answer",
                               "urls": "urls"}]
    (tmp / f"{run_id}.yaml").write_text(yaml.safe_dump({"run_id": run_id, "stages": stages, "parameters": p,
                                                        "settings": {}}))
    groundbench("run", tmp / f"{run_id}.yaml", "--runs-dir", tmp / "runs", check=True)
    return tmp / "runs" / run_id


def test_sharded_run_reports_like_the_whole_run(tmp_path):
    ANSWERS.to_csv(tmp_path / "all.csv", index=False)
    ANSWERS.iloc[::2].to_csv(tmp_path / "s1.csv", index=False)      # each shard holds some answers of both assistants
    ANSWERS.iloc[1::2].to_csv(tmp_path / "s2.csv", index=False)
    whole = _run(tmp_path, "whole", ["20_collect", "40_credibility", "80_report"], tmp_path / "all.csv")
    _run(tmp_path, "shard-1", ["20_collect", "40_credibility"], tmp_path / "s1.csv")
    _run(tmp_path, "shard-2", ["20_collect", "40_credibility"], tmp_path / "s2.csv")
    merged = tmp_path / "runs" / "merged"
    (tmp_path / "merged.yaml").write_text(yaml.safe_dump({"run_id": "merged", "stages": ["80_report"],
                                                          "parameters": {"runs": ["shard-1", "shard-2"]},
                                                          "settings": {}}))
    groundbench("run", tmp_path / "merged.yaml", "--runs-dir", tmp_path / "runs", check=True)
    for t in ("table_1", "table_1_pooled", "table_2", "table_11", "table_12", "table_13", "profile"):
        a = pd.read_csv(whole / "report" / f"{t}.csv", dtype=str, keep_default_na=False)
        b = pd.read_csv(merged / "report" / f"{t}.csv", dtype=str, keep_default_na=False)
        # per-run label only
        a, b = a.drop(columns=["run_id"], errors="ignore"), b.drop(columns=["run_id"], errors="ignore")
        pd.testing.assert_frame_equal(a, b, obj=t)
