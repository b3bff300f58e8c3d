"""Bring your own page text and spans (issue 54): a constructed JSON answer set in the shape of a 2023 generative-search
audit (nested citations with character spans, archived page text, the evidence annotators copied, a folder of archived
pages and a WARC) imported with a mapping only, then groundedness and SourceCheckup run on it with no fetching: every
text the judges read is the dataset's, and every segment is exactly its span."""
import io
import json

import pandas as pd
import pytest
import yaml
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from conftest import groundbench

WHO = ("<html><head><title>Rougeole</title></head><body><nav>Accueil Menu Contact</nav><article><h1>Rougeole</h1><p>"
       + "Le vaccin ROR protège contre la rougeole, les oreillons et la rubéole. " * 8
       + "Deux doses du vaccin sont efficaces à environ 97 % contre la rougeole.</p></article></body></html>")
NIH = ("<html><body><article><p>" + "Vitamin A supplementation reduces measles deaths in young children. " * 10
       + "</p></article></body></html>")
A1 = "Le vaccin ROR est sûr 💉 et efficace. Deux doses protègent à 97 % contre la rougeole."
A2 = "Vitamin A supplements reduce measles deaths in children. Garlic does not cure measles. 麻疹疫苗很安全。"


def span(answer, sentence):
    "The character span of `sentence` in `answer` (Python's code points, which the mapping documents)."
    a = answer.index(sentence)
    return a, a + len(sentence)


def dataset(folder):
    "answers.json (nested citations, spans, page text, evidence), pages/ with index.csv, and crawl.warc.gz."
    (folder / "pages").mkdir(parents=True)
    (folder / "pages" / "who.html").write_text(WHO, encoding="utf-8")
    (folder / "pages" / "index.csv").write_text("url,file\nhttps://www.who.int/fr/rougeole,who.html\n")
    with open(folder / "crawl.warc.gz", "wb") as f:
        w = WARCWriter(f, gzip=True)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record("https://www.nih.gov/vitamin-a?utm_source=chat", "response",
                                            payload=io.BytesIO(NIH.encode()), http_headers=http))
    s1 = span(A1, "Le vaccin ROR est sûr 💉 et efficace.")
    s2 = span(A1, "Deux doses protègent à 97 % contre la rougeole.")
    t1 = span(A2, "Vitamin A supplements reduce measles deaths in children.")
    t2 = span(A2, "Garlic does not cure measles.")
    t3 = span(A2, "麻疹疫苗很安全。")
    rows = [
        {"id": "q1", "system": "perplexity.ai", "query": "Le vaccin ROR est-il sûr ?", "answer": A1, "citations": [
            {"link_target": "https://www.who.int/fr/rougeole", "title": "OMS", "start": s1[0], "end": s1[1]},
            {"link_target": "https://www.cdc.gov/mmr", "title": "CDC", "start": s2[0], "end": s2[1],
             "page": "Two doses of MMR vaccine are about 97% effective at preventing measles. " * 10}]},
        {"id": "q2", "system": "YouChat", "query": "Does vitamin A help with measles?", "answer": A2, "citations": [
            {"link_target": "https://www.nih.gov/vitamin-a?utm_source=chat", "title": "NIH", "start": t1[0],
             "end": t1[1]},
            {"link_target": "https://example.org/garlic", "title": "Garlic", "start": t2[0], "end": t2[1],
             "evidence": "There is no evidence that garlic cures measles or any viral infection."},
            {"link_target": "https://zh.example.org/mmr", "title": "疫苗", "start": t3[0], "end": t3[1],
             "evidence": "麻疹、腮腺炎和风疹联合疫苗是安全有效的。"}]}]
    (folder / "answers.json").write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    return rows


@pytest.mark.slow
def test_imported_spans_page_text_evidence_folder_and_warc_feed_groundedness_and_sourcecheckup_offline(tmp_path):
    rows = dataset(tmp_path / "data")
    mapping = {"path": str(tmp_path / "data" / "answers.json"), "assistant": "system", "question": "query",
               "answer": "answer", "answer_id": "id", "urls": "citations", "url_key": "link_target",
               "text_key": "page", "evidence_key": "evidence", "start_key": "start", "end_key": "end",
               "page_folder": "pages", "page_warc": "crawl.warc.gz"}
    spec = {"run_id": "byo", "stages": ["20_collect", "30_sources", "50_groundedness", "65_sourcecheckup"],
            "parameters": {"source": "table", "sample": 0, "fetch": False, "methods": ["ours"],
                           "compare_variants": [], "import_tables": [mapping]}}
    (tmp_path / "byo.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    groundbench("run", tmp_path / "byo.yaml", "--runs-dir", tmp_path / "runs", check=True, timeout=900)
    run = tmp_path / "runs" / "byo"

    convs = {c["provider"]: c for c in map(json.loads, (run / "20_collect" / "conversations.jsonl").open())}
    for r in rows:                                    # every segment is its span, cited by its own item, nothing else
        c = convs[r["system"]]
        assert c["segment_rule"] == "spans" and c["answer_text"] == r["answer"]
        want = [(x["start"], x["end"], r["answer"][x["start"]:x["end"]], [k]) for k, x in enumerate(r["citations"], 1)]
        got = [(s["start"], s["end"], s["text"], s["citation_indices"]) for s in c["segments"] if not s["uncited"]]
        assert got == want
    assert [x["url"] for x in convs["YouChat"]["citations"]][0] == "https://www.nih.gov/vitamin-a"   # cleaned

    src = pd.read_parquet(run / "30_sources" / "sources.parquet").set_index("url")
    assert src.text_origin.to_dict() == {
        "https://www.who.int/fr/rougeole": "page folder: who.html", "https://www.cdc.gov/mmr": "archived text",
        "https://www.nih.gov/vitamin-a": "WARC: crawl.warc.gz", "https://example.org/garlic": "annotator's evidence",
        "https://zh.example.org/mmr": "annotator's evidence"}
    assert src.valid.all()
    who = src.loc["https://www.who.int/fr/rougeole"]
    assert "97 %" in who.text and "Accueil Menu" not in who.text          # our main text of the archived HTML ...
    assert who.text_sourcecheckup.startswith("Rougeole") and "Accueil Menu" in who.text_sourcecheckup   # ... theirs
    assert "measles deaths" in src.loc["https://www.nih.gov/vitamin-a"].text
    fetched = pd.read_parquet(run / "30_sources" / "fetch_records.parquet")
    assert fetched.empty or not set(fetched.url) & set(src.index)            # no dataset page was fetched
    counts = json.loads((run / "manifest.json").read_text())["stages"]["20_collect"]["counts"]["table_import"]
    assert counts["page_texts"] == {"page folder": 1, "archived text": 1, "WARC": 1, "annotator's evidence": 2}

    scores = pd.read_csv(run / "50_groundedness" / "response_scores.csv")
    assert len(scores) == 2 and (scores.verified > 0).all() and not scores.no_page_text.any()
    assert (scores.judge_failed < scores.verified).all()
    pairs = pd.read_parquet(run / "65_sourcecheckup" / "pairs.parquet")
    assert len(pairs) and (pairs.parse_status == "ok").any() and (pairs.chars_given > 0).all()
    sc = pd.read_csv(run / "65_sourcecheckup" / "sourcecheckup.csv").set_index("assistant")
    assert (sc.statements > 0).all() and (sc.url_validity_pct == 100).all()
