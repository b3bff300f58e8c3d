"""The vLLM backend. vLLM needs a GPU, which these machines lack, so this test replaces the `vllm` module
(and only it) with a fake that records what the backend asks of it: the narrowest boundary we can mock."""
import sys
import types

import pydantic
import pytest

from groundbench.llm import LLM, ChatRequest, complete_json, llm_from_settings


class Label(pydantic.BaseModel):
    label: str


@pytest.fixture
def fake_vllm(monkeypatch):
    calls = {"init": [], "chat": []}

    class SamplingParams:
        def __init__(self, **kw): self.kw = kw

    class StructuredOutputsParams:
        def __init__(self, json=None): self.json = json

    class Out:
        def __init__(self, text): self.text, self.token_ids, self.finish_reason = text, [1, 2, 3], "stop"

    class RequestOutput:
        def __init__(self, text, n): self.outputs, self.prompt_token_ids = [Out(text)], list(range(n))

    class LLM_:
        def __init__(self, **kw): calls["init"].append(kw)
        def chat(self, messages, sampling_params=None, use_tqdm=True):
            calls["chat"].append((messages, sampling_params))
            return [RequestOutput('{"label": "Supported"}', len(m[-1]["content"])) for m in messages]

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM_, SamplingParams
    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = StructuredOutputsParams
    vllm.sampling_params = sp
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    return calls


def test_vllm_one_call_per_batch_with_parallelism_and_structured_outputs(fake_vllm, isolated_settings):
    s = {**isolated_settings, "llm": {**isolated_settings["llm"], "backend": "vllm", "model": "meta-llama/Llama-3.3-70B-Instruct",
                                      "tensor_parallel_size": 4, "pipeline_parallel_size": 2, "revision": "abc123"}}
    llm = llm_from_settings(s)
    assert not llm.smoke
    init = fake_vllm["init"][0]
    assert init["tensor_parallel_size"] == 4 and init["pipeline_parallel_size"] == 2
    assert init["enable_prefix_caching"] is True and init["revision"] == "abc123"
    reqs = [ChatRequest.of(f"unit {i}") for i in range(10)] + [ChatRequest.of("unit 0")]
    res = complete_json(llm, reqs, Label, step="judge", progress=False)
    assert [r.value for r in res] == [{"label": "Supported"}] * 11
    assert len(fake_vllm["chat"]) == 1  # the whole batch in one call, duplicate removed
    msgs, params = fake_vllm["chat"][0]
    assert len(msgs) == 10
    assert params[0].kw["structured_outputs"].json == Label.model_json_schema()
    assert params[0].kw["temperature"] == 0.0 and params[0].kw["seed"] == 0
    st = llm.stats["judge"]
    assert (st["calls"], st["deduplicated"], st["completion_tokens"]) == (10, 1, 30)
    # a rerun is served by the cache: vLLM is not called again
    llm2 = llm_from_settings(s)
    complete_json(llm2, reqs, Label, step="judge", progress=False)
    assert len(fake_vllm["chat"]) == 1 and llm2.stats["judge"]["cache_hits"] == 11
