"""Issue 53 (5): no secret in any file a run writes. A local HTTP server stands in for Perplexity's API (the remote API
cannot be reached here) and plants the key it was sent in every field of its answers; the key is held by a variable of a
custom name (`api_key_env`), the API's and the judge's base URLs carry `user:password@`. Every file of the runs folder
(records, archive, tables, manifest, executed notebooks, caches; binary included) and everything printed is searched."""
import base64
import json
import threading
from http.server import ThreadingHTTPServer

import pytest
import yaml

from conftest import PageHandler, groundbench

KEY = "labkey-Hq3Vn8Tz5Wm2Rx7Kc4"            # no provider's key shape: only its variable says it is a key
QUERY_KEY = "qkey-Zr4Mt8Lp2Wx6"             # in llm.base_url's query string (?api_key=)
API_PASSWORD = "api-pw-Lr6Ns1Qe9"             # in the collector's base URL
JUDGE_PASSWORD = "judge-pw-Fx2Ob7Yu4"         # in llm.base_url


class PlantingAPI(PageHandler):
    """Answers a chat completion with the key in every field; the second prompt in a shape nobody reads. (httpx sends
    the base URL's `user:password` as Basic authorization in place of the key's Bearer header: the server plants the
    key itself.)"""
    calls = []

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        key = KEY
        type(self).calls.append(self.headers.get("Authorization"))
        if len(type(self).calls) > 1:      # a shape change, with the key in it: a parse failure that keeps its field
            return self.send(200, json.dumps({"choices": f"moved, key {key}", "key": key}).encode(), "application/json")
        url = f"https://www.cdc.gov/flu?token={key}"
        body = {"id": key, "model": f"sonar-{key}", "object": "chat.completion", "created": 0, "echo": {"k": [key]},
                "choices": [{"index": 0, "finish_reason": "stop", "message": {   # a segment after the key's
                    "role": "assistant", "content": f"The claim is false[1]. Your key is {key}[2]. Flu kills[1]."}}],
                "citations": [url, f"https://www.nih.gov/{key}"],
                "search_results": [{"title": f"CDC {key}", "url": url, "date": key, "snippet": key},
                                   {"title": "NIH", "url": f"https://www.nih.gov/{key}"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "note": key}}
        self.send(200, json.dumps(body).encode(), "application/json")


class EchoingAPI(PageHandler):
    "Refuses the key and echoes it in its error body, with the Basic authorization it was sent (base64)."
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        key, sent = KEY, self.headers.get("Authorization")
        self.send(401, json.dumps({"error": {"message": f"key {key} is not valid; you sent {sent}"}}).encode(),
                  "application/json")


def _run(tmp_path, handler, run_id, stages):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        spec = tmp_path / f"{run_id}.yaml"
        spec.write_text(yaml.safe_dump({"run_id": run_id, "stages": stages, "parameters": {
            "question_rewrite_sample": 0, "source": "api", "provider": "perplexity-api", "model": "sonar",
            "api_key_env": "LAB_SONAR_VAR", "sample": 2,
            "base_url": f"http://lab:{API_PASSWORD}@127.0.0.1:{srv.server_address[1]}"}}))
        return groundbench("run", spec, "--runs-dir", tmp_path / "runs",
                           "--setting", f"llm.base_url=http://judge:{JUDGE_PASSWORD}@127.0.0.1:9/v1?api_key={QUERY_KEY}",
                           env={"LAB_SONAR_VAR": KEY})
    finally:
        srv.shutdown()


BASIC = base64.b64encode(f"lab:{API_PASSWORD}".encode()).decode()   # what httpx sends for the collector's URL
SECRETS = (KEY, API_PASSWORD, JUDGE_PASSWORD, QUERY_KEY, BASIC)


def _holding(folder, secrets=SECRETS):
    files = [f for f in folder.rglob("*") if f.is_file()]
    return files, [(str(f), s) for f in files for s in secrets if s.encode() in f.read_bytes()]


def test_a_key_planted_in_every_field_an_error_body_and_url_credentials_are_in_no_file_of_the_run(tmp_path):
    PlantingAPI.calls = []
    p = _run(tmp_path, PlantingAPI, "planted", ["10_claims", "20_collect", "30_sources", "40_credibility"])
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(PlantingAPI.calls) == 2, PlantingAPI.calls
    run = tmp_path / "runs" / "planted"
    files, holding = _holding(tmp_path / "runs")
    assert not holding, holding
    names = {f.name for f in files}
    assert {"manifest.json", "conversations.jsonl", "parse_failures_perplexity-api.csv"} <= names, sorted(names)
    assert any(f.suffix == ".ipynb" for f in files) and any("/archive/" in str(f) for f in files)
    # what was redacted is still there, marked: the answer, its cited URL, the parse failure and the manifest's URLs
    conv = (run / "20_collect" / "conversations.jsonl").read_text()
    assert "Your key is [redacted]" in conv and "https://www.cdc.gov/flu?token=[redacted]" in conv, conv[:2000]
    for c in map(json.loads, conv.splitlines()):     # a key masked at its own length: every span still on its text
        assert all(c["answer_text"][s["start"]:s["end"]] == s["text"] for s in c["segments"] if s["start"] >= 0)
        assert any(s["text"].startswith("Flu kills") for s in c["segments"]), c["segments"]
    assert "[redacted]" in (run / "20_collect" / "parse_failures_perplexity-api.csv").read_text()
    manifest = (run / "manifest.json").read_text()
    assert f"http://judge:{JUDGE_PASSWORD}" not in manifest and "http://[redacted]@127.0.0.1:9/v1" in manifest
    assert not [s for s in SECRETS if s in p.stdout + p.stderr]

    p = _run(tmp_path, EchoingAPI, "echoed", ["10_claims", "20_collect"])
    assert p.returncode != 0 and "HTTP 401" in p.stderr and "key [redacted] is not valid" in p.stderr, p.stderr[-2000:]
    files, holding = _holding(tmp_path / "runs" / "echoed")
    assert not holding and any(f.suffix == ".ipynb" for f in files), holding
    assert not [s for s in SECRETS if s in p.stdout + p.stderr]


def test_estimate_and_a_debug_traceback_print_no_credential(tmp_path):
    "Issue 62 (4): `estimate` prints its preflight lines redacted; GROUNDBENCH_DEBUG's traceback is redacted too."
    spec = tmp_path / "e.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "e", "stages": ["10_claims", "50_groundedness"],
                                    "parameters": {"question_rewrite_sample": 0}}))
    url = f"http://judge:{JUDGE_PASSWORD}@127.0.0.1:9/v1?api_key={QUERY_KEY}"
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs", "--setting", "llm.backend=openai",
                    "--setting", f"llm.base_url={url}", "--setting", "llm.model=m")
    assert "127.0.0.1:9" in p.stdout + p.stderr and not [s for s in SECRETS if s in p.stdout + p.stderr], p.stderr


def test_a_debug_traceback_is_redacted(monkeypatch, capsys):
    "GROUNDBENCH_DEBUG=1 shows the traceback of an error that escapes a command, an echoed bearer token redacted."
    import groundbench.cli.commands as commands
    def boom(): raise RuntimeError(f"the server said: Authorization: Bearer {KEY}")
    monkeypatch.setattr(commands, "groundbench_app", lambda: boom)
    monkeypatch.setenv("GROUNDBENCH_DEBUG", "1")
    with pytest.raises(SystemExit): commands.main()
    err = capsys.readouterr().err
    assert "Traceback" in err and "Bearer [redacted]" in err and KEY not in err, err
