"""API collectors against a local HTTP server that answers with the documented response shapes
(OpenAI Responses with web_search url_citation annotations; Perplexity Sonar chat completions).
The remote APIs cannot be reached here: this server stands in for them at the HTTP boundary."""
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from conftest import PageHandler, reparse_archived
from groundbench.collect.api import OpenAIResponsesCollector, PerplexityCollector
from groundbench.collect.base import Archive, CollectionError
from groundbench.core import Prompt

PROMPTS = [Prompt("H1", "Health", "fact_checker", 1, "Is it true that mRNA vaccines alter DNA?"),
           Prompt("H2", "Health", "fact_checker", 1, "Is it true that coughing helps in a heart attack?")]


def responses_body(prompt):
    text = (f"No. mRNA vaccines do not alter DNA ([cdc.gov](https://www.cdc.gov/v?utm_source=openai)). "
            f"The mRNA stays outside the nucleus ([nih.gov](https://www.nih.gov/m?utm_source=openai)).\n\n"
            f"About: {prompt}")
    anns = [{"type": "url_citation", "start_index": m.start(), "end_index": m.end(), "url": m.group(1),
             "title": m.group(1).split("/")[2]}
            for m in re.finditer(r"\(\[[^\]]+\]\((\S+?)\)\)", text)]
    return {"id": "resp_1", "object": "response", "model": "gpt-4o-2024-08-06", "status": "completed", "output": [
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": prompt, "sources": [{"type": "url", "url": "https://www.cdc.gov/v"}]}},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": text, "annotations": anns}]}],
        "usage": {"input_tokens": 10, "output_tokens": 30}}


def sonar_body(prompt):
    return {"id": "x", "model": "sonar", "object": "chat.completion", "created": 0,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                        "content": f"The claim is false[2]. Heart attacks need emergency care[1][2].\n\n"
                                   f"Question was: {prompt}"}}],
            "citations": ["https://www.heart.org/cough-cpr", "https://www.bhf.org.uk/myth", "https://example.com/unused"],
            "search_results": [{"title": "AHA", "url": "https://www.heart.org/cough-cpr", "date": "2024-01-01"},
                               {"title": "BHF", "url": "https://www.bhf.org.uk/myth"}, {"title": "Unused", "url": "https://example.com/unused"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52}}


class API(BaseHTTPRequestHandler):
    script, seen = [], []

    def log_message(self, *a): pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).seen.append((self.path, dict(self.headers), body))
        status = type(self).script.pop(0) if type(self).script else 200
        if status != 200:
            data = b'{"error": {"message": "slow down"}}'
        elif self.path.endswith("/responses"):
            data = json.dumps(responses_body(body["input"])).encode()
        else:
            data = json.dumps(sonar_body(body["messages"][-1]["content"])).encode()
        self.send_response(status)
        if status == 429: self.send_header("Retry-After", "1")
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def api_server():
    API.script, API.seen = [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), API)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_openai_responses_collector(api_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-test-key")
    API.script = [429]
    ar = Archive(tmp_path / "c")
    convs = OpenAIResponsesCollector("gpt-4o", base_url=api_server + "/v1", backoff_s=0.01).collect(PROMPTS, ar,
                                                                                                     progress=False)
    path, headers, body = API.seen[-1]
    assert path == "/v1/responses" and body["tools"] == [{"type": "web_search"}] and body["tool_choice"] == "required"
    assert headers["Authorization"] == "Bearer sk-secret-test-key"
    assert len(API.seen) == 3  # one 429 retried, then two prompts
    c = convs[0]
    assert c.model == "gpt-4o-2024-08-06"
    assert [s.text for s in c.segments][:2] == ["No.", "mRNA vaccines do not alter DNA."]
    # "No." carries no marker of its own: the marker ending its paragraph covers it
    assert [(s.citation_indices, s.uncited) for s in c.segments][:3] == [((2,), False), ((1,), False), ((2,), False)]
    assert [x.url for x in c.citations] == ["https://www.cdc.gov/v", "https://www.nih.gov/m"]
    # keys never reach the run folder
    for f in (tmp_path / "c").rglob("*"):
        if f.is_file(): assert b"sk-secret-test-key" not in f.read_bytes()
    # resumable: nothing is requested again
    n = len(API.seen)
    OpenAIResponsesCollector("gpt-4o", base_url=api_server + "/v1").collect(PROMPTS, ar, progress=False)
    assert len(API.seen) == n
    # the archived response re-parses to the same record
    rec = ar.records("openai-responses")[0]
    assert reparse_archived(ar, rec, "openai-responses", tmp_path)["segments"] == rec["parsed"]["segments"]


def test_perplexity_sonar_collector(api_server, tmp_path, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-test")
    ar = Archive(tmp_path / "c")
    c = PerplexityCollector("sonar", base_url=api_server).collect(PROMPTS[:1], ar, progress=False)[0]
    assert API.seen[0][0] == "/chat/completions" and API.seen[0][1]["Authorization"] == "Bearer pplx-test"
    assert [(x.index, x.url, x.title) for x in c.citations] == [(1, "https://www.bhf.org.uk/myth", "BHF"),
                                                                 (2, "https://www.heart.org/cough-cpr", "AHA")]
    assert [x.url for x in c.uncited_panel_sources] == ["https://example.com/unused"]
    assert [(s.text, s.citation_indices, s.uncited) for s in c.segments] == [
        ("The claim is false.", (1,), False), ("Heart attacks need emergency care.", (1, 2), False),
        (f"Question was: {PROMPTS[0].text}", (1, 2), True)]


def test_api_error_stops_with_prompt_and_status(api_server, tmp_path):
    API.script = [401]
    ar = Archive(tmp_path / "c")
    with pytest.raises(CollectionError, match="HTTP 401"):
        PerplexityCollector("sonar", base_url=api_server).collect(PROMPTS, ar, progress=False)
    assert not ar.records()


class EchoingKey(BaseHTTPRequestHandler):
    "An API that refuses the key it was sent and echoes it in its error body, as some do (`API key not valid: <key>`)."
    def log_message(self, *a): pass

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        data = json.dumps({"error": {"message": f"API key not valid: {key}. Please pass a valid API key."}}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_an_error_body_that_echoes_the_key_never_puts_it_in_the_run_folder_or_the_terminal(tmp_path):
    """Issue 44: the key a run sent comes back in the API's error body. The run stops with the prompt named, and neither
    its manifest, its executed notebooks, any other file of the run folder, nor what it printed holds the key."""
    from conftest import groundbench
    key = "pplx-Zq7mT2vK9xR4bN8cW1yL5hJ3"
    srv = ThreadingHTTPServer(("127.0.0.1", 0), EchoingKey)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        spec = tmp_path / "echo.yaml"
        spec.write_text(yaml.safe_dump({"run_id": "echo", "stages": ["10_claims", "20_collect"], "parameters": {
            "question_rewrite_sample": 0, "source": "api", "provider": "perplexity-api", "model": "sonar",
            "base_url": f"http://127.0.0.1:{srv.server_address[1]}", "sample": 1}}))
        p = groundbench("run", spec, "--runs-dir", tmp_path / "runs", env={"PERPLEXITY_API_KEY": key})
    finally:
        srv.shutdown()
    assert p.returncode != 0 and "HTTP 401" in p.stderr and "API key not valid: [redacted]" in p.stderr, p.stderr
    assert key not in p.stdout + p.stderr
    files = [f for f in (tmp_path / "runs" / "echo").rglob("*") if f.is_file()]
    assert any(f.name == "manifest.json" for f in files) and any(f.suffix == ".ipynb" for f in files)
    holding = [str(f) for f in files if key.encode() in f.read_bytes()]
    assert not holding, holding
    assert "[redacted]" in (tmp_path / "runs" / "echo" / "manifest.json").read_text()


class Hostile(BaseHTTPRequestHandler):
    "An API that trickles its answer a byte at a time, never answers, or answers with a body past any reason."
    def log_message(self, *a): pass

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        if self.path.startswith("/never"):
            time.sleep(8); return
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        try:
            for _ in range(40):
                self.wfile.write(b" " if self.path.startswith("/trickle") else b" " * 1_000_000)
                self.wfile.flush()
                if self.path.startswith("/trickle"): time.sleep(0.5)
        except OSError: pass   # the client gave up, as it should


@pytest.mark.parametrize("kind, said", [("trickle", "no whole answer within 2 s (the total deadline)"),
                                        ("never", "no whole answer within 2 s (the total deadline)"),
                                        ("huge", "the answer passed 5,242,880 bytes (the size cap)")])
def test_a_trickling_silent_or_huge_answer_fails_within_its_limits_naming_the_url_and_prompt(tmp_path, kind, said):
    "Issue 44: httpx's timeouts bound each read, not the whole exchange; the collector's deadline and cap bound both."
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/{kind}"
    ar, t0 = Archive(tmp_path / "a"), time.monotonic()
    try:
        with pytest.raises(CollectionError) as e:
            PerplexityCollector("sonar", base_url=url, max_retries=0, deadline_s=2,
                                max_bytes=5 * 2**20).collect(PROMPTS[:1], ar, progress=False)
    finally:
        srv.shutdown()
    assert time.monotonic() - t0 < 6, time.monotonic() - t0
    pid = PROMPTS[0].prompt_id
    assert f"prompt {pid}" in str(e.value) and f"{url}/chat/completions: {said}" in str(e.value), str(e.value)
    assert not ar.has("perplexity-api", pid)


MALFORMED = {   # one field of the wrong type per case, as a provider's answer might change under us
    "perplexity-api": [("content a number", lambda b: b["choices"][0]["message"].update(content=7)),
                       ("message a list", lambda b: b["choices"][0].update(message=[1])),
                       ("a citation an object", lambda b: b.update(citations=[{"u": 1}, 2, None])),
                       ("a body that is not JSON", lambda b: b"<html>Service temporarily unavailable</html>"),
                       # issue 53: depth in a free-form field once raised RecursionError after the answer was archived
                       ("usage nested 5,000 deep", lambda b: json.dumps(b).encode()[:-1] + b', "usage": '
                        + b"[" * 5000 + b"]" * 5000 + b"}"),
                       ("usage nested 200 deep", lambda b: json.dumps(b).encode()[:-1] + b', "usage": '
                        + b'{"a": ' * 200 + b"1" + b"}" * 200 + b"}"),
                       # a 200 answer whose gzip body is corrupt: httpx's DecodingError once escaped every handler
                       ("a corrupt gzip body", lambda b: (b"\x1f\x8b\x08\x00 not gzip at all",
                                                          [("content-encoding", "gzip")]))],
    "openai-responses": [("output an object", lambda b: b.update(output={"type": "message"})),
                         ("text null", lambda b: b["output"][1]["content"][0].update(text=None)),
                         ("an offset a string", lambda b: b["output"][1]["content"][0]["annotations"][0].update(
                             start_index="twelve"))]}


class Shapes(BaseHTTPRequestHandler):
    "Answers the first prompt with a malformed body (the case set by the test), the others well; counts requests."
    break_it, calls = None, []

    def log_message(self, *a): pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        prompt = body.get("input") or body["messages"][-1]["content"]
        type(self).calls.append(prompt)
        out = responses_body(prompt) if self.path.endswith("/responses") else sonar_body(prompt)
        broken = type(self).break_it(out) if prompt == PROMPTS[0].text else None
        data, extra = broken if isinstance(broken, tuple) else (broken, [])
        data = data if isinstance(data, bytes) else json.dumps(out).encode()
        self.send_response(200)
        for k, v in extra: self.send_header(k, v)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.parametrize("provider, case", [(p, i) for p, cases in MALFORMED.items() for i in range(len(cases))])
def test_an_answer_of_the_wrong_shape_costs_one_prompt_is_archived_and_read_again_not_asked_again(tmp_path, provider,
                                                                                                  case):
    """Issue 44: a field of the wrong type once raised out of the collector and lost the run. Now the answer is archived
    before it is parsed, the failure is recorded with the prompt and the field, the collection goes on, and a rerun
    reads the archive again instead of asking (and parses it, once the parser can)."""
    from groundbench.collect.api import CHAT_API_COLLECTORS, answer_json, shape_failure
    what, breaker = MALFORMED[provider][case]
    Shapes.break_it, Shapes.calls = breaker, []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Shapes)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}" + ("/v1" if provider == "openai-responses" else "")
    try:
        c = CHAT_API_COLLECTORS[provider]("m", base_url=base, backoff_s=0.01)
        ar = Archive(tmp_path / "a")
        convs = c.collect(PROMPTS, ar, progress=False)
        assert [x.prompt_id for x in convs] == [PROMPTS[1].prompt_id], what          # the run went on
        rec = json.loads(ar.record_path(provider, PROMPTS[0].prompt_id).read_text())
        failed = rec["parse_failed"]
        assert failed["prompt_id"] == PROMPTS[0].prompt_id and failed["field"] and failed["found"], failed
        assert ar.read(rec["response"])                                                  # the raw answer is kept
        again = c.collect(PROMPTS, ar, progress=False)
        assert len(Shapes.calls) == 2 and len(again) == 1                               # no second request
    finally:
        srv.shutdown()
    again = shape_failure(c.parse, answer_json(ar.read(rec["response"])), provider, "x", c.shape)[1]
    assert again["field"] == failed["field"], (again, failed)


class OddClaude(PageHandler):
    "Claude's Messages API answering the first prompt with a JSON list, the second with null."
    def do_POST(self):
        prompt = json.loads(self.rfile.read(int(self.headers["content-length"])))["messages"][0]["content"]
        self.send(200, b"[1, 2]" if prompt == PROMPTS[0].text else b"null", "application/json")


def test_claude_answers_that_are_a_list_or_null_are_parse_failures_like_the_others(tmp_path):
    "Issue 53: Claude's collector called .get on them (AttributeError) where Perplexity's recorded a parse failure."
    from groundbench.collect.api_search import ClaudeCollector
    srv = ThreadingHTTPServer(("127.0.0.1", 0), OddClaude)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    ar = Archive(tmp_path / "a")
    try:
        convs = ClaudeCollector("claude", base_url=f"http://127.0.0.1:{srv.server_address[1]}",
                                backoff_s=0.01).collect(PROMPTS[:2], ar, progress=False)
    finally:
        srv.shutdown()
    assert convs == []
    for p, field, found in ((PROMPTS[0], "[0]", "int 1"), (PROMPTS[1], "(the answer)", "None")):
        failed = json.loads(ar.record_path("claude-api", p.prompt_id).read_text())["parse_failed"]
        assert failed["prompt_id"] == p.prompt_id and failed["field"] == field and found in failed["found"], failed


def test_a_collection_without_one_readable_answer_ends_with_its_counts(tmp_path):
    "Issue 53: every answer a parse failure (a provider changed its shape) once crashed the stage on empty counts."
    from conftest import groundbench
    class Changed(Shapes):
        def do_POST(self):   # every answer in a shape the parser does not know
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"choices": "a provider changed its shape"}')
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Changed)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump({"run_id": "s", "stages": ["10_claims", "20_collect"], "parameters": {
            "question_rewrite_sample": 0, "source": "api", "provider": "perplexity-api", "model": "sonar",
            "base_url": f"http://127.0.0.1:{srv.server_address[1]}", "sample": 1}}))
        p = groundbench("run", spec, "--runs-dir", tmp_path / "runs", env={"PERPLEXITY_API_KEY": "k"})
    finally:
        srv.shutdown()
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    counts = json.loads((tmp_path / "runs" / "s" / "manifest.json").read_text())["stages"]["20_collect"]["counts"]
    assert counts["conversations"] == 0 and counts["collected_now"] == 1, counts


def collected_from(handler, collector, archive, prompts=PROMPTS[:1]):
    "What `collector` collects of `prompts` from a local server answering with `handler` (the provider's stand-in)."
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    collector.base_url = f"http://127.0.0.1:{srv.server_address[1]}"
    try: return collector.collect(prompts, archive, progress=False)
    finally: srv.shutdown()


class OddSpans(PageHandler):
    "A Responses API answer with odd annotations: a null end_index, a 10 MB URL, a sentence whose only link is not one."
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        text = ("Vitamin A helps ([ftp](ftp://x.org/a)). Measles kills ([cdc](https://www.cdc.gov/m)). "
                "Huge ([big](https://big.example/x)). Null ([nih](https://www.nih.gov/n)).")
        anns = []
        for m in re.finditer(r"\(\[[^\]]+\]\((\S+?)\)\)", text):
            url = m.group(1) if "big." not in m.group(1) else "https://big.example/" + "x" * 10_000_000
            anns.append({"type": "url_citation", "url": url, "title": "t", "start_index": m.start(),
                         "end_index": None if "nih" in url else m.end()})
        body = {"id": "r", "object": "response", "model": "gpt-4o", "status": "completed", "output": [
            {"type": "message", "id": "m", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": anns}]}]}
        self.send(200, json.dumps(body).encode(), "application/json")


def test_odd_spans_cost_nothing_but_themselves(tmp_path):
    """Issue 53: a null end_index lost the whole answer (a TypeError read as a shape failure), a 10 MB "URL" became a
    citation, and a sentence whose only link was rejected took the next sentence's citation. Now the answer is kept,
    the null span counted (`bad_spans`), the giant URL rejected, and the sentence uncited."""
    ar = Archive(tmp_path)
    convs = collected_from(OddSpans, OpenAIResponsesCollector("gpt-4o", api_key_env="NO_KEY"), ar)
    assert len(convs) == 1, ar.records()
    c = convs[0]
    assert [x.url for x in c.citations] == ["https://www.cdc.gov/m"]
    segs = {s.text: s for s in c.segments}
    assert segs["Vitamin A helps."].uncited and not segs["Measles kills."].uncited
    assert segs["Huge."].uncited                                            # its only link was the giant one
    rec = json.loads(ar.record_path("openai-responses", PROMPTS[0].prompt_id).read_text())
    assert rec["parsed"]["bad_spans"] == 1 and len(rec["parsed"]["rejected_urls"]) == 2


class HugeAnswer(PageHandler):
    "A chat completion whose answer is 20 MB of sentences."
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        body = {"id": "x", "model": "sonar", "object": "chat.completion", "created": 0, "citations": ["https://a.org/"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "It is so[1]. " * 1_600_000}}]}
        self.send(200, json.dumps(body).encode(), "application/json")


def test_an_answer_larger_than_any_real_one_is_archived_and_not_parsed(tmp_path):
    "Issue 53: a 40 MB answer took 186 s and 6.5 GB to segment. Past 16 MB it is archived and recorded as a failure."
    t0, ar = time.monotonic(), Archive(tmp_path)
    convs = collected_from(HugeAnswer, PerplexityCollector("sonar", api_key_env="NO_KEY"), ar)
    rec = json.loads(ar.record_path("perplexity-api", PROMPTS[0].prompt_id).read_text())
    assert convs == [] and "archived, not parsed: too large" in rec["parse_failed"]["error"], rec["parse_failed"]
    assert (tmp_path / rec["response"]).stat().st_size > 16 * 2**20 and time.monotonic() - t0 < 60
