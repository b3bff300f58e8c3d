"""Issue 17: `groundbench estimate PARAMS.yaml` before a run, in seconds and without loading a model. Its figures are
checked against what runs spend in tests/test_demo.py (the demo's estimate vs actual, every step inside its ranges)."""
import re
import time

import pandas as pd

from conftest import ROOT, groundbench


def test_estimate_of_the_whole_expertqa_file_prints_every_llm_step_in_seconds(tmp_path):
    t0 = time.time()
    p = groundbench("estimate", ROOT / "papermill_params" / "expertqa.yaml", "--runs-dir", tmp_path / "runs",
                    "--out", tmp_path / "est.csv", check=True, timeout=300)
    took = time.time() - t0
    assert took < 120, f"estimate took {took:.0f} s"   # about 10 s here: the tokenizer alone, no weights
    t = pd.read_csv(tmp_path / "est.csv")
    steps = set(zip(t.stage, t.step))
    assert {("50_groundedness", "extract_units"), ("50_groundedness", "decontextualise"), ("50_groundedness", "judge"),
            ("60_sourcebench", "sourcebench_content"), ("65_sourcecheckup", "sourcecheckup")} <= steps
    ex = t.set_index(["stage", "step"]).loc[("50_groundedness", "extract_units")]
    # one request per segment of 331 answers
    assert ex.basis == "built" and ex.requests > 1000 and ex.calls_low <= ex.calls_high
    assert "the model's own tokenizer" in p.stdout and "no money per token" in p.stdout
    # the ratios' source is printed: with no run of the model in the runs folder, the smoke model's bundled record
    assert "the bundled record data/estimate_history/smollm2-135m-instruct.json" in p.stdout


def test_estimate_prices_a_hosted_model_and_says_when_it_cannot(tmp_path):
    spec = tmp_path / "gpt.yaml"
    spec.write_text("run_id: gpt\nstages: [10_claims]\nparameters: {question_rewrite_sample: 4}\n"
                    "settings: {llm.backend: openai, llm.model: gpt-4o, llm.base_url: 'http://127.0.0.1:9/v1'}\n")
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs", "--out", tmp_path / "est.csv", check=True)
    t = pd.read_csv(tmp_path / "est.csv")
    assert t.requests.tolist() == [4] and 0 < t.cost_usd_low.iloc[0] < t.cost_usd_high.iloc[0]
    # no tokenizer offline
    assert "$2.5 in / $10.0 out per million tokens" in p.stdout and "characters / 4" in p.stdout
    spec.write_text(spec.read_text().replace("gpt-4o", "a-model-nobody-prices"))
    p = groundbench("estimate", spec, "--runs-dir", tmp_path / "runs", check=True)
    assert "no price in" in p.stdout and "tokens only" in p.stdout


# Issue 45: an estimate a newcomer can trust. Every parameter file with each backend (the file's own, a priced hosted
# model, vLLM on a GPU): every figure's range holds its expected value, the printed text says "expected (low to high)"
# with no range upside down, and the warning about the bundled smoke model appears exactly where a file meant for real
# judgments would use it (the files meant as smoke runs, the demo, expertqa-12 and vllm-cpu, stay quiet).
BACKENDS = {"file's own": {}, "openai": {"llm.backend": "openai", "llm.model": "gpt-4o",
                                          "llm.base_url": "http://127.0.0.1:9/v1"},
            "vllm": {"llm.backend": "vllm", "llm.model": "meta-llama/Llama-3.3-70B-Instruct"}}
WARNS = {"chatgpt-web", "claude", "expertqa", "gemini", "gpt-4o", "gpt-5", "grok", "perplexity", "qwen-chat",
         "sourcebench", "today", "validation"}
FIGURES = (("calls_expected", "calls_low", "calls_high"), ("completion_expected", "completion_low", "completion_high"),
           ("cost_usd", "cost_usd_low", "cost_usd_high"), ("gpu_hours", "gpu_hours_low", "gpu_hours_high"))
_SPAN = re.compile(r"(unknown|\$?[\d,.]+) \((\$?[\d,.]+) to (no bound|\$?[\d,.]+)\)")


def _num(s: str) -> float: return float(s.replace("$", "").replace(",", ""))


def test_every_parameter_file_with_every_backend_gives_ranges_that_hold_and_warns_where_it_should(tmp_path):
    from groundbench.core import load_settings
    from groundbench.plan.estimate import estimate_run, format_estimate, totals
    from groundbench.runner import load_run_spec
    from groundbench.llm.client import smoke_models
    from groundbench.sourcebench import MAX_TOKENS as SB_TOKENS, SMOKE_TOKENS
    files = sorted((ROOT / "papermill_params").glob("*.yaml"))
    assert len(files) >= 20
    warned = set()
    for f in files:
        spec = load_run_spec(f)
        for backend, over in BACKENDS.items():
            s = load_settings(overrides={**spec.settings, **over, "paths.cache_dir": str(tmp_path / "cache")})
            e = estimate_run(spec.stages, spec.parameters, s, tmp_path / "runs" / spec.run_id, tmp_path / "runs")
            t, where = e.table, f"{f.name} ({backend})"
            for exp, low, high in (c for c in FIGURES if c[0] in e.table):
                for r in t.itertuples():
                    x, lo, hi = getattr(r, exp), getattr(r, low), getattr(r, high)
                    assert lo <= hi or hi != hi, (where, r.step, low, lo, high, hi)
                    assert x != x or lo <= x + 1e-9, (where, r.step, exp, x, low, lo)
                    assert x != x or hi != hi or x <= hi + 1e-9, (where, r.step, exp, x, high, hi)
                tx, tl, th = totals(t, exp.replace("_expected", ""))
                assert tl <= tx + 1e-9 or tx != tx, (where, exp, tl, tx)
                assert th != th or tx <= th + 1e-9, (where, exp, tx, th)
            # SourceBench's page calls at the budget the run gives this model: 512 for the smoke model, else 4,096
            sb = t[t.step.str.startswith("sourcebench_")]
            want = SMOKE_TOKENS if e.model in smoke_models(s) else SB_TOKENS["content"]
            assert sb.empty or set(sb.max_tokens) == {want}, (where, set(sb.max_tokens), want)
            text = format_estimate(e)
            table = text.split("\nnotes:")[0]
            assert not re.search(r"\d--|--\)|\(-|- \(", table), where     # no "0-7,653--" or "- (0--)" of old
            for x, lo, hi in _SPAN.findall(text):
                assert hi == "no bound" or _num(lo) <= _num(hi), (where, x, lo, hi)
                assert x == "unknown" or _num(lo) <= _num(x) + 0.01, (where, x, lo, hi)
            if e.warnings:
                assert backend == "file's own" and "SMOKE RUN" in text and "llm.backend=openai" in text, where
                warned.add(f.stem)
    assert warned == WARNS, warned ^ WARNS


def test_an_api_collection_and_a_priced_judge_add_up(tmp_path):
    p = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", "--runs-dir", tmp_path / "runs",
                    "--setting", "llm.backend=openai", "--setting", "llm.model=gpt-4o",
                    "--setting", "llm.base_url=http://127.0.0.1:9/v1", check=True)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("altogether: "))
    coll, judge, total = re.match(r"altogether: collection \$([\d,.]+) \+ judging \$([\d,.]+) .* = \$([\d,.]+) ",
                                  line).groups()
    assert abs(_num(coll) + _num(judge) - _num(total)) < 0.011, line
    assert "WARNING" not in p.stdout                                     # a real judge: no smoke warning
    own = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", "--runs-dir", tmp_path / "runs",
                      check=True).stdout
    assert "WARNING: the judge is smollm2-135m-instruct, the bundled smoke model" in own
    assert "costs no money per token" in own


class _Unreadable:
    "Builds the handler of a local OpenAI-compatible judge whose every answer but the extractions' is unreadable."
    @staticmethod
    def handler():
        import json as _json
        from conftest import PageHandler

        class H(PageHandler):
            calls = 0
            def do_GET(self):
                self.send(200, b'{"object": "list", "data": [{"id": "unreadable"}]}', "application/json")
            def do_POST(self):
                body = _json.loads(self.rfile.read(int(self.headers["content-length"])))
                if not self.path.endswith("/chat/completions"): return self.send(404, b"{}", "application/json")
                type(self).calls += 1
                text = " ".join(m["content"] for m in body["messages"])
                answer = ("- Vitamin A cuts measles deaths: Fact\n- The claim is wrong: Claim"
                          if "into independent content units" in text else
                          "- Vitamin A cuts measles deaths." if "into independent facts" in text else "I cannot say.")
                self.send(200, _json.dumps({"choices": [{"message": {"content": answer}, "finish_reason": "stop"}],
                                            "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).encode(),
                          "application/json")
        return H


def test_the_estimates_high_bound_holds_against_a_judge_that_never_answers_readably(tmp_path):
    """Issue 53: with the paper variant the judge may be asked 33 times a request (VERIFY's 11 calls in 3 rounds),
    decontextualisation 11 times, and the variants compared beside the run's ask again: the estimate assumed 2 and said
    "calls 35 (4 to 396)" of a run that made 1,636. A local server plays a judge whose every answer is unreadable (the
    extractions excepted, so that units reach the judge); every step's calls stay within the estimate's high bound."""
    import json
    import threading
    from http.server import ThreadingHTTPServer

    import yaml
    handler = _Unreadable.handler()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    spec = tmp_path / "u.yaml"
    spec.write_text(yaml.safe_dump({"run_id": "u", "stages": ["10_claims", "20_collect", "30_sources",
                                                              "50_groundedness", "60_sourcebench", "65_sourcecheckup"],
                                    "parameters": {"question_rewrite_sample": 1, "source": "expertqa", "sample": 6,
                                                   "max_conversations": 1, "pick": "shortest", "max_pages": 1,
                                                   "sourcecheckup_conversations": 1},
                                    "settings": {"llm.backend": "openai", "llm.model": "unreadable",
                                                 "llm.base_url": f"http://127.0.0.1:{srv.server_address[1]}/v1",
                                                 "llm.api_key_env": "", "paths.cache_dir": str(tmp_path / "cache"),
                                                 "embed.allow_bundled_with_real_judge": True}}))
    try:
        groundbench("run", spec, "--runs-dir", tmp_path / "runs", "--stages", "10_claims,20_collect,30_sources",
                    check=True)
        groundbench("run", spec, "--runs-dir", tmp_path / "runs", "--stages",
                    "50_groundedness,60_sourcebench,65_sourcecheckup", check=True, timeout=1200)
    finally:
        srv.shutdown()
    run = tmp_path / "runs" / "u"
    est = pd.read_csv(run / "estimate.csv").set_index(["stage", "step"])
    stages = json.loads((run / "manifest.json").read_text())["stages"]
    made = {(s, step): v["calls"] for s, st in stages.items() for step, v in (st.get("llm") or {}).items()
            if "calls" in v}                                              # (the embedder's counts are not calls)
    assert sum(made.values()) == handler.calls and made[("50_groundedness", "judge")] > 33, made
    over = {k: (n, est.loc[k, "calls_high"]) for k, n in made.items() if k in est.index
            and not n <= est.loc[k, "calls_high"]}
    assert not over, over       # NaN (no bound) would also be listed: every step here has a finite bound


def test_gpu_hours_are_for_the_card_and_weights_the_settings_name():
    """Issue 54: the GPU-hours were for an H200 at FP8 whatever gpu.yaml named (AWQ INT4 on an 80 GB card). They are
    now scaled to gpu.card and the weights llm.quantization gives, the basis printed; an unknown card is refused."""
    out = groundbench("estimate", ROOT / "papermill_params" / "gpu.yaml", check=True).stdout
    assert "on H100, int4 weights: scaled from 5,000 / 3,000 tokens/s assumed for H200 FP8" in out, out[-1500:]
    h100 = float(re.search(r"GPU-hours ([\d.]+) \(", out).group(1))
    out = groundbench("estimate", ROOT / "papermill_params" / "gpu.yaml", "--setting", "gpu.card=A100-80G",
                      "--setting", "gpu.weights=bf16", check=True).stdout
    assert "on A100-80G, bf16 weights" in out and float(re.search(r"GPU-hours ([\d.]+) \(", out).group(1)) > h100
    p = groundbench("estimate", ROOT / "papermill_params" / "gpu.yaml", "--setting", "gpu.card=B300")
    assert p.returncode != 0 and "gpu.card 'B300': not in data/gpu_cards.csv" in p.stderr


def test_a_long_run_with_the_smoke_judge_stops_before_its_first_stage_unless_allowed(tmp_path):
    """Issue 63 (4): past `estimate.smoke_warning_hours` (here lowered so that two question rewrites pass it) a run with
    the bundled smoke judge stops before any stage, its estimate kept; `estimate.allow_long_smoke_run=true` runs it."""
    spec = tmp_path / "s.yaml"
    spec.write_text("run_id: s\nstages: [10_claims]\nparameters: {question_rewrite_sample: 2}\n")
    low = ("--setting", "estimate.smoke_warning_hours=0.0001")
    p = groundbench("run", spec, "--runs-dir", tmp_path / "runs", *low)
    assert p.returncode == 1 and "run s stopped before its first stage, nothing spent" in p.stderr, p.stderr[-2000:]
    assert "estimate.allow_long_smoke_run=true" in p.stderr and "SMOKE RUN" in p.stderr
    assert (tmp_path / "runs" / "s" / "estimate.csv").exists() and not (tmp_path / "runs" / "s" / "10_claims").exists()
    groundbench("run", spec, "--runs-dir", tmp_path / "runs", *low, "--setting", "estimate.allow_long_smoke_run=true",
                check=True)
    assert (tmp_path / "runs" / "s" / "10_claims" / "prompts.parquet").exists()


def test_a_full_study_s_estimate_holds_every_call_to_the_judge_s_context_and_takes_stages(tmp_path):
    """Issue 63 (2): gpt-4o.yaml with a 70B judge under vLLM at 8,192 tokens of context prices no call above that
    context (each step's expected prompt tokens over its expected calls), says what the hold took off, prints each
    stage's total first, and `--stages` prices the stages named alone."""
    vllm = ("--setting", "llm.backend=vllm", "--setting", "llm.model=meta-llama/Llama-3.3-70B-Instruct",
            "--setting", "llm.max_model_len=8192", "--setting", "llm.quantization=awq")
    out = tmp_path / "e.csv"
    p = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", "--runs-dir", tmp_path / "runs", *vllm,
                    "--out", out, check=True)
    t = pd.read_csv(out)
    per_call = t.prompt_tokens / t.calls_expected
    assert (per_call.dropna() <= 8192).all(), t[["stage", "step", "prompt_tokens", "calls_expected"]]
    assert "held to the judge's context of 8,192 tokens" in p.stdout and t.prompt_cut_tokens.gt(0).any()
    head = p.stdout.split("stage ")[0]
    assert "per stage:" in head and "65_sourcecheckup" in head and "GPU-hours" in head, head
    only = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", "--runs-dir", tmp_path / "runs", *vllm,
                       "--stages", "50_groundedness", "--out", tmp_path / "g.csv", check=True)
    assert set(pd.read_csv(tmp_path / "g.csv").stage) == {"50_groundedness"}, only.stdout
    bad = groundbench("estimate", ROOT / "papermill_params" / "gpt-4o.yaml", "--stages", "50_grounded")
    assert bad.returncode == 2 and "--stages 50_grounded: not a stage of" in bad.stderr


def test_the_guide_s_gpu_hours_for_gpu_yaml_are_what_the_estimate_computes(tmp_path):
    "The user guide's figures for papermill_params/gpu.yaml, total and per stage, recomputed from the same code."
    import json
    cells = json.loads((ROOT / "nbs" / "guide.ipynb").read_text())["cells"]
    guide = "".join("".join(c["source"]) for c in cells)
    said = re.search(r"gpu\.yaml` \(.*?\): \*\*([\d.]+) GPU-hours expected \(([\d.]+) to no bound\)\*\* \(per stage: "
                     r"groundedness ([\d.]+), SourceBench ([\d.]+), SourceCheckup ([\d.]+), validation ([\d.]+);",
                     guide)
    assert said, "the guide no longer gives gpu.yaml's GPU-hours in the form this test reads"
    out = groundbench("estimate", ROOT / "papermill_params" / "gpu.yaml", "--runs-dir", tmp_path / "runs",
                      check=True).stdout
    total = re.search(r"^total: .*GPU-hours ([\d.]+) \(([\d.]+) to no bound\)", out, re.M).groups()
    stage = {s: re.search(rf"^  {s}\s+calls .*, GPU-hours ([\d.]+) ", out, re.M).group(1)
             for s in ("50_groundedness", "60_sourcebench", "65_sourcecheckup", "70_validation")}
    assert said.groups() == (*total, *stage.values()), (said.groups(), total, stage)
