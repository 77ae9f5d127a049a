"""tests/python/test_server_sessions.py — session KV snapshots in jetson-llm-server on SmolLM2-135M,
by raw HTTP: interleaved sessions (conversation_id and nvext.agent_hints.session_id) reuse their
own prefix from RAM, the --cache-ram byte budget evicts the least recently used session, --kv-dir
files survive a restart and answer with the same greedy text as an uncached server, corrupt or
truncated files are refused with a warning and prefilled instead, 30 SIGKILLs at random moments
after a response leave no temp file and no wrong answer, llama-server's /slots save / erase /
restore and its errors, and the jllm_session_* metrics."""
import glob
import json
import math
import os
import random
import shutil
import time

import pytest

from server_harness import Server, sse_events

CTX = 2048
MAX_TOKENS = 12
# Prompt tokens a re-rendered assistant reply may cost beyond the new message (the reply's
# tokens as text may tokenize differently at its end, and the last generated token is not in
# the KV).
SLACK = 10
ROOMS = ["kitchen", "hall", "office", "garage", "bedroom", "porch", "attic", "cellar"]
KINDS = ["lamp", "fan", "heater", "blind", "speaker", "plug"]
QUESTIONS = ["Which devices are in the office?", "What is device 7?", "Turn off the heater in the attic.",
             "List two lamps.", "Is the porch fan on?", "Which room has the speaker?", "Dim the hall lamp.",
             "How many plugs are there?"]
NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Niaj",
         "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Yvonne"]


def system_prompt(name, n=24):
    """A long system prompt (about 200 tokens) whose first word already differs per name."""
    items = ["%s %s %s %d" % (ROOMS[(i * 3 + len(name)) % len(ROOMS)], name, KINDS[i % len(KINDS)], i) for i in range(n)]
    return "%s's home. You are its assistant. Known devices: %s. Answer briefly." % (name, "; ".join(items))


def chat(srv, msgs, sid=None, hint="conversation_id", **kw):
    body = {"model": "m", "messages": msgs, "max_tokens": MAX_TOKENS, "temperature": 0}
    if sid is not None:
        if hint == "nvext":
            body["nvext"] = {"agent_hints": {"session_id": sid}}
        else:
            body["conversation_id"] = sid
    body.update(kw)
    status, _, r = srv.post("/v1/chat/completions", body, timeout=120)
    assert status == 200, (status, r, srv.log_text()[-3000:])
    return r


def text(r):
    return r["choices"][0]["message"]["content"]


def cache(r):
    return r["jetson"]["cache"]


def cached(r):
    return r["usage"]["prompt_tokens_details"]["cached_tokens"]


class Conv:
    """One session's messages; turn() asks the next question on a server and keeps the answer."""

    def __init__(self, sid, name, hint="conversation_id"):
        self.sid, self.hint = sid, hint
        self.msgs = [{"role": "system", "content": system_prompt(name)}]
        self.turns = 0
        self.last = None  # the last turn's response

    def next_msgs(self):
        return self.msgs + [{"role": "user", "content": QUESTIONS[self.turns % len(QUESTIONS)]}]

    def turn(self, srv, **kw):
        msgs = self.next_msgs()
        r = chat(srv, msgs, self.sid, self.hint, **kw)
        self.keep(msgs, text(r), r)
        return r

    def keep(self, msgs, answer, r=None):
        self.msgs = msgs + [{"role": "assistant", "content": answer}]
        self.turns += 1
        self.last = r


def check_reuse(r, prev):
    """A session's next turn reuses all of its previous turn's prompt and nearly all of its reply."""
    u, p = r["usage"], prev["usage"]
    assert cache(r)["tokens_reused"] == cached(r)
    assert cached(r) >= p["prompt_tokens"], (u, p)
    new = u["prompt_tokens"] - p["prompt_tokens"] - p["completion_tokens"]  # the new message, templated
    assert u["prompt_tokens"] - cached(r) <= new + SLACK, (u, p)


def check_fresh(r):
    """A session's first turn, its prompt unlike any other's: nothing but the chat template's first
    tokens can be reused, and from no snapshot."""
    assert cache(r)["source"] in ("none", "resident"), cache(r)
    assert cached(r) <= 4, r["usage"]
    assert cache(r)["restored_tokens"] == 0


class Reference:
    """A server without session snapshots (--cache-ram 0, no --kv-dir): the texts to compare with.
    Answers are remembered by their messages."""

    def __init__(self):
        self.srv = Server("--cache-ram", "0", ctx=CTX)
        self.memo = {}

    def text(self, msgs):
        key = json.dumps(msgs, sort_keys=True)
        if key not in self.memo:
            r = chat(self.srv, msgs)
            assert cache(r)["source"] in ("none", "resident"), cache(r)
            self.memo[key] = text(r)
        return self.memo[key]


@pytest.fixture(scope="module")
def ref():
    r = Reference()
    yield r
    r.srv.stop()


def jkv_files(d):
    return sorted(glob.glob(os.path.join(str(d), "*.jkv")))


def tmp_files(d):
    return sorted(glob.glob(os.path.join(str(d), "*.tmp")))


def wait_for(pred, timeout=10.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def metrics_after(srv, snapshots):
    """/metrics once `snapshots` snapshots were taken: a response's snapshot is taken after its body
    went out, so a /metrics read right after it may come first."""
    def taken():
        m = srv.metrics()
        return m if m["jllm_session_snapshots_total"] >= snapshots else None
    return wait_for(taken, what="%d snapshots" % snapshots)


def delta(m1, m0, key):
    return m1.get(key, 0) - m0.get(key, 0)


def src_key(source):
    return 'jllm_session_cache_requests_total{source="%s"}' % source


# --- 1. Interleaved sessions, RAM budget -------------------------------------------------------

def test_interleaved_sessions_restore_their_own_prefix():
    srv = Server(ctx=CTX)
    try:
        a = Conv("sess-A", "Alice")
        b = Conv("sess-B", "Bob", hint="nvext")  # the other way to name a session
        c = Conv("sess-C", "Carol")
        prev_sid = None
        for conv in (a, b, a, b, c, a, a):
            prev = conv.last
            last = conv is a and conv.turns == 2
            if last:  # the last turn streamed: the usage chunk carries the same report
                msgs = conv.next_msgs()
                body = {"messages": msgs, "max_tokens": MAX_TOKENS, "temperature": 0, "conversation_id": conv.sid,
                        "stream": True, "stream_options": {"include_usage": True}}
                hc = srv.conn(120)
                hc.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
                resp = hc.getresponse()
                assert resp.status == 200
                events = sse_events(resp)
                hc.close()
                assert events[-1] == "[DONE]"
                chunks = [json.loads(e) for e in events[:-1]]
                usage = [ch for ch in chunks if ch.get("usage")]
                assert len(usage) == 1 and not usage[0]["choices"], usage
                r = {"usage": usage[0]["usage"], "jetson": usage[0]["jetson"]}
                answer = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
                conv.keep(msgs, answer, r)
                again = chat(srv, msgs, conv.sid)  # the same text as an answer in one body
                assert text(again) == answer and cache(again)["source"] == "resident"
            else:
                r = conv.turn(srv)
            if prev is None:
                if conv is a:
                    assert cache(r) == {"tokens_reused": 0, "source": "none", "restored_tokens": 0,
                                        "restore_ms": 0.0}, r  # the server's first request
                    assert cached(r) == 0
                else:
                    check_fresh(r)
            else:
                check_reuse(r, prev)
                jc = cache(r)
                if prev_sid == conv.sid:
                    assert jc["source"] == "resident" and jc["restored_tokens"] == 0, jc
                else:
                    assert jc["source"] == "ram", jc
                    assert 0 < jc["restored_tokens"] <= jc["tokens_reused"], jc
                    assert jc["restore_ms"] >= 0
            prev_sid = conv.sid
        m = metrics_after(srv, 7)
        assert m[src_key("ram")] == 3  # A2, B2, A3
        assert m[src_key("none")] + m[src_key("resident")] == 5  # A1, B1, C1, A3 again, A4
        assert m[src_key("disk")] == 0
        assert m["jllm_session_ram_entries"] == 3
        assert m["jllm_session_ram_evictions_total"] == 0
        assert m["jllm_session_restored_bytes_total"] > 0
        assert m["jllm_session_snapshots_total"] == 7  # A3 again held the same tokens: not stored twice
        assert "[server]" in srv.log_text() and "session=sess-B" in srv.log_text()
    finally:
        srv.stop()


def test_ram_budget_evicts_least_recently_used_session():
    # A snapshot's size: one session's first turn on a server with the default budget.
    probe = Server(ctx=CTX)
    try:
        Conv("probe", "Alice").turn(probe)
        m = metrics_after(probe, 1)
        assert m["jllm_session_ram_entries"] == 1
        snap = m["jllm_session_ram_bytes"]
        assert snap > 0 and m["jllm_session_ram_budget_bytes"] >= 100 * snap
    finally:
        probe.stop()
    # Room for two snapshots (of a second turn, a little larger), not for three of a first turn.
    mb = math.ceil(2.5 * snap / (1 << 20))
    assert 2.4 * snap < mb * (1 << 20) < 2.95 * snap, (snap, mb)
    srv = Server("--cache-ram", str(mb), ctx=CTX)
    try:
        assert srv.metrics()["jllm_session_ram_budget_bytes"] == mb * (1 << 20)
        a, b, c = Conv("A", "Alice"), Conv("B", "Bob"), Conv("C", "Carol")
        for conv in (a, b, c):
            check_fresh(conv.turn(srv))
        m = metrics_after(srv, 3)
        assert m["jllm_session_ram_entries"] == 2 and m["jllm_session_ram_evictions_total"] == 1, m
        assert m["jllm_session_ram_bytes"] <= mb * (1 << 20)
        for conv in (b, c):  # still held
            prev = conv.last
            r = conv.turn(srv)
            assert cache(r)["source"] == "ram", cache(r)
            check_reuse(r, prev)
        r = a.turn(srv)  # A was the least recently used: gone
        check_fresh(r)
        m = metrics_after(srv, 6)
        assert m["jllm_session_ram_evictions_total"] >= 2  # A's second turn pushed one out again
        assert m["jllm_session_ram_bytes"] <= mb * (1 << 20)
        assert m[src_key("ram")] == 2
    finally:
        srv.stop()


# --- 2./3. --kv-dir across a restart, corrupt files ---------------------------------------------

@pytest.fixture(scope="module")
def written(tmp_path_factory, ref):
    """A --kv-dir holding session A's first turn, written by a server that then got SIGTERM."""
    d = tmp_path_factory.mktemp("kv-pristine")
    conv = Conv("restart-A", "Dave")
    srv = Server("--kv-dir", str(d), ctx=CTX)
    try:
        msgs1 = conv.next_msgs()
        r = conv.turn(srv)
        files = wait_for(lambda: jkv_files(d), what="a .jkv file")
        assert len(files) == 1 and len(os.path.basename(files[0])) == 16 + 4, files
        assert wait_for(lambda: srv.metrics()["jllm_session_disk_written_total"] >= 1)
    finally:
        srv.terminate()
        srv.stop()
    assert not tmp_files(d)
    assert text(r) == ref.text(msgs1)  # a sanity check of the comparison itself
    msgs2 = conv.next_msgs()
    expect = ref.text(msgs2)  # right after turn 1 on the reference: its resident prefix
    return d, conv.sid, msgs2, expect, r


def copy_dir(src, dst):
    shutil.copytree(str(src), str(dst))
    return dst


def test_restart_restores_session_from_disk(written, tmp_path):
    src, sid, msgs2, expect, r1 = written
    d = copy_dir(src, tmp_path / "kv")
    srv = Server("--kv-dir", str(d), ctx=CTX)
    try:
        m0 = srv.metrics()
        assert m0["jllm_session_disk_entries"] == 1 and m0["jllm_session_disk_bytes"] > 0
        assert m0["jllm_session_ram_entries"] == 0
        r = chat(srv, msgs2, sid)
        jc = cache(r)
        assert jc["source"] == "disk", jc
        assert cached(r) > 0 and jc["tokens_reused"] == cached(r)
        assert jc["restored_tokens"] == cached(r)  # nothing was resident
        assert jc["restore_ms"] > 0
        check_reuse(r, r1)
        assert text(r) == expect
        m = srv.metrics()
        assert m[src_key("disk")] == 1 and m["jllm_session_disk_loaded_total"] == 1
        assert m["jllm_session_restored_bytes_total"] > 0 and m["jllm_session_disk_rejected_total"] == 0
        assert "[kv-dir]" not in srv.log_text()
    finally:
        srv.stop()


def corrupt_middle(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        data = f.read(64)
        f.seek(size // 2)
        f.write(bytes(x ^ 0x5A for x in data))


def corrupt_header(path):
    with open(path, "r+b") as f:  # inside the fixed header fields (n_layer, n_head_kv, ...)
        f.seek(28)
        data = f.read(8)
        f.seek(28)
        f.write(bytes(x ^ 0xFF for x in data))


def truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) * 2 // 3)


@pytest.mark.parametrize("damage", [corrupt_middle, truncate, corrupt_header], ids=["middle", "truncated", "header"])
def test_corrupt_session_file_is_prefilled_instead(written, tmp_path, damage):
    src, sid, msgs2, expect, _ = written
    d = copy_dir(src, tmp_path / "kv")
    [path] = jkv_files(d)
    damage(path)
    srv = Server("--kv-dir", str(d), ctx=CTX)
    try:
        r = chat(srv, msgs2, sid)
        assert cache(r)["source"] != "disk", cache(r)
        assert cached(r) == 0, r["usage"]  # the server's first request: nothing else to reuse
        assert text(r) == expect
        warn = [line for line in srv.log_text().splitlines() if line.startswith("warning: [kv-dir]")]
        assert warn and any(os.path.basename(path) in line for line in warn), srv.log_text()[-3000:]
        m = srv.metrics()
        assert m["jllm_session_disk_rejected_total"] >= 1 and m["jllm_session_disk_loaded_total"] == 0
        assert m[src_key("disk")] == 0
        # The bad file is gone; the turn's own snapshot replaces it.
        wait_for(lambda: srv.metrics()["jllm_session_disk_written_total"] >= 1, what="the new snapshot")
        r2 = chat(srv, msgs2, sid)
        assert cache(r2)["source"] == "resident" and text(r2) == expect
        srv.assert_healthy()
    finally:
        srv.stop()


# --- 4. SIGKILL at random moments -----------------------------------------------------------------

def test_crash_loop_never_gives_a_wrong_answer(tmp_path, ref):
    rounds = 30
    rng = random.Random(20261201)
    d = tmp_path / "kv"
    d.mkdir()
    names = iter(NAMES)
    known = Conv("known-0", next(names))
    others = [Conv("other-0", next(names)), Conv("other-1", next(names))]
    sources, interrupted = [], 0
    for rnd in range(rounds):
        srv = Server("--kv-dir", str(d), ctx=CTX)
        try:
            assert not tmp_files(d), "temp files after a restart became ready: %s" % tmp_files(d)
            m = srv.metrics()
            assert m["jllm_session_disk_rejected_total"] == 0, srv.log_text()[-3000:]
            # The known session's next turn: the reference's text, whether restored or prefilled.
            msgs = known.next_msgs()
            expect = ref.text(msgs)
            r = chat(srv, msgs, known.sid)
            assert text(r) == expect, (rnd, cache(r), srv.log_text()[-3000:])
            known.keep(msgs, expect, r)
            sources.append(cache(r)["source"])
            # Then a turn or two of other sessions, and a SIGKILL shortly after the last answer,
            # while its snapshot is being taken or written.
            for conv in others[:rng.choice((1, 2))]:
                conv.turn(srv)
            if rng.random() >= 0.3:
                time.sleep(rng.uniform(0, 0.05))
            srv.proc.kill()
            srv.proc.wait()
            bad = [line for line in srv.log_text().splitlines() if "[kv-dir]" in line and "warning" in line]
            assert not bad, srv.log_text()[-3000:]
        finally:
            srv.stop()
        if tmp_files(d):
            interrupted += 1
        # Bounded conversations: a new session now and then.
        if known.turns >= 8:
            known = Conv("known-%d" % rnd, next(names))
        for i, conv in enumerate(others):
            if conv.turns >= 3:
                others[i] = Conv("other-%d-%d" % (i, rnd), next(names))
    srv = Server("--kv-dir", str(d), ctx=CTX)
    try:
        assert not tmp_files(d)
        srv.assert_healthy()
    finally:
        srv.stop()
    # Most known turns after the first of a session come from the session's file.
    assert sources.count("disk") >= rounds // 2, (sources, interrupted)
    print("crash loop: sources %s; rounds that left a temp file: %d" % (sources, interrupted))


# --- 5. /slots ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kvsrv(tmp_path_factory):
    d = tmp_path_factory.mktemp("kv-slots")
    s = Server("--kv-dir", str(d), ctx=CTX)
    s.dir = d
    yield s
    s.stop()


def slot(srv, action, body=None, slot_id=0):
    return srv.post("/slots/%s?action=%s" % (slot_id, action), body if body is not None else {})


def test_slot_save_erase_restore_round_trip(kvsrv, ref):
    conv = Conv("slots", "Erin")
    r1 = conv.turn(kvsrv)
    status, _, s = slot(kvsrv, "save", {"filename": "erin.bin"})
    assert status == 200, s
    assert s["id_slot"] == 0 and s["filename"] == "erin.bin"
    n = s["n_saved"]
    assert n >= r1["usage"]["prompt_tokens"] and s["n_written"] > 0 and s["timings"]["save_ms"] >= 0
    assert os.path.exists(os.path.join(str(kvsrv.dir), "slots", "erin.bin"))
    status, _, e = slot(kvsrv, "erase")
    assert status == 200 and e == {"id_slot": 0, "n_erased": n}, e
    status, _, e = slot(kvsrv, "erase")  # nothing left
    assert status == 200 and e["n_erased"] == 0, e
    status, _, rs = slot(kvsrv, "restore", {"filename": "erin.bin"})
    assert status == 200, rs
    assert rs["id_slot"] == 0 and rs["filename"] == "erin.bin"
    assert rs["n_restored"] == n and rs["n_read"] == s["n_written"] and rs["timings"]["restore_ms"] >= 0
    msgs = conv.next_msgs()
    r = conv.turn(kvsrv)
    assert cache(r)["source"] == "resident", cache(r)
    assert cached(r) > 0
    check_reuse(r, r1)
    # The same text as a server that never saw a snapshot (turn 1 then 2 there).
    assert ref.text(msgs[:2]) == text(r1)
    assert text(r) == ref.text(msgs)


def test_slot_errors(kvsrv, ref):
    for action in ("save", "restore"):
        status, _, e = slot(ref.srv, action, {"filename": "x.bin"})
        assert status == 400 and e["error"]["code"] == "no_kv_dir", e
    for bad in ("../x", ".hidden", "a/b", "", "a\\b"):
        status, _, e = slot(kvsrv, "save", {"filename": bad})
        assert status == 400 and e["error"]["param"] == "filename", (bad, e)
        status, _, e = slot(kvsrv, "restore", {"filename": bad})
        assert status == 400, (bad, e)
    for body in ({}, {"filename": 3}, "not json"):
        status, _, e = slot(kvsrv, "save", body)
        assert status == 400, (body, e)
    status, _, e = slot(kvsrv, "save", {"filename": "x.bin"}, slot_id=1)
    assert status == 400, e
    status, _, e = slot(kvsrv, "erase", slot_id=7)
    assert status == 400, e
    for action in ("bogus", ""):
        status, _, e = slot(kvsrv, action, {"filename": "x.bin"})
        assert status == 400 and e["error"]["param"] == "action", e
    status, _, e = kvsrv.post("/slots/0", {"filename": "x.bin"})  # no action
    assert status == 400, e
    # Restores that cannot work: the server answers 400 and keeps going.
    status, _, e = slot(kvsrv, "restore", {"filename": "missing.bin"})
    assert status == 400, e
    folder = os.path.join(str(kvsrv.dir), "slots")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "garbage.bin"), "wb") as f:
        f.write(os.urandom(4096))
    status, _, e = slot(kvsrv, "restore", {"filename": "garbage.bin"})
    assert status == 400, e
    conv = Conv("slot-err", "Frank")
    r1 = conv.turn(kvsrv)
    status, _, s = slot(kvsrv, "save", {"filename": "frank.bin"})
    assert status == 200, s
    good = os.path.join(folder, "frank.bin")
    with open(good, "rb") as f:
        data = f.read()
    half = len(data) // 2
    flipped = data[:half] + bytes([data[half] ^ 1]) + data[half + 1:]
    for name, bad in (("short.bin", data[:half]), ("flipped.bin", flipped)):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bad)
        status, _, e = slot(kvsrv, "restore", {"filename": name})
        assert status == 400, (name, e)
    kvsrv.assert_healthy()
    # The failed restores left the resident sequence alone.
    r = conv.turn(kvsrv)
    assert cache(r)["source"] == "resident", cache(r)
    check_reuse(r, r1)


# --- 6. Metrics ---------------------------------------------------------------------------------

def test_session_metrics_move(kvsrv):
    m0 = kvsrv.metrics()
    for key in [src_key(s) for s in ("resident", "ram", "disk", "none")] + [
            "jllm_session_restored_bytes_total", "jllm_session_snapshots_total", "jllm_session_snapshot_bytes_total",
            "jllm_session_ram_entries", "jllm_session_ram_bytes", "jllm_session_ram_budget_bytes",
            "jllm_session_ram_evictions_total", "jllm_session_disk_entries", "jllm_session_disk_bytes",
            "jllm_session_disk_budget_bytes", "jllm_session_disk_written_total", "jllm_session_disk_written_bytes_total",
            "jllm_session_disk_loaded_total", "jllm_session_disk_loaded_bytes_total", "jllm_session_disk_evictions_total",
            "jllm_session_disk_rejected_total", "jllm_session_disk_write_errors_total"]:
        assert key in m0, key
    assert m0["jllm_session_disk_budget_bytes"] == 4096 * (1 << 20)
    g, h = Conv("metrics-G", "Grace"), Conv("metrics-H", "Heidi")
    rs = [g.turn(kvsrv), g.turn(kvsrv), h.turn(kvsrv), g.turn(kvsrv)]
    assert [cache(r)["source"] for r in rs[1:2] + rs[3:]] == ["resident", "ram"]
    m1 = metrics_after(kvsrv, m0["jllm_session_snapshots_total"] + 4)
    for s in ("resident", "ram", "disk", "none"):
        assert delta(m1, m0, src_key(s)) == sum(cache(r)["source"] == s for r in rs), s
    assert delta(m1, m0, "jllm_cached_tokens_total") == sum(cached(r) for r in rs)
    assert delta(m1, m0, "jllm_session_snapshots_total") >= 4
    assert delta(m1, m0, "jllm_session_snapshot_bytes_total") > 0
    assert delta(m1, m0, "jllm_session_restored_bytes_total") > 0
    assert m1["jllm_session_ram_entries"] >= 2 and m1["jllm_session_ram_bytes"] > 0
    # Written in the background: G's and H's files at least (queued writes of one session may merge).
    def written():
        m = kvsrv.metrics()
        return m if delta(m, m0, "jllm_session_disk_written_total") >= 2 else None
    m2 = wait_for(written, what="disk writes")
    assert delta(m2, m0, "jllm_session_disk_written_bytes_total") > 0
    assert m2["jllm_session_disk_entries"] >= 2 and m2["jllm_session_disk_bytes"] > 0
    assert m2["jllm_session_disk_entries"] == len(jkv_files(kvsrv.dir))
    assert m2["jllm_session_disk_write_errors_total"] == 0


def test_cache_reuse_keeps_the_prompt_after_an_early_edit():
    """--cache-reuse 16: the clock line at the top of the system prompt changes between two turns;
    with it the rest of the prompt is reused (moved), without it the prompt is prefilled from the
    clock on. Both answer."""
    devices = system_prompt("Zed", n=30)
    msgs = lambda t: [{"role": "system", "content": "The time is %s.\n%s" % (t, devices)},
                      {"role": "user", "content": QUESTIONS[0]}]
    got = {}
    for reuse in (0, 16):
        srv = Server("--cache-reuse", str(reuse), ctx=CTX)
        try:
            chat(srv, msgs("10:00:00"), "Z")
            r = chat(srv, msgs("10:01:30"), "Z")
            got[reuse] = cached(r), r["usage"]["prompt_tokens"]
            assert cache(r)["tokens_reused"] == cached(r)
            srv.assert_healthy()
        finally:
            srv.stop()
    (plain, n0), (moved, n1) = got[0], got[16]
    assert n0 == n1
    assert plain < 20, got  # the prefix ends at the clock
    assert moved >= n1 - 20, got  # all but the clock line and the last token
