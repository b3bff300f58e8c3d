"""The test run's answer store (tests/support/answer_store.py): test machinery that lives in the tests, switched on in
the processes conftest.groundbench(...) starts by tests/support/sitecustomize.py. Real llama.cpp, real SQLite."""
import os
import subprocess
import sys

from answer_store import ANSWER_STORE_ENV, AnswerStore, StoredLlamaCpp
from conftest import SUPPORT
from groundbench.llm.backends import LlamaCppBackend
from groundbench.llm.client import ChatRequest, Completion


def test_a_stored_answer_is_served_with_its_token_counts_and_counted(tmp_path):
    s = AnswerStore(tmp_path / "answers.sqlite")
    assert s.get("k") is None
    s.put("k", Completion("yes", 12, 3, "stop"), 2.5)
    s.put("k", Completion("no", 1, 1, "stop"), 9.0)                      # the first answer stays
    assert AnswerStore(tmp_path / "answers.sqlite").get("k") == Completion("yes", 12, 3, "stop")  # another process
    assert s.summary() == {"computed": 1, "served": 1, "seconds_spared": 2.5}


def test_the_stored_backend_computes_once_and_answers_as_the_model_did(tmp_path, monkeypatch):
    req = ChatRequest((("user", "Name one colour."),), max_tokens=8)
    plain = LlamaCppBackend(n_ctx=1024).generate([req])[0]
    monkeypatch.setenv(ANSWER_STORE_ENV, str(tmp_path / "answers.sqlite"))
    first = StoredLlamaCpp(n_ctx=1024).generate([req])[0]
    again = StoredLlamaCpp(n_ctx=1024).generate([req])[0]
    assert first == plain
    assert again == plain
    assert AnswerStore(tmp_path / "answers.sqlite").summary()["served"] == 1


def test_sitecustomize_makes_llamacpp_the_stored_backend_only_with_a_store(tmp_path):
    code = "from groundbench.llm.client import BACKENDS; print(BACKENDS['llamacpp'])"
    env = {**os.environ, "PYTHONPATH": str(SUPPORT)}
    on = subprocess.run([sys.executable, "-c", code], env={**env, ANSWER_STORE_ENV: str(tmp_path / "a.sqlite")},
                        capture_output=True, text=True, check=True).stdout.strip()
    off = subprocess.run([sys.executable, "-c", code], env={**env, ANSWER_STORE_ENV: ""},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert on == "answer_store:StoredLlamaCpp"
    assert off == "groundbench.llm.backends:LlamaCppBackend"
