"""Shared caches stay correct (issue 20): four processes writing one SQLite cache at once lose and duplicate nothing,
and `groundbench cache merge` of caches made apart is exact (same keys, every row once, conflicts counted)."""
import sqlite3
import subprocess
import sys

import numpy as np

from conftest import groundbench

WRITER = r"""
import sys, time
from pathlib import Path
from groundbench.llm.client import Completion, LLMCache
path, me, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = LLMCache(path)
desc = {"backend": "mock", "model": "m"}
for i in range(n):  # small transactions interleaved with the other writers; keys 0..49 are written by every process
    k = i if i < 50 else 1000 * (me + 1) + i
    c.put_many([(f"key{k}", desc, Completion(f"text{k}", 1, 1, "stop"))])
print("ok")
"""


def test_four_processes_write_one_cache_at_once(tmp_path):
    db, n = tmp_path / "llm.sqlite", 300
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(i), str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT key, text FROM completions").fetchall()
    want = {f"key{k}" for k in range(50)} | {f"key{1000 * (m + 1) + i}" for m in range(4) for i in range(50, n)}
    assert len(rows) == len(want) == 50 + 4 * (n - 50)            # nothing lost, nothing duplicated
    assert {k for k, _ in rows} == want and all(t == "text" + k[3:] for k, t in rows)


def test_cache_merge_is_exact_for_answers_and_embeddings(tmp_path):
    from groundbench.embed import EmbeddingCache
    from groundbench.llm.client import Completion, LLMCache
    desc = {"backend": "mock", "model": "m"}
    a, b = LLMCache(tmp_path / "a.sqlite"), LLMCache(tmp_path / "b.sqlite")
    a.put_many([(f"k{i}", desc, Completion(f"t{i}", 2, 3, "stop")) for i in range(0, 60)])
    b.put_many([(f"k{i}", desc, Completion(f"t{i}", 2, 3, "stop")) for i in range(40, 100)])
    r = groundbench("cache", "merge", tmp_path / "a.sqlite", tmp_path / "b.sqlite", "--out", tmp_path / "m.sqlite",
                    check=True)
    assert "b.sqlite: completions: 60 rows, 40 added, 20 already there, 0 conflicting" in r.stdout
    assert "100 completions" in r.stdout
    m = LLMCache(tmp_path / "m.sqlite").get_many([f"k{i}" for i in range(100)])
    assert len(m) == 100 and all(m[f"k{i}"].text == f"t{i}" and m[f"k{i}"].completion_tokens == 3 for i in range(100))
    e1, e2 = EmbeddingCache(tmp_path / "e1.sqlite"), EmbeddingCache(tmp_path / "e2.sqlite")
    v = np.arange(4, dtype=np.float32)
    e1.put_many("mini", [("h1", v), ("h2", v + 1)])
    e2.put_many("mini", [("h2", v + 1), ("h3", v + 2)]); e2.put_many("gte", [("h1", v)])
    groundbench("cache", "merge", tmp_path / "e1.sqlite", tmp_path / "e2.sqlite", "--out", tmp_path / "e.sqlite",
                check=True)
    em = EmbeddingCache(tmp_path / "e.sqlite")
    assert set(em.get_many("mini", ["h1", "h2", "h3"])) == {"h1", "h2", "h3"}
    assert set(em.get_many("gte", ["h1"])) == {"h1"}
    assert np.array_equal(em.get_many("mini", ["h3"])["h3"], v + 2)
