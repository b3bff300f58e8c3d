"""The page text and the page selection of the released SourceBench and SourceCheckup code, re-stated from their files
and run on raw HTML and HTTP statuses served by a local HTTP server (issue 52), against groundbench's sources stage
and its `paper` variants on the same pages.

Sources read (the re-statements are ours, written from the behaviour of these files):
- SourceBench: WukLab/SourceBench at c578bcefd98dbe0a0cb09eda059705418a398cf0, src/source-collection/
  collect_sources_from_urls.py (scrape_url: one requests.get, no retry; status other than 200 rejected; for an HTML
  Content-Type BeautifulSoup's html.parser with script, style, noscript, header, footer and nav removed,
  get_text("\\n"), lines stripped, blank lines dropped; other types the decoded text; under 500 characters rejected;
  search_result_last_updated None), src/content-scoring/scripts/scoring.py (TOP_K_SOURCES 5, pub_date from
  search_result_last_updated), src/evaluation/compute_metrics.py (the weighted total and Avg).
- SourceCheckup: kevinwu23/SourceCheckup at 62bb5ddf0f78053d52d26cbe9c8bc893a2fec72b, utils.py
  (extract_contents_from_url: requests.get; None unless 200; BeautifulSoup(content, "html.parser").get_text()) and
  run.py (a None page skipped, every other page, empty or not, put to the verifier with each statement).
The verifier and the SourceBench judge are constructed (MockBackend): what is compared is which pages are kept, what
text each model call is given, and the numbers the official aggregation makes of the same scores. Issue 61: the
re-statements fetch as the collectors fetch (SourceBench's Chrome/120 User-Agent and 15 s timeout, requests' own
User-Agent and no timeout for SourceCheckup), the sources stage fetches each page again as each collector does, and
the pages add redirect chains of 6, a body that takes 17 s, a User-Agent block, a body broken once, identical bytes
under two types, a charset named after 200 characters of Content-Type and a body over our size cap.
"""
import json
import threading
import time
import zlib
from collections import Counter
from http.server import ThreadingHTTPServer

import pandas as pd
import pytest
import requests
from bs4 import BeautifulSoup

from conftest import PageHandler
from groundbench.core import Citation, Conversation, Prompt, Segment, Unit, write_jsonl, write_table
from groundbench.llm.client import LLM, MockBackend
from groundbench.runfolder import Run
from groundbench.sourcebench import METRICS, score_pages, sourcebench_pages, system_scores
from groundbench.sourcecheckup import judge_pairs, page_view
from groundbench.sources.fetch import SOURCEBENCH_UA
from groundbench.sources.stage import run as sources_stage
from groundbench.stages import COLLECT, SOURCES

S = "The council approved the new water plan after a long public debate about costs and risks. "   # 91 characters


def html(body: str, title: str = "Water plan") -> bytes:
    return f"<html><head><title>{title}</title></head><body>{body}</body></html>".encode()


def paras(n: int) -> str:
    return "".join(f"<p>{S}Point {i}.</p>" for i in range(n))


# each page a class of difference between the collectors' text and our main text (lengths measured by hand: the
# sidebar page is 918 characters to SourceBench's collector and 395 to our extraction, the padded text 570 and 449)
PAGES = {
    "/long": html("<article>" + paras(12) + "</article>"),
    "/sidebar": html("<article>" + paras(4) + "</article><aside>" + "".join(
        f"<div>Most read: story number {i} about the city budget and the harbour</div>" for i in range(8))
        + "</aside>"),
    "/nav": html("<header>City News</header><nav>" + " | ".join(f"<a href='/s{i}'>Section {i}</a>" for i in range(40))
                 + "</nav><article>" + paras(3) + "</article><footer>Copyright 2025 City News.</footer>"),
    "/comments": html("<article>" + paras(4) + "</article><div class='comments' id='comments'><h3>Comments</h3>"
                      + "".join(f"<div class='comment'><p>Reader {i}: I think the plan is far too expensive.</p></div>"
                                for i in range(8)) + "</div>"),
    "/repeat": html("<article>" + ("<p>" + S + "</p>") * 7 + "</article>"),
    "/table": html("<h1>Rates</h1><table>" + "".join(
        f"<tr><td>District {i}</td><td>{i * 3}.5 m3</td><td>approved</td></tr>" for i in range(25)) + "</table>"),
    "/exact500": html("<p>" + "x" * 490 + "</p>", title="T" * 9),     # title, newline, 490: exactly 500 characters
    "/exact499": html("<p>" + "x" * 489 + "</p>", title="T" * 9),
    "/js": html("<div id='root'></div><script>document.getElementById('root').innerHTML = '" + S * 8
                + "';</script>"),
    "/empty": b"",
}
PLAIN = ("\n" * 60 + S * 5 + " " * 60).encode()     # a text file padded with blank lines and spaces
SAME = (S * 7).encode()                                # the same bytes served as HTML and as plain text
CYRILLIC = ("<html><body><p>" + "Совет одобрил новый план водоснабжения после долгих публичных дебатов. " * 8
            + "</p></body></html>").encode("cp1251")
LATE_CHARSET = "text/html; " + "; ".join(f"x-note{i}=filler" for i in range(14)) + "; charset=windows-1251"
HUGE = html(paras(2000))                              # about 200 KB: over the cap this run sets (100 KB)


class Site(PageHandler):
    hits = Counter()   # by path and User-Agent: each collector's own first request

    def do_GET(self):
        p, ua = self.path, self.headers.get("User-Agent", "")
        type(self).hits[p, ua] += 1
        first = type(self).hits[p, ua] == 1
        if p in PAGES: return self.send(200, PAGES[p])
        if p == "/padded": return self.send(200, PLAIN, "text/plain")
        if p == "/gzip": return self.send(200, zlib.compress(PAGES["/long"]), headers=[("content-encoding", "deflate")])
        if p == "/flaky":   # a rate limit on the first request, then the page
            return self.send(429, b"slow down") if first else self.send(200, PAGES["/long"])
        if p.startswith("/r") and p[2:].isdigit():   # a chain of redirects: /r6 -> /r5 ... -> /r1 -> /long
            n = int(p[2:])
            return self.send(302, b"", headers=[("location", f"/r{n - 1}" if n > 1 else "/long")])
        if p == "/slow17":   # the headers at once, the body after 17 s
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(PAGES["/long"])))
            self.end_headers(); self.wfile.flush()
            time.sleep(17)
            try: self.wfile.write(PAGES["/long"])
            except (BrokenPipeError, ConnectionResetError): pass
            return
        if p == "/uablock":   # a site that turns away requests' own User-Agent
            return (self.send(403, b"<html><body>bots not welcome</body></html>") if "python-requests" in ua
                    else self.send(200, PAGES["/long"]))
        if p == "/broken" and first:   # the body cut off mid-read, once for each client
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(PAGES["/long"])))
            self.end_headers()
            self.wfile.write(PAGES["/long"][:300]); self.wfile.flush()
            self.close_connection = True
            return
        if p == "/broken": return self.send(200, PAGES["/long"])
        if p == "/same-html": return self.send(200, SAME, "text/html")
        if p == "/same-plain": return self.send(200, SAME, "text/plain")
        if p == "/charset": return self.send(200, CYRILLIC, LATE_CHARSET)
        if p == "/huge": return self.send(200, HUGE)
        return self.send(404, b"<html><body>not found</body></html>")


@pytest.fixture(scope="module")
def site():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", [f"127.0.0.1:{srv.server_address[1]}"]
    srv.shutdown()


CITES = {"A": ["/sidebar", "/gone", "/flaky", "/long", "/nav", "/comments", "/exact500", "/padded", "/table"],
         "B": ["/js", "/empty", "/exact499", "/repeat", "/gzip", "/nav", "/table"],
         "C": ["/r6", "/slow17", "/broken", "/huge", "/uablock", "/same-html"],
         "D": ["/same-plain", "/charset"]}
DECIDED_BY_OUR_LIMITS = {"/huge"}   # over the body cap this run sets: the collectors would keep it; counted


# ---------------------------------------------------------------- the released collectors, re-stated
def sourcebench_scrape(url: str) -> tuple[str, str]:
    "SourceBench's scrape_url: (status, text): ok, blocked (not 200), too_short (under 500), error."
    try: resp = requests.get(url, headers={"User-Agent": SOURCEBENCH_UA}, timeout=15)
    except requests.RequestException: return "error", ""
    if resp.status_code != 200: return "blocked", ""
    ctype = resp.headers.get("Content-Type", "")
    if "text/html" in ctype or "application/xhtml+xml" in ctype:
        soup = BeautifulSoup(resp.text, "html.parser")
        for t in soup(["script", "style", "noscript", "header", "footer", "nav"]): t.decompose()
        text = "\n".join(x.strip() for x in soup.get_text("\n").splitlines() if x.strip())
    else: text = resp.text
    return ("too_short" if len(text) < 500 else "ok"), text


def sourcebench_selection(urls: list[str], top_k: int = 5) -> list[tuple[str, str]]:
    "collect_sources_from_url_file then the scorer's first k: each URL once, the ok ones, in order."
    seen, kept = set(), []
    for u in urls:
        if u in seen: continue
        seen.add(u)
        status, text = sourcebench_scrape(u)
        if status == "ok": kept.append((u, text))
    return kept[:top_k]


def sourcecheckup_contents(url: str) -> str | None:
    """SourceCheckup's extract_contents_from_url: requests' own User-Agent, no timeout. A body broken mid-read raises
    there, and run.py stops; here such a page is one its code could not read (None)."""
    try: resp = requests.get(url)
    except requests.RequestException: return None
    return BeautifulSoup(resp.content, "html.parser").get_text() if resp.status_code == 200 else None


WEIGHTS = {"CR": 3, "FA": 3, "NE": 3, "FR": 2, "AA": 2, "OA": 2, "DA": 2, "LC": 2}
KEYS = {"CR": "semantic_relevance", "FA": "factual_accuracy", "NE": "objectivity_tone", "FR": "freshness",
        "AA": "author_accountability", "OA": "ownership_transparency", "DA": "domain_authority",
        "LC": "layout_ad_density"}


def official_system(pages: list[dict]) -> tuple[float, float]:
    "compute_metrics.py: a missing score counts 0 in the weighted total; Avg the mean of each page's available mean."
    w = [sum((p[m] or 0) * k for m, k in WEIGHTS.items()) * 100 / 95 for p in pages]
    avg = [sum(v for v in p.values() if v is not None) / len([v for v in p.values() if v is not None]) for p in pages
           if any(v is not None for v in p.values())]
    return sum(w) / len(w), sum(avg) / len(avg)


def scores_of(path: str) -> dict:
    "The constructed judge's scores for a page: from its path, one page missing its layout score."
    h = sum(map(ord, path))
    return {m: (None if path == "/comments" and m == "LC" else 1 + (h + 3 * i) % 5) for i, m in enumerate(METRICS)}


# ---------------------------------------------------------------- the run
@pytest.fixture(scope="module")
def released_run(site, tmp_path_factory):
    """The official re-statements' view of the pages first (each page's first request), then groundbench's sources
    stage on the same pages after the server forgets (so the flaky page answers 429 to both first requests)."""
    base, allow = site
    Site.hits.clear()
    official = {a: sourcebench_selection([base + p for p in paths]) for a, paths in CITES.items()}
    Site.hits.clear()
    checkup = {base + p: sourcecheckup_contents(base + p) for paths in CITES.values() for p in paths}
    Site.hits.clear()
    run = Run.open("released", tmp_path_factory.mktemp("runs"))
    convs, prompts = [], []
    for a, paths in CITES.items():
        p = Prompt(f"SB{a}", "VACOS", "user", 0, f"What did the council decide ({a})?")
        text = "The council approved the water plan."
        convs.append(Conversation(a, "", p.prompt_id, p.text, text,
                                  tuple(Citation(i, base + u) for i, u in enumerate(paths, 1)),
                                  (Segment(text, tuple(range(1, len(paths) + 1)), 0, len(text)),)))
        prompts.append(p)
    write_jsonl(convs, run.stage_dir(COLLECT) / "conversations.jsonl")
    write_table(pd.DataFrame([vars(p) for p in prompts]), run.stage_dir(COLLECT) / "prompts.parquet")
    sources_stage(run.dir, allow_private=allow, total_timeout_s=20,
                  settings_overrides={"sources.max_bytes": 100_000})   # a cap /huge is over
    return run, official, checkup, {c.provider: c for c in convs}


def test_sourcebench_paper_keeps_the_pages_the_official_collector_keeps(released_run, site):
    run, official, _, convs = released_run
    base = site[0]
    pages = sourcebench_pages(run.dir, 5, 0, "official", "released")[0]
    for a, kept in official.items():
        ours = pages[pages.assistant == a]
        theirs = [(u, t) for u, t in kept if u[len(base):] not in DECIDED_BY_OUR_LIMITS]
        assert ours.url.tolist() == [u for u, _ in theirs]                 # the same pages, in the same order
        assert ours.text.tolist() == [t for _, t in theirs]                # and the same text, to the character
    # the new classes: 6 redirects followed, 17 s too slow for its 15 s timeout, a broken body its failure, the
    # Chrome User-Agent let in, identical bytes read as HTML and as text apart, a late charset read
    assert [u for u, _ in official["C"]] == [base + p for p in ("/r6", "/huge", "/uablock", "/same-html")]
    assert [u for u, _ in official["D"]] == [base + p for p in ("/same-plain", "/charset")]
    assert "Совет одобрил" in official["D"][1][1] and "Совет одобрил" in pages.text[pages.assistant == "D"].iloc[1]
    src = pd.read_parquet(run.dir / SOURCES / "sources.parquet").set_index("url")
    assert src.loc[base + "/huge", "limit_sourcebench"] == "too_large"      # decided by our limit, and said so
    assert src.loc[base + "/same-html", "text_sourcebench"] != src.loc[base + "/same-plain", "text_sourcebench"]
    counts = Run(run.dir).manifest()["stages"][SOURCES]["counts"]
    assert counts["sourcebench_fetch_decided_by_our_limits"] == counts["sourcecheckup_fetch_decided_by_our_limits"]
    assert counts["sourcebench_fetch_decided_by_our_limits"] == 1
    assert [u for u, _ in official["A"]] == [base + p for p in ("/sidebar", "/long", "/comments", "/exact500",
                                                                 "/padded")]
    assert [u for u, _ in official["B"]] == [base + p for p in ("/repeat", "/gzip", "/table")]
    assert set(pages.page_date) == {"None"}                               # the collector gives the judge no date
    # our extraction picks other pages: the test can tell the two texts apart
    ext = sourcebench_pages(run.dir, 5, 0, "official", "extracted")[0]
    assert ext[ext.assistant == "A"].url.tolist() == [base + p for p in ("/flaky", "/long", "/table")]
    assert ext[ext.assistant == "B"].url.tolist() == [base + p for p in ("/gzip", "/table")]
    assert (src.loc[base + "/flaky", "status_sourcebench"], src.loc[base + "/flaky", "status"]) == (429, 200)


def test_sourcebench_paper_scores_as_compute_metrics_on_the_official_selection(released_run):
    run, official, _, _ = released_run
    pages = sourcebench_pages(run.dir, 5, 0, "official", "released")[0]
    seen = []

    def judge(r):
        text = r.messages[-1][1]
        seen.append(text)
        sc = scores_of("/" + next(u for u in pages.url if u in text).split("/", 3)[3])
        return json.dumps({KEYS[m]: {"score": v, "justification": "j"} for m, v in sc.items() if v is not None})

    scores = score_pages(pages, LLM(MockBackend("sb", judge)), today="2026-01-25", progress=False)
    ours = system_scores(scores).set_index("assistant")
    for a, kept in official.items():
        kept = [(u, t) for u, t in kept if "/" + u.split("/", 3)[3] not in DECIDED_BY_OUR_LIMITS]   # counted apart
        w, avg = official_system([scores_of("/" + u.split("/", 3)[3]) for u, _ in kept])
        assert ours.loc[a, "weighted"] == pytest.approx(round(w, 2), abs=0.006)
        assert ours.loc[a, "Avg"] == pytest.approx(round(avg, 2), abs=0.006)
        for u, t in kept:   # every call about a page is given the collector's text of it, whole
            assert sum(t in s for s in seen) >= 3
    assert all("Page date (last updated, else published): None" in s for s in seen if "Current date" in s)


def test_sourcecheckup_verifier_reads_get_text_and_counts_a_200_page_valid(released_run, site):
    run, _, checkup, convs = released_run
    base = site[0]
    src = pd.read_parquet(run.dir / SOURCES / "sources.parquet")
    view = page_view(src, "whole")
    got = dict(zip(view.url, view.valid))
    limited = {base + p for p in DECIDED_BY_OUR_LIMITS}
    assert {u: v for u, v in got.items() if u not in limited} == {
        u: c is not None for u, c in checkup.items() if u not in limited}  # valid exactly where their code reads
    assert checkup[base + "/huge"] is not None and not got[base + "/huge"]   # our cap decided it: counted below
    assert view.set_index("url").our_limit[base + "/huge"]
    assert not got[base + "/uablock"] and got[base + "/slow17"] and got[base + "/r6"]   # their User-Agent, no timeout
    assert got[base + "/empty"] and not got[base + "/flaky"] and not got[base + "/gone"]
    seen = []
    llm = LLM(MockBackend("sc", lambda r: (seen.append(r.messages[-1][1]),
                                           json.dumps({"supported": False, "justification": "j"}))[1]))
    units = [Unit(c.conversation_id, 0, "The council approved the water plan.", "Fact") for c in convs.values()]
    pairs = judge_pairs(units, view, llm, None, progress=False, budget=10 ** 6)
    asked = pairs[~pairs.parse_status.str.startswith("skipped")]
    assert len(asked) == sum(checkup[base + p] is not None and p not in DECIDED_BY_OUR_LIMITS
                             for paths in CITES.values() for p in paths)   # all asked
    for u, contents in checkup.items():
        if contents and u not in limited: assert any(contents in s for s in seen), u   # get_text()'s text, whole
    assert int((asked.chars_total == 0).sum()) == 1                         # the empty page, asked as it is
    ours = page_view(src, "extracted").set_index("url")
    assert not ours.loc[base + "/empty", "valid"] and ours.loc[base + "/flaky", "valid"]   # ours differs there
