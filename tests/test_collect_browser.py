"""Browser collectors driven by Selenium in Debian's headless Chromium (no Selenium Manager, no network)
through local fixture sites shaped like the real pages (tests/fixtures/README.md says what each is modelled on)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, groundbench
from fixture_site import PROMPT, FixtureSite, assistant, collect_one
from groundbench.collect.base import Archive, CollectionError

pytestmark = [pytest.mark.slow, pytest.mark.chromium]



def check_archive(ar, rec, marker_text):
    html = ar.read(rec["html"]).decode()
    assert marker_text in html and PROMPT.text in html
    png = ar.read(rec["screenshot"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert rec["started_at"] <= rec["collected_at"] and rec["source"] == "browser"
    return html


def segs(conv):
    return [(s.text, s.citation_indices, s.uncited) for s in conv.segments]


def test_chatgpt_gpt4o(tmp_path):
    with FixtureSite("chatgpt") as site:
        ar, rec, conv = collect_one(assistant("chatgpt"), site, tmp_path, model="gpt-4o")
        assert site.sent[PROMPT.text] == 1
    check_archive(ar, rec, "webpage-citation-pill")
    assert rec["model_shown"] == "GPT-4o" and conv.thinking is False
    assert [c.url for c in conv.citations] == ["https://www.cdc.gov/vaccines/facts", "https://www.reuters.com/fact-check/abc"]
    assert segs(conv)[1:] == [("This claim is false according to health agencies.", (1,), False),
                              ("Be critical of posts that repeat it.", (1, 2), True),
                              ("Fact-checkers rated it false.", (2,), False),
                              ("The agency gives the details.", (1,), False)]


def test_chatgpt_gpt4o_hover_highlight_gives_exact_spans(tmp_path):
    with FixtureSite("chatgpt", "highlight") as site:
        ar, rec, conv = collect_one(assistant("chatgpt"), site, tmp_path, model="gpt-4o")
    hl = [s for s in conv.segments if s.text == "This claim is false"]
    assert hl and hl[0].citation_indices == (1,) and conv.answer_text[hl[0].start:hl[0].end] == "This claim is false"


def test_chatgpt_gpt4o_spans_read_by_hovering_each_pill(tmp_path):
    """GPT-4o highlights the cited words only while the mouse is over a pill (fixture variant "hover", modelled on seed
    000's Figure 4): the collector hovers every pill with ActionChains and keeps the spans in the archived page."""
    with FixtureSite("chatgpt", "hover") as site:
        ar, rec, conv = collect_one(assistant("chatgpt"), site, tmp_path, model="gpt-4o")
    check_archive(ar, rec, "data-groundbench-hover")
    assert rec["hover_spans"] == 2
    by_text = {s.text: s for s in conv.segments}
    assert by_text["This claim is false"].citation_indices == (1,)
    assert by_text["This claim is false"].span_source == "hover"
    assert by_text["rated it false"].citation_indices == (2,) and by_text["rated it false"].span_source == "hover"
    # its pill highlights nothing: the sentence rule
    assert by_text["The agency gives the details."].span_source == "sentence"
    with FixtureSite("chatgpt", "hover") as site:  # GPT-5 highlights nothing: no hovering
        ar5, rec5, conv5 = collect_one(assistant("chatgpt"), site, tmp_path / "g5", model="gpt-5")
    assert rec5["hover_spans"] == 0 and {s.span_source for s in conv5.segments} == {"sentence"}


def test_chatgpt_gpt5_thinking_is_recorded(tmp_path):
    with FixtureSite("chatgpt") as site:
        ar, rec, conv = collect_one(assistant("chatgpt"), site, tmp_path, model="gpt-5")
    assert rec["model_shown"] == "GPT-5" and conv.thinking is True
    assert "Searching the web for the claim" not in conv.answer_text  # the reasoning summary is not the answer
    assert len(conv.citations) == 2


def test_perplexity_with_sources_panel(tmp_path):
    with FixtureSite("perplexity") as site:
        ar, rec, conv = collect_one(assistant("perplexity"), site, tmp_path)
    html = check_archive(ar, rec, "data-pplx-citation-url")
    assert 'data-context-pane="true"' in html  # the opened sources panel is archived too
    assert [c.url for c in conv.citations] == ["https://apnews.com/article/fact-check-123", "https://www.who.int/news-room/q-a",
                                               "https://en.wikipedia.org/wiki/MRNA_vaccine"]
    assert [c.url for c in conv.uncited_panel_sources] == ["https://example-blog.net/post"]
    assert segs(conv)[1:] == [("The claim is not supported by evidence.", (1, 2), False),
                              ("Health agencies explain the science.", (2,), False),
                              ("An encyclopedia summarises it.", (3,), False),
                              ("In short, it is false.", (1, 2, 3), True)]


def test_a_fourth_assistant_is_one_yaml_and_one_fixture_page(tmp_path):
    """Issue 28: an assistant groundbench does not ship, added the way the README says: a YAML file (any path) and a
    page to test it on, no Python. The same collector drives it in Chromium: the answer archived, its two links as
    citations, each paragraph a segment with the citation it carries, and a login wall stops it with the YAML's own
    words."""
    cfg = ROOT / "tests" / "fixtures" / "assistants" / "lechat.yaml"
    with FixtureSite("lechat") as site:
        ar, rec, conv = collect_one(assistant(cfg), site, tmp_path)
    check_archive(ar, rec, 'class="ref"')
    assert conv.provider == "lechat" and rec["source"] == "browser"
    assert [c.url for c in conv.citations] == ["https://www.who.int/news-room/fact-sheets/detail/measles",
                                               "https://www.cdc.gov/measles/vaccines/index.html"]
    assert segs(conv) == [("The claim is false: measles vaccines do not alter DNA.", (1,), False),
                          ("Two doses protect about 97% of people.", (2,), False),
                          ("Ask a doctor about your own case.", (1, 2), True)]
    with FixtureSite("lechat", "login") as site:
        with pytest.raises(CollectionError, match="login wall"):
            collect_one(assistant(cfg), site, tmp_path / "login")


def test_qwen_thinking_off_search_on_hostname_pills(tmp_path):
    with FixtureSite("qwen") as site:
        ar, rec, conv = collect_one(assistant("qwen"), site, tmp_path)
    check_archive(ar, rec, "qwen-markdown-citation")
    assert conv.thinking is False and "step by step" not in conv.answer_text  # thinking was switched off
    assert [c.url for c in conv.citations] == ["https://www.bbc.co.uk/news/health-1", "https://www.reuters.com/fact-check/x",
                                               # 百度 resolved by the drawer card's title
                                               "https://baike.baidu.com/item/mRNA",
                                               # the second reuters.com pill: its own page
                                               "https://www.reuters.com/world/vaccines-y"]
    assert rec["model_shown"] == "Qwen3-235B-A22B"


@pytest.mark.parametrize("site_name,variant,expected", [
    ("chatgpt", "login", "login wall"), ("chatgpt", "captcha", "captcha"), ("chatgpt", "ratelimit", "rate limit"),
    ("chatgpt", "unknown", "unknown page"), ("perplexity", "login", "login wall"), ("qwen", "login", "login wall")])
def test_blockers_stop_with_message_and_screenshot(tmp_path, site_name, variant, expected):
    cls = assistant(site_name)
    ar = Archive(tmp_path / "c")
    with FixtureSite(site_name, variant) as site:
        c = cls(base_url=site.url, delay_s=0)
        c.cfg["waits"]["page_timeout_s"] = 3
        t0 = time.time()
        with pytest.raises(CollectionError, match=expected) as e:
            c.collect([PROMPT], ar, progress=False)
    assert time.time() - t0 < 60  # stops, never loops
    shot = Path(str(e.value).split("screenshot ")[1].split(")")[0])
    assert shot.exists() and shot.read_bytes()[:4] == b"\x89PNG"
    assert not ar.has(c.provider, PROMPT.prompt_id)


def test_parse_cli_reproduces_archived_record_byte_for_byte(tmp_path):
    with FixtureSite("perplexity") as site:
        ar, rec, conv = collect_one(assistant("perplexity"), site, tmp_path)
    page = tmp_path / "page.html"
    page.write_bytes(ar.read(rec["html"]))
    outs = [groundbench("parse", "--provider", "perplexity", "--html", page, check=True).stdout for _ in range(2)]
    assert outs[0] == outs[1]
    parsed = json.loads(outs[0])
    assert parsed["citations"] == rec["parsed"]["citations"] and parsed["segments"] == rec["parsed"]["segments"]
    assert parsed["uncited_panel_sources"] == rec["parsed"]["uncited_panel_sources"]


RUNNER = """
import sys, json
from groundbench.collect.base import Archive
from groundbench.collect.browser import BrowserCollector
from groundbench.core import Prompt
ps = [Prompt("H%d" % i, "Health", "fact_checker", 1, "Is claim number %d true?" % i) for i in range(5)]
BrowserCollector("chatgpt", model="gpt-4o", base_url=sys.argv[1], delay_s=0.5).collect(ps, Archive(sys.argv[2]),
                                                                                       progress=False)
"""


def test_killed_collection_resumes_and_archives_each_prompt_once(tmp_path):
    root = tmp_path / "collect"
    with FixtureSite("chatgpt") as site:
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, site.url, str(root)], start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and len(list(root.glob("records/chatgpt/*.json"))) < 2: time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = {p.name: p.read_bytes() for p in root.glob("records/chatgpt/*.json")}
        assert 2 <= len(before) < 5
        sent_before = dict(site.sent)
        subprocess.run([sys.executable, "-c", RUNNER, site.url, str(root)], check=True, timeout=300)
        records = list(root.glob("records/chatgpt/*.json"))
        assert len(records) == 5
        for name, data in before.items():
            assert (root / "records/chatgpt" / name).read_bytes() == data  # untouched
        archived_prompts = {json.loads(d)["prompt_text"] for d in before.values()}
        for p in archived_prompts: assert site.sent[p] == sent_before[p] == 1  # not sent again
    assert not list(root.glob("**/*.tmp"))
