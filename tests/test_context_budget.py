"""Issue 53 (6): whole pages are cut to what the judge's context holds, counted by the model's own tokenizer. The
bundled model makes 4.5 characters a token of English, one token a digit and 1.5 tokens a Chinese character: the old
budget of 4 characters a token asked its 8,192-token context for far more than it holds on the digit and Chinese pages
(llama.cpp's ValueError stopped the stage). Real llama.cpp in process (n_ctx 8,192) and a real llama.cpp server."""
import dataclasses

import pandas as pd
import pytest

from groundbench.core import Unit
from groundbench.llm.backends import LlamaCppBackend, OpenAIBackend
from groundbench.llm.client import LLM
from groundbench.llm.context import Window, fit

PAGES = {
    "english": " ".join(f"Paragraph {i}: vitamin A supplements reduce measles deaths in children, trials show."
                        for i in range(600)),
    "digits": " ".join(f"{i * 7919 % 100000:05d} {i * 104729 % 1000000:06d} 3.{i:04d}" for i in range(4000)),
    "chinese": "维生素A补充剂可以降低儿童麻疹死亡率，多项试验表明了这一点。" * 1500}


@pytest.fixture(scope="module")
def judge():
    return LLM(LlamaCppBackend(n_ctx=8192, load=False))   # its tokenizer: the weights are loaded only to answer


class _Read(Exception):
    "Stops llama-cpp-python's chat handler once it has the prompt's tokens, before any evaluation."


def engine_prompt_tokens(backend: LlamaCppBackend, r) -> int:
    """The tokens llama.cpp would evaluate for request `r`: llama-cpp-python's own chat handler for the model formats
    and tokenizes the messages (the template in the GGUF); its `create_completion` is stopped before evaluating, which
    is where it raises "Requested tokens exceed context window" when they reach n_ctx. (Evaluating an 8,000-token
    prompt takes the smoke model about a minute here: `test_a_whole_page_run...` evaluates real ones in a 2,048
    context.)"""
    v = backend._vocab_only
    seen = {}
    def stop(prompt, **kw):
        seen["n"] = len(prompt)
        raise _Read
    v.create_completion = stop
    try: v._chat_handlers[v.chat_format](llama=v, messages=r.message_dicts(), max_tokens=r.max_tokens)
    except _Read: pass
    return seen["n"]


def test_the_tokenizer_counts_what_four_characters_a_token_does_not(judge):
    w = Window(judge, 32768)
    assert (w.tokens, w.exact) == (8192, True)
    per = {k: len(t) / w.count(t) for k, t in PAGES.items()}
    assert per["english"] > 4 and per["digits"] < 1.5 and per["chinese"] < 1, per   # 4 a token fits English only
    for text in PAGES.values():
        cut, was_cut = fit(w, text, 6000)
        assert was_cut and 5900 <= w.count(cut) <= 6000 and text.startswith(cut)


def test_whole_pages_fit_the_8192_context_in_both_lenses_repairs_included(judge):
    """SourceCheckup's verifier call and its JSON repair round, SourceBench's three calls (official reader; strict
    with its repair round): each prompt as llama.cpp formats and tokenizes it, plus the answer it may run to, fits in
    8,192, and fills it (the page is cut by tokens, not shorter than needed)."""
    from groundbench.llm.client import repair_request, request, schema_json, load_prompt, with_schema
    from groundbench.sourcebench import MAX_TOKENS, ContentScores, _page_requests, fit_pages
    from groundbench.sourcecheckup import SUPPORT_TOKENS, Support
    b, n_ctx = judge.backend, 8192
    judge.window = w = Window(judge, 32768)
    pt, statement = load_prompt("sourcecheckup_support"), "Vitamin A reduces measles deaths in children."
    for name, text in PAGES.items():
        shown, cut = fit(w, text, w.room(pt.render(statement=statement, source=""), SUPPORT_TOKENS,
                                          schema_json(Support)))
        r = with_schema([request(judge, pt.render(statement=statement, source=shown), max_tokens=SUPPORT_TOKENS)],
                        Support)[0]
        rep = repair_request(r, "{" + "broken " * 400, "Invalid JSON: EOF while parsing an object", window=w)
        used = [engine_prompt_tokens(b, x) + SUPPORT_TOKENS for x in (r, rep)]
        assert cut and all(u <= n_ctx for u in used) and used[1] > n_ctx - 400, (name, used)
    pages = pd.DataFrame({"query": "Does vitamin A reduce measles deaths?", "page_date": "2025-01-01",
                          "url": [f"https://{k}.example/p" for k in PAGES], "text": list(PAGES.values())})
    text = pages.text.tolist()
    for reader in ("official", "strict"):
        shown, cut, window = fit_pages(judge, pages, [0, 1, 2], text, "2026-01-25", reader=reader)
        assert cut == [True, True, True] and window == {"context_tokens": 8192, "token_count": "the model's tokenizer"}
        for kind, rs in _page_requests(judge, pages, [0, 1, 2], text, shown, "2026-01-25").items():
            for page, r in zip(PAGES, rs):
                used = engine_prompt_tokens(b, r) + MAX_TOKENS[kind]
                assert used <= n_ctx and (reader == "strict" or used > n_ctx - 400), (reader, kind, page, used)
                if reader == "strict":
                    r = with_schema([r], ContentScores)[0]
                    rep = repair_request(r, "x" * 20000, "Field required at 'FA'", window=w)
                    assert engine_prompt_tokens(b, rep) + MAX_TOKENS[kind] <= n_ctx, (kind, page)


def test_a_whole_page_run_completes_on_the_real_engine_with_its_cuts_counted(tmp_path):
    """SourceCheckup's whole-page verifier on the three pages with the real engine answering (a 2,048-token context:
    an 8,192-token prompt takes this build about a minute): every page cut, counted, and answered."""
    from groundbench.sourcecheckup import judge_pairs
    llm = LLM(LlamaCppBackend(n_ctx=2048))
    src = pd.DataFrame({"conversation_id": "c", "citation_index": [1, 2, 3], "text": list(PAGES.values()),
                        "valid": True})
    unit = Unit("c", 0, "Vitamin A reduces measles deaths in children.", "Fact")
    llm.window = Window(llm, 32768)
    pairs = judge_pairs([unit], src, llm, None, progress=False, source_text="whole", window=llm.window)
    assert pairs.source_cut.all() and (pairs.chars_given < pairs.chars_total).all(), pairs
    assert set(pairs.parse_status) <= {"ok", "repaired", "failed"}, pairs.parse_status   # asked, none refused
    st = llm.stats["sourcecheckup"]
    assert st.calls >= 3 and st.prompt_tokens <= st.calls * 2048, dataclasses.asdict(st)
    given = dict(zip(PAGES, pairs.chars_given))
    assert given["english"] > 3 * given["digits"] > 3 * given["chinese"] / 2, given  # by tokens, not characters


def test_an_openai_compatible_server_counts_with_its_own_tokenizer(llama_server, judge):
    "llama-cpp-python's server exposes /extras/tokenize: the page is cut by its count, as in process (its BOS aside)."
    server = OpenAIBackend("smollm2-server", base_url=llama_server, api_key_env="")
    w, here = Window(server, 4096), Window(judge, 4096)
    assert w.exact and server.tokenizer.kind == 2 and w.tokens == 4096      # the server says no context: settings
    for text in PAGES.values():
        assert abs(w.count(text) - here.count(text)) <= 1
        cut, was_cut = fit(w, text, 3000)
        assert was_cut and here.count(cut) <= 3000 and len(cut) >= len(fit(here, text, 2990)[0])
    hosted = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", api_key_env="", timeout_s=2)   # nothing answers
    bound = Window(hosted, 4096)
    cut = fit(bound, PAGES["chinese"], 3000)[0]                          # one token a byte: 3 a Chinese character
    assert not bound.exact and 2996 < len(cut.encode()) <= 3000 and len(cut) < 1100 and PAGES["chinese"].startswith(cut)


def test_a_long_chinese_answer_fits_the_context_in_every_groundedness_extraction(judge):
    """Issue 53: groundedness gave an answer 12,000 characters (3,000 tokens at 4 characters a token) to its extraction,
    decontextualisation and VERIFY's extraction: a Chinese answer is about a token a character, 12,000 tokens, over
    the 8,192 context. Each request now holds at most about 3,000 of the model's own tokens of the answer, counted by
    llama.cpp's own chat handler, with the cut counted; an English answer of the same length is given as before."""
    from groundbench.core import Conversation, Segment
    from groundbench.groundedness.methods import verify_requests
    from groundbench.groundedness.units import decontext_requests, extract_requests
    for lang, text, cut_expected in (("chinese", PAGES["chinese"][:14000], True),
                                     ("english", PAGES["english"][:11000], False)):
        seg = Segment(text[:200], (1,), 0, 200)
        conv = Conversation("p", "m", "p1", "q", text, (), (seg,), conversation_id=f"c-{lang}")
        stats: dict = {}
        _, ext = extract_requests([conv], judge, 12000, stats=stats)
        unit = Unit(conv.conversation_id, 0, text[:60], "Fact", segment_index=0, citation_indices=(1,))
        _, dec = decontext_requests([unit], [conv], judge, 12000, stats=stats)
        ver = verify_requests([conv], judge, 12000, stats=stats)
        for r in (*ext, *dec, *ver):
            n = engine_prompt_tokens(judge.backend, r)
            assert n + r.max_tokens <= 8192, (lang, n, r.max_tokens)
        said = stats.get("extract_context_truncated", 0) + stats.get("verify_context_truncated", 0)
        assert bool(said) == cut_expected, (lang, stats)
