"""tests/python/test_server_hostile.py — hostile input against jetson-llm-server: malformed and
mistyped JSON, huge and deeply nested bodies, invalid UTF-8, control characters, prompts at and
past the context length. Each gets the right 4xx with an OpenAI error object, and the server
stays up."""
import json
import socket
import subprocess

import pytest

from server_harness import N_CTX, Server

MSG = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def srv():
    s = Server()
    yield s
    s.stop()


def check_error(status, body, want_status, param=None, code=None):
    assert status == want_status, body
    assert isinstance(body, dict) and set(body["error"]) == {"message", "type", "param", "code"}, body
    if param is not None:
        assert body["error"]["param"] == param, body
    if code is not None:
        assert body["error"]["code"] == code, body


@pytest.mark.parametrize("raw", [b"", b"{", b"not json", b'{"messages": [}', b"[1, 2", b'{"a": 1} trailing',
                                 b"\x00\x01\x02", b'{"messages": NaN}'])
def test_invalid_json(srv, raw):
    for path in ("/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"):
        status, _, body = srv.post(path, raw)
        check_error(status, body, 400)
    srv.assert_healthy()


@pytest.mark.parametrize("body", [[], "string", 5, None, True])
def test_body_not_an_object(srv, body):
    status, _, r = srv.post("/v1/chat/completions", json.dumps(body))
    check_error(status, r, 400)


WRONG_CHAT = [
    ("messages", "hello"), ("messages", 5), ("messages", []), ("messages", [5]), ("messages", [{"content": "x"}]),
    ("messages", [{"role": 7, "content": "x"}]), ("messages", [{"role": "wizard", "content": "x"}]),
    ("messages", [{"role": "user", "content": 5}]), ("messages", [{"role": "user", "content": {"a": 1}}]),
    ("messages", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
    ("messages", [{"role": "user", "content": [5]}]),
    ("max_tokens", "10"), ("max_tokens", 1.5), ("max_tokens", -5), ("max_tokens", [1]), ("max_tokens", 1e30),
    ("max_completion_tokens", "x"), ("temperature", "hot"), ("temperature", -1), ("temperature", 3),
    ("temperature", True), ("top_p", 2), ("top_p", "x"), ("top_k", -1), ("top_k", 2.5), ("min_p", 5),
    ("presence_penalty", 3), ("frequency_penalty", "x"), ("repeat_penalty", 0), ("repeat_penalty", {}),
    ("seed", "42"), ("seed", 1.5), ("stop", 5), ("stop", [1, 2]), ("stop", ["a"] * 17), ("stop", {"a": 1}),
    ("logit_bias", [1]), ("logit_bias", {"abc": 1}), ("logit_bias", {"99999999": 1}), ("logit_bias", {"5": "x"}),
    ("logit_bias", {"5": 1000}), ("n", 2), ("n", "1"), ("n", 0), ("stream", "yes"), ("stream", 1),
    ("stream_options", 5), ("stream_options", {"include_usage": "yes"}), ("logprobs", "yes"),
    ("top_logprobs", 50), ("top_logprobs", "x"), ("think", "yes"), ("chat_template_kwargs", []),
    ("chat_template_kwargs", {"enable_thinking": "yes"}), ("conversation_id", ["a"]), ("nvext", 5),
    ("nvext", {"agent_hints": 5}), ("tools", "x"), ("response_format", "json"),
]


@pytest.mark.parametrize("field,value", WRONG_CHAT)
def test_wrong_types_chat(srv, field, value):
    body = {"messages": MSG, "max_tokens": 1, field: value}
    status, _, r = srv.post("/v1/chat/completions", body)
    check_error(status, r, 400)
    assert r["error"]["param"] is None or r["error"]["param"].split(".")[0] == field, r


WRONG_COMPLETION = [
    ("prompt", None), ("prompt", 5), ("prompt", {"a": 1}), ("prompt", [-1]), ("prompt", [1.5]),
    ("prompt", [10 ** 9]), ("prompt", ["a", "b"]), ("prompt", [[1, 2], [3]]), ("prompt", [True]),
    ("logprobs", 10), ("logprobs", "x"), ("echo", True), ("suffix", "x"), ("best_of", 3), ("max_tokens", "x"),
]


@pytest.mark.parametrize("field,value", WRONG_COMPLETION)
def test_wrong_types_completions(srv, field, value):
    body = {"prompt": "Hi", "max_tokens": 1, field: value}
    status, _, r = srv.post("/v1/completions", body)
    check_error(status, r, 400)


def test_wrong_types_tokenize(srv):
    for path, body in (("/tokenize", {"content": 5}), ("/tokenize", {}), ("/tokenize", {"content": "x", "add_special": 1}),
                       ("/detokenize", {"tokens": "abc"}), ("/detokenize", {"tokens": [1.5]}),
                       ("/detokenize", {"tokens": [-1]}), ("/detokenize", {"tokens": [2 ** 40]}),
                       ("/detokenize", {"tokens": [[1]]})):
        status, _, r = srv.post(path, body)
        check_error(status, r, 400)


def test_ten_thousand_messages(srv):
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "message %d" % i} for i in range(10000)]
    status, _, r = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 1}, timeout=120)
    check_error(status, r, 400, param="messages", code="context_length_exceeded")
    srv.assert_healthy()


@pytest.mark.parametrize("opener,closer", [(b"[", b"]"), (b'{"a":', b"}")])
def test_nested_100000_deep(srv, opener, closer):
    depth = 100000
    for path in ("/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"):
        body = opener * depth + b"1" + closer * depth
        status, _, r = srv.post(path, body)
        check_error(status, r, 400)
        assert "nested" in r["error"]["message"]
        # inside a field too
        body = b'{"messages": ' + opener * depth + closer * depth + b"}"
        status, _, r = srv.post(path, body)
        check_error(status, r, 400)
    srv.assert_healthy()


def test_moderate_nesting_is_fine(srv):
    body = {"messages": MSG, "max_tokens": 1, "extra": json.loads("[" * 40 + "]" * 40)}
    status, _, _ = srv.post("/v1/chat/completions", body)
    assert status == 200


def test_50_megabyte_body(srv):
    big = b'{"messages": [{"role": "user", "content": "' + b"a" * (50 * 1024 * 1024) + b'"}]}'
    try:
        status, _, r = srv.post("/v1/chat/completions", big, timeout=120)
        check_error(status, r, 413)
    except (ConnectionResetError, BrokenPipeError):
        pass  # the server may close while the client is still sending; it must stay up
    srv.assert_healthy()


def test_chunked_body_over_limit(srv):
    # No Content-Length: the server counts while reading and stops at its limit.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"a" * (1 << 20)
        try:
            for _ in range(40):
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        except (ConnectionResetError, BrokenPipeError):
            pass  # the server answered and closed before the client finished
        reply = s.recv(65536)
        assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    finally:
        s.close()
    srv.assert_healthy()


def test_invalid_utf8(srv):
    for raw in (b'{"messages": [{"role": "user", "content": "\xff\xfe bad"}], "max_tokens": 1}',
                b'{"messages": [{"role": "user", "content": "\xc3"}], "max_tokens": 1}',
                b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}], "max_tokens": 1}',
                b'{"prompt": "\xc0\xaf", "max_tokens": 1}'):
        path = "/v1/completions" if b"prompt" in raw else "/v1/chat/completions"
        status, _, r = srv.post(path, raw)
        check_error(status, r, 400, code="invalid_json")
    # lone surrogate escapes are invalid too
    status, _, r = srv.post("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\\ud800"}]}')
    check_error(status, r, 400)
    srv.assert_healthy()


def test_control_characters(srv):
    raw = b'{"messages": [{"role": "user", "content": "a\x01b\x1fc"}], "max_tokens": 1}'
    status, _, r = srv.post("/v1/chat/completions", raw)
    check_error(status, r, 400, code="invalid_json")
    # escaped control characters are legal JSON text: answered normally
    body = {"messages": [{"role": "user", "content": "a\u0000b\u0001\u001b[31m\u007f"}], "max_tokens": 2}
    status, _, r = srv.post("/v1/chat/completions", body)
    assert status == 200, r
    status, _, r = srv.post("/tokenize", {"content": "\u0000\u0001"})
    assert status == 200
    srv.assert_healthy()


def test_prompt_at_and_past_context_length(srv):
    # SmolLM2 adds no BOS to completions, so a token prompt has exactly its own length.
    tok = 1000
    for n, want in ((N_CTX - 1, 200), (N_CTX, 400), (N_CTX + 1, 400), (4 * N_CTX, 400)):
        status, _, r = srv.post("/v1/completions", {"prompt": [tok] * n, "max_tokens": 4}, timeout=120)
        if want == 200:
            assert status == 200, r
            assert r["usage"]["prompt_tokens"] == n
            # the context fills: one token sampled from the last prompt position's logits, one from
            # the last free position's
            assert r["choices"][0]["finish_reason"] == "length" and 1 <= r["usage"]["completion_tokens"] <= 2
        else:
            check_error(status, r, 400, param="prompt", code="context_length_exceeded")
    # the same through chat: a text that tokenizes past the context
    status, _, r = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * N_CTX}]})
    check_error(status, r, 400, param="messages", code="context_length_exceeded")
    srv.assert_healthy()


def test_unknown_endpoints_and_methods(srv):
    for method, path in (("GET", "/v1/nothing"), ("POST", "/health"), ("GET", "/v1/chat/completions"),
                         ("DELETE", "/v1/models"), ("GET", "/" + "x" * 5000)):
        status, _, data = srv.request(method, path, b"{}" if method == "POST" else None)
        assert 400 <= status < 500, (method, path, status)
        if status == 404:
            assert json.loads(data)["error"]["type"] == "not_found_error"
    srv.assert_healthy()


def test_garbage_http(srv):
    for junk in (b"\x00\xff\x13garbage\r\n\r\n", b"GET / HTTP/9.9\r\n" + b"X: y\r\n" * 2000 + b"\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n{}"):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            s.recv(65536)
        except OSError:
            pass
        finally:
            s.close()
    srv.assert_healthy()


def test_connection_burst(srv):
    """Clients that open a connection per request arrive in bursts: the listening socket keeps a
    backlog well above cpp-httplib's 5 (a full accept queue plus SYN cookies turns requests into
    connection resets), and 200 connections opened at once are all answered."""
    out = subprocess.run(["ss", "-ltnH", "sport = :%d" % srv.port], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out and out[0] == "LISTEN", out
    assert int(out[2]) >= 128, "listen backlog %s" % out[2]  # Send-Q of a listening socket
    socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=30) for _ in range(200)]
    try:
        for s in socks:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for s in socks:
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            assert data.startswith(b"HTTP/1.1 200"), data[:200]
    finally:
        for s in socks:
            s.close()
    srv.assert_healthy()


def test_unknown_fields_ignored(srv):
    status, _, r = srv.post("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "user": "me", "metadata": {"a": 1},
                                                     "store": False, "parallel_tool_calls": True, "whatever": [1, 2]})
    assert status == 200, r
