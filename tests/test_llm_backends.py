"""The LLM layer against real models: llama.cpp in process and llama.cpp's OpenAI-compatible server.
Retries are tested against a local HTTP server that answers 429/5xx; only vLLM is faked (see test_vllm_backend.py)."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pydantic
import pytest

from groundbench.llm.client import LLM, ChatRequest, LLMCache, complete_json, llm_from_settings, make_backend, request
from groundbench.llm.backends import LLMHTTPError, OpenAIBackend


class Verdict(pydantic.BaseModel):
    label: str = pydantic.Field(max_length=40)
    rationale: str = pydantic.Field(max_length=200)


PROMPT = "Is water wet? Reply as JSON with a short label and a short rationale."


def test_llamacpp_in_process_structured_and_cached(isolated_settings):
    llm = llm_from_settings(isolated_settings)
    assert llm.smoke and llm.backend.describe()["revision"]  # sha256 of the GGUF
    reqs = [request(llm, PROMPT, max_tokens=80), request(llm, PROMPT, max_tokens=80),
            request(llm, "Say hello as JSON.", max_tokens=80)]
    res = complete_json(llm, reqs, Verdict, step="judge", progress=False)
    assert all(r.parse_status in ("ok", "repaired", "failed") for r in res)
    for r in res:  # a value exactly when parsing succeeded; never a default label
        assert (r.value is None) == (r.parse_status == "failed")
        if r.value: Verdict(**r.value)
    st = llm.stats["judge"]
    assert st.deduplicated >= 1 and st.calls >= 2 and st.completion_tokens > 0
    first = [r.value for r in res]
    # same settings, new client: everything from the disk cache, identical answers
    llm2 = llm_from_settings(isolated_settings)
    res2 = complete_json(llm2, reqs, Verdict, step="judge", progress=False)
    assert llm2.stats["judge"].calls == 0 and llm2.stats["judge"].cache_hits >= 3
    assert [r.value for r in res2] == first
    # another output-changing setting (max tokens) is another cache entry
    llm3 = llm_from_settings(isolated_settings)
    llm3.complete([request(llm3, PROMPT, max_tokens=20)], progress=False)
    assert llm3.stats["default"].calls == 1


def test_llamacpp_holds_the_bundled_model_to_a_grammar(isolated_settings):
    "A text format (VERIFY's final bracketed label) under a GBNF grammar: the real model's answer is in the format."
    llm = llm_from_settings(isolated_settings)
    g = 'root ::= [^\\[]{0,40} "[" ("Supported" | "Contradicted" | "Unverifiable") "]"'
    ask = ChatRequest.of("Is the sky green? Think, then give your label.", max_tokens=40, grammar=g)
    out = llm.backend.generate([ask])[0].text
    import re
    assert re.fullmatch(r"[^\[]{0,40}\[(Supported|Contradicted|Unverifiable)\]", out, re.S), out


def test_temperature_zero_is_deterministic(isolated_settings):
    llm = llm_from_settings(isolated_settings)
    a = llm.backend.generate([ChatRequest.of("Name a colour.", max_tokens=16)])[0].text
    b = llm.backend.generate([ChatRequest.of("Name a colour.", max_tokens=16)])[0].text
    assert a == b and a


@pytest.mark.llama_server
def test_openai_backend_against_llama_server(llama_server, isolated_settings, tmp_path):
    llm = llm_from_settings(isolated_settings, backend="openai", base_url=llama_server, model="smollm2-server",
                            structured="json_object")
    out = llm.complete([request(llm, "Say hi.", max_tokens=16)], progress=False)
    assert out[0].text and out[0].completion_tokens > 0 and out[0].prompt_tokens > 0
    res = complete_json(llm, [request(llm, PROMPT, max_tokens=80)], Verdict, progress=False)
    assert res[0].parse_status in ("ok", "repaired", "failed")
    assert (res[0].value is None) == (res[0].parse_status == "failed")
    # the server's cache entries are its own: the same prompt on the in-process backend is a new call
    local = llm_from_settings(isolated_settings)
    local.complete([request(local, "Say hi.", max_tokens=16)], progress=False)
    assert local.stats["default"].calls == 1


@pytest.mark.llama_server
def test_openai_backend_auto_structured_mode(llama_server, isolated_settings):
    """auto: OpenAI's json_schema form first; a server that refuses it (400) gets llama.cpp's json_object form."""
    llm = llm_from_settings(isolated_settings, backend="openai", base_url=llama_server, model="smollm2-server",
                            structured="auto")
    res = complete_json(llm, [request(llm, PROMPT, max_tokens=80)], Verdict, progress=False)
    assert res[0].parse_status in ("ok", "repaired", "failed")
    assert llm.backend.structured in ("auto", "json_object")


class FlakyHandler(BaseHTTPRequestHandler):
    """Answers from a script: a list of (status, headers) before a 200; records arrival times and concurrency."""
    script: list = []
    log: list = []
    inflight = 0
    max_inflight = 0
    lock = threading.Lock()
    delay = 0.0

    def log_message(self, *a): pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if not self.path.endswith("/chat/completions"):      # no /tokenize here: the client counts without it
            self.send_response(404); self.send_header("content-length", "0"); self.end_headers(); return
        cls = type(self)
        with cls.lock:
            cls.log.append((time.time(), body))
            cls.inflight += 1
            cls.max_inflight = max(cls.max_inflight, cls.inflight)
            step = cls.script.pop(0) if cls.script else (200, {})
        time.sleep(cls.delay)
        status, headers = step
        answer = {"message": {"content": body["messages"][-1]["content"].upper()}, "finish_reason": "stop"}
        payload = ({"choices": [answer], "usage": {"prompt_tokens": 3, "completion_tokens": 2}} if status == 200
                   else {"error": "busy"})
        data = json.dumps(payload).encode()
        with cls.lock: cls.inflight -= 1   # before the answer leaves: a client thread may send its next request at once
        self.send_response(status)
        for k, v in headers.items(): self.send_header(k, v)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def flaky_server():
    FlakyHandler.script, FlakyHandler.log, FlakyHandler.inflight = [], [], 0
    FlakyHandler.max_inflight, FlakyHandler.delay = 0, 0.0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FlakyHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", FlakyHandler
    srv.shutdown()


def test_retries_honour_retry_after(flaky_server, monkeypatch):
    base, h = flaky_server
    monkeypatch.setenv("TEST_KEY", "sk-test")
    h.script = [(429, {"Retry-After": "1"}), (503, {}), (200, {})]
    b = OpenAIBackend("m", base_url=base, api_key_env="TEST_KEY", backoff_s=0.05)
    out = b.generate([ChatRequest.of("hello")])
    assert out[0].text == "HELLO" and out[0].prompt_tokens == 3
    times = [t for t, _ in h.log]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.95  # waited the Retry-After second
    assert times[2] - times[1] < 0.95   # no Retry-After: short exponential backoff


def test_non_retryable_error_is_raised_with_status(flaky_server):
    base, h = flaky_server
    h.script = [(401, {})]
    b = OpenAIBackend("m", base_url=base, backoff_s=0.01, structured="none")
    with pytest.raises(LLMHTTPError, match="HTTP 401"):
        b.generate([ChatRequest.of("x")])
    assert len(h.log) == 1


def test_retries_give_up_after_max(flaky_server):
    base, h = flaky_server
    h.script = [(500, {})] * 10
    b = OpenAIBackend("m", base_url=base, backoff_s=0.01, max_retries=2)
    with pytest.raises(LLMHTTPError, match="HTTP 500"):
        b.generate([ChatRequest.of("x")])
    assert len(h.log) == 3


def test_concurrency_is_bounded_and_used(flaky_server, tmp_path):
    base, h = flaky_server
    h.delay = 0.3
    llm = LLM(OpenAIBackend("m", base_url=base, concurrency=4), LLMCache(tmp_path / "c.sqlite"))
    outs = llm.complete([ChatRequest.of(f"q{i}") for i in range(12)], progress=False)
    assert [o.text for o in outs] == [f"Q{i}" for i in range(12)]
    assert 2 <= h.max_inflight <= 4
    assert llm.stats["default"].calls == 12
    # the step's high-water mark, counted where the requests are sent, is what the server itself saw
    assert llm.stats["default"].in_flight_max == h.max_inflight
    one = LLM(OpenAIBackend("m", base_url=base, concurrency=1), LLMCache(tmp_path / "d.sqlite"))
    one.complete([ChatRequest.of(f"r{i}") for i in range(3)], step="judge", progress=False)
    assert one.stats["judge"].in_flight_max == 1      # a step sent one at a time shows as such


def test_a_concurrency_above_httpx_s_default_pool_reaches_the_server_within_the_deadline(tmp_path):
    """Issue 62 (6): at llm.concurrency 300 the server sees more than httpx's default 100 connections at once, and 300
    requests of 2 s each end within a 6 s deadline (none waits for a pooled connection inside its deadline)."""
    class Wide(ThreadingHTTPServer):
        request_queue_size = 1024       # the stand-in server accepts a burst of 300 (its default backlog is 5)
    FlakyHandler.script, FlakyHandler.log, FlakyHandler.inflight = [], [], 0
    FlakyHandler.max_inflight, FlakyHandler.delay = 0, 2.0
    srv = Wide(("127.0.0.1", 0), FlakyHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        b = OpenAIBackend("m", base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1", concurrency=300,
                          timeout_s=6, max_retries=0, structured="none")
        outs = b.generate([ChatRequest.of(f"q{i}") for i in range(300)])
    finally:
        srv.shutdown()
    assert [o.text for o in outs] == [f"Q{i}" for i in range(300)]
    assert FlakyHandler.max_inflight > 100, FlakyHandler.max_inflight


def test_json_schema_payload_forms(flaky_server):
    base, h = flaky_server
    schema = Verdict.model_json_schema()
    OpenAIBackend("m", base_url=base, structured="json_schema").generate([ChatRequest.of("a", schema=schema)])
    OpenAIBackend("m", base_url=base, structured="json_object").generate([ChatRequest.of("a", schema=schema)])
    f1, f2 = h.log[0][1]["response_format"], h.log[1][1]["response_format"]
    assert f1["type"] == "json_schema" and f1["json_schema"]["schema"] == schema
    assert f2 == {"type": "json_object", "schema": schema}
    assert h.log[0][1]["seed"] == 0 and h.log[0][1]["temperature"] == 0.0


def test_auto_mode_falls_back_on_400(flaky_server):
    base, h = flaky_server
    h.script = [(400, {})]
    b = OpenAIBackend("m", base_url=base, structured="auto")
    b.generate([ChatRequest.of("a", schema=Verdict.model_json_schema())])
    assert [x[1]["response_format"]["type"] for x in h.log] == ["json_schema", "json_object"]
    assert b.structured == "json_object"


def test_unknown_backend_and_missing_base_url():
    with pytest.raises(KeyError, match="unknown LLM backend 'nope'"):
        make_backend("nope", model="x")
    with pytest.raises(ValueError, match="llm.base_url"):
        make_backend("openai", model="x")


@pytest.mark.slow
def test_backend_gives_a_fresh_model_s_answers_whatever_came_before():
    """The in-process backend checks the grammar lazily (llm.greedy_grammar_check), which changes no token, and an
    answer does not depend on the request before it. Three of the study's own prompts (judge, SourceCheckup, SourceBench
    layout) under a JSON schema: llama-cpp-python's stock sampling on a model reset before every request, and our
    backend answering them in one order and in the reverse order, give byte-identical answers and token counts (the
    notebook 11_llm_client compares one more with one thread)."""
    from llama_cpp import Llama
    from groundbench.llm.client import load_prompt
    from groundbench.llm.backends import LlamaCppBackend, bundled_gguf, llama_threads
    page = "Measles vaccines are safe and effective, according to the WHO. They do not change DNA. " * 12
    schema = {"type": "object", "properties": {"supported": {"type": "boolean"}, "justification": {"type": "string"}},
              "required": ["supported", "justification"]}
    reqs = [load_prompt("sourcecheckup_support").render(statement="Vaccines change human DNA", source=page),
            load_prompt("judge").render(statement="Vaccines change human DNA", evidence=page),
            load_prompt("sourcebench_layout").render(url="https://example.org/a", text=page, length=len(page))]
    chat = [ChatRequest.of(m, schema, max_tokens=80, temperature=0.0, seed=0) for m in reqs]
    stock = Llama(model_path=str(bundled_gguf()), n_ctx=4096, n_threads=llama_threads(), seed=0, verbose=False)
    fresh = []
    for r in chat:
        stock.reset()
        r = stock.create_chat_completion(messages=r.message_dicts(), max_tokens=80, temperature=0.0, seed=0,
                                         response_format={"type": "json_object", "schema": r.schema_dict()})
        fresh.append((r["choices"][0]["message"]["content"], r["usage"]["prompt_tokens"],
                      r["usage"]["completion_tokens"]))
    ours = LlamaCppBackend(n_ctx=4096)
    forward = [(c.text, c.prompt_tokens, c.completion_tokens) for c in ours.generate(chat)]
    backward = [(c.text, c.prompt_tokens, c.completion_tokens) for c in ours.generate(chat[::-1])][::-1]
    assert fresh == forward == backward and all(a[0] for a in fresh)


def test_every_grammar_of_the_package_compiles_in_llama_cpp():
    "A grammar llama.cpp refuses can crash the process (a repetition nested in a repetition did): compile each one."
    from llama_cpp import LlamaGrammar
    from groundbench.groundedness.judge import judge_grammar
    from groundbench.groundedness.methods import FACT_GRAMMAR, VERIFY_LABELS
    from groundbench.groundedness.units import DECONTEXT_GRAMMAR, unit_grammar
    for g in (FACT_GRAMMAR, unit_grammar(), unit_grammar(VERIFY_LABELS), DECONTEXT_GRAMMAR, judge_grammar(1500),
              judge_grammar(300)):
        assert LlamaGrammar.from_string(g, verbose=False) is not None


class OddJudge(BaseHTTPRequestHandler):
    "An OpenAI-compatible endpoint gone wrong: it trickles its answer, sends 9 MB, or a completion without choices."
    def log_message(self, *a): pass

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        kind = self.path.split("/")[1]
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        try:
            if kind == "trickle":
                for ch in b'{"choices": [{"message": {"content": "ok"}}]}':
                    self.wfile.write(bytes([ch])); self.wfile.flush(); time.sleep(0.5)
            elif kind == "huge":
                self.wfile.write(b'{"choices": [{"message": {"content": "' + b"x" * (9 * 2**20) + b'"}}]}')
            else:
                self.wfile.write(b'{"choices": []}')
        except (BrokenPipeError, ConnectionResetError): pass


@pytest.mark.parametrize("kind, said", [("trickle", "no whole answer within 2 s (the total deadline)"),
                                        ("huge", "passed 8,388,608 bytes (the size cap)"),
                                        ("empty", "not a chat completion (IndexError")])
def test_the_judge_endpoint_has_a_total_deadline_a_size_cap_and_names_itself(kind, said):
    """Issue 53: a trickling server held a 5 s timeout for 40 s, a 300 MB answer was read whole, `{"choices": []}` was a
    bare IndexError. A local server plays the endpoint."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), OddJudge)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/{kind}/v1"
    try:
        b = OpenAIBackend("m", base_url=base, api_key_env="", timeout_s=2, max_retries=0, structured="none")
        t0 = time.monotonic()
        with pytest.raises((LLMHTTPError, RuntimeError)) as e:
            b.generate([ChatRequest.of("hi", max_tokens=5)])
        assert time.monotonic() - t0 < 10 and said in str(e.value) and base in str(e.value), str(e.value)[:300]
    finally:
        srv.shutdown()


def test_sourcebench_sends_its_three_independent_calls_together(flaky_server, tmp_path):
    """Issue 55: a page's content, metadata and layout calls do not wait for each other on a server (they went one
    kind after another: vLLM's log said 'Running: 1 reqs'); in flight never more than llm.concurrency. The server is
    a local stand-in for an OpenAI-compatible one (its answers are no scores: read as parse failures, asked again)."""
    import pandas as pd
    from groundbench.sourcebench import score_pages
    base, h = flaky_server
    h.delay = 0.4
    pages = pd.DataFrame({"query": ["q1", "q2"], "url": ["https://a.org/1", "https://b.org/2"],
                          "text": ["Page one text. " * 40, "Page two text. " * 40], "page_date": "2025-01-01"})
    llm = LLM(OpenAIBackend("m", base_url=base, concurrency=16, structured="none"), LLMCache(tmp_path / "c.sqlite"))
    out = score_pages(pages, llm, today="2025-06-01", progress=False, context_tokens=8192)
    assert h.max_inflight == 6, h.max_inflight          # 2 pages x 3 kinds at once (it was 2: one kind at a time)
    assert {s: llm.stats[f"sourcebench_{s}"].calls for s in ("content", "metadata", "layout")} == \
        {"content": 4, "metadata": 4, "layout": 4}      # each kind asked once more when unread, as scoring.py does
    assert {s: llm.stats[f"sourcebench_{s}"].in_flight_max for s in ("content", "metadata", "layout")} == \
        {"content": 2, "metadata": 2, "layout": 2}      # each step's own mark: its 2 pages at once
    assert (out.content_parse_status != "ok").all()
    h.max_inflight = 0
    llm = LLM(OpenAIBackend("m", base_url=base, concurrency=4, structured="none"), LLMCache(tmp_path / "d.sqlite"))
    score_pages(pages.assign(query=["q3", "q4"]), llm, today="2025-06-01", progress=False, context_tokens=8192)
    assert h.max_inflight == 4                          # bounded by the concurrency across the kinds


def test_jobs_run_at_once_on_one_client_send_an_identical_request_once(flaky_server, tmp_path):
    """Issue 55: SourceBench's variants, scored at once on a server (each on a view of the client), judge the same pages
    with the same prompts. Run one after another the second found the first's answers in the cache; at once neither
    did, and vLLM ran every call twice (bench_vllm_run: 4 calls a kind for 2). A request another job is sending is now
    waited for: the calls are those of one variant alone, whatever the timing (in flight together or cached after).
    The server is a local stand-in for an OpenAI-compatible one."""
    import pandas as pd
    from groundbench.llm.flight import absorb, concurrently, view
    from groundbench.sourcebench import score_pages
    base, h = flaky_server
    h.delay = 0.4
    pages = pd.DataFrame({"query": ["q1", "q2"], "url": ["https://a.org/1", "https://b.org/2"],
                          "text": ["Page one text. " * 40, "Page two text. " * 40], "page_date": "2025-01-01"})
    llm = LLM(OpenAIBackend("m", base_url=base, concurrency=16, structured="none"), LLMCache(tmp_path / "c.sqlite"))
    views = [view(llm), view(llm)]
    outs = concurrently(llm, {k: (lambda v=v: score_pages(pages, v, today="2025-06-01", progress=False,
                                                         context_tokens=8192)) for k, v in enumerate(views)})
    absorb(llm, views)
    kinds = ("content", "metadata", "layout")
    assert {s: llm.stats[f"sourcebench_{s}"].calls for s in kinds} == {s: 4 for s in kinds}   # as one job alone
    assert {s: llm.stats[f"sourcebench_{s}"].requests for s in kinds} == {s: 8 for s in kinds}
    assert len(h.log) == 12 and h.max_inflight <= 6
    assert outs[0].equals(outs[1])
