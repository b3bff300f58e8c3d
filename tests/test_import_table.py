"""Your own answers in (issue 14): the table import through a parameter file, on a spreadsheet with awkward headers that
we write here and on the shipped real ChatGPT Search and Perplexity answers; the parser's agreement with the
hand-checked sentence labels is the figure the README prints."""
import json

import pandas as pd
import pytest
import yaml

from conftest import ROOT, groundbench, user_docs
from groundbench.collect.table import import_table, import_tables, segment_agreement

ASB = yaml.safe_load((ROOT / "papermill_params" / "ai-search-benchmark.yaml").read_text())
LABELS = json.loads((ROOT / "tests" / "fixtures" / "segment_labels" / "ai_search_benchmark.json").read_text())


def awkward_csv(path):
    "One row per answer, one cited URL per row, headers with a space, a newline and a trailing space."
    pd.DataFrame({"AI tool ": ["Tool A", "Tool A", "Tool B"],
                  "Question\n(as asked)": ["Is the moon made of cheese?", "Did X win?", "Is the moon made of cheese?"],
                  "Answer text": ["No, it is rock [1]. Samples were returned.", "Yes, in 2020.¹", "No. It is a myth."],
                  "Cited URL ": ["https://www.nasa.gov/moon", "https://www.reuters.com/x?utm_source=a", "https://www.facebook.com/p/1"],
                  "Collected on": ["2025-03-01", "2025-03-01", "2025-11-02"], "Notes, etc.": ["n1", "n2", "n3"]}
                 ).to_csv(path, index=False)
    return {"path": str(path), "assistant": "AI tool", "question": "question (as asked)", "answer": "Answer text",
            "urls": "Cited URL", "collected_at": "Collected on", "meta": ["Notes, etc."]}


@pytest.mark.slow
def test_awkward_spreadsheet_runs_through_collect_and_credibility_with_a_mapping_only(tmp_path):
    spec = {"run_id": "mine", "stages": ["20_collect", "40_credibility"],
            "parameters": {"source": "table", "sample": 0, "import_tables": [awkward_csv(tmp_path / "answers.csv")]},
            "settings": {}}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(spec))
    groundbench("run", tmp_path / "mine.yaml", "--runs-dir", tmp_path / "runs", check=True)
    run = tmp_path / "runs" / "mine"
    convs = [json.loads(l) for l in (run / "20_collect" / "conversations.jsonl").read_text().splitlines()]
    assert [c["provider"] for c in convs] == ["Tool A", "Tool A", "Tool B"]
    assert [c["segment_rule"] for c in convs] == ["markers", "markers", "all_citations"]
    assert convs[1]["citations"][0]["url"] == "https://www.reuters.com/x"          # tracking parameter removed
    meta = pd.read_parquet(run / "20_collect" / "imported_answers.parquet")
    assert meta["meta_Notes, etc."].tolist() == ["n1", "n2", "n3"]
    m = json.loads((run / "manifest.json").read_text())["stages"]["20_collect"]["counts"]["table_import"]
    assert m["answers"] == 3 and m["segment_rules"] == {"markers": 2, "all_citations": 1}
    assert m["markers_found"] == {"brackets": 1, "superscripts": 1}
    t2 = pd.read_csv(run / "40_credibility" / "table_2.csv", dtype=str)
    assert list(t2.columns) == ["Measure", "Tool A", "Tool B"]
    t1 = pd.read_csv(run / "40_credibility" / "table_1.csv", dtype=str)
    assert t1.Group.tolist()[0] == "Overall" and len(t1) == 3                      # no topics or roles: no empty rows
    base = t1.set_index("Group").loc["Rated citations, the base of CR and NCR (of all cited)"]   # what CR is of
    assert base["Tool A CR"] == "2 of 2 (100%)" and base["Tool B CR"] == "1 of 1 (100%)"


@pytest.mark.parametrize("ext", ["xlsx", "parquet", "jsonl"])
def test_the_same_answers_from_excel_parquet_and_jsonl(tmp_path, ext):
    m = awkward_csv(tmp_path / "a.csv")
    df = pd.read_csv(tmp_path / "a.csv", dtype=str)
    p = tmp_path / f"a.{ext}"
    if ext == "xlsx": df.to_excel(p, index=False)
    elif ext == "parquet": df.to_parquet(p)
    else: df.to_json(p, orient="records", lines=True, force_ascii=False)
    got = import_table(p, {k: v for k, v in m.items() if k != "path"})
    want = import_table(tmp_path / "a.csv", {k: v for k, v in m.items() if k != "path"})
    assert [c.conversation_id for c in got.conversations] == [c.conversation_id for c in want.conversations]


def test_one_row_per_citation_and_bad_rows(tmp_path):
    p = tmp_path / "long.csv"
    p.write_text("id,bot,answer,url\n"
                 "a1,X,Claim one [1]. Claim two [2].,https://a.org/1\n"
                 "a1,X,Claim one [1]. Claim two [2].,https://b.org/2\n"
                 "a2,X,Other.,https://c.org\n"
                 "a1,X,A different text.,https://d.org\n", encoding="utf-8")
    m = {"answer_id": "id", "assistant": "bot", "answer": "answer", "urls": "url"}
    with pytest.raises(ValueError,
                       match=r"long.csv: row 5: column 'answer' \(answer\): answer id 'a1' was seen at row 2"):
        import_table(p, m)
    imp = import_table(p, m, skip_bad_rows=True)
    assert [len(c.citations) for c in imp.conversations] == [2, 1]
    assert [s.citation_indices for s in imp.conversations[0].segments] == [(1,), (2,)]
    assert imp.rejected.row.tolist() == [5] and "different answer" in imp.rejected.reason[0]
    p.write_bytes(b"bot,answer\nX,caf\xe9 ok\n")
    with pytest.raises(ValueError, match="long.csv: line 2: bytes at offset .* are not utf-8"):
        import_table(p, {"assistant": "bot", "answer": "answer"})
    cp1252 = import_table(p, {"assistant": "bot", "answer": "answer", "encoding": "cp1252"})
    assert cp1252.conversations[0].answer_text == "café ok"
    with pytest.raises(ValueError, match="field 'urls': no column 'links'"):
        import_table(p, {"assistant": "bot", "answer": "answer", "urls": "links", "encoding": "cp1252"})


def test_real_chatgpt_search_and_perplexity_answers_import_with_the_shipped_mapping():
    imp = import_tables(ASB["parameters"]["import_tables"], ROOT)
    c = imp.counts
    assert c["answers"] == 302 and [f["answers"] for f in c["files"]] == [202, 100]
    assert c["markers_found"]["publisher_lines"] > 400 and c["markers_found"]["glued"] > 300
    # publisher lines matched to a citation
    assert c["unresolved_pills"] <= 2
    assert sum(c["segment_rules"].values()) == 302


def test_segment_agreement_with_the_hand_labels_is_what_the_readme_says():
    imp = import_tables(ASB["parameters"]["import_tables"], ROOT)
    t = segment_agreement(imp.conversations, LABELS["answers"],
                          dict(zip(imp.answers.conversation_id, imp.answers.answer_id)))
    assert t.answers.tolist() == [20, 20]
    readme = user_docs()
    for r in t.itertuples():
        line = (f"| {r.assistant} | {r.answers} | {r.sentences} | {r.sentences_agree} "
                f"({r.sentence_agreement_pct:.1f}%) | {r.answers_agree} |")
        assert line in readme, f"README's segment agreement row for {r.assistant} should read: {line}"


def _readme_row(label):
    line = next(l for l in user_docs().splitlines() if l.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


@pytest.mark.slow
def test_readme_headline_figures_of_the_real_answers_are_what_a_run_computes(tmp_path):
    # the sources stage changes nothing here
    spec = {**ASB, "stages": ["20_collect", "40_credibility", "80_report"],
            # the README's table: our rules (the paper's: test_credibility.py)
            "settings": {"credibility.rules": "full"}}
    (tmp_path / "asb.yaml").write_text(yaml.safe_dump(spec))
    groundbench("run", tmp_path / "asb.yaml", "--runs-dir", tmp_path / "runs", check=True)
    run = tmp_path / "runs" / ASB["run_id"]
    cred = run / "40_credibility"
    t1 = pd.read_csv(cred / "table_1.csv", dtype=str).set_index("Group")
    t2 = pd.read_csv(cred / "table_2.csv", dtype=str).set_index("Measure")
    t11 = pd.read_csv(cred / "table_11.csv", dtype=str)
    for k, a in enumerate(["ChatGPT Search", "Perplexity"]):
        assert _readme_row("CR, % (per-conversation mean ± 1.96 SE)")[k] == t1.loc["Overall", f"{a} CR"]
        assert _readme_row("NCR, %")[k] == t1.loc["Overall", f"{a} NCR"]
        cites = f"{t2.loc['Total sources', a]} ({t2.loc['Conversations', a]})"
        assert _readme_row("citations (conversations)")[k] == cites
        assert _readme_row("fact-checker citations, %")[k] == t2.loc["Overall FC citations (%)", a]
        assert _readme_row("social media citations, %")[k] == t2.loc["Social media citations (%)", a]
        top = ", ".join(f"{o if isinstance(o, str) and o else d} {n}" for o, d, n in    # the name, else the domain
                        t11[[f"{a} Outlet", f"{a} Domain", f"{a} Count"]].head(3).itertuples(index=False))
        assert _readme_row("top cited domains")[k] == top
    c = pd.read_parquet(cred / "citations.parquet")
    readme = user_docs()
    share = c.groupby("assistant").classified.mean()
    assert (f"Only {round(100 * share['ChatGPT Search'])}% (ChatGPT Search) and "
            f"{round(100 * share['Perplexity'])}% (Perplexity)") in readme
    sm = c[(c.assistant == "Perplexity") & (c.category == "social_media")]
    assert (f"mostly Reddit ({(sm.domain == 'reddit.com').sum()} of {len(sm)}) and "
            f"Stack Overflow ({(sm.domain == 'stackoverflow.com').sum()})") in readme
    m = json.loads((run / "manifest.json").read_text())["stages"]["20_collect"]["counts"]["table_import"]
    found, rules = m["markers_found"], m["segment_rules"]
    said = (f"{m['answers']} answers with {m['citations']:,} citations; publisher lines matched "
            f"{found['publisher_lines']} times ({m['unresolved_pills']} left unresolved), glued digits "
            f"{found['glued']} times, `【n】` {found['brackets']} times; segment rules: {rules['markers']} `markers`, "
            f"{rules['all_citations']} `all_citations`, {rules['no_citations']} `no_citations`")
    assert said in readme, said

    cmp = pd.read_csv(run / "report" / "comparison_1.csv")                       # ChatGPT Search (A) vs Perplexity (B)
    row = lambda m: cmp[(cmp.metric == m) & (cmp.group == "overall")].iloc[0]
    cr, share, nc = row("CR_conv"), row("CR"), row("NCR_conv")
    assert f"{cr.pooled_a:.2f}" == t1.loc["Overall", "ChatGPT Search CR"].split(" ± ")[0]   # Table 1's estimator
    assert round(cr["diff"], 6) == round(cr.b_value - cr.a_value, 6) and cr.low < cr["diff"] < cr.high
    assert cr.paired == 37 and cr.design == "paired on 37 of 194 claims"    # the questions both answered: paired
    page = (run / "report" / "index.html").read_text()
    assert "Comparison 1: Perplexity vs ChatGPT Search" in page
    # the run says what it is, on the report
    assert "not the paper&#x27;s misinformation claims" in page
    tell = lambda r: "" if r.significant else ": a difference this sample cannot tell"
    said = (f"Perplexity's per-conversation CR is {abs(cr['diff']):.2f} points below ChatGPT Search's on the "
            f"{cr.paired} questions both answered (claim-weighted and paired; 95% interval {cr.low:.2f} to "
            f"{cr.high:.2f}, Holm-adjusted p {cr.p_holm:.3f}{tell(cr)}); Table 1's estimator over all their answers, "
            f"most of them to questions only one of them answered, puts them {abs(cr.pooled_diff):.2f} points apart "
            f"({cr.pooled_low:.2f} to {cr.pooled_high:.2f}), and the pooled share of credible citations "
            f"{share.pooled_diff:.2f} points ({share.pooled_low:.2f} to {share.pooled_high:.2f}). Their "
            f"per-conversation NCR differ by {nc['diff']:.2f} points ({nc.low:.2f} to {nc.high:.2f}{tell(nc)})")
    assert said in user_docs(), said
    quoted = (f"Perplexity's per-conversation CR {abs(cr['diff']):.2f} points below ChatGPT Search's, claim-weighted "
              f"and paired on the {cr.paired} questions both answered, 95% interval {cr.low:.2f} to {cr.high:.2f}, "
              f"Holm-adjusted p {cr.p_holm:.3f} (the report's `comparison_1`)")
    assert quoted in (ROOT / "README.md").read_text(), quoted              # the README's "Which number to report"


TOW = ("tool,answer,sources\nBot,Yes [1][2].,\"www.bbc.co.uk/news/1; https://apnews.com/x\"\n"
       "Bot,No.,no source\nBot2,Maybe [1].,reuters.com\n")


@pytest.mark.slow
def test_scheme_less_urls_and_no_source_cells_keep_every_answer_and_run_and_status_say_so(tmp_path):
    "A Tow Center-like table (issue 29): host-only URLs and 'no source' cells; bad_urls drop_url and repair."
    src = tmp_path / "tow.csv"
    src.write_text(TOW)
    refused = groundbench("import", src, "--out", tmp_path / "a", "--map", "assistant=tool", "--map", "answer=answer",
                          "--map", "urls=sources")
    assert refused.returncode != 0 and "bad_urls: drop_url or repair keep the answer" in refused.stderr
    p = groundbench("import", src, "--out", tmp_path / "b", "--map", "assistant=tool", "--map", "answer=answer",
                    "--map", "urls=sources", "--map", "bad_urls=repair", check=True)
    # "no source" is one cell dropped (issue 54: it was counted as two, a word each)
    assert "3 answers, 3 citations" in p.stdout and "cited URLs: 2 repaired, 1 dropped" in p.stdout, p.stdout
    changes = pd.read_csv(tmp_path / "b" / "url_changes.csv")
    assert changes.action.tolist() == ["repaired", "dropped", "repaired"]
    spec = {"run_id": "tow", "stages": ["20_collect"], "parameters": {"source": "table", "sample": 0, "import_tables": [
        {"path": str(src), "assistant": "tool", "answer": "answer", "urls": "sources", "bad_urls": "drop_url"}]}}
    (tmp_path / "tow.yaml").write_text(yaml.safe_dump(spec))
    run = groundbench("run", tmp_path / "tow.yaml", "--runs-dir", tmp_path / "runs", "--no-estimate", check=True)
    line = "import: 0 rows rejected, 0 cited URLs repaired, 3 dropped"
    assert line in run.stdout, run.stdout
    assert line in groundbench("status", tmp_path / "runs" / "tow", check=True).stdout
    convs = (tmp_path / "runs" / "tow" / "20_collect" / "conversations.jsonl").read_text().splitlines()
    assert len(convs) == 3 and (tmp_path / "runs" / "tow" / "20_collect" / "url_changes.csv").exists()
    spec["parameters"]["sample"] = 2  # a sample of the table is said, in the run's summary and in status
    (tmp_path / "tow.yaml").write_text(yaml.safe_dump(spec))
    run = groundbench("run", tmp_path / "tow.yaml", "--runs-dir", tmp_path / "runs2", "--no-estimate", check=True)
    assert "sample: 2 of the 3 imported answers kept" in run.stdout, run.stdout


@pytest.mark.slow
def test_expertqa_and_tables_in_one_run_and_the_paper_rows_say_what_was_asked_and_when(tmp_path):
    """The demo's shape, by the stages' own functions (no model): ExpertQA answers and a table's answers collected in
    one run (each sampled), rated, and reported; the table's assistant, mapped to a paper column, gets paper-vs-run
    rows labelled `other questions` and the month its mapping gives, and the estimate plans the same conversations."""
    from groundbench.collect.stage import run as collect
    from groundbench.core import load_settings
    from groundbench.credibility.stage import run as rate
    from groundbench.plan.steps import plan_inputs
    from groundbench.report.tables import run as report
    from groundbench.runfolder import Run
    mapping = {**awkward_csv(tmp_path / "answers.csv"), "collected_on": "2025-03"}
    del mapping["collected_at"]
    r = Run.open("both", tmp_path / "runs")
    params = {"source": ["expertqa", "table"], "sample": 6, "import_tables": [mapping]}
    out = collect(r.dir, **params)
    convs = [json.loads(l) for l in (out.folder / "conversations.jsonl").read_text().splitlines()]
    providers = [c["provider"] for c in convs]
    assert providers.count("expertqa") == 6 and providers[6:] == ["Tool A", "Tool A", "Tool B"]  # in source order
    assert {c["collected_at"] for c in convs[6:]} == {"2025-03"}
    assert (out.folder / "sources_presupplied.parquet").exists() and "conversations.jsonl" in out.files
    inp = plan_inputs(["20_collect"], lambda s: params if s == "20_collect" else {}, load_settings(), None)
    assert [c.conversation_id for c in inp.convs] == [c["conversation_id"] for c in convs]   # the estimate's view
    rate(r.dir, n_boot=50)
    pv = report(r.dir, n_boot=50, paper_assistants={"Tool A": "Perplexity"}).table
    assert set(pv.run_assistant) == {"Tool A"} and set(pv.group) == {"Overall"}      # no topic or role to compare
    assert set(pv.questions) == {"other questions"} and set(pv.collected) == {"2025-03"}
    with pytest.raises(ValueError, match="one source, or a list of expertqa and table"):
        collect(r.dir, source=["expertqa", "browser"])


def test_identical_refusals_without_a_question_column_are_kept_and_said(tmp_path):
    """Issue 45, the Tow Center-like case: an audit spreadsheet with no question column, where several answers are the
    same refusal. Each row stays an answer of its own (merging would change Table 2's refusal counts), the screen says
    so, and a URL repair is said too; `--map duplicates=merge` merges them, and says that instead."""
    rows = [{"Tool": "Grok", "Answer": "I can't help with that.", "URLs": ""} for _ in range(3)]
    rows += [{"Tool": "Grok", "Answer": f"Answer {i} [1].", "URLs": f"example{i}.org/a"} for i in range(3)]
    pd.DataFrame(rows).to_csv(tmp_path / "audit.csv", index=False)
    maps = ["--map", "answer=Answer", "--map", "assistant=Tool", "--map", "urls=URLs", "--map", "bad_urls=repair"]
    p = groundbench("import", tmp_path / "audit.csv", "--out", tmp_path / "kept", *maps, check=True)
    assert p.stdout.startswith("6 answers"), p.stdout
    assert "2 rows repeat an earlier answer (same assistant, question and answer): kept" in p.stdout, p.stdout
    assert "cited URLs: 3 repaired" in p.stdout, p.stdout
    convs = [json.loads(x) for x in (tmp_path / "kept" / "conversations.jsonl").read_text().splitlines()]
    assert len({c["conversation_id"] for c in convs}) == 6
    assert sum(c["refused"] for c in convs) == 3
    m = groundbench("import", tmp_path / "audit.csv", "--out", tmp_path / "merged", *maps, "--map", "duplicates=merge",
                    check=True)
    assert m.stdout.startswith("4 answers") and "2 repeated answers merged into the earlier one" in m.stdout, m.stdout
    bad = groundbench("import", tmp_path / "audit.csv", "--out", tmp_path / "x", *maps, "--map", "duplicates=drop")
    assert bad.returncode == 2 and "duplicates 'drop': use keep or merge" in bad.stderr, bad.stderr


def test_rows_that_continue_an_answer_are_counted_and_said(tmp_path):
    """Issue 53: consecutive rows with the same assistant, question and answer, the second adding citations, were folded
    into one answer while the screen said nothing of it (duplicates_merged 0, 'kept apart')."""
    src = tmp_path / "long.csv"
    pd.DataFrame({"tool": ["Bot", "Bot", "Bot"], "q": ["Q1?", "Q1?", "Q2?"], "a": ["Yes [1][2].", "Yes [1][2].", "No."],
                  "url": ["https://www.reuters.com/a", "https://apnews.com/b", "https://www.bbc.com/c"]}
                 ).to_csv(src, index=False)
    p = groundbench("import", src, "--out", tmp_path / "o", "--map", "assistant=tool", "--map", "question=q",
                    "--map", "answer=a", "--map", "urls=url", check=True)
    counts = json.loads((tmp_path / "o" / "import_counts.json").read_text())
    assert (counts["answers"], counts["citations"], counts["rows_continued"]) == (2, 3, 1)
    assert "1 rows continued the answer above them" in p.stdout, p.stdout


def test_a_lone_surrogate_is_blamed_on_its_column_and_spans_in_bytes_or_utf16_land_on_the_same_text(tmp_path):
    """Issue 62, weak cases of round four: a JSON file's broken escape (half of a character) was blamed on the URL
    column or raised a bare UnicodeEncodeError; a span counted in UTF-8 bytes (Google's grounding) or in UTF-16 units
    (JavaScript) was read as characters: placed wrongly after an emoji, or outside the answer."""
    rows = [{"bot": "X", "q": "Q?\ud800", "answer": "Yes [1].", "links": ["https://a.org"]},
            {"bot": "X", "q": "Q2?", "answer": "No [1].", "links": [["https://b.org/\udc00"]]},
            {"bot": "X", "q": "Q3?", "answer": "Maybe [1].", "links": ["https://c.org"]}]
    p = tmp_path / "a.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    m = {"assistant": "bot", "question": "q", "answer": "answer", "urls": "links"}
    with pytest.raises(ValueError, match=r"a.jsonl: row 1: column 'q' \(question\): a lone UTF-16 surrogate"):
        import_table(p, m)
    imp = import_table(p, m, skip_bad_rows=True)
    assert [c.prompt_text for c in imp.conversations] == ["Q3?"] and len(imp.rejected) == 2
    assert "column 'links' (urls)" in imp.rejected.reason[1]
    answer = "Le vaccin 💉 est sûr. Il protège."
    first = answer[:answer.index(".") + 1]
    for units, end in (("utf8_bytes", len(first.encode())), ("utf16", len(first.encode("utf-16-le")) // 2)):
        p.write_text(json.dumps({"bot": "X", "answer": answer, "cites": [
            {"url": "https://a.org", "start": 0, "end": end}]}) + "\n", encoding="utf-8")
        imp = import_table(p, {"assistant": "bot", "answer": "answer", "urls": "cites", "start_key": "start",
                               "end_key": "end", "span_units": units})
        segs = imp.conversations[0].segments
        assert [answer[s.start:s.end] for s in segs if not s.uncited] == [first], (units, segs)
    with pytest.raises(ValueError, match="span_units 'bytes': use characters, utf8_bytes, utf16"):
        import_table(p, {"assistant": "bot", "answer": "answer", "span_units": "bytes"})
