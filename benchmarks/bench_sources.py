"""Benchmark: text extraction throughput (pages per second, one core) and fetch throughput against a local
server with concurrency 1 vs 16 (the server answers after 50 ms, like a nearby web server). One JSON line.

The pages: 300 HTML articles built from ExpertQA's evidence passages (real page text) (8 passages a page) inside
navigation,
sidebar and footer boilerplate.

    python benchmarks/bench_sources.py [--pages 300] [--fetch 200]"""
import argparse
import json
import os
import platform
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from groundbench.collect.expertqa import import_expertqa
from groundbench.sources.extract import extract
from groundbench.sources.fetch import FetchSettings, fetch_all

ap = argparse.ArgumentParser()
ap.add_argument("--pages", type=int, default=300)
ap.add_argument("--fetch", type=int, default=200)
args = ap.parse_args()

allt = list(import_expertqa().sources.text)
texts = [" ".join(allt[(8 * i + k) % len(allt)] for k in range(8)) for i in range(args.pages)]  # 8 passages a page
nav = "<nav>" + " | ".join(f"<a href='/s{i}'>Section {i}</a>" for i in range(40)) + "</nav>"
side = "<aside>" + "".join(f"<div class='ad'>Sponsored link {i}: buy now</div>" for i in range(30)) + "</aside>"
foot = "<footer>" + " ".join(f"<a href='/f{i}'>Footer link {i}</a>" for i in range(60)) + " Copyright.</footer>"
pages = [(
    f"<html><head><title>Article {i}</title><meta name='author' content='A. Writer'><meta "
    f"property='article:published_time' content='2023-0{1 + i % 9}-1{i % 9}'>"
          f"</head><body>{nav}{side}<article><h1>Article {i}</h1>" + "".join(f"<p>{p}</p>" for p in t.split(
              ". ")) + f"</article>{foot}</body></html>").encode()
         for i, t in enumerate(texts)]

t0 = time.perf_counter()
chars = sum(len(extract(p, "text/html; charset=utf-8", f"https://example.org/{i}").text) for i, p in enumerate(pages))
t_extract = time.perf_counter() - t0


class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        time.sleep(0.05)
        body = pages[int(self.path.strip("/").split("/")[-1]) % len(pages)]
        self.send_response(200); self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers(); self.wfile.write(body)


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{srv.server_address[1]}"
res = {}
for conc in (1, 16):
    urls = [f"{base}/c{conc}/{i}" for i in range(args.fetch)]
    cfg = FetchSettings(concurrency=conc, per_host=conc, allow_private=True)
    t0 = time.perf_counter()
    recs = fetch_all(urls, cfg)
    dt = time.perf_counter() - t0
    assert all(r.status == 200 for r in recs)
    res[conc] = round(len(urls) / dt, 1)
srv.shutdown()
print(json.dumps({"benchmark": "sources", "pages": len(pages),
                  "avg_page_kb": round(sum(map(len, pages)) / len(pages) / 1024, 1),
                  "extract_pages_per_s": round(len(pages) / t_extract, 1), "extracted_chars": chars,
                  "fetch_urls": args.fetch, "fetch_per_s_concurrency_1": res[1], "fetch_per_s_concurrency_16": res[16],
                  "server_latency_ms": 50,
                  "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"}))
