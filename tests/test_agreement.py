"""Issue 32's agreement command on constructed labels: two annotators of a judged run (groundedness) and of its scored
pages (SourceBench), labelled through `groundbench annotate` and the label store, and `groundbench agreement` printing
the kappa between them (computed by hand below), the judge against them, the judge beside the two baselines, and the
SourceBench judge's mean absolute error per metric."""
import numpy as np
import pandas as pd
import pytest

from conftest import groundbench
from test_annotate import judged_run
from groundbench.labels.annotate import LabelStore, shared_sample, groundedness_items
from groundbench.labels.agreement import SOURCEBENCH_TASK, sourcebench_items
from groundbench.core import write_table
from groundbench.sourcebench import METRICS


def scored_pages(d):
    "Two pages the SourceBench judge scored (3 on every metric), with their texts."
    urls = ["https://www.cdc.gov/x", "https://blog.example/y"]
    write_table(pd.DataFrame({"conversation_id": ["c1", "c1"], "url": urls, "assistant": ["chatgpt GPT-4o"] * 2,
                              "query": ["Tell me facts."] * 2, "published": ["2025-05-01", ""], "updated": ["", ""],
                              **{m: [3.0, 3.0] for m in METRICS}}), d / "60_sourcebench" / "page_scores.parquet")
    write_table(pd.DataFrame({"conversation_id": ["c1", "c1"], "url": urls, "text": ["CDC page text.", "A blog."]}),
                d / "30_sources" / "sources.parquet")


@pytest.mark.chromium
def test_agreement_prints_kappa_judge_baselines_and_page_quality(tmp_path):
    run = judged_run(tmp_path / "run")
    scored_pages(run)
    # annotator a labels like the judge did; b differs on the Unverifiable item: kappa(a, b) by hand
    # p_o = 5/6; a: 4 S, 1 C, 1 U; b: 5 S, 1 C; p_e = (4*5 + 1*1 + 1*0) / 36 = 21/36;
    # kappa = (30/36 - 21/36) / (15/36) = 0.6
    sample = shared_sample(run, groundedness_items(run), 6)
    judge, first = dict(zip(sample.item_id, sample.judge_label)), sample.item_id[0]
    r = groundbench("annotate", run, "--annotator", "a", "--n", "6", "--label", judge[first], check=True)
    assert f"{first}: {judge[first]} (labels/a.csv)" in r.stdout and "item 2 of 6 (1 labelled)" in r.stdout
    a, b = LabelStore(run, "a"), LabelStore(run, "b")
    for i in sample.item_id:
        if i != first: a.add(i, judge[i])
        b.add(i, "Supported" if judge[i] == "Unverifiable" else judge[i])
    # SourceBench: a page's CR through the command, the rest through the store; a gives 4 everywhere, b 5 and 3
    r = groundbench("annotate", run, "--annotator", "a", "--task", "sourcebench", "--n", "2", "--label", "4",
                    check=True)
    assert ":CR: 4 (labels/sourcebench/a.csv)" in r.stdout and "FA: Factual accuracy" in r.stdout
    pages = sourcebench_items(run).page_id.unique()
    sa, sb = LabelStore(run, "a", SOURCEBENCH_TASK), LabelStore(run, "b", SOURCEBENCH_TASK)
    for p, sc in zip(pages, ("5", "3")):
        for m in METRICS:
            sa.add(f"{p}:{m}", "4", replace=True)
            sb.add(f"{p}:{m}", sc)
    out = groundbench("agreement", run, "--n-boot", "50", check=True).stdout
    pairs = pd.read_csv(run / "labels" / "agreement_annotators.csv")
    assert np.isclose(pairs.kappa.iloc[0], 0.6)
    assert "0.600" in out
    judge = pd.read_csv(run / "labels" / "agreement_judge.csv").set_index("against")
    assert judge.loc["a", "kappa"] == 1.0 and judge.loc["a", "items"] == 6
    base = pd.read_csv(run / "labels" / "agreement_baselines.csv")
    assert base.method.tolist() == ["judge", "word_overlap", "embedding_cosine"] and "two baselines" in out
    pq = pd.read_csv(run / "labels" / "sourcebench" / "agreement_page_quality.csv")
    judge_a = pq[(pq.against == "a") & (pq.method == "judge")].iloc[0]
    assert judge_a[list(METRICS)].tolist() == [1.0] * 8                 # |4 - 3| on every metric of both pages
    assert pq[pq.against == "a vs b"].iloc[0]["Avg"] == 1.0              # |4-5| and |4-3|
    assert "mean absolute error per metric" in out
    # the report shows the people's figures beside the rest
    from groundbench.core import Prompt
    from groundbench.report.tables import load_outputs, write_report
    write_table([Prompt("c", "Health", "fact_checker", 1, "Tell me facts.", prompt_id="p")],
                run / "20_collect" / "prompts.parquet")
    o = load_outputs([run])
    o.citations = None            # this hand-made run's citations table has only the columns the labelling view reads
    write_report(o, run / "report", n_boot=20)
    page = (run / "report" / "index.html").read_text()
    for title in ("People: agreement between the annotators", "beside two non-LLM baselines",
                  "mean absolute error per metric against the people"):
        assert title in page
    assert (run / "report" / "agreement_page_quality.csv").exists()
    # as a person sees it: the section in headless Chromium, a screenshot left in _screenshots/
    from selenium.webdriver.common.by import By
    from conftest import ROOT
    from groundbench.collect.browser import make_driver
    d = make_driver(None, headless=True, window=(1300, 1000))
    try:
        d.get((run / "report" / "index.html").as_uri())
        el = d.find_element(By.XPATH, "//*[contains(text(), 'People: agreement between the annotators')]")
        d.execute_script("arguments[0].scrollIntoView()", el)
        assert el.is_displayed()
        rows = [r.text for r in d.find_elements(By.CSS_SELECTOR, "table tr") if r.text.startswith("a / b")]
        assert rows and "0.6" in rows[0]
        (ROOT / "_screenshots").mkdir(exist_ok=True)
        d.save_screenshot(str(ROOT / "_screenshots" / "report-agreement.png"))
    finally:
        d.quit()


def test_five_concurrent_annotate_writers_keep_five_labels(tmp_path):
    """Issue 44: five `groundbench annotate` processes labelling five items of one annotator at the same moment. Each
    adds its label under a lock to the file as it then is, so all five labels are kept (each process read the file
    before the others wrote, and wrote back what it had read plus its own label, before)."""
    import concurrent.futures as cf
    run = judged_run(tmp_path / "run")
    groundbench("annotate", run, "--annotator", "ann", "--n", "6", check=True)          # the sample, drawn once
    ids = pd.read_csv(run / "labels" / "sample.csv").item_id.tolist()[:5]
    with cf.ThreadPoolExecutor(5) as ex:
        done = list(ex.map(lambda i: groundbench("annotate", run, "--annotator", "ann", "--item", i,
                                                 "--label", "Supported"), ids))
    assert [p.returncode for p in done] == [0] * 5, [p.stderr for p in done]
    labels = pd.read_csv(run / "labels" / "ann.csv")
    assert sorted(labels.item_id) == sorted(ids) and set(labels.label) == {"Supported"}


def _label_after_all_read(run, item, barrier):
    store = LabelStore(run, "ann")       # every writer has read the file (empty) before any of them writes
    barrier.wait(timeout=60)
    store.add(item, "Supported")


def test_five_writers_that_read_before_any_writes_keep_five_labels(tmp_path):
    """The same as five labelling views opened at once: five processes each open the annotator's store, wait until all
    five have read it, then label one item each. A store that wrote back what it had read would keep one label."""
    import multiprocessing as mp
    run = judged_run(tmp_path / "run")
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(5)
    procs = [ctx.Process(target=_label_after_all_read, args=(run, f"u{i}:all", barrier)) for i in range(5)]
    for p in procs: p.start()
    for p in procs: p.join(60)
    assert [p.exitcode for p in procs] == [0] * 5
    assert sorted(pd.read_csv(run / "labels" / "ann.csv").item_id) == [f"u{i}:all" for i in range(5)]


def test_a_labels_file_with_an_item_the_run_does_not_have_is_named_not_dropped(tmp_path):
    "Before: agreement left an unknown item id out of every figure without a word (issue 44, 5)."
    run = judged_run(tmp_path / "run")
    item = groundedness_items(run).item_id.iloc[0]
    (run / "labels").mkdir(exist_ok=True)
    (run / "labels" / "dana.csv").write_text(f"item_id,label\n{item},Supported\nnot-an-item,Contradicted\n")
    p = groundbench("agreement", run, "--n-boot", "20")
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "dana.csv: row 3: item 'not-an-item' is not a groundedness item of this run" in p.stderr, p.stderr
