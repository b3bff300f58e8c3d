"""The 20_collect stage through `groundbench run`: the full ExpertQA import offline, and browser collection
of seed prompts through a local fixture site (real headless Chromium)."""
import json

import pandas as pd
import yaml
import pytest

from conftest import groundbench
from fixture_site import FixtureSite
from groundbench.core import Conversation, read_records


@pytest.mark.slow
def test_expertqa_full_import(tmp_path):
    spec = tmp_path / "eqa.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "eqa", "stages": ["20_collect"],
                                    "parameters": {"source": "expertqa", "sample": 0}}))
    groundbench("run", spec, "--runs-dir", tmp_path / "runs", check=True)
    out = tmp_path / "runs/eqa/20_collect"
    convs = read_records(out / "conversations.jsonl", Conversation)
    assert len(convs) == 479 and len({(c.prompt_id, c.model) for c in convs}) == 479
    claims = pd.read_parquet(out / "expert_claims.parquet")
    assert len(claims) == 2788 and int(claims.has_passage.sum()) == 1765
    src = pd.read_parquet(out / "sources_presupplied.parquet")
    assert src.presupplied.all() and (src.text.str.len() > 0).all()
    m = json.loads((tmp_path / "runs/eqa/manifest.json").read_text())
    assert m["stages"]["20_collect"]["counts"]["expertqa"]["rows"] == 885
    counts = pd.read_csv(out / "conversation_counts.csv")
    assert counts.conversations.sum() == 479 and counts.citations.sum() == 2738
    # the per-system counts the README reports
    assert counts.set_index("model").conversations.to_dict() == {"bing_chat": 108, "post_hoc_sphere_gpt4": 93,
                                                                  "post_hoc_gs_gpt4": 91, "rr_gs_gpt4": 91,
                                                                  "rr_sphere_gpt4": 59, "gpt4": 37}
    assert len(src) == 1417


@pytest.mark.chromium
@pytest.mark.slow
def test_browser_collection_stage_on_fixture(tmp_path):
    with FixtureSite("perplexity") as site:
        spec = tmp_path / "p.yaml"
        spec.write_text(yaml.safe_dump({"run_id": "p", "stages": ["10_claims", "20_collect"], "parameters": {
            "question_rewrite_sample": 0, "source": "browser", "provider": "perplexity", "sample": 3,
            "base_url": site.url, "delay_s": 0}}))
        groundbench("run", spec, "--runs-dir", tmp_path / "runs", check=True)
        assert sum(site.sent.values()) == 3
        groundbench("run", spec, "--runs-dir", tmp_path / "runs", check=True)  # resumes: nothing sent again
        assert sum(site.sent.values()) == 3
    out = tmp_path / "runs/p/20_collect"
    convs = read_records(out / "conversations.jsonl", Conversation)
    assert len(convs) == 3 and all(len(c.citations) == 3 for c in convs)
    prompts = pd.read_parquet(out / "prompts.parquet")
    assert prompts.topic.nunique() == 3  # the sample is spread over topics and roles
    m = json.loads((tmp_path / "runs/p/manifest.json").read_text())
    assert m["stages"]["20_collect"]["counts"]["archived_before"] == 3
