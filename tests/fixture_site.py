"""A local HTTP server for the assistant fixture sites (tests/fixtures/<site>.html) on 127.0.0.1.
It serves the page with the chosen variant, and counts the prompts each page reports as sent."""
import json
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from groundbench.collect.base import Archive
from groundbench.collect.browser import BrowserCollector
from groundbench.core import Prompt

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QWEN_SOURCES = [{"url": "https://www.bbc.co.uk/news/health-1", "title": "BBC News", "hostname": "bbc.co.uk"},
                {"url": "https://www.reuters.com/fact-check/x", "title": "Reuters", "hostname": "reuters.com"},
                {"url": "https://baike.baidu.com/item/mRNA", "title": "百度百科", "hostname": "百度"},
                {"url": "https://www.reuters.com/world/vaccines-y", "title": "Reuters", "hostname": "reuters.com"}]


class FixtureSite:
    def __init__(self, name: str, variant: str = ""):
        self.name, self.variant, self.sent = name, variant, Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a): pass

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                if u.path == "/sent":
                    site.sent[urllib.parse.parse_qs(u.query).get("p", [""])[0]] += 1
                    return self._send(b"ok", "text/plain")
                if u.path == "/common.js":
                    js = (FIXTURES / "common.js").read_text().replace("__VARIANT__", site.variant)
                    return self._send(js.encode(), "application/javascript")
                if u.path in ("/", "/index.html") or u.path.startswith("/c/"):
                    return self._send((FIXTURES / f"{site.name}.html").read_bytes(), "text/html; charset=utf-8")
                self.send_error(404)

            def do_POST(self):
                # Qwen Chat's chat API in its 2026 shape: server-sent events whose chunks carry
                # choices[0].delta {phase: web_search | answer, extra.web_search_info[], content}
                u = urllib.parse.urlsplit(self.path)
                if u.path != "/api/v2/chat/completions": return self.send_error(404)
                n = int(self.headers.get("content-length") or 0)
                prompt = json.loads(self.rfile.read(n) or b"{}").get("prompt", "")
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-store")
                self.end_headers()
                chunks = [{"phase": "web_search", "extra": {"web_search_info": QWEN_SOURCES}}]
                chunks += [{"phase": "answer", "content": t} for t in (
                    f"You asked: {prompt}\n\n", "This claim is false, as reported.[[1]]\n\n",
                    "- Fact-checkers debunked it.[[2]]\n- An encyclopedia explains mRNA.[[3]]\n\n",
                    "Please rely on trusted sources.[[4]]")]
                try:
                    for c in chunks:
                        event = json.dumps({"choices": [{"delta": c}]}, ensure_ascii=False)
                        self.wfile.write(b"data: " + event.encode() + b"\n\n")
                        self.wfile.flush()
                        time.sleep(0.3)
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError): pass

            def _send(self, data, ctype):
                self.send_response(200)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str: return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":  # serve a fixture for a look in a browser: python tests/fixture_site.py chatgpt [variant]
    import sys, time
    with FixtureSite(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "") as s:
        print(s.url, flush=True)
        while True: time.sleep(3600)



# what the tests of the browser collector share: one prompt, a collector per assistant YAML, one prompt collected
PROMPT = Prompt("H1", "Health", "fact_checker", 1, "Fact-check: mRNA vaccines alter human DNA, with evidence")


def assistant(name):
    "The browser collector of the assistant `name` (its YAML), made with the keyword arguments given."
    return lambda config=name, **kw: BrowserCollector(config, **kw)


def collect_one(cls, site, tmp_path, **kw):
    "One prompt collected from the fixture `site` by the collector class `cls`: (archive, its record, conversation)."
    ar = Archive(tmp_path / "collect")
    conv = cls(base_url=site.url, delay_s=0, **kw).collect([PROMPT], ar, progress=False)[0]
    return ar, ar.records()[0], conv
