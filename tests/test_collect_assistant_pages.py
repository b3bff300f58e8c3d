"""The 2026 pages (issue 19): ChatGPT's unified picker, tools menu and three answer renderers with popover-only URLs;
Perplexity's several .prose blocks, "+1" hover cards and "N sources" modal; Qwen Chat's model list, mode menu, thinking
select and pills whose URLs come only from the chat API's stream, captured through the Chrome DevTools Protocol. Real
headless Chromium against local fixture sites (tests/fixtures/*2026.html; tests/fixtures/README.md says which facts each
follows). The same YAML still collects the older fixture pages (tests/test_collect_browser.py)."""
import copy
import json

import pytest

from fixture_site import PROMPT, FixtureSite, assistant, collect_one
from groundbench.collect.base import Archive, CollectionError
from groundbench.collect.page import load_ui_config, parse_page
from groundbench.collect.browser import BrowserCollector
from groundbench.core import Prompt

pytestmark = [pytest.mark.slow, pytest.mark.chromium]

CDC, REUTERS, AP = "https://www.cdc.gov/vaccines/facts", "https://www.reuters.com/fact-check/abc", "https://apnews.com/article/xyz"


@pytest.mark.parametrize("variant,renderer", [("classic", "classic"), ("hybrid", "hybrid"), ("dil", "dil")])
def test_chatgpt_2026_every_renderer_with_popover_urls(tmp_path, variant, renderer):
    with FixtureSite("chatgpt2026", variant) as site:
        ar, rec, conv = collect_one(assistant("chatgpt"), site, tmp_path, model="GPT-5.1")
    assert rec["renderer"] == renderer and rec["model_answered"] == "gpt-5.1" and not rec["model_mismatch"]
    # "Reuters +1": both URLs, the second only in its popover
    assert [c.url for c in conv.citations] == [CDC, REUTERS, AP]
    assert conv.unresolved_pills == 0 and "Fact-checkers rated it false." in conv.answer_text
    cited = {i for s in conv.segments for i in s.citation_indices if not s.uncited}
    assert cited == {1, 2, 3}
    assert [c.url for c in conv.uncited_panel_sources] == ["https://www.who.int/unused"]  # the Sources side panel, read
    html = ar.read(rec["html"]).decode()
    assert "data-groundbench-urls" in html  # the popover URLs are in the archived page, so it re-parses offline
    # the page as served, without the popover reading: its badges are counted, never dropped silently
    if variant == "dil":
        # no popover, no panel
        raw = html.replace("data-groundbench-urls", "data-x").replace('data-testid="sources-panel"', "")
        p = parse_page(raw, "chatgpt")
        assert p.renderer == "dil" and p.unresolved_pills == 3 and not p.citations


def test_chatgpt_2026_plan_limit_fallback_is_recorded_or_stops(tmp_path):
    with FixtureSite("chatgpt2026", "fallback") as site:
        ar, rec, conv = collect_one(assistant("chatgpt"), site, tmp_path, model="GPT-5.2 Thinking")
        assert rec["model_mismatch"] and rec["model_answered"] == "gpt-5.2-mini"
        assert "hit the Free plan limit" in rec["model_fallback_notice"]
        another = Prompt("H2", "Health", "fact_checker", 2, "Another claim")
        mismatch = "asked for 'GPT-5.2 Thinking', the page says 'gpt-5.2-mini' answered"
        with pytest.raises(CollectionError, match=mismatch):
            BrowserCollector("chatgpt", base_url=site.url, delay_s=0, model="GPT-5.2 Thinking",
                             on_model_mismatch="stop").collect([another], Archive(tmp_path / "stop"), progress=False)
    assert not Archive(tmp_path / "stop").has("chatgpt", another.prompt_id)


def test_chatgpt_2026_guest_page_is_not_a_login_wall_and_a_challenge_stops(tmp_path):
    with FixtureSite("chatgpt2026", "guest") as site:
        _, rec, conv = collect_one(assistant("chatgpt"), site, tmp_path, model="GPT-5.1")
    assert len(conv.citations) == 3
    with FixtureSite("chatgpt2026", "cloudflare") as site:
        c = BrowserCollector("chatgpt", base_url=site.url, delay_s=0, model="GPT-5.1")
        c.cfg["waits"]["page_timeout_s"] = 3
        with pytest.raises(CollectionError, match="captcha or challenge"):
            c.collect([PROMPT], Archive(tmp_path / "cf"), progress=False)


def test_chatgpt_2026_broken_flow_names_the_step(tmp_path):
    with FixtureSite("chatgpt2026", "broken") as site:
        with pytest.raises(CollectionError, match=r"flow 'web_search'.*no alternative's element is on the page"):
            BrowserCollector("chatgpt", base_url=site.url, delay_s=0, model="GPT-5.1").collect(
                [PROMPT], Archive(tmp_path / "b"), progress=False)


def test_perplexity_2026_every_prose_block_hover_card_and_sources_modal(tmp_path):
    with FixtureSite("perplexity2026") as site:
        ar, rec, conv = collect_one(assistant("perplexity"), site, tmp_path)
    # three .prose blocks
    assert "In short, it is false." in conv.answer_text and "The claim is not supported" in conv.answer_text
    assert [c.url for c in conv.citations] == ["https://apnews.com/article/fact-check-123", "https://www.who.int/news-room/q-a",
                                               "https://www.nih.gov/news/mrna", "https://en.wikipedia.org/wiki/MRNA_vaccine"]
    assert conv.unresolved_pills == 0 and conv.uncited_panel_sources == ()
    assert "role=\"dialog\"" in ar.read(rec["html"]).decode()  # the "4 sources" modal was opened, by its text


def test_qwen_2026_flows_and_urls_from_the_captured_stream(tmp_path):
    with FixtureSite("qwen2026") as site:
        ar, rec, conv = collect_one(assistant("qwen"), site, tmp_path, model="Qwen3.8-Max")
    assert rec["model_shown"] == "Qwen3.8-Max" and conv.thinking is False and "step by step" not in conv.answer_text
    assert [c.url for c in conv.citations] == ["https://www.bbc.co.uk/news/health-1", "https://www.reuters.com/fact-check/x",
                                               "https://baike.baidu.com/item/mRNA", "https://www.reuters.com/world/vaccines-y"]
    assert rec["stream"]["sources"] == 4 and rec["stream"]["pills_resolved"] == 4 and conv.unresolved_pills == 0
    assert "web_search_info" in ar.read(rec["stream"]["body"]).decode()  # the raw stream is archived


def test_qwen_2026_without_stream_or_list_counts_unresolved_pills(tmp_path):
    cfg = copy.deepcopy(load_ui_config("qwen"))
    cfg.pop("stream_capture")
    # guest: 登录 / Log in buttons beside a working composer are no login wall
    with FixtureSite("qwen2026", "guest") as site:
        ar, rec, conv = collect_one(assistant("qwen"), site, tmp_path, model="Qwen3.8-Max", config=cfg)
    assert conv.citations == () and conv.unresolved_pills == 4
    with FixtureSite("qwen2026", "drawer") as site:  # the sources list alone resolves them, by host and position
        _, _, conv = collect_one(assistant("qwen"), site, tmp_path / "d", model="Qwen3.8-Max", config=cfg)
    assert len(conv.citations) == 4 and conv.unresolved_pills == 0


def test_doctor_reports_every_step_and_names_a_broken_selector(tmp_path):
    import yaml
    from conftest import groundbench
    with FixtureSite("chatgpt2026") as site:
        p = groundbench("doctor", "chatgpt", "--base-url", site.url, "--model", "GPT-5.1", "--out", tmp_path / "ok",
                        timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    for needle in ("flow model", "flow web_search", "send the prompt", "the answer finishes", "read pill popovers",
                   "citations (distinct URLs)", "renderer"):
        assert needle in p.stdout, needle
    report = json.loads((tmp_path / "ok" / "doctor.json").read_text())
    cites = next(r for r in report["rows"] if r["name"] == "citations (distinct URLs)")
    assert report["ok"] and cites["count"] == 3
    assert (tmp_path / "ok" / "page.png").exists() and (tmp_path / "ok" / "page.html").exists()
    cfg = yaml.safe_load(open(load_ui_config("chatgpt")["_path"]))
    # the day the site renames its send button
    cfg["selectors"]["send_button"] = "button[data-testid='send-btn-renamed']"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    with FixtureSite("chatgpt2026") as site:
        p = groundbench("doctor", "chatgpt", "--base-url", site.url, "--config", tmp_path / "broken.yaml",
                        "--out", tmp_path / "b", timeout=300)
    assert p.returncode == 1 and "send-btn-renamed" in p.stderr and "FAILED" in p.stdout
    with FixtureSite("qwen2026") as site:  # the stream capture and the Qwen flows, checked the same way
        p = groundbench("doctor", "qwen", "--base-url", site.url, "--model", "Qwen3.8-Max", "--out", tmp_path / "q",
                        timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "capture the answer's stream" in p.stdout
