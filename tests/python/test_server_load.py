"""tests/python/test_server_load.py — load test: 32 concurrent loopback clients against one
jetson-llm-server (default --max-queue 16) for JLLM_LOAD_SECONDS (default 120; 0 skips) after a
15 s warm-up with the same mix. Every request must be answered with its expected status (200,
or 503 when the queue is full; 400 for the deliberately bad ones), the server must not crash,
and its RSS after the run must be within 5% of its RSS after the warm-up. The mix: chat and
completions (streaming and not, short max_tokens), clients hanging up mid-stream, /health,
/metrics, /tokenize and invalid JSON. A summary is printed and written to
$JLLM_BUILD_DIR/server_load.json."""
import http.client
import json
import os
import random
import threading
import time

import pytest

from server_harness import BUILD, Server

CLIENTS = 32
LOAD_SECONDS = float(os.environ.get("JLLM_LOAD_SECONDS", "120"))
WARMUP_SECONDS = 15.0
MSGS = [{"role": "system", "content": "You are a home assistant."}, {"role": "user", "content": "Turn on the lights."}]


def one_request(port, rng, stats):
    kind = rng.choices(["chat", "stream", "completion", "hangup", "health", "metrics", "tokenize", "bad"],
                       weights=[35, 25, 10, 3, 10, 5, 7, 5])[0]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    hdr = {"Content-Type": "application/json"}
    try:
        if kind == "chat":
            c.request("POST", "/v1/chat/completions", json.dumps({"messages": MSGS, "max_tokens": 4,
                                                                   "temperature": 0.7}), hdr)
        elif kind in ("stream", "hangup"):
            c.request("POST", "/v1/chat/completions", json.dumps({"messages": MSGS, "max_tokens": 4 if kind == "stream" else 64,
                                                                   "stream": True,
                                                                   "stream_options": {"include_usage": True}}), hdr)
        elif kind == "completion":
            c.request("POST", "/v1/completions", json.dumps({"prompt": "The weather today is", "max_tokens": 4}), hdr)
        elif kind == "health":
            c.request("GET", "/health")
        elif kind == "metrics":
            c.request("GET", "/metrics")
        elif kind == "tokenize":
            c.request("POST", "/tokenize", json.dumps({"content": "turn on the kitchen lights"}), hdr)
        else:
            c.request("POST", "/v1/chat/completions", b'{"messages": [', hdr)
        r = c.getresponse()
        if kind == "hangup" and r.status == 200:
            r.read1(256)
            c.sock.close()
            body = b""
        else:
            body = r.read()
        status = r.status
        ok = status in ((400,) if kind == "bad" else (200, 503))
        if ok and status == 200 and kind == "stream":
            ok = body.rstrip().endswith(b"data: [DONE]")
        if ok and status == 503:
            ok = r.getheader("Retry-After") is not None and json.loads(body)["error"]["code"] == "queue_full"
        if ok and status == 200 and kind in ("chat", "completion"):
            ok = json.loads(body)["choices"][0]["finish_reason"] in ("stop", "length")
        stats.record(kind, status, ok)
        return status
    except Exception as e:  # noqa: BLE001 — any transport failure is a test failure
        stats.record(kind, repr(e)[:80], False)
        return None
    finally:
        c.close()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.by = {}
        self.bad = []
        self.total = 0

    def record(self, kind, status, ok):
        with self.lock:
            self.total += 1
            key = "%s:%s" % (kind, status)
            self.by[key] = self.by.get(key, 0) + 1
            if not ok and len(self.bad) < 20:
                self.bad.append(key)


def run_phase(srv, seconds, stats):
    stop_at = time.time() + seconds

    def client(i):
        rng = random.Random(1000 + i)
        while time.time() < stop_at:
            if one_request(srv.port, rng, stats) == 503:
                time.sleep(0.05 + rng.random() * 0.1)  # a polite client backs off a little

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 180)
    assert not any(t.is_alive() for t in threads), "clients hung"


@pytest.mark.skipif(LOAD_SECONDS <= 0, reason="JLLM_LOAD_SECONDS=0")
def test_load_32_clients():
    srv = Server()
    try:
        warm = Stats()
        run_phase(srv, WARMUP_SECONDS, warm)
        time.sleep(1.0)
        srv.assert_healthy()
        # Session snapshots fill the RAM cache (--cache-ram) as requests come: held on purpose,
        # so they are taken out of the growth.
        rss_warm = srv.rss_bytes() - srv.metrics()["jllm_session_ram_bytes"]
        stats = Stats()
        t0 = time.time()
        run_phase(srv, LOAD_SECONDS, stats)
        elapsed = time.time() - t0
        time.sleep(1.0)
        srv.assert_healthy()
        m = srv.metrics()
        rss_after = srv.rss_bytes() - m["jllm_session_ram_bytes"]
        n503 = sum(v for k, v in stats.by.items() if k.endswith(":503"))
        summary = {"clients": CLIENTS, "seconds": round(elapsed, 1), "requests": stats.total, "by": stats.by,
                   "http_503": n503, "failures": stats.bad, "rss_after_warmup_mib": round(rss_warm / 2 ** 20, 2),
                   "session_ram_mib": round(m["jllm_session_ram_bytes"] / 2 ** 20, 2),
                   "rss_after_mib": round(rss_after / 2 ** 20, 2),
                   "rss_growth_pct": round(100.0 * (rss_after - rss_warm) / rss_warm, 2),
                   "generations": {k: v for k, v in m.items() if k.startswith("jllm_generations_total")},
                   "decode_tps": m.get("jllm_decode_tokens_per_second")}
        print("\n[load] " + json.dumps(summary, indent=1))
        try:
            with open(os.path.join(BUILD, "server_load.json"), "w") as f:
                json.dump(summary, f, indent=1)
        except OSError:
            pass
        assert not stats.bad and not warm.bad, (stats.bad, warm.bad)
        assert stats.by.get("chat:200", 0) + stats.by.get("stream:200", 0) > 20
        assert rss_after <= rss_warm * 1.05, summary
    finally:
        srv.stop()
