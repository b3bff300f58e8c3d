"""The `paper` variants send the released code's own messages, parameters and readers (issue 61), byte for byte.

groundbench ships none of the authors' sentences, so each test builds a stand-in clone of the released repository: the
same files and names, with prompts in our own words and the calling code re-stated for this test from what the
released files do (WukLab/SourceBench c578bce scoring.py; kevinwu23/SourceCheckup 62bb5dd run.py, utils.py,
prompts.json; launchnlp/FactBench 3e6b21a VERIFY/). The test then runs that calling code, with its model and its
network replaced by recorders (the narrowest boundary: what it would send), and our `paper` variant on the same
inputs, and compares what both send. On a reviewer's machine the real clones replace the stand-ins:
GROUNDBENCH_RELEASED_SOURCEBENCH, GROUNDBENCH_RELEASED_SOURCECHECKUP and GROUNDBENCH_RELEASED_FACTBENCH name them, and
the same comparisons run against the authors' own code and prompts."""
import asyncio
import contextlib
import importlib.util
import io
import json
import os
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from groundbench.core import Conversation, Segment, Unit
from groundbench.groundedness.judge import Evidence, judge_units
from groundbench.groundedness.methods import verify_requests
from groundbench.groundedness.units import PAPER, decontext_requests
from groundbench.llm.client import LLM, MockBackend
from groundbench.llm.context import Window
from groundbench.llm.released import load_released, own_wording
from groundbench.sourcebench import VARIANTS, prompts_line, score_pages
from groundbench.sourcecheckup_released import paper_table, run_paper

# ---------------------------------------------------------------- stand-in clones (our words, the released layout)
SCORING_PY = '''
import asyncio, json, re
TEMPERATURE = 0
MAX_RETRIES = 1
CURRENT_DATE_LABEL = "January 25, 2026"
CLIENT = None
GROUP1_SYSTEM_PROMPT = """Stand-in: rate a page's content for a query.
"""
GROUP1_USER_PROMPT_TEMPLATE = """Rate it.
{{
 "query_id": "{query_id}",
 "query_text": "{query_text}",
 "source_url": "{source_url}",
 "source_text": "{source_text}",
 "text_length": "{text_length}"
}}"""
GROUP2_SYSTEM_PROMPT = """Stand-in: rate a page's metadata."""
GROUP2_USER_PROMPT_TEMPLATE = """Rate it.
{{
 "query_id": "{query_id}",
 "query_text": "{query_text}",
 "source_url": "{source_url}",
 "source_text": "{source_text}",
 "current_date": "January 25, 2026",
 "pub_date": "{search_result_last_updated}"
}}"""
GROUP3_SYSTEM_PROMPT = """Stand-in: rate a page's layout."""
GROUP3_USER_PROMPT_TEMPLATE = """Rate it: {{"source_url": "{source_url}", "source_text": "{source_text}", \
"text_length": "{text_length}"}}"""

def get_text_length(source):
    n = source.get("text_content_length")
    return n if isinstance(n, int) else len(source.get("text_content") or "")

async def _call(system, user, temperature):
    r = CLIENT.chat.completions.create(model="qwen-plus", messages=[{"role": "system", "content": system},
                                       {"role": "user", "content": user}], temperature=temperature,
                                       max_tokens=4096, extra_body={"enable_thinking": False})
    return r.choices[0].message.content

async def score_group1(query_id, query_text, source, dry_run, temperature):
    if get_text_length(source) <= 0: return None
    return await _call(GROUP1_SYSTEM_PROMPT, GROUP1_USER_PROMPT_TEMPLATE.format(
        query_id=query_id, query_text=query_text, source_url=source.get("source_url"),
        source_text=source.get("text_content") or "", text_length=get_text_length(source)), temperature)

async def score_group2(query_id, query_text, source, dry_run, temperature):
    if get_text_length(source) <= 0: return None
    return await _call(GROUP2_SYSTEM_PROMPT, GROUP2_USER_PROMPT_TEMPLATE.format(
        query_id=query_id, query_text=query_text, source_url=source.get("source_url") or "N/A",
        source_text=source.get("text_content") or "",
        search_result_last_updated=source.get("search_result_last_updated", "N/A")), temperature)

async def score_group3(query_id, query_text, source, dry_run, temperature):
    if get_text_length(source) <= 0: return None
    return await _call(GROUP3_SYSTEM_PROMPT, GROUP3_USER_PROMPT_TEMPLATE.format(
        source_url=source.get("source_url"), source_text=source.get("text_content") or "",
        text_length=get_text_length(source)), temperature)
'''

PROMPTS_JSON = {"parser": "Stand-in parser: list the statements of the text under the key '0'.",
                "verifier": "Stand-in verifier: answer {\"found\": quote} or {\"not_found\": reason}."}

RUN_PY = '''
import json
import pandas as pd
from utils import extract_contents_from_url, GPTWrapper

def main(citation_url=None, question=None, output_file="example_output.csv"):
    with open("prompts.json") as f: prompts = json.load(f)
    response_model = GPTWrapper(response_format="json", system_prompt=prompts["answerer"], seed=0, temperature=0)
    response_dict = json.loads(response_model(question))
    response_text, citation_list = response_dict["response"], response_dict["citations"]
    parser_model = GPTWrapper(response_format="json", system_prompt=prompts["parser"], seed=0, temperature=0)
    response_parsed_list = json.loads(parser_model(response_text))["0"]
    citation_contents_list = []
    for citation_url in citation_list:
        contents = extract_contents_from_url(citation_url)
        if contents is None: continue
        citation_contents_list.append((citation_url, contents))
    if len(citation_contents_list) == 0: return
    source_verifier = GPTWrapper(response_format="json", system_prompt=prompts["verifier"], seed=0, temperature=0)
    decision_matrix = []
    for idx, parsed_statement in enumerate(response_parsed_list):
        for URL, citation_contents in citation_contents_list:
            decision_dict = json.loads(source_verifier(f"{parsed_statement}: {citation_contents}"))
            decision, reason = decision_dict.popitem()
            decision_matrix.append({"Statement": parsed_statement, "Citation URL": URL, "Decision": decision,
                                    "Reason": reason})
    df = pd.DataFrame(decision_matrix)
    df.to_csv(output_file, index=False)
'''

EXTRACT_STANDIN = ('UNIT_EXTRACTION_POROMPT="""<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n'
                   'Stand-in: split into units, one per line.\n\nTEXT: {_RESPONSE_PLACEHOLDER}<|eot_id|>'
                   '<|start_header_id|>assistant<|end_header_id|>\n\nUNITS:\n"""\n')
DECONTEXT_STANDIN = ('_DECONTEXT_PROMPT = """<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n'
                     'Stand-in: make the UNIT stand alone.\nUNIT:\n{UNIT}\n\nRESPONSE:\n{RESPONSE}\n\n'
                     'REVISED UNIT:<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"""\n')
JUDGE_STANDIN = ("SUPPORTED_LABEL = 'Supported'\n_STATEMENT_PLACEHOLDER = '[STATEMENT]'\n"
                 "_KNOWLEDGE_PLACEHOLDER = '[KNOWLEDGE]'\n"
                 '_FINAL_ANSWER_FORMAT = f"""<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n'
                 'Stand-in: judge, ending with [{SUPPORTED_LABEL}] or another label.\n\nKNOWLEDGE: \n'
                 '{_KNOWLEDGE_PLACEHOLDER}\n\nSTATEMENT:\n{_STATEMENT_PLACEHOLDER}<|eot_id|>'
                 '<|start_header_id|>assistant<|end_header_id|>\n"""\n')
VERIFY_FILES = {"VERIFY/get_atomic_units.py": EXTRACT_STANDIN, "VERIFY/decontextualize_fact_.py": DECONTEXT_STANDIN,
                "VERIFY/rate_atomic_fact_.py": JUDGE_STANDIN}


def clone(tmp_path: Path, method: str) -> Path:
    "The user's clone: the real one a reviewer names, else a stand-in of the same layout."
    real = os.environ.get(f"GROUNDBENCH_RELEASED_{method.upper()}")
    if real: return Path(real)
    d = tmp_path / method
    if method == "sourcebench":
        (d / "src/content-scoring/scripts").mkdir(parents=True)
        (d / "src/content-scoring/scripts/scoring.py").write_text(SCORING_PY, encoding="utf-8")
    elif method == "sourcecheckup":
        d.mkdir()
        (d / "prompts.json").write_text(json.dumps({**PROMPTS_JSON, "answerer": "Stand-in answerer."}),
                                        encoding="utf-8")
        (d / "run.py").write_text(RUN_PY, encoding="utf-8")
    else:
        for rel, text in VERIFY_FILES.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text, encoding="utf-8")
    return d


def load_module(path: Path, name: str, stubs: dict | None = None):
    "A released file imported as a module (its imports of models and networks given `stubs`)."
    saved = {k: sys.modules.get(k) for k in stubs or {}}
    sys.modules.update(stubs or {})
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        for k, v in saved.items():
            if v is None: sys.modules.pop(k, None)
            else: sys.modules[k] = v


def recording_llm(answer):
    "Our side of the comparison: a client whose backend records every request and answers with `answer(request)`."
    seen = []
    def respond(r):
        seen.append(r)
        return answer(r)
    return LLM(MockBackend("recorder", respond)), seen


# ---------------------------------------------------------------- SourceBench
def test_sourcebench_paper_sends_scoring_py_s_messages_and_parameters(tmp_path):
    d = clone(tmp_path, "sourcebench")
    rel = load_released("sourcebench", {"released": {"sourcebench": str(d)}})
    mod = load_module(d / "src/content-scoring/scripts/scoring.py", "scoring_standin")
    sent = []

    class Completions:
        def create(self, **kw):
            sent.append(kw)
            return types.SimpleNamespace(choices=[types.SimpleNamespace(message=types.SimpleNamespace(
                content="{}"))])
    mod.CLIENT = types.SimpleNamespace(chat=types.SimpleNamespace(completions=Completions()))
    text = 'A page: it says "quoted" {braces} and a\\backslash.\n' * 40
    page = {"query_id": "7", "query": "Is X safe?", "url": "https://example.org/a?b=1", "text": text,
            "page_date": "None"}
    source = {"text_content": text, "text_content_length": len(text), "source_url": page["url"],
              "search_result_last_updated": None}
    for g in (mod.score_group1, mod.score_group2, mod.score_group3):
        asyncio.run(g(page["query_id"], page["query"], source, False, mod.TEMPERATURE))
    llm, ours = recording_llm(lambda r: "{}")
    score_pages(pd.DataFrame([page]), llm, today="2026-01-25", progress=False, released=rel)
    first = list({json.dumps(r.message_dicts()): r for r in ours}.values())   # a retry repeats its messages
    assert [r.message_dicts() for r in first] == [k["messages"] for k in sent]   # byte for byte
    assert {r.temperature for r in ours} == {float(mod.TEMPERATURE)} and {r.max_tokens for r in first} == {4096}
    assert len(ours) == 3 * (1 + mod.MAX_RETRIES)
    assert all(not r.schema and not r.grammar for r in ours)     # scoring.py sends no schema to a real judge
    official = VARIANTS["paper"].reader           # the paper variant reads as scoring.py: its prompts are released
    assert prompts_line(official, rel).startswith(f"prompts: released, read from {d}")
    assert prompts_line(official, None) == own_wording("sourcebench")
    assert prompts_line(VARIANTS["rubric"].reader, rel) == "prompts: groundbench's own (a variant of ours)"


# ---------------------------------------------------------------- SourceCheckup
def _run_py(d: Path, answer: str, parsed, pages: dict, verdict) -> tuple[list, pd.DataFrame | None]:
    "run.py's main on one answer, its models and page reader replaced by recorders: (messages sent, decisions)."
    sent = []

    class GPTWrapper:
        def __init__(self, model_name=None, response_format=None, system_prompt=None, seed=None, temperature=None):
            self.system, self.fmt, self.seed, self.temperature = system_prompt, response_format, seed, temperature

        def __call__(self, query):
            sent.append((self.system, query, self.fmt, self.seed, self.temperature))
            if self.system == json.loads((d / "prompts.json").read_text())["answerer"]:
                return json.dumps({"response": answer, "citations": list(pages)})
            if self.system == json.loads((d / "prompts.json").read_text())["parser"]: return parsed
            return verdict(query)
    utils = types.ModuleType("utils")
    utils.GPTWrapper, utils.extract_contents_from_url = GPTWrapper, lambda url: pages[url]
    mod = load_module(d / "run.py", "run_standin", {"utils": utils})
    out = d / "out.csv"
    if out.exists(): out.unlink()
    cwd = os.getcwd()
    os.chdir(d)
    try:
        with contextlib.redirect_stdout(io.StringIO()): mod.main(question="q", output_file=str(out))
    finally: os.chdir(cwd)
    return sent, (pd.read_csv(out) if out.exists() else None)


@pytest.mark.parametrize("case", ["duplicates", "all_failed", "unparsable"])
def test_sourcecheckup_paper_is_run_py_s_messages_and_counting(tmp_path, case):
    d = clone(tmp_path, "sourcecheckup")
    rel = load_released("sourcecheckup", {"released": {"sourcecheckup": str(d)}})
    answer = "Vitamin A helps. Zinc cures colds."
    parsed = (json.dumps({"0": ["Vitamin A helps.", "Vitamin A helps.", "Zinc cures colds."]})
              if case != "unparsable" else json.dumps({"statements": ["Vitamin A helps."]}))
    pages = {"https://a.org/1": "vitamin A reduces deaths", "https://b.org/2": "nothing here"}
    if case == "all_failed": pages = {u: None for u in pages}
    verdict = lambda q: json.dumps({"found": "q"} if q.startswith("Vitamin") and "vitamin A" in q
                                   else {"not_found": "no"})
    if case == "unparsable":
        with pytest.raises(KeyError): _run_py(d, answer, parsed, pages, verdict)   # run.py raises there
        theirs, decisions = None, None
    else: theirs, decisions = _run_py(d, answer, parsed, pages, verdict)
    conv = Conversation("x", "m", "p1", "q", answer, conversation_id="c1")
    view = pd.DataFrame({"conversation_id": ["c1", "c1"], "citation_index": [1, 2],
                         "text": [t or "" for t in pages.values()], "valid": [t is not None for t in pages.values()]})

    def answer_of(r):
        system, user = r.messages[0][1], r.messages[-1][1]
        return parsed if system == PROMPTS_JSON["parser"] else verdict(user)
    llm, ours = recording_llm(answer_of)
    resp, _ = run_paper([conv], view, {"c1": "A"}, llm, rel, Window(llm, 1 << 16), progress=False)
    row = resp.iloc[0]
    if theirs is not None:   # the parser's and the verifier's messages, as run.py's wrapper sends them
        theirs_msgs = [(s, q) for s, q, *_ in theirs[1:]]     # after the answerer's call (our answers are collected)
        assert sorted(set(theirs_msgs)) == sorted({(r.messages[0][1], r.messages[1][1]) for r in ours})
        assert {(f, seed, t) for _, _, f, seed, t in theirs} == {("json", 0, 0)}
        assert {(r.seed, r.temperature) for r in ours} == {(0, 0.0)}
    if case == "duplicates":   # run.py: unique statements found by any page over unique statements
        found = decisions[decisions.Decision == "found"].Statement.nunique()
        assert (row.found, row.unique_statements) == (found, decisions.Statement.nunique()) == (1, 2)
    elif case == "all_failed":   # run.py returns before its verifier: no result, not 0 of 2
        assert decisions is None and row.status == "no result: no cited page could be read" and row.found == 0
        assert paper_table(resp, rel).responses_no_result[0] == 1
    else: assert row.status.startswith("no parsable statement")
    assert paper_table(resp, rel).prompts[0].startswith(f"prompts: released, read from {d}")


# ---------------------------------------------------------------- VERIFY
def _verify_modules(d: Path):
    "VERIFY's three prompt modules, their imports of models, search and config stubbed."
    stub = lambda name, **kw: types.SimpleNamespace(__name__=name, **kw)
    utils = types.SimpleNamespace(strip_string=lambda s: s.strip(" \n"))
    stubs = {"modeling": stub("modeling", Model=object), "utils": utils, "config": stub("config", max_retries=10,
             search_type="serper", num_searches=3, serper_api_key="", max_steps=3),
             "query_serper": stub("query_serper"), "factuality_evaluation": stub("factuality_evaluation",
                                                                                 FactEval=object),
             "pandas": pd, "tqdm": stub("tqdm", tqdm=lambda x, **k: x)}
    return [load_module(d / rel, f"verify_{i}", stubs) for i, rel in enumerate(VERIFY_FILES)]


def test_verify_paper_sends_its_code_s_raw_prompts_at_its_parameters(tmp_path):
    d = clone(tmp_path, "factbench")
    rel = load_released("factbench", {"released": {"factbench": str(d)}})
    ext, dec, rate = _verify_modules(d)
    response = "Acme was founded in 1998. It is based in Oslo."
    conv = Conversation("x", "m", "p1", "q", response, segments=(Segment(response, (), 0, len(response)),),
                        conversation_id="c1")
    unit = Unit("c1", 0, "It is based in Oslo", "Fact", 26, 45, 0, ())
    llm, _ = recording_llm(lambda r: "")
    # what the released code builds: the extraction's str.format, the decontextualisation's, the judge's replaces,
    # each stripped as VERIFY's model wrapper strips its prompts
    theirs = [ext.UNIT_EXTRACTION_POROMPT.format(_RESPONSE_PLACEHOLDER=response).strip(" \n"),
              dec._DECONTEXT_PROMPT.format(UNIT=unit.text, RESPONSE=response).strip(" \n"),
              rate._FINAL_ANSWER_FORMAT.replace(rate._STATEMENT_PLACEHOLDER, unit.text).replace(
                  rate._KNOWLEDGE_PLACEHOLDER, "chunk one\nchunk two").strip(" \n")]
    ours = [verify_requests([conv], llm, variant=PAPER, released=rel)[0],
            decontext_requests([unit], [conv], llm, variant=PAPER, released=rel)[1][0]]
    seen = []
    judge_llm = LLM(MockBackend("r2", lambda r: seen.append(r) or "[Supported]"))
    judge_units([unit], {(unit.unit_id, "all"): Evidence(unit.unit_id, "all", ["chunk one", "chunk two"], [1, 1],
                                                          [0.9, 0.8])},
                judge_llm, ("all",), progress=False, step="verify_judge", variant=PAPER, released=rel)
    ours.append(seen[0])
    assert [r.raw_prompt for r in ours] == theirs                 # byte for byte, sent as raw text completions
    assert all(r.is_raw for r in ours)
    assert {r.temperature for r in ours} == {0.5} and {r.max_tokens for r in ours} == {2048}
    assert all(not r.grammar for r in ours)                      # the released code sends no grammar
