"""tests/python/server_harness.py — starts the real jetson-llm-server binary on a free loopback
port (-p 0; the port is read from its log) with a small context, and gives tests raw-HTTP and
/metrics helpers. Used by the test_server_*.py files.

Env: JLLM_BUILD_DIR (default build/), JLLM_TEST_MODEL (default
models/SmolLM2-135M-Instruct.Q4_1.gguf), JLLM_TEST_QWEN_MODEL (default
models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf), JLLM_REQUIRE_MODELS=1 turns a missing binary or model
into a failure instead of a skip."""
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("JLLM_BUILD_DIR", os.path.join(ROOT, "build"))
MODEL = os.environ.get("JLLM_TEST_MODEL", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
# The tool-call model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M; scripts/fetch_model.sh qwen2.5-0.5b).
QWEN_MODEL = os.environ.get("JLLM_TEST_QWEN_MODEL",
                            os.path.join(ROOT, "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
N_CTX = 512
# SmolLM2's end-of-generation ids (<|endoftext|>, <|im_end|>): biased away to force long outputs.
NO_EOS = {"0": -100, "2": -100}


def binary_path():
    for p in (os.path.join(BUILD, "apps", "server", "jetson-llm-server"), os.path.join(BUILD, "jetson-llm-server")):
        if os.path.exists(p):
            return p
    return None


def require_artifacts(model=MODEL):
    missing = []
    if binary_path() is None:
        missing.append("jetson-llm-server under " + BUILD)
    if not os.path.exists(model):
        missing.append(model + " (scripts/fetch_model.sh)")
    if missing:
        msg = "missing: " + ", ".join(missing)
        if os.environ.get("JLLM_REQUIRE_MODELS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


class Server:
    def __init__(self, *extra, ctx=N_CTX, model=MODEL, env=None):
        require_artifacts(model)
        self.log = tempfile.NamedTemporaryFile(prefix="jllm-server-", suffix=".log", delete=False)
        args = [binary_path(), "-m", model, "-p", "0", "--host", "127.0.0.1", *extra]
        if ctx is not None:
            args += ["-c", str(ctx)]
        if "--threads" not in extra:
            args += ["-t", "2"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=None if env is None else {**os.environ, **env})
        self.port = None
        deadline = time.time() + 30
        while time.time() < deadline:
            text = self.log_text()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
            if self.port and "ready:" in text:
                break
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early:\n" + text)
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError("server did not become ready:\n" + self.log_text())
        self.base = "http://127.0.0.1:%d" % self.port

    def log_text(self):
        with open(self.log.name, "r", errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """Raw HTTP; `body` may be bytes, str or a JSON-able object. Returns (status, headers, bytes)."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, path, body, headers=None, timeout=60):
        status, hdrs, data = self.request("POST", path, body, headers, timeout)
        try:
            return status, hdrs, json.loads(data)
        except ValueError:
            return status, hdrs, data

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def assert_healthy(self):
        assert self.alive(), "server died:\n" + self.log_text()[-4000:]
        status, _, body = self.request("GET", "/health", timeout=10)
        assert status == 200, body

    def terminate(self, timeout=30):
        """SIGTERM; returns the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


def sse_events(resp):
    """Parses an SSE body (http.client response) into the list of `data:` payloads."""
    events = []
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        if not chunk:
            break
        buf += chunk
    for block in buf.decode().split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                events.append(line[len("data: "):])
    return events
