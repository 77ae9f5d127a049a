#!/usr/bin/env python3
"""scripts/soak.py — drives jetson-llm-server with a home assistant's mix for a while and checks
that it stays well: no failed request, RSS flat after warm-up (least-squares slope under
--max-slope MB/h), open fds and threads flat, memory back after bursts of large bodies. Writes
soak.json, soak.md and soak.png (RSS, fds and latency over time) to --out.

The mix, in turn: chat, streamed chat, a tool call (tool_choice=required), JSON Schema output,
session turns (conversation_id, four conversations growing turn by turn), a client that hangs up
mid-stream, and bad requests (malformed JSON, wrong types, unknown endpoints, prompts past the
context), each answer checked for its shape. Every --burst-every seconds after warm-up, 20 bodies of
1.5 MB (prompts past the context): RSS two seconds later must be within 10% of its value before.

Either starts the server (MODEL given; the binary from --server) or soaks one already running
(--url, with --pid for its process, e.g. systemctl show -p MainPID --value jetson-llm-server).
Run through scripts/soak.sh; python3 scripts/soak.py --help lists every option."""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

LIGHT_TOOL = {"type": "function", "function": {
    "name": "light_turn_on", "description": "Turn on a light",
    "parameters": {"type": "object", "properties": {
        "entity_id": {"type": "string", "description": "e.g. light.kitchen"},
        "brightness_pct": {"type": "integer", "minimum": 0, "maximum": 100}},
        "required": ["entity_id"]}}}
STATE_SCHEMA = {"type": "object", "properties": {
    "entity_id": {"type": "string"}, "state": {"enum": ["on", "off"]},
    "brightness": {"type": "integer", "minimum": 0, "maximum": 255}},
    "required": ["entity_id", "state"], "additionalProperties": False}
QUESTIONS = ["What is the capital of France?", "Name three colours.", "Is the kitchen light on?",
             "Summarise: porch light on, front door locked, 21 C inside.", "Say hello to the family.",
             "What should I cook tonight?", "How many minutes are in two hours?"]
TOOL_ASKS = ["Turn on the kitchen light.", "Switch on the porch light at half brightness.",
             "Please light up the living room.", "Turn the bedroom lamp on."]
BAD_REQUESTS = [("POST", "/v1/chat/completions", b"{not json", 400),
                ("POST", "/v1/chat/completions", b'{"messages": 3}', 400),
                ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], '
                                                  b'"max_tokens": "many"}', 400),
                ("POST", "/v1/completions", b'{"prompt": "x", "temperature": -1}', 400),
                ("GET", "/v1/no-such-endpoint", None, 404)]
WORDS_1_5MB = "word " * 300000


def percentile(values, q):
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def slope_per_hour(points):
    """Least-squares slope of (t seconds, y) in y units per hour; None for fewer than 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mt) * (y - my) for t, y in points) / var * 3600.0


class Target:
    """The server under test: started here, or reached at --url."""

    def __init__(self, args):
        self.proc = None
        self.log_path = os.path.join(args.out, "server.log")
        if args.url:
            u = urllib.parse.urlparse(args.url)
            self.host, self.port = u.hostname, u.port or 80
            self.pid = args.pid
        else:
            binary = args.server or os.path.join(ROOT, "build", "apps", "server", "jetson-llm-server")
            cmd = [binary, "-m", args.model, "-p", "0", "--host", "127.0.0.1", "-c", str(args.ctx),
                   "--cache-ram", str(args.cache_ram), *args.server_arg]
            self.log = open(self.log_path, "w")
            # As the systemd unit runs it: no per-thread malloc caches (--keep-tcache: glibc's default).
            env = dict(os.environ)
            if not args.keep_tcache and "tcache_count" not in env.get("GLIBC_TUNABLES", ""):
                env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), "glibc.malloc.tcache_count=0"]))
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
            self.pid, self.host, self.port = self.proc.pid, "127.0.0.1", None
            deadline = time.time() + 300
            while time.time() < deadline:
                text = open(self.log_path, errors="replace").read()
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
                if m:
                    self.port = int(m.group(1))
                if self.port and "ready:" in text:
                    break
                if self.proc.poll() is not None:
                    sys.exit("soak: the server exited while starting:\n" + text[-3000:])
                time.sleep(0.1)
            else:
                self.proc.kill()
                sys.exit("soak: the server did not become ready in 300 s")
        self.headers = {"Content-Type": "application/json"}
        if args.api_key:
            self.headers["Authorization"] = "Bearer " + args.api_key

    def request(self, method, path, body=None, timeout=300):
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=self.headers)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def sample(self, detail=False):
        """(rss MB, open fds, threads) of the server process, and with `detail` its anonymous and
        file-backed parts (MB); None where unknown."""
        if not self.pid:
            return (None,) * (5 if detail else 3)
        rss = threads = anon = mapped = fds = None
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1]) / 1024.0
                    elif line.startswith("RssAnon:"):
                        anon = int(line.split()[1]) / 1024.0
                    elif line.startswith("RssFile:"):
                        mapped = int(line.split()[1]) / 1024.0
                    elif line.startswith("Threads:"):
                        threads = int(line.split()[1])
            fds = len(os.listdir("/proc/%d/fd" % self.pid))
        except OSError:
            pass
        return (rss, fds, threads, anon, mapped) if detail else (rss, fds, threads)

    def stop(self):
        """SIGTERM a server started here; (exit code, seconds) or None."""
        if not self.proc:
            return None
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        return code, time.time() - t0


def temperature_c():
    """The hottest thermal zone in degrees C (Jetson: CPU-therm, GPU-therm, ...); None if none."""
    best = None
    base = "/sys/class/thermal"
    try:
        zones = [z for z in os.listdir(base) if z.startswith("thermal_zone")]
    except OSError:
        return None
    for z in zones:
        try:
            with open(os.path.join(base, z, "temp")) as f:
                v = int(f.read().strip()) / 1000.0
        except (OSError, ValueError):
            continue
        if -40 < v < 150:
            best = v if best is None else max(best, v)
    return best


class Soak:
    def __init__(self, args, target):
        self.args, self.t = args, target
        self.t0 = time.time()
        self.samples = []      # (t, rss MB, fds, threads, temp C)
        self.quiet = []        # (t, fds, threads, anonymous MB less session snapshots, end of an iteration)
        self.results = []      # (t, kind, seconds, ok, detail)
        self.bursts = []       # {t_start, t_end, rss_before, rss_after, ok}
        self.excluded = []     # (t_start, t_end) windows left out of the RSS fit
        self.sessions = {}
        self.stop_sampling = threading.Event()
        self.rng = random.Random(args.seed)
        self.tools_supported = True
        self.disconnects = 0
        self.unsupported = []

    # ---- sampling ----
    def sampler(self):
        while not self.stop_sampling.is_set():
            rss, fds, threads, anon, mapped = self.t.sample(detail=True)
            self.samples.append((time.time() - self.t0, rss, fds, threads, temperature_c(), anon, mapped,
                                 self.session_ram_mb()))
            self.stop_sampling.wait(self.args.sample_every)

    def server_metric_mb(self, *names):
        """Gauges from the server's /metrics, in MB (None each where absent)."""
        try:
            status, data = self.t.request("GET", "/metrics", timeout=10)
        except OSError:
            return [None] * len(names)
        out = []
        for name in names:
            m = re.search(rb"^" + name.encode() + rb" (\S+)$", data, re.M) if status == 200 else None
            out.append(float(m.group(1)) / 2 ** 20 if m else None)
        return out

    def session_ram_mb(self):
        """The server's session snapshots in host RAM (MB, from /metrics), bounded by --cache-ram."""
        return self.server_metric_mb("jllm_session_ram_bytes")[0]

    def record(self, kind, start, ok, detail=""):
        self.results.append((start - self.t0, kind, time.time() - start, ok, detail))
        if not ok:
            print("soak: FAILED %s: %s" % (kind, detail[:300]), file=sys.stderr, flush=True)

    # ---- request kinds; each returns (ok, detail) ----
    def chat_body(self, messages, **extra):
        body = {"messages": messages, "max_tokens": self.args.tokens, "temperature": 0.7,
                "seed": self.rng.randrange(1 << 30)}
        body.update(extra)
        return body

    def k_chat(self):
        status, data = self.t.request("POST", "/v1/chat/completions",
                                      self.chat_body([{"role": "user", "content": self.rng.choice(QUESTIONS)}]))
        if status != 200:
            return False, "status %d: %s" % (status, data[:200])
        j = json.loads(data)
        msg = j["choices"][0]["message"]
        ok = isinstance(msg.get("content"), str) and j["usage"]["completion_tokens"] > 0
        return ok, "" if ok else "bad answer: %s" % data[:300]

    def k_stream(self):
        body = self.chat_body([{"role": "user", "content": self.rng.choice(QUESTIONS)}], stream=True)
        c = http.client.HTTPConnection(self.t.host, self.t.port, timeout=300)
        try:
            c.request("POST", "/v1/chat/completions", json.dumps(body).encode(), self.t.headers)
            r = c.getresponse()
            if r.status != 200:
                return False, "status %d: %s" % (r.status, r.read()[:200])
            raw = r.read().decode()
        finally:
            c.close()
        events = [line[6:] for line in raw.split("\n") if line.startswith("data: ")]
        if not events or events[-1] != "[DONE]":
            return False, "stream did not end with [DONE]: %s" % raw[-200:]
        finishes = [json.loads(e)["choices"][0].get("finish_reason") for e in events[:-1]
                    if json.loads(e).get("choices")]
        ok = any(f in ("stop", "length") for f in finishes)
        return ok, "" if ok else "no finish_reason in the stream"

    def k_tools(self):
        if not self.tools_supported:
            return None
        body = self.chat_body([{"role": "user", "content": self.rng.choice(TOOL_ASKS)}],
                              tools=[LIGHT_TOOL], tool_choice="required", max_tokens=max(self.args.tokens, 64))
        status, data = self.t.request("POST", "/v1/chat/completions", body)
        if status == 400 and b"invalid_tools" in data:
            self.tools_supported = False
            self.unsupported.append("tools (%s)" % json.loads(data)["error"]["message"])
            return None
        if status != 200:
            return False, "status %d: %s" % (status, data[:200])
        j = json.loads(data)
        ch = j["choices"][0]
        calls = ch["message"].get("tool_calls") or []
        if ch["finish_reason"] != "tool_calls" or not calls:
            return False, "no tool call: %s" % data[:300]
        f = calls[0]["function"]
        args = json.loads(f["arguments"])
        ok = f["name"] == "light_turn_on" and isinstance(args.get("entity_id"), str)
        return ok, "" if ok else "bad call: %s" % f

    def k_json(self):
        body = self.chat_body([{"role": "user", "content": "Report the kitchen light as JSON."}],
                              response_format={"type": "json_schema", "json_schema": {
                                  "name": "state", "schema": STATE_SCHEMA}}, max_tokens=max(self.args.tokens, 80))
        status, data = self.t.request("POST", "/v1/chat/completions", body)
        if status != 200:
            return False, "status %d: %s" % (status, data[:200])
        j = json.loads(data)
        if j["choices"][0]["finish_reason"] != "stop":
            return True, ""  # cut by max_tokens: the text is a prefix, nothing to parse
        try:
            obj = json.loads(j["choices"][0]["message"]["content"])
        except ValueError as e:
            return False, "JSON output does not parse: %s" % e
        try:
            import jsonschema
            jsonschema.validate(obj, STATE_SCHEMA)
        except ImportError:
            pass
        except Exception as e:  # noqa: BLE001 — any validation error is a failure
            return False, "JSON output breaks its schema: %s" % e
        return True, ""

    def k_session(self):
        sid = "soak-%d" % self.rng.randrange(4)
        hist = self.sessions.setdefault(sid, [])
        if sum(len(m["content"]) for m in hist) > self.args.ctx:  # ~4 chars a token: start over
            hist.clear()
        hist.append({"role": "user", "content": self.rng.choice(QUESTIONS)})
        status, data = self.t.request("POST", "/v1/chat/completions",
                                      self.chat_body(hist, conversation_id=sid, temperature=0))
        if status != 200:
            hist.pop()
            return False, "status %d: %s" % (status, data[:200])
        j = json.loads(data)
        hist.append({"role": "assistant", "content": j["choices"][0]["message"]["content"] or ""})
        cached = j["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
        self.session_turns.append((len(hist) > 2, cached > 0))
        return True, ""

    def k_disconnect(self):
        s = socket.create_connection((self.t.host, self.t.port), timeout=60)
        try:
            body = json.dumps(self.chat_body([{"role": "user", "content": "Tell a long story."}],
                                             stream=True, max_tokens=self.args.tokens * 4)).encode()
            head = "".join("%s: %s\r\n" % kv for kv in self.t.headers.items())
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\n" + head.encode() +
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
            got = b""
            while got.count(b"data: ") < 2:
                d = s.recv(4096)
                if not d:
                    break
                got += d
        finally:
            s.close()
        self.disconnects += 1
        ok = got.startswith(b"HTTP/1.1 200")
        return ok, "" if ok else "stream did not start: %s" % got[:200]

    def k_bad(self):
        method, path, body, want = self.rng.choice(BAD_REQUESTS + [("POST", "/v1/chat/completions", None, 400)])
        if body is None and method == "POST":  # a prompt past the context
            body = self.chat_body([{"role": "user", "content": "word " * (self.args.ctx * 2)}])
        status, data = self.t.request(method, path, body)
        try:
            err = json.loads(data)["error"]
            shaped = isinstance(err.get("message"), str) and "type" in err
        except (ValueError, KeyError, TypeError):
            shaped = False
        ok = status == want and shaped
        return ok, "" if ok else "%s %s: status %d (want %d): %s" % (method, path, status, want, data[:200])

    def burst(self):
        """20 bodies of 1.5 MB; RSS 2 s after within 10% of before."""
        before = self.t.sample()[0]
        start = time.time() - self.t0
        ok_all = True
        for _ in range(20):
            t = time.time()
            status, data = self.t.request("POST", "/v1/chat/completions",
                                          {"messages": [{"role": "user", "content": WORDS_1_5MB}], "max_tokens": 4})
            ok = status == 400 and b"context_length_exceeded" in data
            ok_all &= ok
            self.record("large_body", t, ok, "" if ok else "status %d: %s" % (status, data[:200]))
        time.sleep(2)
        after = self.t.sample()[0]
        end = time.time() - self.t0
        self.excluded.append((start - 1, end + 1))
        within = before is None or after is None or after <= before * 1.10
        self.bursts.append({"t": round(start, 1), "rss_before_mb": before, "rss_after_mb": after,
                            "requests_ok": ok_all, "returned": within})
        print("soak: burst at %.0f s: RSS %.1f -> %.1f MB" % (start, before or 0, after or 0), flush=True)

    # ---- the run ----
    def run(self):
        a = self.args
        self.session_turns = []
        kinds = [("chat", self.k_chat), ("stream", self.k_stream), ("tools", self.k_tools),
                 ("json", self.k_json), ("session", self.k_session), ("session", self.k_session),
                 ("disconnect", self.k_disconnect), ("bad", self.k_bad)]
        sampler = threading.Thread(target=self.sampler, daemon=True)
        sampler.start()
        deadline = self.t0 + a.duration if a.duration > 0 else None
        next_burst = self.t0 + a.warmup + min(a.burst_every, max(10.0, (a.duration - a.warmup) / 2)
                                               if a.duration > 0 else a.burst_every)
        it = 0
        while (a.iters <= 0 or it < a.iters) and (deadline is None or time.time() < deadline):
            for name, fn in kinds:
                if deadline is not None and time.time() >= deadline:
                    break
                start = time.time()
                try:
                    out = fn()
                except Exception as e:  # noqa: BLE001 — a client-side error is a failed request
                    out = (False, "%s: %s" % (type(e).__name__, e))
                if out is not None:
                    self.record(name, start, *out)
                sess, in_use = self.server_metric_mb("jllm_session_ram_bytes", "jllm_heap_in_use_bytes")
                rss, fds, threads, anon, _ = self.t.sample(detail=True)
                self.quiet.append((time.time() - self.t0, fds, threads, None if anon is None else anon - (sess or 0),
                                   name == kinds[-1][0], None if in_use is None else in_use - (sess or 0)))
            it += 1
            if a.burst_every > 0 and time.time() >= next_burst and (deadline is None or time.time() < deadline - 5):
                self.burst()
                next_burst = time.time() + a.burst_every
            if it % 10 == 0:
                done = sum(1 for r in self.results if r[3])
                print("soak: %.0f s, %d iterations, %d requests ok, %d failed, RSS %.1f MB"
                      % (time.time() - self.t0, it, done, len(self.results) - done,
                         self.samples[-1][1] or 0 if self.samples else 0), flush=True)
        self.iterations = it
        # The server still answers, then stops cleanly when it is ours.
        start = time.time()
        try:
            status, _ = self.t.request("GET", "/health", timeout=10)
            self.record("health", start, status == 200, "" if status == 200 else "status %d" % status)
        except Exception as e:  # noqa: BLE001
            self.record("health", start, False, repr(e))
        try:
            status, data = self.t.request("GET", "/metrics", timeout=10)
            self.metrics_text = data.decode() if status == 200 else ""
        except Exception:  # noqa: BLE001
            self.metrics_text = ""
        self.stop_sampling.set()
        sampler.join(5)
        self.shutdown = self.t.stop()

    # ---- the verdict ----
    def report(self):
        a = self.args
        elapsed = time.time() - self.t0
        warm = [s for s in self.samples if s[0] >= a.warmup and s[1] is not None and
                not any(lo <= s[0] <= hi for lo, hi in self.excluded)]
        rss_slope = slope_per_hour([(s[0], s[1]) for s in warm])
        # What can leak: anonymous memory less the session snapshots (which grow by design up to
        # --cache-ram). The file-backed part is the mapped model (page cache, bounded by the file).
        # Taken once per iteration of the mix, after its last request, so the fit compares like with
        # like (what a request leaves allocated for a moment differs by kind).
        heap = [(q[0], q[3]) for q in self.quiet if q[0] >= a.warmup and q[3] is not None and q[4] and
                not any(lo <= q[0] <= hi for lo, hi in self.excluded)]
        heap_slope = slope_per_hour(heap)
        # The allocator's in-use bytes less the snapshots: growth here is live memory (a leak or a
        # growing structure); growth of `heap` alone is memory kept free inside the arenas.
        in_use = [(q[0], q[5]) for q in self.quiet if len(q) > 5 and q[5] is not None and q[0] >= a.warmup and
                  q[4] and not any(lo <= q[0] <= hi for lo, hi in self.excluded)]
        in_use_slope = slope_per_hour(in_use)
        file_slope = slope_per_hour([(s[0], s[6]) for s in warm if s[6] is not None])
        sess = [s[7] for s in self.samples if s[7] is not None]
        quiet_warm = [q for q in self.quiet if q[0] >= a.warmup and q[1] is not None]

        def level(values, first):
            if not values:
                return None
            n = max(1, len(values) // 10)
            part = values[:n] if first else values[-n:]
            return statistics.median(part)

        fds_first, fds_last = level([q[1] for q in quiet_warm], True), level([q[1] for q in quiet_warm], False)
        thr_first, thr_last = level([q[2] for q in quiet_warm], True), level([q[2] for q in quiet_warm], False)
        kinds = {}
        for t, kind, secs, ok, detail in self.results:
            k = kinds.setdefault(kind, {"count": 0, "failed": 0, "lat": []})
            k["count"] += 1
            k["failed"] += 0 if ok else 1
            k["lat"].append(secs)
        all_lat = [r[2] for r in self.results if r[1] not in ("large_body", "health")]
        failures = [{"t": round(r[0], 1), "kind": r[1], "detail": r[4]} for r in self.results if not r[3]]
        follow_ups = [hit for later, hit in self.session_turns if later]
        temps = [s[4] for s in self.samples if s[4] is not None]
        disconnect_metric = None
        m = re.search(r"^jllm_client_disconnects_total (\S+)$", getattr(self, "metrics_text", ""), re.M)
        if m:
            disconnect_metric = float(m.group(1))
        checks = []

        def check(name, ok, detail):
            checks.append({"check": name, "pass": bool(ok), "detail": detail})

        check("no failed request", not failures, "%d of %d failed" % (len(failures), len(self.results)))
        window = heap[-1][0] - heap[0][0] if len(heap) > 1 else 0
        if heap_slope is None:
            check("RSS slope after warm-up", False, "too few samples after the %.0f s warm-up" % a.warmup)
        elif window < a.min_slope_window:
            # A short run's window is the tail of the warm-up transient (the allocator settling,
            # caches filling): its slope says nothing about MB per hour, so it is shown, not gated.
            check("RSS slope after warm-up (not gated: %.0f s window < %.0f s)" % (window, a.min_slope_window), True,
                  "%+.2f MB/h over %d samples: anonymous RSS less session snapshots; whole RSS %+.1f MB/h"
                  % (heap_slope, len(heap), rss_slope or 0))
        else:
            check("RSS slope after warm-up", heap_slope < a.max_slope,
                  "%+.2f MB/h over %d samples (limit %.1f MB/h): anonymous RSS less session snapshots; "
                  "whole RSS %+.1f MB/h, mapped model %+.1f MB/h, session snapshots up to %.1f MB, "
                  "allocator in-use bytes less snapshots %s MB/h"
                  % (heap_slope, len(heap), a.max_slope, rss_slope or 0, file_slope or 0, max(sess) if sess else 0,
                     "n/a" if in_use_slope is None else "%+.2f" % in_use_slope))
        if fds_first is not None:
            check("open fds flat", fds_last <= fds_first + a.fd_slack,
                  "%g after warm-up, %g at the end (slack %d)" % (fds_first, fds_last, a.fd_slack))
            check("threads flat", thr_last <= thr_first, "%g after warm-up, %g at the end" % (thr_first, thr_last))
        for b in self.bursts:
            check("memory back after 20 x 1.5 MB bodies at %.0f s" % b["t"], b["returned"] and b["requests_ok"],
                  "RSS %.1f -> %.1f MB (limit +10%%)" % (b["rss_before_mb"] or 0, b["rss_after_mb"] or 0))
        if a.burst_every > 0 and not self.bursts:
            check("a large-body burst ran", False, "the run ended before the first burst")
        if follow_ups:
            rate = sum(follow_ups) / len(follow_ups)
            check("session follow-up turns reuse their prefix", rate >= 0.5,
                  "%d of %d follow-up turns had cached tokens" % (sum(follow_ups), len(follow_ups)))
        if disconnect_metric is not None and self.t.proc:
            check("hang-ups noticed", disconnect_metric >= self.disconnects,
                  "server counted %g of %d" % (disconnect_metric, self.disconnects))
        if self.shutdown:
            code, secs = self.shutdown
            check("SIGTERM exits cleanly", code == 0 and secs < 10, "exit %d in %.2f s" % (code, secs))
        passed = all(c["pass"] for c in checks)
        rss_values = [s[1] for s in self.samples if s[1] is not None]
        out = {
            "pass": passed, "model": a.model, "url": a.url, "duration_s": round(elapsed, 1),
            "warmup_s": a.warmup, "iterations": self.iterations, "tokens": a.tokens,
            "requests": len(self.results), "failed": len(failures), "failures": failures[:50],
            "unsupported": self.unsupported, "checks": checks,
            "rss_mb": {"start": rss_values[0] if rss_values else None,
                       "after_warmup": warm[0][1] if warm else None,
                       "end": rss_values[-1] if rss_values else None,
                       "max": max(rss_values) if rss_values else None,
                       "slope_mb_per_h": rss_slope, "heap_slope_mb_per_h": heap_slope,
                       "mapped_slope_mb_per_h": file_slope,
                       "heap_after_warmup": heap[0][1] if heap else None, "heap_end": heap[-1][1] if heap else None,
                       "in_use_slope_mb_per_h": in_use_slope,
                       "in_use_after_warmup": in_use[0][1] if in_use else None,
                       "in_use_end": in_use[-1][1] if in_use else None,
                       "mapped_end": self.samples[-1][6] if self.samples else None,
                       "session_snapshots_max": max(sess) if sess else None},
            "fds": {"after_warmup": fds_first, "end": fds_last},
            "threads": {"after_warmup": thr_first, "end": thr_last},
            "temperature_c": {"max": max(temps), "mean": statistics.mean(temps)} if temps else None,
            "bursts": self.bursts,
            "latency_s": {k: {"count": v["count"], "failed": v["failed"],
                              "p50": percentile(v["lat"], 50), "p95": percentile(v["lat"], 95),
                              "p99": percentile(v["lat"], 99)} for k, v in kinds.items()},
            "latency_all_s": {"p50": percentile(all_lat, 50), "p95": percentile(all_lat, 95),
                              "p99": percentile(all_lat, 99)},
            "samples": [list(s) for s in self.samples],
            "quiet_samples": [list(q) for q in self.quiet],
            "requests_log": [[round(r[0], 2), r[1], round(r[2], 4), r[3]] for r in self.results],
        }
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "soak.json"), "w") as f:
            json.dump(out, f, indent=1)
        plotted = self.plot(os.path.join(a.out, "soak.png"))
        self.markdown(out, os.path.join(a.out, "soak.md"), plotted)
        return out

    def plot(self, path):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("soak: matplotlib is not installed; no plot", file=sys.stderr)
            return False
        fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
        ts = [s[0] / 60 for s in self.samples if s[1] is not None]
        ax1.plot(ts, [s[1] for s in self.samples if s[1] is not None], lw=1, label="RSS")
        hs = [(s[0] / 60, s[5] - (s[7] or 0)) for s in self.samples if s[5] is not None]
        ax1.plot([h[0] for h in hs], [h[1] for h in hs], lw=1, label="anonymous less session snapshots")
        ax1.legend(loc="center right", fontsize=8)
        ax1.axvline(self.args.warmup / 60, color="grey", ls="--", lw=0.8)
        for lo, hi in self.excluded:
            ax1.axvspan(lo / 60, hi / 60, color="orange", alpha=0.2)
        ax1.set_ylabel("RSS (MB)")
        ax1.set_title("jetson-llm-server soak: %s" % os.path.basename(self.args.model or self.args.url))
        ax2.plot([q[0] / 60 for q in self.quiet if q[1] is not None], [q[1] for q in self.quiet if q[1] is not None],
                 lw=1, label="open fds")
        ax2.plot([q[0] / 60 for q in self.quiet if q[2] is not None], [q[2] for q in self.quiet if q[2] is not None],
                 lw=1, label="threads")
        ax2.legend(loc="upper left")
        ax2.set_ylabel("count")
        kinds = sorted({r[1] for r in self.results if r[1] != "health"})
        for k in kinds:
            pts = [(r[0] / 60, r[2]) for r in self.results if r[1] == k]
            ax3.scatter([p[0] for p in pts], [p[1] for p in pts], s=4, label=k)
        ax3.set_yscale("log")
        ax3.set_ylabel("latency (s)")
        ax3.set_xlabel("minutes")
        ax3.legend(loc="upper left", ncol=4, fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return True

    def markdown(self, out, path, plotted):
        def ms(v):
            return "-" if v is None else "%.0f" % (v * 1000)
        lines = ["# Soak report: %s" % ("PASS" if out["pass"] else "FAIL"), "",
                 "- server: %s" % (out["model"] or out["url"]),
                 "- duration %.0f s (warm-up %.0f s), %d iterations, %d requests, %d failed, max_tokens %d"
                 % (out["duration_s"], out["warmup_s"], out["iterations"], out["requests"], out["failed"],
                    out["tokens"]),
                 "- RSS: start %s MB, after warm-up %s MB, end %s MB, max %s MB, slope %s MB/h" % tuple(
                     "-" if v is None else "%.1f" % v for v in (
                         out["rss_mb"]["start"], out["rss_mb"]["after_warmup"], out["rss_mb"]["end"],
                         out["rss_mb"]["max"], out["rss_mb"]["slope_mb_per_h"])),
                 "- heap (anonymous RSS less session snapshots): %s -> %s MB, slope %s MB/h; mapped model "
                 "pages %s MB at the end; session snapshots up to %s MB" % tuple(
                     "-" if v is None else "%.1f" % v for v in (
                         out["rss_mb"]["heap_after_warmup"], out["rss_mb"]["heap_end"],
                         out["rss_mb"]["heap_slope_mb_per_h"], out["rss_mb"]["mapped_end"],
                         out["rss_mb"]["session_snapshots_max"])),
                 "- open fds %s -> %s, threads %s -> %s (after warm-up -> end)" % (
                     out["fds"]["after_warmup"], out["fds"]["end"], out["threads"]["after_warmup"],
                     out["threads"]["end"]),
                 "- temperature: %s" % ("max %.1f C, mean %.1f C" % (out["temperature_c"]["max"],
                                                                     out["temperature_c"]["mean"])
                                        if out["temperature_c"] else "no thermal zone readable"), ""]
        if out["unsupported"]:
            lines += ["- left out of the mix: " + "; ".join(out["unsupported"]), ""]
        lines += ["| check | result | detail |", "|---|---|---|"]
        lines += ["| %s | %s | %s |" % (c["check"], "pass" if c["pass"] else "**FAIL**", c["detail"])
                  for c in out["checks"]]
        lines += ["", "| request | count | failed | p50 ms | p95 ms | p99 ms |", "|---|---:|---:|---:|---:|---:|"]
        for k, v in sorted(out["latency_s"].items()):
            lines.append("| %s | %d | %d | %s | %s | %s |" % (k, v["count"], v["failed"], ms(v["p50"]),
                                                             ms(v["p95"]), ms(v["p99"])))
        al = out["latency_all_s"]
        lines.append("| all (mix) | | | %s | %s | %s |" % (ms(al["p50"]), ms(al["p95"]), ms(al["p99"])))
        if out["failures"]:
            lines += ["", "Failures (first %d):" % len(out["failures"])]
            lines += ["- %.1f s %s: %s" % (f["t"], f["kind"], f["detail"]) for f in out["failures"]]
        if plotted:
            lines += ["", "![RSS, fds, threads and latency over time](soak.png)"]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("model", nargs="?", help="GGUF model; the server is started with it")
    p.add_argument("--iters", type=int, default=0, help="stop after N iterations of the mix (0: no limit)")
    p.add_argument("--tokens", type=int, default=32, help="max_tokens of each generation")
    p.add_argument("--duration", type=float, default=120, help="stop after S seconds (0: no limit)")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds left out of the flatness checks (default: a quarter of --duration, 30..600)")
    p.add_argument("--burst-every", type=float, default=600,
                   help="seconds between bursts of 20 large bodies after warm-up (0: none); a run shorter "
                        "than that has one halfway through the measured part")
    p.add_argument("--sample-every", type=float, default=None, help="seconds between RSS samples (default 1, "
                                                                        "5 for runs over 2 h)")
    p.add_argument("--max-slope", type=float, default=1.0, help="RSS slope limit after warm-up, MB/h")
    p.add_argument("--min-slope-window", type=float, default=1800,
                   help="seconds of samples after warm-up below which the slope is shown, not gated")
    p.add_argument("--fd-slack", type=int, default=2, help="open fds the end may have beyond the start")
    p.add_argument("--out", default=os.path.join(ROOT, "soak-out"), help="folder for soak.json/.md/.png")
    p.add_argument("--ctx", type=int, default=2048, help="-c for a server started here")
    p.add_argument("--cache-ram", type=int, default=128, help="--cache-ram (MiB) for a server started here")
    p.add_argument("--server", help="jetson-llm-server binary (default build/apps/server/jetson-llm-server)")
    p.add_argument("--server-arg", action="append", default=[], help="one more server argument (repeatable)")
    p.add_argument("--keep-tcache", action="store_true",
                   help="start the server with glibc's per-thread malloc caches (the unit turns them off)")
    p.add_argument("--url", help="soak a server already running there instead")
    p.add_argument("--pid", type=int, help="with --url: the server's process id, for RSS/fds/threads")
    p.add_argument("--api-key", default=os.environ.get("JLLM_API_KEY"), help="bearer key (env JLLM_API_KEY)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if not a.model and not a.url:
        p.error("give a MODEL to start the server with, or --url of a running one")
    if a.model and not a.url and not os.path.exists(a.model):
        p.error("no such model: %s" % a.model)
    if a.duration <= 0 and a.iters <= 0:
        p.error("give --duration or --iters (or both)")
    if a.warmup is None:
        a.warmup = min(600.0, max(30.0, a.duration / 4)) if a.duration > 0 else 30.0
    if a.sample_every is None:
        a.sample_every = 5.0 if a.duration > 7200 else 1.0
    os.makedirs(a.out, exist_ok=True)
    target = Target(a)
    soak = Soak(a, target)
    try:
        soak.run()
    except KeyboardInterrupt:
        print("soak: interrupted; reporting what ran", file=sys.stderr)
        soak.iterations = getattr(soak, "iterations", 0)
        soak.stop_sampling.set()
        soak.metrics_text = ""
        soak.shutdown = target.stop()
    out = soak.report()
    with open(os.path.join(a.out, "soak.md")) as f:
        print(f.read())
    print("soak: %s; report in %s" % ("PASS" if out["pass"] else "FAIL", a.out))
    return 0 if out["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
