"""Issue 31: Gemini, Claude and Grok through their APIs, against a local HTTP server that answers with each provider's
documented response shapes (tests/fixtures/api_search/README.md says which facts each follows). The remote APIs cannot
be reached here: this server stands in for them, and for Google's grounding redirector, at the HTTP boundary."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from conftest import ROOT, groundbench, reparse_archived
from groundbench.collect.api_search import ClaudeCollector, GeminiCollector, GrokCollector
from groundbench.collect.base import Archive, CollectionError
from groundbench.core import Prompt
from groundbench.sources.fetch import FetchSettings
from test_collect_api import responses_body, sonar_body

FIX = ROOT / "tests" / "fixtures" / "api_search"
PROMPTS = [Prompt("H1", "Health", "fact_checker", 1, "Is it true that mRNA vaccines alter DNA?"),
           Prompt("H2", "Health", "fact_checker", 1, "Is it true that coughing helps in a heart attack?")]
TARGETS = {"rki": "https://www.rki.de/DE/mrna.html", "pei": "https://www.pei.de/faq.html",
           "bmg": "https://www.bundesgesundheitsministerium.de/impfen.html"}   # "gone": 404, unresolvable


class Server(BaseHTTPRequestHandler):
    script, seen = [], []   # script: per request, a status or a name of a variant ("no_metadata", "pause")

    def log_message(self, *a): pass

    def reply(self, status, data=b"", headers=()):
        self.send_response(status)
        for k, v in headers: self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        key = self.path.rsplit("/", 1)[-1]
        if "/grounding-api-redirect/" in self.path and key in TARGETS:
            return self.reply(302, headers=[("Location", TARGETS[key])])
        self.reply(404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).seen.append((self.path, dict(self.headers), body))
        step = type(self).script.pop(0) if type(self).script else 200
        if isinstance(step, int) and step != 200:
            return self.reply(step, b'{"error": {"message": "slow down"}}',
                              [("Retry-After", "1")] if step == 429 else [])
        base = f"http://{self.headers['Host']}"
        fixture = lambda name: json.loads((FIX / f"{name}.json").read_text(encoding="utf-8").replace("__BASE__", base))
        if self.path.endswith(":generateContent"):
            data = fixture("gemini")
            if step == "no_metadata": del data["candidates"][0]["groundingMetadata"]
        elif self.path.endswith("/messages"):
            data = fixture("claude")
            if step == "pause":   # the turn paused after the search; the continuation brings the answer
                data = {**data, "stop_reason": "pause_turn", "content": data["content"][:3]}
            elif body["messages"][-1]["role"] == "assistant":
                data = {**data, "content": data["content"][3:]}
        elif self.path.endswith("/responses"):
            data = fixture("grok") if body["model"].startswith("grok") else responses_body(body["input"])
        else:
            data = sonar_body(body["messages"][-1]["content"])
        self.reply(200, json.dumps(data, ensure_ascii=False).encode(), [("content-type", "application/json")])


@pytest.fixture
def server():
    Server.script, Server.seen = [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def spans(c):
    "Each segment with its character offsets checked against the answer text."
    for s in c.segments: assert c.answer_text[s.start:s.end] == s.text, s
    return [(s.text, s.citation_indices, s.uncited) for s in c.segments]


def test_gemini_byte_offsets_redirects_and_missing_metadata(server, tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g-secret")
    Server.script = [200, "no_metadata"]
    ar = Archive(tmp_path / "c")
    convs = GeminiCollector("gemini-2.5-flash", base_url=server + "/v1beta",
                            fetch=FetchSettings(allow_private=True)).collect(PROMPTS, ar, progress=False)
    path, headers, body = Server.seen[0]
    assert path == "/v1beta/models/gemini-2.5-flash:generateContent" and headers["x-goog-api-key"] == "g-secret"
    assert body["tools"] == [{"google_search": {}}] and body["contents"][0]["parts"][0]["text"] == PROMPTS[0].text
    c = convs[0]
    # the sources' own URLs (two redirects resolved), the 404 link kept as it was; numbered by first appearance
    assert [x.url for x in c.citations] == [TARGETS["rki"], TARGETS["pei"],
                                           server + "/grounding-api-redirect/gone"]
    assert spans(c) == [
        ("Nein, mRNA-Impfstoffe verändern die DNA nicht.", (1, 2), False),                  # one support, two chunks
        ("Die mRNA gelangt nie in den Zellkern. Sie zerfällt nach wenigen Tagen.", (1,), False),   # two sentences
        ("Nebenwirkungen sind meist mild.", (1, 2, 3), True),
        ("Fazit:", (1, 2, 3), True),                                                        # the second part
        ("Die Behauptung ist falsch – so das RKI und das PEI.", (2, 3), False)]
    assert [x.url for x in c.uncited_panel_sources] == [TARGETS["bmg"]]                   # resolved too
    rec = ar.records("gemini-api")[0]
    assert rec["redirects_unresolved"] == 1 and len(rec["redirects"]) == 4
    assert {r["redirect"].rsplit("/", 1)[1]: r["final"] for r in rec["redirects"]}["pei"] == TARGETS["pei"]
    assert rec["search"]["queries"] == ["mRNA Impfstoff verändert DNA", "mRNA Zellkern"]
    assert rec["search"]["usage"]["toolUsePromptTokenCount"] == 212 and rec["search"]["offsets"] == "utf-8 bytes"
    # the second answer came without grounding metadata although the usage says the model searched
    assert (convs[1].sources_missing, convs[1].citations, convs[0].sources_missing) == (True, (), False)
    for f in (tmp_path / "c").rglob("*"):
        if f.is_file(): assert b"g-secret" not in f.read_bytes()


def test_claude_cited_blocks_pause_turn_and_retry_after(server, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    Server.script = [429, 200, "pause", 200]
    ar = Archive(tmp_path / "c")
    convs = ClaudeCollector("claude-sonnet-4-5", base_url=server + "/v1", backoff_s=0.01).collect(
        PROMPTS, ar, progress=False)
    assert len(Server.seen) == 4            # one 429 (Retry-After honoured), then prompt 1, prompt 2 paused + continued
    path, headers, body = Server.seen[1]
    assert path == "/v1/messages" and headers["x-api-key"] == "sk-ant-test"
    assert headers["anthropic-version"] == "2023-06-01"
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search"}]
    assert [m["role"] for m in Server.seen[3][2]["messages"]] == ["user", "assistant"]   # the paused turn sent back
    for c in convs:
        assert spans(c) == [
            ("Voy a buscar información al respecto.", (1, 2), True), ("No.", (1, 2), True),
            ("Las vacunas de ARNm no alteran el ADN humano", (1,), False),
            ("el ARNm nunca entra en el núcleo. Se degrada en pocos días", (1, 2), False),
            ("Consulte a su médico si tiene dudas.", (1, 2), True)]
        assert [x.url for x in c.citations] == ["https://www.who.int/es/arnm", "https://www.aemps.gob.es/vacunas"]
        assert [x.url for x in c.uncited_panel_sources] == ["https://www.example.es/foro"]
    paused = ar.records("claude-api")[1]
    assert paused["search"]["turns"] == 2 and paused["search"]["queries"] == ["vacunas ARNm alteran ADN"]
    assert paused["search"]["cited_text"][0]["cited_text"] == "Las vacunas de ARNm no modifican el ADN."
    assert reparse_archived(ar, paused, "claude-api", tmp_path)["segments"] == paused["parsed"]["segments"]
    assert not any(c.incomplete for c in convs)
    # a turn that pauses every time: continued max_continue times, then archived and marked incomplete (issue 44)
    Server.script, Server.seen = ["pause"] * 10, []
    c = ClaudeCollector("claude-sonnet-4-5", base_url=server + "/v1", backoff_s=0.01)
    conv, = c.collect(PROMPTS[:1], Archive(tmp_path / "paused"), progress=False)
    assert len(Server.seen) == c.max_continue + 1 and conv.incomplete


def test_grok_links_and_an_error_that_stops(server, tmp_path, monkeypatch):
    monkeypatch.setenv("XAI_API_KEY", "xai-test")
    ar = Archive(tmp_path / "c")
    c = GrokCollector("grok-4", base_url=server + "/v1").collect(PROMPTS[:1], ar, progress=False)[0]
    assert Server.seen[0][0] == "/v1/responses" and Server.seen[0][1]["Authorization"] == "Bearer xai-test"
    assert spans(c) == [("Non, les vaccins à ARNm ne modifient pas l'ADN.", (1,), False),
                        ("L'ARNm reste hors du noyau et se dégrade vite.", (1, 2), False),
                        ("Demandez conseil à un médecin.", (1, 2), True)]
    assert [x.url for x in c.uncited_panel_sources] == ["https://x.com/i/status/1975607901571199086"]
    assert (c.model, c.thinking, c.reasoning_tokens) == ("grok-4-0709", True, 310)
    assert ar.records("grok-api")[0]["search"]["offsets"] == "chars"
    Server.script = [500] * 3
    with pytest.raises(CollectionError, match=f"grok-api: prompt {PROMPTS[1].prompt_id}: HTTP 500"):
        GrokCollector("grok-4", base_url=server + "/v1", max_retries=2, backoff_s=0.01).collect(PROMPTS, ar,
                                                                                                 progress=False)
    assert [r["prompt_id"] for r in ar.records("grok-api")] == [PROMPTS[0].prompt_id]   # what was collected stays


def test_doctor_api_mode_shows_spans_and_resolved_links(server, tmp_path):
    args = ("doctor", "gemini-api", "--model", "gemini-2.5-flash", "--base-url", server + "/v1beta", "--allow-private",
            "--out", tmp_path / "d")
    r = groundbench(*args, env={"GEMINI_API_KEY": "k"}, check=True)
    assert "asked gemini-2.5-flash, answered by gemini-2.5-flash" in r.stdout
    assert TARGETS["rki"] in r.stdout and "4 redirect links (1 unresolved)" in r.stdout
    d = json.loads((tmp_path / "d" / "doctor.json").read_text())
    assert d["citations"][0]["given_as"] == server + "/grounding-api-redirect/rki"
    assert d["segments"][0] == {"start": 0, "end": 46, "citations": [1, 2], "uncited": False,
                                "text": "Nein, mRNA-Impfstoffe verändern die DNA nicht."}
    Server.script = ["no_metadata"]
    r2 = groundbench(*args, env={"GEMINI_API_KEY": "k"})
    assert r2.returncode == 1 and "no citation came back although the API searched (sources missing)" in r2.stderr


@pytest.mark.slow
def test_today_collects_five_api_assistants_into_one_report(server, tmp_path):
    keys = {k: "test-key" for k in ("OPENAI_API_KEY", "PERPLEXITY_API_KEY", "GEMINI_API_KEY", "ANTHROPIC_API_KEY",
                                    "XAI_API_KEY")}
    r = groundbench("run", ROOT / "papermill_params" / "today.yaml", "--runs-dir", tmp_path / "runs", "--no-estimate",
                "--stages", "10_claims,20_collect,30_sources,40_credibility,68_profile,80_report",
                "--param", f"base_url={server}/v1", "--param", "allow_private=true", "--param", "sample=2",
                "--param", "fetch=false", check=True, env=keys, timeout=900)
    run = tmp_path / "runs" / "today"
    names = ["openai-responses gpt-4o-2024-08-06", "perplexity-api sonar", "gemini-api gemini-2.5-flash",
             "claude-api claude-sonnet-4-5-20250929", "grok-api grok-4-0709"]
    counts = pd.read_csv(run / "20_collect" / "conversation_counts.csv")
    assert sorted(counts.provider) == sorted(n.split()[0] for n in names) and set(counts.conversations) == {2}
    m = json.loads((run / "manifest.json").read_text())["stages"]["20_collect"]["counts"]
    assert set(m["api_assistants"]) == {"openai-responses gpt-5", "perplexity-api sonar", "gemini-api gemini-2.5-flash",
                                        "claude-api claude-sonnet-4-5", "grok-api grok-4.3"}
    assert m["redirects_unresolved"] == 2 and m["api_assistants_left_out"] == []
    assert ("0 answers searched but came without sources (sources_missing), 2 redirect links unresolved; "
            "left out: none") in r.stdout + r.stderr
    t1 = pd.read_csv(run / "40_credibility" / "table_1.csv")
    for n in names: assert any(n in str(c) for c in t1.columns), (n, list(t1.columns))
    profile = pd.read_csv(run / "68_profile" / "profile.csv")
    assert set(profile.iloc[:, 0]) >= set(names)
    html = (run / "report" / "index.html").read_text()
    for n in names: assert n in html
    # without a key an assistant is named and left out
    groundbench("run", ROOT / "papermill_params" / "today.yaml", "--runs-dir", tmp_path / "runs2", "--no-estimate",
                "--stages", "10_claims,20_collect", "--param", f"base_url={server}/v1", "--param", "sample=1",
                check=True, env={**keys, "XAI_API_KEY": "", "ANTHROPIC_API_KEY": ""})
    m2 = json.loads((tmp_path / "runs2" / "today" / "manifest.json").read_text())["stages"]["20_collect"]["counts"]
    assert m2["api_assistants_left_out"] == [
        "claude-api claude-sonnet-4-5: ANTHROPIC_API_KEY is not set, not collected",
        "grok-api grok-4.3: XAI_API_KEY is not set, not collected"]


def leaves(x, path=()):
    "Every value's path in a JSON document (containers and scalars alike)."
    yield path
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items: yield from leaves(v, path + (k,))


def replaced(doc, path, value):
    d = json.loads(json.dumps(doc))
    if not path: return value
    parent = d
    for k in path[:-1]: parent = parent[k]
    parent[path[-1]] = value
    return d


@pytest.mark.parametrize("provider", ["openai-responses", "perplexity-api", "gemini-api", "claude-api", "grok-api"])
def test_every_field_of_every_provider_s_answer_given_the_wrong_type_is_a_named_parse_failure(provider):
    """Issue 44 (1): a field of the wrong type once raised out of the collector. Every value of each provider's
    documented answer (every field at every depth, and the whole answer) replaced in turn by a value of each other JSON
    type: the answer either still parses or fails as a record naming a field path and what was there, never an
    exception."""
    from groundbench.collect.api import shape_failure
    from groundbench.collect.api_search import API_COLLECTORS, API_PARSERS
    base = "http://127.0.0.1:9"
    doc = {"openai-responses": lambda: responses_body("q"), "perplexity-api": lambda: sonar_body("q"),
           "gemini-api": lambda: json.loads((FIX / "gemini.json").read_text().replace("__BASE__", base)),
           "claude-api": lambda: json.loads((FIX / "claude.json").read_text().replace("__BASE__", base)),
           "grok-api": lambda: json.loads((FIX / "grok.json").read_text().replace("__BASE__", base))}[provider]()
    shape, parse = API_COLLECTORS[provider].shape, API_PARSERS[provider]
    assert shape_failure(parse, doc, provider, "p", shape)[1] is None            # the documented answer parses
    cases = failed = 0
    for path in leaves(doc):
        for value in (None, 7, -1, 10**12, "x", [1], {"a": 1}, True):
            old = doc
            for k in path: old = old[k]
            if type(old) is type(value) and old == value: continue
            cases += 1
            parsed, fail = shape_failure(parse, replaced(doc, path, value), provider, "p", shape)
            if fail is None: continue
            failed += 1
            assert fail["field"] and fail["found"] and fail["error"] and fail["prompt_id"] == "p", fail
    assert cases > 100 and 0 < failed < cases, (cases, failed)
