"""Shared fixtures: free ports, the llama.cpp server, isolated caches."""
import os
import socket
import subprocess
import sys
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


def groundbench(*args, cwd=ROOT, check=False, timeout=600, env=None):
    """Run the installed `groundbench` command; returns the CompletedProcess."""
    p = subprocess.run([str(BIN / "groundbench"), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, **(env or {})})
    if check and p.returncode != 0:
        raise AssertionError(f"groundbench {' '.join(map(str, args))} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


@pytest.fixture(scope="session")
def gguf_path():
    from groundbench.llm import bundled_gguf
    return bundled_gguf()


@pytest.fixture(scope="session")
def llama_server(gguf_path, tmp_path_factory):
    """A real llama.cpp OpenAI-compatible server on 127.0.0.1 with the bundled SmolLM2 model."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path), "--host", "127.0.0.1",
                                 "--port", str(port), "--n_ctx", "4096", "--model_alias", "smollm2-server"], stdout=f, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None: raise RuntimeError(f"llama.cpp server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200: break
            except httpx.TransportError: pass
            time.sleep(0.5)
        else: raise RuntimeError(f"llama.cpp server did not start in 120 s: {log.read_text()[-2000:]}")
        yield base
    finally:
        proc.terminate()
        try: proc.wait(10)
        except subprocess.TimeoutExpired: proc.kill()


@pytest.fixture
def isolated_settings(tmp_path):
    """Settings whose caches and runs live in a temporary folder."""
    from groundbench.core import load_settings
    return load_settings(overrides={"paths.cache_dir": str(tmp_path / "cache"), "paths.runs_dir": str(tmp_path / "runs")})
