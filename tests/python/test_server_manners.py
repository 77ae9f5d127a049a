"""tests/python/test_server_manners.py — how jetson-llm-server behaves as a long-running daemon:
memory handed back after large request bodies, SIGTERM prompt with idle keep-alive connections
open, and clients that half-close their connection after sending the request or while its answer
streams (they still get the answer, streamed or not), while a client that hangs up still cancels
its generation."""
import http.client
import json
import socket
import time

import pytest

from server_harness import NO_EOS, Server

CHAT = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def srv():
    s = Server(ctx=2048)
    yield s
    s.stop()


def chat(srv, content, max_tokens=8):
    return srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": content}],
                                             "max_tokens": max_tokens})


def test_memory_returns_after_large_bodies(srv):
    for _ in range(5):
        assert chat(srv, "Hello there", 16)[0] == 200
    steady = srv.rss_bytes()
    # 20 bodies of 1.5 MB whose prompts are far over the context, then one of 15 MB.
    for _ in range(20):
        status, _, body = chat(srv, "word " * 300000)
        assert status == 400 and body["error"]["code"] == "context_length_exceeded", body
    after_burst = srv.rss_bytes()
    status, _, _ = chat(srv, "word " * 3000000)
    assert status == 400
    after_big = srv.rss_bytes()
    assert chat(srv, "Hello there", 16)[0] == 200
    print("RSS steady %.1f MB, after 20 x 1.5 MB %.1f MB, after 15 MB %.1f MB"
          % (steady / 1e6, after_burst / 1e6, after_big / 1e6))
    assert after_burst <= steady * 1.10, (steady, after_burst)
    assert after_big <= steady * 1.10, (steady, after_big)
    # The allocator's own view (glibc): what is handed out, and what it keeps free.
    m = srv.metrics()
    assert m["jllm_heap_in_use_bytes"] > 0 and m["jllm_heap_free_bytes"] >= 0


def read_until_closed(s, data=b""):
    """`data` and what the socket reads after it until the server closes."""
    while True:
        d = s.recv(65536)
        if not d:
            return data
        data += d


def raw_half_closed(port, body, timeout=60):
    """Sends one request, half-closes (SHUT_WR), reads until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        s.shutdown(socket.SHUT_WR)
        return read_until_closed(s)
    finally:
        s.close()


def final_response(data):
    """Drops interim 1xx responses; returns (status line, headers text, body bytes)."""
    while data.startswith(b"HTTP/1.1 1"):
        data = data[data.index(b"\r\n\r\n") + 4:]
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return lines[0], "\r\n".join(lines[1:]), body


def dechunk(body):
    out = b""
    while body:
        size_text, _, rest = body.partition(b"\r\n")
        size = int(size_text, 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


def test_half_closed_client_gets_its_answer(srv):
    body = json.dumps({"messages": CHAT, "max_tokens": 12}).encode()
    status, headers, payload = final_response(raw_half_closed(srv.port, body))
    assert status == "HTTP/1.1 200 OK", (status, headers)
    answer = json.loads(payload)
    assert answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] > 0

    body = json.dumps({"messages": CHAT, "max_tokens": 12, "stream": True}).encode()
    status, headers, payload = final_response(raw_half_closed(srv.port, body))
    assert status == "HTTP/1.1 200 OK" and "chunked" in headers.lower(), (status, headers)
    events = [line[6:] for line in dechunk(payload).decode().split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-3:]
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1]
                   if json.loads(e)["choices"])
    assert text
    # An error answer reaches a half-closed client too.
    status, _, payload = final_response(raw_half_closed(srv.port, b'{"messages": 3}'))
    assert status.startswith("HTTP/1.1 400") and json.loads(payload)["error"]["param"] == "messages"
    srv.assert_healthy()


def test_client_half_closing_mid_stream_gets_the_whole_stream(srv):
    # The FIN arrives after the stream started (the server already writes events): cpp-httplib
    # would stop at its next write, taking the end of the read side for a hang-up.
    body = json.dumps({"messages": CHAT, "max_tokens": 160, "stream": True, "logit_bias": NO_EOS,
                       "temperature": 0, "stream_options": {"include_usage": True}}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        data = s.recv(65536)  # the headers (and the first events): the stream has started
        assert data.startswith(b"HTTP/1.1 200"), data[:200]
        s.shutdown(socket.SHUT_WR)
        before = len(data)
        data = read_until_closed(s, data)
    finally:
        s.close()
    assert data[before:].count(b"data: ") > 10  # most of the stream came after the half-close
    status, headers, payload = final_response(data)
    assert status == "HTTP/1.1 200 OK" and "chunked" in headers.lower(), (status, headers)
    events = [line[6:] for line in dechunk(payload).decode().split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish == ["length"], finish
    assert chunks[-1]["usage"]["completion_tokens"] == 160, chunks[-1]
    srv.assert_healthy()


def test_hang_up_still_cancels_after_probe(srv):
    # A client that closes outright while its (non-streamed) answer generates: the server cannot
    # tell it from a half-close until it writes, so it probes and then cancels.
    key = 'jllm_generations_total{finish="cancelled"}'
    before = srv.metrics().get(key, 0)
    s = socket.create_connection(("127.0.0.1", srv.port))
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 1500, "logit_bias": NO_EOS}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(0.5)
    s.close()
    deadline = time.time() + 10
    while time.time() < deadline and srv.metrics().get(key, 0) <= before:
        time.sleep(0.05)
    assert srv.metrics().get(key, 0) > before
    srv.assert_healthy()


def test_sigterm_with_idle_keep_alive_connections():
    s = Server()
    try:
        conns = []
        for _ in range(8):
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            c.request("GET", "/health")
            assert c.getresponse().read()
            conns.append(c)  # left open and idle
        t0 = time.time()
        assert s.terminate() == 0
        took = time.time() - t0
        print("SIGTERM with 8 idle keep-alive connections: exit in %.3f s" % took)
        assert took < 1.0, took
        for c in conns:
            c.close()
    finally:
        s.stop()
