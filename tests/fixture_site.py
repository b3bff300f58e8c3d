"""A local HTTP server for the assistant fixture sites (tests/fixtures/<site>.html) on 127.0.0.1.
It serves the page with the chosen variant, and counts the prompts each page reports as sent."""
import threading
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


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
