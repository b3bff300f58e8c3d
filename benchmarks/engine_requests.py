"""The requests both engine benchmarks send (bench_engines.py, and engine_vllm.py in the vLLM environment): the judge's
own prompt (VERIFY's shape, judge.v3) on the seed study's claims against two fixed knowledge points, under the judge's
own grammar (VERIFY's unnumbered form), greedy. Imports only what the vLLM environment holds."""
import csv
from pathlib import Path

from groundbench.groundedness.judge import judge_grammar
from groundbench.llm.client import ChatRequest, load_prompt

ROOT = Path(__file__).resolve().parent.parent
KNOWLEDGE = ("Public health agencies review the evidence on vaccines, diets and treatments before advising anyone.\n"
             "Claims that spread on social media are often checked by fact-checkers, who cite their sources.")


def judge_requests(n: int, reasoning_chars: int, max_tokens: int) -> list[ChatRequest]:
    "`n` judge requests on the first `n` claims of the seed study (repeated when n is larger)."
    with open(ROOT / "data" / "seed_study" / "claims.csv", newline="", encoding="utf-8") as f:
        claims = [r["claim"] for r in csv.DictReader(f)]
    pt, g = load_prompt("judge", 3), judge_grammar(reasoning_chars, numbered=False)
    return [ChatRequest.of(pt.render(statement=claims[i % len(claims)], evidence=KNOWLEDGE), max_tokens=max_tokens,
                           temperature=0.0, seed=0, grammar=g) for i in range(n)]
