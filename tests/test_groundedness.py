"""Groundedness: batching and dedup across conversations (mock model, the logic around it), units without
citations and sources without text, and the stage end to end with the real bundled llama.cpp model,
whose rerun makes no model call (on the session's shared small demo run)."""
import json
import shutil

import pandas as pd
import pytest
import yaml

from conftest import groundbench
from groundbench.core import Citation, Conversation, Segment
from groundbench.embed import Embedder, EmbeddingCache
from groundbench.groundedness.judge import SCOPES, judge_units, retrieve, source_chunks
from groundbench.groundedness.metrics import response_scores
from groundbench.groundedness.units import decontextualise, extract_units
from groundbench.llm import LLM, LLMCache, MockBackend


def convs():
    seg = Segment("Vaccines do not change DNA.", (1,), 0, 27)
    a = Conversation("x", "m", "p1", "q", "Vaccines do not change DNA.", (Citation(1, "https://a.org"),), (seg,))
    b = Conversation("x", "m", "p2", "q", "Vaccines do not change DNA.", (Citation(1, "https://b.org"),), (seg,))  # same sentence, same context
    c = Conversation("x", "m", "p3", "q", "No sources here.", (), (Segment("No sources here.", (), 0, 16, True),))
    return [a, b, c]


def respond(r):
    last = r.messages[-1][1]
    if last.startswith("Answer (context)") and "Sentence:" in last:
        return '{"units": [{"text": "%s", "label": "Fact"}]}' % last.split("Sentence: ")[1].rstrip(".")
    if "Unit:" in last: return '{"decontextualised": "%s"}' % last.split("Unit: ")[1]
    return '{"summary": "s", "relation": "r", "label": "Supported"}'


def test_batching_dedup_and_units_without_citations(tmp_path):
    mock = MockBackend("m", respond)
    llm = LLM(mock, LLMCache(tmp_path / "c.sqlite"))
    cs = convs()
    units = extract_units(cs, llm, progress=False)
    assert mock.batches == [2]  # three segments, two distinct requests, one batch
    assert llm.stats["extract_units"]["deduplicated"] == 1
    units, status = decontextualise(units, cs, llm, progress=False)
    assert len(units) == 3 and set(status.values()) == {"ok"}
    sources = pd.DataFrame({"conversation_id": [cs[0].conversation_id, cs[1].conversation_id], "citation_index": [1, 1],
                            "text": ["Vaccines do not change human DNA, experts say. " * 5, ""], "score": [1.0, -1.0]})
    emb = Embedder(cache=EmbeddingCache(tmp_path / "e.sqlite"))
    ev = retrieve(units, source_chunks(sources), emb)
    js = judge_units(units, ev, llm, SCOPES, progress=False)
    by = {(j.unit_id, j.scope): j for j in js}
    u_a, u_b, u_c = units
    assert by[(u_a.unit_id, "all")].label == "Supported" and by[(u_a.unit_id, "non_credible")].skipped == "no evidence"
    assert by[(u_b.unit_id, "all")].skipped == "no evidence"  # its only source has no text: Unverifiable without a call
    assert by[(u_c.unit_id, "all")].skipped == "no evidence"  # no citations at all
    st = llm.stats["judge"]  # only (a, all) and (a, credible) had evidence: the same chunks, so one call serves both
    assert (st["requests"], st["calls"], st["deduplicated"]) == (2, 1, 1)
    r = response_scores(units, js).set_index("conversation_id")
    assert r.loc[cs[0].conversation_id, "gs"] == 1.0 and r.loc[cs[0].conversation_id, "cg"] == 1.0 and r.loc[cs[0].conversation_id, "ncg"] == 0.0
    assert r.loc[cs[2].conversation_id, "gs"] == 0.0 and r.loc[cs[2].conversation_id, "hs"] == 0.5  # one Unverifiable: 0.5 / sqrt(1)


@pytest.mark.slow
def test_stage_with_real_model_and_rerun_without_calls(small_demo, tmp_path):
    """The groundedness stage of the session's small demo (real bundled model, empty cache at its start): calls made,
    failures recorded as such; the stage rerun on a copy of the run makes no model call and encodes nothing."""
    runs, spec, db = small_demo
    out = runs / "a" / "50_groundedness"
    m = json.loads((runs / "a" / "manifest.json").read_text())
    first = m["stages"]["50_groundedness"]["history"][0]["llm"]
    assert first["extract_units"]["calls"] > 0 and m["smoke_run"] is True
    units = [json.loads(l) for l in (out / "units.jsonl").read_text().splitlines()]
    judgments = [json.loads(l) for l in (out / "judgments.jsonl").read_text().splitlines()]
    assert units and all(u["parse_status"] in ("ok", "repaired", "failed") for u in units)
    assert all((u["label"] == "") == (u["parse_status"] == "failed") for u in units)  # failures are recorded, never a default label
    for j in judgments:
        assert j["label"] in ("Supported", "Contradicted", "Unverifiable", "")
        assert (j["label"] == "") == (j["parse_status"] == "failed")
    assert "SMOKE RUN" in (out / "table_4.md").read_text() and (out / "figure_3.png").exists() and (out / "table_14.csv").exists()
    copy = tmp_path / "runs"  # the shared run stays as it was: the rerun works on a copy of the run and of its cache
    shutil.copytree(runs / "a", copy / "a")
    shutil.copytree(db.parent, tmp_path / "cache")
    d = yaml.safe_load(spec.read_text())
    d["settings"]["paths.cache_dir"] = str(tmp_path / "cache")
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(d))
    groundbench("run", tmp_path / "a.yaml", "--runs-dir", copy, "--stages", "50_groundedness", check=True, timeout=900)
    again = json.loads((copy / "a" / "manifest.json").read_text())["stages"]["50_groundedness"]["llm"]
    assert sum(again[s]["calls"] for s in ("extract_units", "decontextualise", "judge")) == 0
    assert again["embedding"]["encoded"] == 0
