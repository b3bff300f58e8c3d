"""Test-only: the bundled model's answers shared by the processes of one test run.

A test run makes the same request many times (the question rewrites of the first prompts, in every small run of the
runner's tests). Answers depend only on their request, so a test run may compute each once: `StoredLlamaCpp` is the
in-process llama.cpp backend that keeps every answer it computes in the SQLite file `GROUNDBENCH_ANSWER_STORE` names,
with the seconds it took, keyed by the request's cache key and the threads used, and answers the same request from it
in any process of the test run. The run's own cache, call counts, token counts and budgets see a call like any other;
only the model's work is spared. `sitecustomize.py` beside this file registers it as the `llamacpp` backend in the
processes `conftest.groundbench(...)` starts (and their kernels); the library knows nothing of it."""
from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from groundbench.llm.backends import LlamaCppBackend
from groundbench.llm.client import Completion, cache_key

ANSWER_STORE_ENV = "GROUNDBENCH_ANSWER_STORE"


class AnswerStore:
    """Answers in SQLite (several writers): `get` serves a stored answer and counts it; `put` keeps a computed one with
    its seconds; `summary` says what was spared."""
    def __init__(self, path: str | Path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=60, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, text TEXT, prompt_tokens INT, "
                        "completion_tokens INT, finish_reason TEXT, seconds REAL, served INT DEFAULT 0)")
        self.db.commit()

    def get(self, key: str) -> Completion | None:
        row = self.db.execute("SELECT text, prompt_tokens, completion_tokens, finish_reason FROM answers WHERE key = ?",
                              (key,)).fetchone()
        if row is None: return None
        self.db.execute("UPDATE answers SET served = served + 1 WHERE key = ?", (key,))
        self.db.commit()
        return Completion(*row)

    def put(self, key: str, c: Completion, seconds: float):
        self.db.execute("INSERT OR IGNORE INTO answers VALUES (?,?,?,?,?,?,0)",
                        (key, c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason, seconds))
        self.db.commit()

    def summary(self) -> dict:
        n, served, spared = self.db.execute("SELECT COUNT(*), COALESCE(SUM(served), 0), "
                                            "COALESCE(SUM(served * seconds), 0) FROM answers").fetchone()
        return {"computed": n, "served": served, "seconds_spared": round(spared, 1)}


_STORES: dict[str, AnswerStore] = {}


def answer_store() -> AnswerStore | None:
    "The store `GROUNDBENCH_ANSWER_STORE` names, opened once per process, or None."
    if not (p := os.environ.get(ANSWER_STORE_ENV)): return None
    if p not in _STORES: _STORES[p] = AnswerStore(p)
    return _STORES[p]


class StoredLlamaCpp(LlamaCppBackend):
    "The llama.cpp backend, its answers served from and kept in the test run's `AnswerStore`."
    def generate(self, requests):
        if (store := answer_store()) is None: return super().generate(requests)
        out = []
        for r in requests:
            key = cache_key({**self.describe(), "threads": self.llm.n_threads}, r)
            if (c := store.get(key)) is None:
                t0 = time.perf_counter()
                c = super().generate([r])[0]
                store.put(key, c, time.perf_counter() - t0)
            out.append(c)
        return out
