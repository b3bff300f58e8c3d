"""People label a run as they would (issue 32): the labelling view opened in a real JupyterLab in headless Chromium,
five items labelled by clicking, the page reloaded and the view resumed; the labels file holds what was clicked. A
screenshot of the view is left in _screenshots/ for a person (docs/images/annotate-jupyterlab.png is one of them)."""
import json
import time

import pandas as pd
import pytest

from conftest import ROOT, jupyterlab

pytestmark = [pytest.mark.slow, pytest.mark.chromium, pytest.mark.jupyterlab]
SHOTS = ROOT / "_screenshots"


def judged_run(d):
    "A run with one answer of six sentences, each a unit the judge labelled in scope all, with one evidence chunk."
    from groundbench.core import Citation, Conversation, Segment, write_jsonl, write_table
    sents = ["Vaccines are tested in trials.", "They are safe for most people.", "The moon is made of cheese.",
             "Water boils at 100 C at sea level.", "Paris is in France.", "Mars has two moons."]
    text = " ".join(sents)
    segs = tuple(Segment(s, (1,), text.index(s), text.index(s) + len(s)) for s in sents)
    c = Conversation("chatgpt", "GPT-4o", "p", "Tell me facts.", text, (Citation(1, "https://www.cdc.gov/x"),), segs)
    write_jsonl([c], d / "20_collect" / "conversations.jsonl")
    write_table(pd.DataFrame({"conversation_id": [c.conversation_id], "citation_index": [1], "label": ["high"]}),
                d / "40_credibility" / "citations.parquet")
    write_jsonl([dict(conversation_id=c.conversation_id, unit_index=i, unit_id=f"u{i}", text=s, label="Fact",
                      segment_index=i) for i, s in enumerate(sents)], d / "50_groundedness" / "units.jsonl")
    verdicts = ["Supported", "Supported", "Contradicted", "Supported", "Unverifiable", "Supported"]
    write_jsonl([dict(unit_id=f"u{i}", scope="all", label=v, skipped="",
                      evidence=dict(unit_id=f"u{i}", scope="all", chunks=[f"Evidence text {i}."], citation_indices=[1],
                                    scores=[0.5])) for i, v in enumerate(verdicts)],
                d / "50_groundedness" / "judgments.jsonl")
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "label", "metadata": {}, "outputs": [],
                     "source": ["from groundbench.labels.annotate import Annotator\n",
                                "Annotator(\".\", \"ann\", n=5)"]}],
          "metadata": {"kernelspec": {"display_name": "groundbench", "language": "python", "name": "groundbench"}},
          "nbformat": 4, "nbformat_minor": 5}
    (d / "label.ipynb").write_text(json.dumps(nb))
    return d


def run_cell(driver):
    "Put the cursor in the notebook's one cell and run it (Shift+Enter), as a person does."
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    deadline, err = time.time() + 90, None
    while time.time() < deadline:   # the kernel connected and idle first: a cell run before that is lost
        if any("| Idle" in e.text for e in driver.find_elements(By.CSS_SELECTOR, ".jp-StatusBar-TextItem")): break
        time.sleep(0.5)
    while time.time() < deadline:
        try:
            driver.find_element(By.CSS_SELECTOR, ".jp-Cell .cm-content").click()
            break
        except Exception as e:  # the editor is not ready yet (the notebook and its kernel are still opening)
            err = e
            time.sleep(0.5)
    else:
        SHOTS.mkdir(exist_ok=True); driver.save_screenshot(str(SHOTS / "annotate-failed.png"))
        raise AssertionError(f"the notebook's cell could not be clicked: {err}")
    ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()


def wait_text(driver, text, timeout=90):
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if any(text in e.text for e in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")): return True
        except StaleElementReferenceException: pass   # an output re-rendered while it was read: read again
        time.sleep(0.5)
    SHOTS.mkdir(exist_ok=True); driver.save_screenshot(str(SHOTS / "annotate-failed.png"))
    outs = [e.text[:300] for e in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")]
    raise AssertionError(f"{text!r} did not appear in the view (outputs: {outs}; see _screenshots/annotate-failed.png)")


def test_five_items_labelled_by_clicking_in_jupyterlab_and_resumed_after_a_reload(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from groundbench.collect.browser import make_driver
    root = tmp_path / "lab"
    run = judged_run(root / "lab-run")
    driver = None
    with jupyterlab(root, tmp_path / "lab-settings") as (base, token):
        try:
            driver = make_driver(None, headless=True, window=(1400, 1000))
            url = f"{base}/lab/tree/lab-run/label.ipynb?{token}"
            driver.get(url)
            run_cell(driver)
            wait_text(driver, "ann: item 1 of 5, 0 labelled")
            sample = pd.read_csv(run / "labels" / "sample.csv").item_id.tolist()
            assert sample[0] == "u2:all"              # the rarest judge labels first: Contradicted, then Unverifiable
            clicks = ["Contradicted", "Unverifiable", "Supported", "Supported", "skip"]
            for k, label in enumerate(clicks):
                button = next(b for b in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output button")
                              if b.text.strip() == label)
                button.click()
                wait_text(driver, f"{k + 1} labelled")
                if k == 1:
                    SHOTS.mkdir(exist_ok=True)
                    driver.save_screenshot(str(SHOTS / "annotate-jupyterlab.png"))
            wait_text(driver, "(all labelled)")
            got = pd.read_csv(run / "labels" / "ann.csv", dtype=str, keep_default_na=False)
            assert got.item_id.tolist() == sample and got.label.tolist() == clicks   # what was clicked, in order
            driver.get(url)                             # reloaded: the same view comes back where it was
            run_cell(driver)
            wait_text(driver, "ann: item 5 of 5, 5 labelled")
            # keys: with the pointer over the item, 1 is the first label (the skipped item becomes Supported), and the
            # left arrow goes back; JupyterLab's own shortcuts (1 would turn a cell into a heading) never see them
            from selenium.webdriver.common.action_chains import ActionChains
            item = driver.find_element(By.XPATH, "//*[contains(text(), 'item 5 of 5')]")
            ActionChains(driver).move_to_element(item).perform()
            ActionChains(driver).send_keys("1").perform()
            wait_text(driver, "(changed from skip)")
            got = pd.read_csv(run / "labels" / "ann.csv", dtype=str, keep_default_na=False)
            assert got.set_index("item_id").label[sample[4]] == "Supported"
            ActionChains(driver).send_keys(Keys.ARROW_LEFT).perform()
            wait_text(driver, "ann: item 4 of 5")
            assert driver.find_elements(By.CSS_SELECTOR, ".jp-MarkdownCell") == []     # the code cell stayed code
            assert (SHOTS / "annotate-jupyterlab.png").stat().st_size > 20_000
        finally:
            if driver is not None: driver.quit()


# Issue 44 (4): the labelling view once printed a stored label unescaped, and an <img onerror> in a labels file ran in
# JupyterLab. Every field the view shows carries markup that would run if it were ever rendered as HTML.
ATTACK = "<img src=x onerror=\"window.__pwned=(window.__pwned||[]).concat(['{}'])\">"


def hostile_run(d):
    "A judged and SourceBench-scored run whose every shown field (of both labelling tasks) carries a script."
    from groundbench.core import Citation, Conversation, Segment, write_jsonl, write_table
    from groundbench.sourcebench import METRICS
    x = ATTACK.format
    sents = [f"Sentence one {x('sentence')}.",
             f"Sentence two {x('sentence')} <script>window.__pwned=['script']</script>."]
    text = " ".join(sents)
    segs = tuple(Segment(s, (1,), text.index(s), text.index(s) + len(s)) for s in sents)
    url = "https://www.cdc.gov/x?a=1'><img src=x onerror=\"window.__pwned=['url']\">"
    c = Conversation("chatgpt", f"GPT {x('assistant')}", "p", f"Prompt {x('prompt')}", text,
                     (Citation(1, url, f"Title {x('title')}"),), segs)
    write_jsonl([c], d / "20_collect" / "conversations.jsonl")
    write_table(pd.DataFrame({"conversation_id": [c.conversation_id], "citation_index": [1],
                              "label": [f"high {x('credibility')}"]}), d / "40_credibility" / "citations.parquet")
    write_jsonl([dict(conversation_id=c.conversation_id, unit_index=i, unit_id=f"u{i}{x('unit_id')}",
                      text=f"Unit {i} {x('unit')}",
                      decontextualised=f"Decontextualised {x('decontextualised')}" * (1 - i),
                      label="Fact", segment_index=i) for i in range(2)], d / "50_groundedness" / "units.jsonl")
    write_jsonl([dict(unit_id=f"u{i}{x('unit_id')}", scope="all", label=v, skipped="",
                      evidence=dict(unit_id=f"u{i}", scope="all", chunks=[f"Chunk {i} {x('chunk')}"],
                                    citation_indices=[1], scores=[0.5]))
                 for i, v in enumerate(["Supported", f"Contradicted {x('judge_label')}"])],
                d / "50_groundedness" / "judgments.jsonl")
    write_table(pd.DataFrame({"conversation_id": [c.conversation_id], "url": [url], "assistant": [f"Bot {x('sb_bot')}"],
                              "query": [f"Query {x('query')}"], "published": [f"2025 {x('date')}"], "updated": [""],
                              **{m: [3.0] for m in METRICS}}), d / "60_sourcebench" / "page_scores.parquet")
    write_table(pd.DataFrame({"conversation_id": [c.conversation_id], "url": [url],
                              "text": [f"Page text {x('page')}"]}),
                d / "30_sources" / "sources.parquet")
    (d / "labels").mkdir(parents=True)
    # a label given earlier with a note that is markup: the view shows the label back ("this one: ...")
    pd.DataFrame({"item_id": [f"u0{x('unit_id')}:all"], "label": ["Supported"], "note": [x("note")]}).to_csv(
        d / "labels" / "ann.csv", index=False)
    cell = ("from IPython.display import display\nfrom groundbench.labels.annotate import Annotator\n"
            "from groundbench.labels.agreement import SOURCEBENCH_TASK\n"
            "display(Annotator('.', 'ann', n=2, show_judge=True), "
            "Annotator('.', 'ann', n=2, show_judge=True, task=SOURCEBENCH_TASK))")
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "label", "metadata": {}, "outputs": [],
                     "source": [cell]}],
          "metadata": {"kernelspec": {"display_name": "groundbench", "language": "python", "name": "groundbench"}},
          "nbformat": 4, "nbformat_minor": 5}
    (d / "label.ipynb").write_text(json.dumps(nb))
    return d


def test_no_script_from_the_data_runs_in_the_labelling_view(tmp_path):
    from selenium.webdriver.common.by import By
    from groundbench.collect.browser import make_driver
    root = tmp_path / "lab"
    hostile_run(root / "run")
    driver = None
    with jupyterlab(root, tmp_path / "lab-settings") as (base, token):
        try:
            driver = make_driver(None, headless=True, window=(1366, 900))
            driver.get(f"{base}/lab/tree/run/label.ipynb?{token}")
            run_cell(driver)
            wait_text(driver, "item 1 of 2, 1 labelled")     # the groundedness view: the stored label counted
            wait_text(driver, "Cited for:")                    # the SourceBench view
            for label in ("Contradicted", "4"):                # a label in each view: the said line shows the item id
                b = next(b for b in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output button")
                         if b.text.strip() == label)
                b.click()
            wait_text(driver, "(all labelled)")
            wait_text(driver, "saved in ann.csv")
            time.sleep(1)                                      # an onerror fires once the broken image fails to load
            assert driver.execute_script("return window.__pwned") is None, driver.execute_script(
                "return window.__pwned")
            text = lambda: " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"))
            shown = text()
            next(b for b in driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output button")
                 if b.text.strip() == "forward >").click()   # the other unit (the one labelled before the view opened)
            wait_text(driver, "item 2 of 2")
            shown += text()
            time.sleep(1)
            assert driver.execute_script("return window.__pwned") is None, driver.execute_script(
                "return window.__pwned")
            for field in ("sentence", "unit", "decontextualised", "chunk", "credibility", "assistant", "unit_id",
                          "judge_label", "sb_bot", "query", "date", "page"):
                assert f"'{field}'" in shown, f"{field}: its markup is not shown as text ({shown[:3000]})"
            assert "onerror=\"window.__pwned=['url']\"" in shown       # the URL as text and as a link, never markup
            SHOTS.mkdir(exist_ok=True)
            driver.save_screenshot(str(SHOTS / "annotate-hostile-text.png"))
        finally:
            if driver is not None: driver.quit()
