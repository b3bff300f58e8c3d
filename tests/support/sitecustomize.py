"""Test-only, imported at the start of every Python process `conftest.groundbench(...)` starts (its folder is on their
PYTHONPATH): with an answer store named, the `llamacpp` backend is the test run's `answer_store.StoredLlamaCpp`."""
import os

if os.environ.get("GROUNDBENCH_ANSWER_STORE"):
    from groundbench.llm.client import register_backend
    register_backend("llamacpp", "answer_store:StoredLlamaCpp")
