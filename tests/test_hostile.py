"""Hostile pages and careless input: a local hostile server serves decompression bombs, table-heavy HTML, PDF bombs,
script and meta navigation to refused addresses, invalid ports and charsets, slow and endless bodies. Each case asserts
the reason recorded on its URL's record, bounded time and memory, and that the rest of the batch was fetched. No mocks:
real sockets, a real Chromium, the real `groundbench` command."""
import gzip
import io
import json
import os
import subprocess
import threading
import time
import zlib
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import PageHandler, BIN, ROOT, groundbench

ARTICLE = ("<html><head><title>Garlic and flu</title></head><body><article><h1>Garlic does not cure flu</h1>"
           + "".join(f"<p>Paragraph {i}: no trial has shown that garlic cures or prevents influenza, "
                     "researchers say.</p>"
                     for i in range(12))
           + "</article></body></html>")
FRENCH = ("<html><head><title>Vaccins</title></head><body><article>"
          + "<p>Les vaccins à ARN ne modifient pas l'ADN, répètent les chercheurs interrogés.</p>" * 12
          + "</article></body></html>")
SECRET = b"<html><body><article><p>TOP SECRET internal admin page: credentials inside.</p></article></body></html>"


def pdf_bomb() -> bytes:
    "A small PDF whose compressed content stream expands to millions of characters of text, on many pages."
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject
    w = PdfWriter()
    font = w._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                           NameObject("/Subtype"): NameObject("/Type1"),
                                           NameObject("/BaseFont"): NameObject("/Helvetica")}))
    s = DecodedStreamObject()
    s.set_data(b"BT /F1 1 Tf " + b"(AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA) Tj " * 150_000 + b"ET")
    content = w._add_object(s.flate_encode())
    for _ in range(40):
        page = w.add_blank_page(612, 792)
        fonts = DictionaryObject({NameObject("/F1"): font})
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
        page[NameObject("/Contents")] = content
    b = io.BytesIO()
    w.write(b)
    return b.getvalue()


def gzip_zeros(n: int) -> bytes:
    "gzip of n zero bytes, made in chunks (never n bytes in memory)."
    c, out, chunk = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS), [], b"\0" * (16 << 20)
    for _ in range(n // len(chunk)): out.append(c.compress(chunk))
    out.append(c.flush())
    return b"".join(out)


class Hostile(PageHandler):
    hits = Counter()
    secret_port = 0
    bodies: dict = {}


    def do_GET(self):
        p, b = self.path, type(self).bodies
        type(self).hits[p] += 1
        secret = f"http://127.0.0.1:{type(self).secret_port}/secret"
        if p == "/ok": return self.send(200, ARTICLE.encode())
        if p == "/gzip-gzip": return self.send(200, b["gzip2"], headers=[("Content-Encoding", "gzip, gzip")])
        if p == "/gzip-bomb": return self.send(200, b["gzip1"], headers=[("Content-Encoding", "gzip")])
        if p == "/deflate":
            return self.send(200, zlib.compress(ARTICLE.encode()), headers=[("Content-Encoding", "deflate")])
        if p == "/br": return self.send(200, b"\x1b\x03\x00", headers=[("Content-Encoding", "br")])
        if p == "/corrupt-gzip":
            return self.send(200, b"\x1f\x8b\x08\x00garbage-not-gzip", headers=[("Content-Encoding", "gzip")])
        if p == "/tables": return self.send(200, b["tables"])
        if p == "/bomb.pdf": return self.send(200, b["pdf"], "application/pdf")
        if p == "/charset-undefined": return self.send(200, ARTICLE.encode(), "text/html; charset=undefined")
        if p == "/meta-undefined":
            return self.send(200, ARTICLE.replace("<head>", "<head><meta charset='undefined'>").encode(), "text/html")
        if p == "/mojibake": return self.send(200, FRENCH.encode("utf-8"), "text/html; charset=iso-8859-1")
        if p == "/to-bad-port": return self.send(302, headers=[("Location", "http://127.0.0.1:99999/x")])
        if p == "/to-broken-ipv6": return self.send(302, headers=[("Location", "http://[::1/x")])
        if p == "/to-secret": return self.send(302, headers=[("Location", secret)])
        if p == "/nav-script":
            return self.send(200, f"<html><body><script>location.href = {json.dumps(secret)};</script></body></html>"
                             .encode())
        if p == "/nav-meta":
            return self.send(200, (f"<html><head><meta http-equiv='refresh' content='0;url={secret}'></head>"
                                   "<body></body></html>").encode())
        if p == "/img-secret":
            return self.send(200, (f"<html><body><img src='{secret}'><div id=r></div><script>"
                                   "document.getElementById('r').innerHTML = '<article>' + "
                                   "'<p>Rendered text about garlic and influenza trials.</p>'.repeat(12)"
                                   " + '</article>';</script></body></html>").encode())
        if p == "/endless":
            self.send_response(200); self.send_header("content-type", "text/html"); self.end_headers()
            try:
                while True: self.wfile.write(b"<p>" + b"x" * 65536 + b"</p>")
            except (BrokenPipeError, ConnectionResetError): return
        if p == "/slow-body":
            self.send_response(200); self.send_header("content-type", "text/html")
            self.send_header("content-length", "100000"); self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"<p>slow</p>"); self.wfile.flush(); time.sleep(0.5)
            except (BrokenPipeError, ConnectionResetError): return
            return
        return self.send(404, b"<html><body>not here</body></html>")


class Secret(BaseHTTPRequestHandler):
    hits = Counter()
    def log_message(self, *a): pass
    def do_GET(self):
        type(self).hits[self.path] += 1
        self.send_response(200); self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(SECRET))); self.end_headers(); self.wfile.write(SECRET)


@pytest.fixture(scope="module")
def hostile():
    Hostile.bodies = {
        "gzip1": gzip_zeros(200 << 20),                       # one layer: 200 MiB of zeros in about 200 KB
        "gzip2": gzip.compress(gzip_zeros(1 << 30), 9),       # two layers: 1 GiB in a few KB
        "tables": b"<html><body>" + b"".join(b"<table><tr><td>%d</td><td>cell</td></tr></table><p>row %d</p>" % (i, i)
                                             for i in range(120_000)) + b"</body></html>",
        "pdf": pdf_bomb(),
    }
    assert len(Hostile.bodies["gzip2"]) < 20_000 and len(Hostile.bodies["pdf"]) < 200_000
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (Hostile, Secret)]
    for s in servers: threading.Thread(target=s.serve_forever, daemon=True).start()
    Hostile.secret_port = servers[1].server_address[1]
    yield f"http://127.0.0.1:{servers[0].server_address[1]}", f"127.0.0.1:{servers[0].server_address[1]}"
    for s in servers: s.shutdown()


@pytest.mark.serial  # its peak-RSS bound failed once (1,070 MiB) beside the demo on pytest-xdist's other worker
@pytest.mark.slow
def test_hostile_batch_bounded_and_every_reason_recorded(hostile, tmp_path):
    base, allow = hostile
    paths = ["/ok", "/gzip-gzip", "/gzip-bomb", "/deflate", "/br", "/corrupt-gzip", "/tables", "/bomb.pdf",
             "/charset-undefined", "/meta-undefined", "/mojibake", "/to-bad-port", "/to-broken-ipv6", "/endless",
             "/slow-body"]
    urls = [base + p for p in paths] + ["http://example.com:99999/", "http://[::1/", "javascript:alert(1)"]
    (tmp_path / "urls.txt").write_text("\n".join(urls) + "\n")
    # the fetch runs in its own process tree: measured with wait4 so that only it (and its extraction worker) counts
    t0 = time.time()
    proc = subprocess.Popen([str(BIN / "groundbench"), "fetch", "--from", str(tmp_path / "urls.txt"),
                             "--out", str(tmp_path / "f"), "--allow-private", "--timeout", "12"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read().decode(); err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - t0
    assert os.waitstatus_to_exitcode(status) == 0, err
    peak_mib = usage.ru_maxrss / 1024
    assert peak_mib < 1024, f"peak RSS {peak_mib:.0f} MiB"
    rows = {r["url"]: r for r in map(json.loads, out.splitlines())}
    reason = {u[len(base):] if u.startswith(base) else u: rows[u]["reason"] for u in urls}
    # the batch carried on
    assert reason["/ok"] == "" and rows[base + "/ok"]["valid"] and rows[base + "/ok"]["substantive"]
    assert reason["/deflate"] == "" and rows[base + "/deflate"]["valid"]
    assert reason["/gzip-gzip"] == "decompression_limit" and "stacked" in rows[base + "/gzip-gzip"]["error"]
    assert reason["/gzip-bomb"] == "decompression_limit"
    assert reason["/br"] == "unsupported_encoding" and reason["/corrupt-gzip"] == "corrupt_body"
    assert reason["/tables"] in ("extract_timeout", "too_large"), rows[base + "/tables"]
    assert reason["/bomb.pdf"] in ("too_large", "extract_timeout", "extract_memory")
    assert not rows[base + "/bomb.pdf"]["valid"]
    for p in ("/charset-undefined", "/meta-undefined"):
        assert reason[p] == "" and rows[base + p]["valid"], rows[base + p]
    assert reason["/mojibake"] == "" and rows[base + "/mojibake"]["valid"]
    assert reason["/to-bad-port"] == "invalid_url" and reason["/to-broken-ipv6"] == "invalid_url"
    assert reason["/endless"] == "too_large" and reason["/slow-body"] == "timeout"
    assert reason["http://example.com:99999/"] == "invalid_url" and reason["http://[::1/"] == "invalid_url"
    assert reason["javascript:alert(1)"] == "refused"
    assert "URLs:" in err and "decompression_limit" in err   # the summary counts reasons
    # bounded time: every record under its budget (12 s fetch + at least 5 s extraction), the batch well under the sum
    recs = [json.loads(p.read_text()) for p in (tmp_path / "f" / "fetch").glob("*/*.json")]
    assert all(r["seconds"] <= 12.5 for r in recs), [(r["url"], r["seconds"]) for r in recs if r["seconds"] > 12.5]
    slow = next(r for r in recs if r["url"].endswith("/slow-body"))
    assert slow["seconds"] >= 11 and slow["attempts"] >= 1 and slow["reason"] == "timeout"   # real seconds, not 0
    assert wall < 120, wall
    # the text of the mis-declared page is repaired, not mojibake
    ext = [json.loads(p.read_text()) for p in (tmp_path / "f" / "extracted").glob("*/*.json")]
    fr = next(e for e in ext if "chercheurs" in e["text"])
    assert "répètent" in fr["text"] and "Ã" not in fr["text"] and fr["encoding"].startswith("utf-8 (declared")


def test_transient_failures_are_retried_on_rerun_and_settings_key_the_cache(hostile, tmp_path):
    base, allow = hostile
    out = tmp_path / "f"
    first = groundbench("fetch", base + "/slow-body", base + "/ok", "--out", out, "--allow-private", "--timeout", "2",
                        check=True)
    assert json.loads(first.stdout.splitlines()[0])["reason"] == "timeout"
    hits = Hostile.hits[("/slow-body")], Hostile.hits["/ok"]
    groundbench("fetch", base + "/slow-body", base + "/ok", "--out", out, "--allow-private", "--timeout", "2",
                check=True)
    # transient again; success cached
    assert Hostile.hits["/slow-body"] == hits[0] + 1 and Hostile.hits["/ok"] == hits[1]
    # refused without --allow-private, then fetched with it (the outcome depends on that setting)
    refused = groundbench("fetch", base + "/deflate", "--out", out, check=True)
    assert json.loads(refused.stdout)["reason"] == "refused"
    allowed = groundbench("fetch", base + "/deflate", "--out", out, "--allow-private", check=True)
    assert json.loads(allowed.stdout)["valid"]


@pytest.mark.chromium
@pytest.mark.parametrize("page", ["/nav-script", "/nav-meta"])
def test_browser_rendering_cannot_reach_a_refused_address(hostile, page):
    from groundbench.sources.browser import render_with_browser
    base, allow = hostile
    before = sum(Secret.hits.values())
    rd = render_with_browser(base + page, [allow], wait_s=2.0)
    assert sum(Secret.hits.values()) == before, "the internal page was requested"
    assert rd.reason == "refused" and rd.html == "" and "TOP SECRET" not in json.dumps(rd.__dict__)
    assert any(str(Hostile.secret_port) in r["url"] for r in rd.refused)
    # a direct fetch of the same address is refused the same way
    from groundbench.sources.fetch import check_url, Refused
    with pytest.raises(Refused): check_url(f"http://127.0.0.1:{Hostile.secret_port}/secret", [allow])


@pytest.mark.chromium
def test_browser_subresources_to_refused_addresses_are_blocked_but_the_page_renders(hostile):
    from groundbench.sources.browser import render_with_browser
    base, allow = hostile
    before = sum(Secret.hits.values())
    rd = render_with_browser(base + "/img-secret", [allow], wait_s=2.0)
    assert sum(Secret.hits.values()) == before
    assert rd.reason == "" and "Rendered text about garlic" in rd.html and rd.refused


@pytest.mark.chromium
@pytest.mark.slow
def test_stage_browser_fetch_records_refused_navigation(hostile, tmp_path):
    import pandas as pd
    import yaml
    from groundbench.core import Citation, Conversation, write_jsonl
    base, allow = hostile
    conv = Conversation("perplexity", "sonar", "p1", "q", "Answer.",
                        (Citation(1, base + "/nav-script"), Citation(2, base + "/ok"),
                         Citation(3, base + "/to-secret")))
    write_jsonl([conv], tmp_path / "runs" / "h" / "20_collect" / "conversations.jsonl")
    spec = tmp_path / "h.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "h", "stages": ["30_sources"],
                                    "parameters": {"allow_private": [allow], "browser_fetch": True}}))
    before = sum(Secret.hits.values())
    groundbench("run", spec, "--runs-dir", tmp_path / "runs", check=True)
    assert sum(Secret.hits.values()) == before
    src = pd.read_parquet(tmp_path / "runs/h/30_sources/sources.parquet").set_index("url")
    assert src.loc[base + "/nav-script"].reason == "refused" and not src.loc[base + "/nav-script"].valid
    assert src.loc[base + "/to-secret"].reason == "refused" and src.loc[base + "/ok"].valid
    why = pd.read_csv(tmp_path / "runs/h/30_sources/failure_reasons.csv")
    assert why.set_index("reason").citations.to_dict() == {"ok": 1, "refused": 2}
    m = json.loads((tmp_path / "runs/h/manifest.json").read_text())
    assert m["stages"]["30_sources"]["counts"]["urls_refused"] == 2


# --- every command: one clear line and a non-zero exit, never a traceback ---------------------------------------------

def one_error(p, *needles):
    assert p.returncode != 0, p.stdout
    assert "Traceback" not in p.stderr and p.stderr.startswith("groundbench: error: "), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    for n in needles: assert n in p.stderr, (n, p.stderr)


def test_prompts_errors(tmp_path):
    claims = tmp_path / "c.csv"
    claims.write_text("id,topic,claim,question\nX1,T,foo,Why foo?\n")
    one_error(groundbench("prompts", "--claims", tmp_path, "--out", tmp_path / "p.csv"), "is a folder")
    one_error(groundbench("prompts", "--claims", claims, "--out", tmp_path), "is a folder")
    one_error(groundbench("prompts", "--claims", claims, "--out", claims), "is the --claims file")
    assert "X1,T,foo" in claims.read_text()
    bomb = tmp_path / "t.csv"
    bomb.write_text('role,template_id,template\nfact_checker,1,"{claim:>200000000}"\n')
    one_error(groundbench("prompts", "--claims", claims, "--templates", bomb, "--out", tmp_path / "p.csv"),
              "t.csv: line 2: field 'template'")
    assert not (tmp_path / "p.csv").exists()
    dup = tmp_path / "d.csv"
    dup.write_text("id,claim_id,topic,claim\nX1,X1,T,foo\n")
    one_error(groundbench("prompts", "--claims", dup, "--out", tmp_path / "p.csv"), "d.csv: line 1",
              "both mean 'claim_id'")
    risky = tmp_path / "r.csv"
    risky.write_text('id,topic,claim,question\nX1,T,"=HYPERLINK(""http://evil"")",Is it?\n')
    plain = tmp_path / "plain.csv"
    plain.write_text("role,template_id,template\nfact_checker,1,{claim}\n")
    groundbench("prompts", "--claims", risky, "--templates", plain, "--out", tmp_path / "safe.csv", check=True)
    assert "'=HYPERLINK" in (tmp_path / "safe.csv").read_text()


@pytest.mark.slow
def test_run_errors(tmp_path):
    one_error(groundbench("run", tmp_path / "none.yaml"), "no such parameter file")
    (tmp_path / "bad.yaml").write_text("stages: [10_claims\n")
    one_error(groundbench("run", tmp_path / "bad.yaml"), "not valid YAML")
    one_error(groundbench("run", tmp_path), str(tmp_path))


def test_status_errors(tmp_path):
    one_error(groundbench("status", tmp_path / "nope"), "not a folder")
    run = tmp_path / "r"
    run.mkdir()
    one_error(groundbench("status", run), "no manifest.json")
    for content, needle in ((b"{not json", "not valid JSON"), (b"", "not valid JSON"),
                            (b"\xff\xfe\x00garbage", "manifest.json"), (b"[1, 2]", "expected a JSON object"),
                            (b'{"stages": [1]}', "field 'stages'"),
                            (b'{"stages": {"a": 5}}', "field 'stages.a'")):
        (run / "manifest.json").write_bytes(content)
        one_error(groundbench("status", run), needle)
    hostile_stage = {"status": "done\r  10_claims ok", "seconds": "x"}
    (run / "manifest.json").write_text(json.dumps({"run_id": "x\x1b]0;pwned\x07",
                                                   "stages": {"\x1b[2Jfake": hostile_stage}}))
    p = groundbench("status", run, check=True)
    assert "\x1b" not in p.stdout and "\r" not in p.stdout and "\x07" not in p.stdout and "\\x1b" in p.stdout


def test_parse_errors_and_hostile_pages(tmp_path):
    one_error(groundbench("parse", "--provider", "chatgpt", "--html", tmp_path), "is a folder")
    one_error(groundbench("parse", "--provider", "openai-chat", "--json", tmp_path), "is a folder")
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    one_error(groundbench("parse", "--provider", "openai-chat", "--json", tmp_path / "list.json"),
              "expected a JSON object")
    (tmp_path / "shape.json").write_text('{"choices": "nope"}')
    one_error(groundbench("parse", "--provider", "openai-chat", "--json", tmp_path / "shape.json"), "expected shape")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    one_error(groundbench("parse", "--provider", "perplexity-api", "--json", tmp_path / "deep.json"), "deep.json")
    page = tmp_path / "p.html"
    page.write_text('<div data-message-author-role="assistant"><div class="markdown">'
                    '<p>Garlic does not cure flu.</p></div></div>')
    (tmp_path / "bad.yaml").write_text("provider: [unclosed\n")
    one_error(groundbench("parse", "--provider", "chatgpt", "--html", page, "--config", tmp_path / "bad.yaml"),
              "not valid YAML")
    import yaml
    cfg = yaml.safe_load((ROOT / "groundbench/collect/chatgpt.yaml").read_text())
    cfg["selectors"]["answer"] = "div[[[unclosed"
    (tmp_path / "sel.yaml").write_text(yaml.safe_dump(cfg))
    one_error(groundbench("parse", "--provider", "chatgpt", "--html", page, "--config", tmp_path / "sel.yaml"),
              "selector")
    # a Latin-1 page is read by its charset; a truncated page never leaks markup; javascript:/data:/relative links are
    # not citations
    latin = ('<html><head><meta charset="iso-8859-1"></head><body><div data-message-author-role="assistant">'
             '<div class="markdown"><p>Le café ne guérit pas la grippe.'
             '<span data-testid="webpage-citation-pill"><a href="javascript:alert(1)">x</a></span>'
             '<span data-testid="webpage-citation-pill"><a href="https://www.who.int/a">WHO</a></span>'
             '<span data-testid="webpage-citation-pill"><a href="/relative">r</a></span>'
             '<span data-testid="webpage-citation-pill"><a href="data:text/html,hi">d</a></span></p>'
             '<p>Cut here <a href="https://ex')
    page.write_bytes(latin.encode("latin-1"))
    p = groundbench("parse", "--provider", "chatgpt", "--html", page, check=True)
    d = json.loads(p.stdout)
    assert "Le café ne guérit pas la grippe." in d["answer_text"] and "\ufffd" not in d["answer_text"]
    assert "<a" not in d["answer_text"] and "href" not in d["answer_text"]
    assert [c["url"] for c in d["citations"]] == ["https://www.who.int/a"]
    assert d["rejected_urls"] == ["javascript:alert(1)", "/relative", "data:text/html,hi"]


def test_credibility_and_fetch_errors(tmp_path):
    one_error(groundbench("credibility", "--from", tmp_path), str(tmp_path))
    one_error(groundbench("credibility", "--from", tmp_path / "none.txt"), "none.txt")
    one_error(groundbench("credibility"), "no URLs")
    (tmp_path / "file").write_text("x")
    one_error(groundbench("fetch", "http://example.com/", "--out", tmp_path / "file"), "is a file")
    for bad in ("0", "-1", "nan", "inf"):
        one_error(groundbench("fetch", "http://example.com/", "--out", tmp_path / "o", "--timeout", bad), "--timeout")
    p = groundbench("--version", check=True)
    assert p.stdout.strip()


def test_login_and_doctor_errors(tmp_path):
    one_error(groundbench("login", "nope", "--profile-dir", tmp_path / "p"), "no UI configuration")
    one_error(groundbench("doctor", "nope"), "unknown assistant 'nope'")
    (tmp_path / "bad.yaml").write_text("provider: [unclosed\n")
    one_error(groundbench("doctor", "chatgpt", "--config", tmp_path / "bad.yaml"), "not valid YAML")
    (tmp_path / "file").write_text("x")
    one_error(groundbench("doctor", "chatgpt", "--out", tmp_path / "file"), "is a file")


def test_an_annotator_whose_name_starts_with_agreement_keeps_its_labels(tmp_path):
    "Issue 53: annotate accepted the name `agreement_bob`, and load_labels skipped every file starting `agreement`."
    from groundbench.labels.annotate import LabelStore, load_labels
    LabelStore(tmp_path, "agreement_bob").add("item-1", "Supported")
    LabelStore(tmp_path, "ann").add("item-1", "Unverifiable")
    got = load_labels(tmp_path)
    assert sorted(got.annotator.unique()) == ["agreement_bob", "ann"]


def test_the_setting_an_error_advises_exists(tmp_path):
    "Issue 53: the embedder's refusal said to set embed.allow_bundled_with_real_judge, which settings.ini lacked."
    from groundbench.core import load_settings
    assert load_settings()["embed"]["allow_bundled_with_real_judge"] is False      # declared, off
    s = load_settings(overrides={"embed.allow_bundled_with_real_judge": "true"})     # before: "unknown setting"
    assert str(s["embed"]["allow_bundled_with_real_judge"]).lower() == "true"


def test_a_model_name_with_a_terminal_escape_reaches_no_terminal_raw(tmp_path):
    "Issue 53: `estimate` printed the model's name as given: a title sequence reached the terminal."
    spec = tmp_path / "e.yaml"
    spec.write_text("run_id: e\nstages: [10_claims]\nparameters: {question_rewrite_sample: 1}\n")
    name = "\x1b]0;pwned\x07gpt-4o"
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs", "--setting", "llm.backend=openai",
                    "--setting", f"llm.model={name}", "--setting", "llm.base_url=http://127.0.0.1:9/v1")
    assert "\x1b" not in p.stdout + p.stderr and "\x07" not in p.stdout + p.stderr
    assert "\\x1b]0;pwned\\x07gpt-4o" in p.stdout, p.stdout[-1500:]


def test_the_set_up_scripts_keep_a_path_with_a_space_one_word():
    """Issue 53: `$PIP install` (PIP="$VENV/bin/python -m pip") split a virtual environment's path with a space in
    it. The pip command is an array, expanded quoted, in both set-up scripts; bash reads them both."""
    import re
    from conftest import ROOT
    for f in (ROOT / "setup.sh", ROOT / "scripts" / "setup_vllm_cpu.sh"):
        text = f.read_text()
        assert re.search(r'PIP=\("\$VENV/bin/python" -m pip\)', text) and '"${PIP[@]}" install' in text, f
        assert not re.search(r"\$PIP\b", text), f
        assert subprocess.run(["bash", "-n", str(f)]).returncode == 0


def test_parse_checks_the_documented_shape_as_a_collection_does(tmp_path):
    """Issue 53: `groundbench parse` skipped the shape check a collection makes: an answer whose citations are a string
    was parsed letter by letter. Now it is refused naming the field, as the collection records it."""
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"id": "x", "model": "sonar", "choices": [{"index": 0, "message": {
        "role": "assistant", "content": "It is false[1]."}}], "citations": "https://a.org/x"}))
    one_error(groundbench("parse", "--provider", "perplexity-api", "--json", f),
              "not a perplexity-api response of the expected shape: citations:")
