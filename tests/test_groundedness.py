"""Groundedness: batching and dedup across conversations (mock model, the logic around it), units without
citations and sources without text. The stage end to end with the real bundled llama.cpp model, whose rerun makes no
model call, is tested on the shared small demo run in tests/test_demo.py."""

import pandas as pd

from groundbench.core import Citation, Conversation, Segment
from groundbench.embed import Embedder, EmbeddingCache
from groundbench.groundedness.judge import SCOPES, judge_units, retrieve, source_chunks
from groundbench.groundedness.metrics import response_scores
from groundbench.groundedness.units import decontextualise, extract_units
from groundbench.llm.client import LLM, LLMCache, MockBackend


def convs():
    seg = Segment("Vaccines do not change DNA.", (1,), 0, 27)
    a = Conversation("x", "m", "p1", "q", "Vaccines do not change DNA.", (Citation(1, "https://a.org"),), (seg,))
    # same sentence, same context
    b = Conversation("x", "m", "p2", "q", "Vaccines do not change DNA.", (Citation(1, "https://b.org"),), (seg,))
    c = Conversation("x", "m", "p3", "q", "No sources here.", (), (Segment("No sources here.", (), 0, 16, True),))
    return [a, b, c]


def respond(r):
    last = r.messages[-1][1]
    if last.startswith("Answer (context)") and "Sentence:" in last:   # VERIFY's formats (prompts v2)
        return "- %s: Fact" % last.split("Sentence: ")[1].rstrip(".")
    if "Unit:" in last: return "No vague reference.\n```\n%s\n```" % last.split("Unit: ")[1]
    # VERIFY's judge prompt (the paper variant) numbers no knowledge point, and its reader takes the first bracket
    return "1. The knowledge says so.\n2. It supports the statement.\n3. The statement.\n4. [Supported]"


def test_batching_dedup_and_units_without_citations(tmp_path):
    mock = MockBackend("m", respond)
    llm = LLM(mock, LLMCache(tmp_path / "c.sqlite"))
    cs = convs()
    units = extract_units(cs, llm, progress=False)
    assert mock.batches == [2]  # three segments, two distinct requests, one batch
    assert llm.stats["extract_units"].deduplicated == 1
    units, status = decontextualise(units, cs, llm, progress=False)
    assert len(units) == 3 and set(status.values()) == {"ok"}
    sources = pd.DataFrame({"conversation_id": [cs[0].conversation_id, cs[1].conversation_id], "citation_index": [1, 1],
                            "text": ["Vaccines do not change human DNA, experts say. " * 5, ""], "score": [1.0, -1.0]})
    emb = Embedder(cache=EmbeddingCache(tmp_path / "e.sqlite"))
    ev = retrieve(units, source_chunks(sources), emb)
    js = judge_units(units, ev, llm, SCOPES, progress=False)
    by = {(j.unit_id, j.scope): j for j in js}
    u_a, u_b, u_c = units
    assert by[(u_a.unit_id, "all")].label == "Supported" and by[(u_a.unit_id, "non_credible")].skipped == "no evidence"
    assert by[(u_b.unit_id, "all")].skipped == "no evidence"  # its only source has no text: Unverifiable without a call
    assert by[(u_c.unit_id, "all")].skipped == "no evidence"  # no citations at all
    st = llm.stats["judge"]  # only (a, all) and (a, credible) had evidence: the same chunks, so one call serves both
    assert (st.requests, st.calls, st.deduplicated) == (2, 1, 1)
    r = response_scores(units, js).set_index("conversation_id")
    first = r.loc[cs[0].conversation_id]
    assert first["gs"] == 1.0 and first["cg"] == 1.0 and first["ncg"] == 0.0
    # one Unverifiable: 0.5 / sqrt(1)
    assert r.loc[cs[2].conversation_id, "gs"] == 0.0 and r.loc[cs[2].conversation_id, "hs"] == 0.5


def test_methods_run_at_once_on_a_server_and_give_the_same_results(tmp_path):
    """Issue 55: ours, VERIFY and FActScore ask independent requests; on a backend that takes requests in parallel (a
    server) the three pipelines now run at once (ours' and VERIFY's first requests arrive together), one after
    another in process (llama.cpp); units, labels and counts are the same either way. The backends are mocks standing
    in for a server (a real one is tested with SourceBench in tests/test_llm_backends.py)."""
    import threading
    import time
    from groundbench.groundedness.stage import run_methods
    from groundbench.groundedness.units import PAPER

    def runs(parallel: int):
        started, lock = [], threading.Lock()

        class Timed(MockBackend):
            parallel_requests = parallel
            def generate(self, requests):
                with lock: started.append((time.monotonic(), requests[0].messages[0][1][:40]))
                time.sleep(0.3)
                return super().generate(requests)
        llm = LLM(Timed("m", respond), LLMCache(tmp_path / f"c{parallel}.sqlite"), chunk_size=1)
        cs = convs()
        sources = pd.DataFrame({"conversation_id": [cs[0].conversation_id, cs[1].conversation_id],
                                "citation_index": [1, 1], "score": [1.0, -1.0],
                                "text": ["Vaccines do not change human DNA, experts say. " * 5, "DNA facts. " * 9]})
        caps: dict = {}
        (units, _, judgments, _), other = run_methods(
            ["ours", "verify", "factscore"], cs, source_chunks(sources), llm,
            Embedder(cache=EmbeddingCache(tmp_path / "e.sqlite")), {c.conversation_id: "q" for c in cs}, 5, 12000, 1500,
            caps, PAPER)
        t0 = min(t for t, _ in started)
        first = {}
        for t, what in started: first.setdefault(what, t - t0)
        labels = sorted((j.unit_id, j.scope, j.label) for j in judgments)
        return first, labels, {m: sorted(str(x) for x in u) for m, (u, _) in other.items()}, caps

    at_once, labels_a, other_a, caps_a = runs(4)
    in_turn, labels_b, other_b, caps_b = runs(1)
    assert (labels_a, other_a, caps_a) == (labels_b, other_b, caps_b)
    verify = next(k for k in at_once if k.startswith("You break a chat assistant's whole"))   # VERIFY's extraction
    assert at_once[verify] < 0.25, at_once             # begins with ours (FActScore's first waits for the embedder)
    assert in_turn[verify] >= 0.6, in_turn             # one after another: after ours has ended


def grouped_respond(r):
    "A model that answers the grouped variant's numbered formats as `respond` answers the paper's, item by item."
    last = r.messages[-1][1]
    items = lambda head: [line.split(" ", 1) for line in last.split(head)[1].splitlines() if line.startswith("[")]
    if "Sentences:\n" in last: return "".join(f"{k}\n- {s.rstrip('.')}: Fact\n" for k, s in items("Sentences:\n"))
    if "Units:\n" in last: return "".join(f"{k} {s}\n" for k, s in items("Units:\n"))
    return "".join(f"{k} [Supported]\n" for k, _ in items("STATEMENTS:\n"))


def test_the_grouped_variant_runs_in_the_stage_with_the_same_units_and_fewer_calls(tmp_path):
    """Issue 55: `variant = grouped` runs our method several units a call through the stage's own entry (run_ours):
    with a model that answers each item as the paper variant's model answers it, the units, decontextualisations and
    labels are the paper variant's, in fewer calls (the mock stands in for the model: the formats are what is tested;
    its agreement with a real model is measured in benchmarks/bench_groundedness.py)."""
    from groundbench.groundedness.stage import run_ours
    from groundbench.groundedness.units import PAPER, VARIANTS
    cs = [convs()[0], Conversation("x", "m", "p4", "q", "Vaccines are tested. They are safe.",
                                   (Citation(1, "https://c.org"),),
                                   (Segment("Vaccines are tested.", (1,), 0, 20),
                                    Segment("They are safe.", (1,), 21, 35)))]
    sources = pd.DataFrame({"conversation_id": [c.conversation_id for c in cs], "citation_index": [1, 1],
                            "score": [1.0, 1.0], "text": ["Vaccines do not change human DNA, experts say. " * 5,
                                                          "Vaccines are tested in trials and are safe. " * 5]})
    emb = Embedder(cache=EmbeddingCache(tmp_path / "e.sqlite"))
    out = {}
    for v, resp in ((PAPER, respond), (VARIANTS["grouped"], grouped_respond)):
        llm = LLM(MockBackend("m", resp), LLMCache(tmp_path / f"{v.name}.sqlite"))
        units, status, judgments, _ = run_ours(cs, source_chunks(sources), llm, emb, 5, 12000, 1500, {}, v)
        out[v.name] = ([(u.text, u.label, u.decontextualised) for u in units], set(status.values()),
                       [(j.scope, j.label) for j in judgments], sum(s.calls for s in llm.stats.values()))
    (pu, ps, pj, pcalls), (gu, gs, gj, gcalls) = out["paper"], out["grouped"]
    assert (gu, gs, gj) == (pu, ps, pj) and len(gu) == 3 and ps == {"ok"}
    assert {lab for _, lab in gj} == {"Supported", "Unverifiable"}
    assert gcalls < pcalls, (gcalls, pcalls)
