"""Sources: fetching and extraction against a real local HTTP server on 127.0.0.1 that serves every awkward case."""
import io
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from http.server import ThreadingHTTPServer

import pandas as pd
import pytest
import yaml

from conftest import PageHandler, BIN, ROOT, free_port, groundbench
from groundbench.core import Citation, Conversation, write_jsonl
from groundbench.sources.fetch import FetchSettings
from groundbench.sources.stage import PageStore, source_doc

ARTICLE = ("<html><head><title>Vaccine facts</title><meta name='author' content='Jane Doe'>"
           "<meta property='article:published_time' content='2024-03-01'>"
           "<meta property='og:site_name' content='Example Health'></head>"
           "<body><nav>Home | News | Sport | Login | Subscribe</nav><article><h1>Vaccines and DNA</h1>"
           + "".join(f"<p>Paragraph {i}: mRNA from vaccines never enters the cell nucleus and cannot change DNA, "
                     f"study {i} found.</p>" for i in range(10))
           + "</article><footer>Copyright 2024 Example Health. Privacy. Terms. Cookie settings.</footer></body></html>")
RUSSIAN = ("<html><head><title>Проверка фактов</title></head><body><article>"
           + "<p>Вакцины не изменяют ДНК человека, утверждают учёные.</p>" * 15 + "</article></body></html>")
SJIS = ("<html><head><meta charset='shift_jis'><title>ファクトチェック</title></head><body><article>"
        + "<p>ワクチンは人間のDNAを変えません。専門家がそう述べています。</p>" * 15 + "</article></body></html>")
JS_ONLY = ("<html><head><title>App</title></head><body><div id='root'></div><script>"
           "document.getElementById('root').innerHTML = "
           + json.dumps("<article>"
                        + "<p>Rendered by JavaScript: the claim about vaccines is false, experts say.</p>" * 12
                        + "</article>") + ";</script></body></html>")


def pdf_bytes():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["pdf.fonttype"] = 42
    fig = plt.figure()
    fig.text(0.05, 0.5, "Fact sheet: vaccines do not alter human DNA.")
    b = io.BytesIO()
    fig.savefig(b, format="pdf")
    plt.close(fig)
    return b.getvalue()


class Site(PageHandler):
    hits = Counter()
    agents = Counter()   # (path, User-Agent): ours and each released collector's fetch told apart
    other_port = 0
    pdf = b""  # made once before the server starts (see site()), never inside a timed request


    def do_GET(self):
        p = self.path
        type(self).hits[p] += 1
        type(self).agents[p, self.headers.get("User-Agent", "")] += 1
        if p == "/article": return self.send(200, ARTICLE.encode())
        if p.startswith("/redirect/"):
            n = int(p.rsplit("/", 1)[1])
            return self.send(302, headers=[("Location", f"/redirect/{n - 1}" if n > 1 else "/article")])
        if p == "/loop": return self.send(302, headers=[("Location", "/loop")])
        if p == "/404": return self.send(404, b"<html><body>not found</body></html>")
        if p == "/500": return self.send(500, b"<html><body>error</body></html>")
        if p == "/slow":
            time.sleep(4)
            return self.send(200, ARTICLE.encode())
        if p == "/big": return self.send(200, b"<html><body>" + b"x" * 300_000 + b"</body></html>")
        if p == "/ru": return self.send(200, RUSSIAN.encode("cp1251"), "text/html; charset=windows-1251")
        if p == "/sjis": return self.send(200, SJIS.encode("shift_jis"), "text/html")
        if p == "/doc.pdf": return self.send(200, type(self).pdf, "application/pdf")
        if p == "/empty": return self.send(200, b"", "text/html")
        if p == "/js": return self.send(200, JS_ONLY.encode())
        if p == "/to-private": return self.send(302, headers=[("Location", f"http://localhost:{type(self).other_port}/article")])
        if p == "/to-metadata": return self.send(301, headers=[("Location", "http://169.254.169.254/latest/meta-data/")])
        if p.startswith("/page/"):
            time.sleep(0.3)
            return self.send(200, ARTICLE.replace("Vaccine facts", f"Page {p}").encode())
        return self.send(404)


@pytest.fixture(scope="module")
def site():
    Site.hits, Site.agents = Counter(), Counter()
    Site.other_port = free_port()
    # The PDF is drawn by matplotlib, whose first import on a fresh machine builds its font cache: seconds of work
    # that, done inside the request, once ran past the fetch's 3 s total under the suite's load (the PDF lost its text).
    Site.pdf = pdf_bytes()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", [f"127.0.0.1:{srv.server_address[1]}"]
    srv.shutdown()


def fetch(site, tmp_path, paths, **kw):
    base, allow = site
    cfg = FetchSettings(allow_private=allow, total_timeout_s=kw.pop("total", 3), read_timeout_s=2, connect_timeout_s=2,
                        max_bytes=kw.pop("max_bytes", 100_000), backoff_s=0.05, **kw)
    store = PageStore(tmp_path)
    urls = [base + p for p in paths]
    recs = store.fetch(urls, cfg, progress=False)
    return {p: (recs[base + p], source_doc(recs[base + p], store.extracted(recs[base + p]))) for p in paths}


def test_every_case_gets_the_right_record(site, tmp_path):
    t0 = time.time()
    out = fetch(site, tmp_path, ["/article", "/redirect/3", "/loop", "/404", "/500", "/slow", "/big", "/ru", "/sjis",
                                 "/doc.pdf", "/empty", "/js", "/to-private", "/to-metadata"])
    assert time.time() - t0 < 30  # nothing hangs the run
    rec, doc = out["/article"]
    assert doc.valid and doc.substantive and doc.title == "Vaccines and DNA"
    assert doc.author == "Jane Doe" and doc.published == "2024-03-01"
    assert doc.site_name == "Example Health" and "Paragraph 9" in doc.text
    assert "Subscribe" not in doc.text and "Cookie settings" not in doc.text
    assert rec.sha256 and rec.bytes == len(ARTICLE.encode()) and rec.content_type.startswith("text/html")
    rec, doc = out["/redirect/3"]
    assert [h["status"] for h in rec.hops] == [302, 302, 302] and rec.final_url.endswith("/article") and doc.valid
    rec, doc = out["/loop"]
    assert "more than 5 redirects" in rec.error and len(rec.hops) == 6 and not doc.valid
    assert out["/404"][0].status == 404 and not out["/404"][1].valid
    rec, doc = out["/500"]
    assert rec.status == 500 and rec.attempts == 3 and not doc.valid  # transient: retried, then recorded
    assert out["/slow"][0].error.startswith("timeout") and not out["/slow"][1].valid
    assert "body larger than 100000 bytes" in out["/big"][0].error and not out["/big"][1].valid
    assert "Вакцины не изменяют ДНК" in out["/ru"][1].text and out["/ru"][1].title == "Проверка фактов"
    assert "ワクチンは人間のDNAを変えません" in out["/sjis"][1].text
    assert "vaccines do not alter human DNA" in out["/doc.pdf"][1].text
    assert out["/doc.pdf"][1].valid and not out["/doc.pdf"][1].substantive
    assert out["/empty"][0].status == 200 and not out["/empty"][1].valid
    assert out["/js"][0].status == 200 and not out["/js"][1].valid  # no JavaScript runs by default
    for p in ("/to-private", "/to-metadata"):
        rec, doc = out[p]
        assert rec.error.startswith("refused:") and not doc.valid and len(rec.hops) == 1  # checked after the redirect
    assert "169.254.169.254" in out["/to-metadata"][0].error


def test_rerun_makes_no_request(site, tmp_path):
    fetch(site, tmp_path, ["/article", "/ru"])
    before = sum(Site.hits.values())
    fetch(site, tmp_path, ["/article", "/ru"])
    assert sum(Site.hits.values()) == before


def test_cli_refuses_private_unless_allowed(site, tmp_path):
    base, _ = site
    p = groundbench("fetch", "http://127.0.0.1/", "http://169.254.169.254/", base + "/article", "--out", tmp_path / "a",
                    check=True)
    rows = [json.loads(l) for l in p.stdout.splitlines()]
    assert all(r["error"].startswith("refused:") for r in rows) and "private, loopback, link-local" in rows[0]["error"]
    p = groundbench("fetch", base + "/article", "--out", tmp_path / "b", "--allow-private", check=True)
    row = json.loads(p.stdout)
    assert row["valid"] and row["substantive"]
    assert row["title"] == "Vaccines and DNA" and row["published"] == "2024-03-01"
    assert set(row) == {"url", "final_url", "status", "valid", "substantive", "chars", "title", "published", "reason",
                        "error"}


def make_run(tmp_path, urls, run_id="s"):
    conv = Conversation("perplexity", "sonar", "p1", "q", "Answer.",
                        tuple(Citation(i, u) for i, u in enumerate(urls, 1)))
    write_jsonl([conv], tmp_path / "runs" / run_id / "20_collect" / "conversations.jsonl")


@pytest.mark.chromium
@pytest.mark.slow
def test_stage_with_browser_fetch_for_js_pages(site, tmp_path):
    base, allow = site
    make_run(tmp_path, [base + "/article", base + "/js", base + "/404"])
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "s", "stages": ["30_sources"],
                                    "parameters": {"allow_private": allow, "browser_fetch": True}}))
    groundbench("run", spec, "--runs-dir", tmp_path / "runs", check=True)
    src = pd.read_parquet(tmp_path / "runs/s/30_sources/sources.parquet").set_index("url")
    assert src.loc[base + "/js"].valid and "Rendered by JavaScript" in src.loc[base + "/js"].text
    assert src.loc[base + "/article"].valid and not src.loc[base + "/404"].valid
    val = pd.read_csv(tmp_path / "runs/s/30_sources/validity.csv")
    assert val.valid.sum() == 2 and val.citations.sum() == 3


@pytest.mark.slow
def test_killed_fetch_stage_resumes_without_refetching(site, tmp_path):
    base, allow = site
    urls = [f"{base}/page/{i}" for i in range(24)]
    make_run(tmp_path, urls, "k")
    spec = tmp_path / "k.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "k", "stages": ["30_sources"],
                                    "parameters": {"allow_private": allow, "concurrency": 2, "per_host": 2}}))
    proc = subprocess.Popen([str(BIN / "groundbench"), "run", str(spec), "--runs-dir", str(tmp_path / "runs")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    recs = tmp_path / "runs/k/30_sources/fetch"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(recs.glob("*/*.json"))) < 6: time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {json.loads(p.read_text())["url"] for p in recs.glob("*/*.json")}
    assert 6 <= len(done_before) < 24
    groundbench("run", spec, "--runs-dir", tmp_path / "runs", check=True)
    for u in done_before:   # archived before the kill: not fetched again (the collectors' fetches come after ours)
        got = {a: n for (q, a), n in Site.agents.items() if q == u[len(base):]}
        assert len(got) == 3 and set(got.values()) == {1}, (u, got)
    src = pd.read_parquet(tmp_path / "runs/k/30_sources/sources.parquet")
    assert len(src) == 24 and src.valid.all()
