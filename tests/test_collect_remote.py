"""Collection past one machine (issue 20): the browser collector drives a W3C WebDriver endpoint (here chromedriver
itself serving WebDriver on 127.0.0.1, as a Selenium Grid node would) through `remote_url`, and two workers split one
prompt set by a stable hash; one worker is killed mid-way and rerun: every prompt is sent once and archived once, and a
run without `--worker` then writes the conversations of all of them from the archive, sending nothing."""
import json
import os
import signal
import subprocess
import time

import httpx
import yaml
import pytest

from conftest import BIN, free_port, groundbench
from fixture_site import FixtureSite

pytestmark = [pytest.mark.slow, pytest.mark.chromium]


def test_two_remote_workers_split_the_prompts_and_survive_a_kill(tmp_path):
    from groundbench.collect.browser import CHROMEDRIVER
    from groundbench.collect.stage import sample_by_group, worker_of
    from groundbench.core import Prompt, read_records
    port = free_port()
    # its own process group: the browsers it starts go with it (the killed worker's session is never closed by the
    # worker, and chromedriver leaves that Chromium running when it is stopped; it was once found orphaned after CI)
    driver_server = subprocess.Popen([os.environ.get("GROUNDBENCH_CHROMEDRIVER", CHROMEDRIVER), f"--port={port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    env = {**os.environ, "GROUNDBENCH_REMOTE_CHROMIUM": os.environ.get("GROUNDBENCH_CHROMIUM", "/usr/bin/chromium")}
    try:
        for _ in range(100):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/status", timeout=1).json()["value"]["ready"]: break
            except (httpx.HTTPError, KeyError, ValueError): pass
            time.sleep(0.1)
        with FixtureSite("perplexity") as site:
            runs, n = tmp_path / "runs", 8
            params = {"question_rewrite_sample": 0, "source": "browser", "provider": "perplexity", "sample": n,
                      "base_url": site.url, "delay_s": 2, "remote_url": f"http://127.0.0.1:{port}"}
            spec = tmp_path / "r.yaml"
            spec.write_text(yaml.safe_dump({"run_id": "r", "stages": ["10_claims", "20_collect"],
                                            "parameters": params}))
            groundbench("run", spec, "--runs-dir", runs, "--stages", "10_claims", check=True)   # once: the prompt set
            prompts = sample_by_group(read_records(runs / "r/10_claims/prompts.parquet", Prompt),
                                      lambda p: (p.topic, p.role), n)
            share = {k: [p.prompt_id for p in prompts if worker_of(p.prompt_id, 2) == k] for k in (0, 1)}
            assert len(share[0]) >= 2 and len(share[1]) >= 2, share
            records = runs / "r/20_collect/records/perplexity"
            def start(k):
                return subprocess.Popen([str(BIN / "groundbench"), "run", str(spec), "--runs-dir", str(runs),
                                         "--worker", f"{k}/2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env, start_new_session=True)
            w0, w1 = start(0), start(1)
            deadline = time.time() + 240
            while time.time() < deadline and not any((records / f"{pid}.json").exists() for pid in share[1]):
                assert w1.poll() is None, w1.communicate()[1][-2000:]
                time.sleep(0.05)
            # between two prompts (2 s apart): one archived, the rest not
            os.killpg(w1.pid, signal.SIGKILL)
            w1.wait(30)
            done1 = [pid for pid in share[1] if (records / f"{pid}.json").exists()]
            assert 1 <= len(done1) < len(share[1]), done1
            out0 = w0.communicate(timeout=300)
            assert w0.returncode == 0, out0[1][-2000:]
            r1 = subprocess.run([str(BIN / "groundbench"), "run", str(spec), "--runs-dir", str(runs),
                                 "--worker", "1/2"], capture_output=True, text=True, env=env, timeout=300)
            assert r1.returncode == 0, r1.stderr[-2000:]
            # each prompt archived once
            assert sorted(p.stem for p in records.glob("*.json")) == sorted(share[0] + share[1])
            assert sum(site.sent.values()) == n and max(site.sent.values()) == 1, site.sent      # and sent once
            w = {k: json.loads((runs / f"r/20_collect/workers/worker-{k}-of-2.json").read_text()) for k in (0, 1)}
            assert w[0]["prompts"] == len(share[0])
            assert (w[1]["archived_before"], w[1]["collected_now"]) == (len(done1), len(share[1]) - len(done1))
            # workers never write shared files
            assert not (runs / "r/20_collect/conversations.jsonl").exists()
            # the run itself: from the archive
            groundbench("run", spec, "--runs-dir", runs, check=True, env=env)
            assert sum(site.sent.values()) == n
        convs = [json.loads(l) for l in (runs / "r/20_collect/conversations.jsonl").read_text().splitlines()]
        assert len(convs) == n and all(len(c["citations"]) == 3 for c in convs)
        assert (runs / "r/notebooks/20_collect.worker-0-of-2.ipynb").exists()
        assert (runs / "r/notebooks/20_collect.ipynb").exists()
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):   # chromedriver and every browser of its sessions
            try: os.killpg(driver_server.pid, sig)
            except ProcessLookupError: break
            time.sleep(1)
        driver_server.wait(10)
        deadline, left = time.time() + 20, ["?"]
        while left and time.time() < deadline:   # killed processes take a moment to be gone
            left = subprocess.run(["pgrep", "-g", str(driver_server.pid)], capture_output=True,
                                  text=True).stdout.split()
            if left: time.sleep(0.5)
        assert left == [], f"processes of the WebDriver server's group still running 20 s after SIGKILL: {left}"
