"""tests/python/test_server_api.py — jetson-llm-server as a black box, driven by the official
`openai` client and raw HTTP on SmolLM2-135M: chat and completions (streaming and not), stop
strings, max_tokens, seeds, logprobs, prefix reuse, API key, disconnects, queue overflow,
timeout and SIGTERM."""
import http.client
import json
import threading
import time

import openai
import pytest

from server_harness import NO_EOS, Server, sse_events

CHAT = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def srv():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_health_and_models(srv, client):
    status, _, body = srv.request("GET", "/health")
    h = json.loads(body)
    assert status == 200 and h["status"] == "ok"
    assert h["memory"]["weight_bytes"] > 0 and h["memory"]["kv_bytes"] > 0
    assert h["kv"]["n_ctx"] == 512
    assert h["thermal"] is None and h["power"] is None
    models = client.models.list()
    assert [m.id for m in models.data] == ["SmolLM2-135M-Instruct.Q4_1"]


def test_chat_basic(client):
    r = client.chat.completions.create(model="whatever-name", messages=CHAT, max_tokens=8, temperature=0)
    assert r.id.startswith("chatcmpl-")
    assert r.model == "SmolLM2-135M-Instruct.Q4_1"  # the alias, whatever was asked
    c = r.choices[0]
    assert c.message.role == "assistant" and isinstance(c.message.content, str) and c.message.content
    assert "<think>" not in c.message.content
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 10 and 0 < u.completion_tokens <= 8
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert u.prompt_tokens_details.cached_tokens >= 0
    assert u.completion_tokens_details.reasoning_tokens == 0


def test_ids_unique(client):
    ids = {client.chat.completions.create(model="m", messages=CHAT, max_tokens=1).id for _ in range(3)}
    assert len(ids) == 3


def test_max_tokens_gives_length(client):
    r = client.chat.completions.create(model="m", messages=CHAT, max_tokens=3, temperature=0, logit_bias={0: -100, 2: -100})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3
    r = client.chat.completions.create(model="m", messages=CHAT, max_completion_tokens=2, temperature=0,
                                       logit_bias={0: -100, 2: -100})
    assert r.usage.completion_tokens == 2


def test_stream_equals_nonstream_at_temperature_0(client):
    msgs = [{"role": "user", "content": "Write one sentence about the sea."}]
    full = client.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0)
    chunks = list(client.chat.completions.create(model="m", messages=msgs, max_tokens=24, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == full.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert len({c.id for c in chunks}) == 1


def test_stream_without_usage_has_no_usage_chunk(client):
    chunks = list(client.chat.completions.create(model="m", messages=CHAT, max_tokens=4, stream=True))
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_raw_sse_shape(srv):
    c = srv.conn()
    c.request("POST", "/v1/chat/completions", json.dumps({"messages": CHAT, "max_tokens": 4, "stream": True}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream")
    events = sse_events(r)
    c.close()
    assert events[-1] == "[DONE]"
    for e in events[:-1]:
        json.loads(e)
        e.encode("utf-8")


def test_stream_never_splits_utf8(srv):
    # Japanese and emoji take several tokens per character in SmolLM2's byte-level BPE.
    for prompt in ("こんにちは、私の名前は", "Emoji party: 🎉🎉"):
        body = {"prompt": prompt, "max_tokens": 24, "temperature": 0}
        status, _, full = srv.post("/v1/completions", body)
        assert status == 200
        text = full["choices"][0]["text"]
        assert any(ord(ch) > 0x2FFF for ch in text), text
        c = srv.conn()
        c.request("POST", "/v1/completions", json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
        events = sse_events(c.getresponse())
        c.close()
        pieces = [json.loads(e)["choices"][0]["text"] for e in events[:-1] if json.loads(e)["choices"]]
        assert "".join(pieces) == text
        # Whole characters only. When max_tokens ends inside a character, the engine's final flush
        # turns the dangling bytes into one U+FFFD, so only the last piece may carry it.
        texts = [p for p in pieces if p]
        for p in texts[:-1]:
            assert "\ufffd" not in p
        assert texts[-1].count("\ufffd") <= 1
        assert "\ufffd" not in text[:-1]


def test_stop_string(client):
    msgs = [{"role": "user", "content": "Describe a cat in two sentences."}]
    base = client.chat.completions.create(model="m", messages=msgs, max_tokens=30, temperature=0).choices[0].message.content
    assert len(base) >= 20, base
    mid = len(base) // 2
    stop = base[mid:mid + 4]
    expected = base[:base.find(stop)]
    for stream in (False, True):
        if stream:
            chunks = list(client.chat.completions.create(model="m", messages=msgs, max_tokens=30, temperature=0,
                                                         stop=[stop, "zzzz"], stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason][0]
        else:
            r = client.chat.completions.create(model="m", messages=msgs, max_tokens=30, temperature=0, stop=stop)
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        assert text == expected
        assert finish == "stop"


def test_same_seed_same_text(client):
    kw = dict(model="m", messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=16, temperature=1.0,
              top_p=1.0)
    a = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
    b = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
    assert a == b


def test_logprobs_chat(client):
    r = client.chat.completions.create(model="m", messages=CHAT, max_tokens=6, temperature=0, logprobs=True,
                                       top_logprobs=3)
    lp = r.choices[0].logprobs.content
    assert lp and "".join(e.token for e in lp) == r.choices[0].message.content
    for e in lp:
        assert e.logprob <= 0.0
        assert len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.top_logprobs[-1].logprob
        # greedy: the chosen token is the most likely one
        assert abs(e.top_logprobs[0].logprob - e.logprob) < 1e-3
    chunks = list(client.chat.completions.create(model="m", messages=CHAT, max_tokens=4, temperature=0, logprobs=True,
                                                 stream=True))
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert streamed and all(e.logprob <= 0 for e in streamed)


def test_completions(client):
    r = client.completions.create(model="m", prompt="The capital of France is", max_tokens=6, temperature=0,
                                  logprobs=2)
    assert r.id.startswith("cmpl-") and r.object == "text_completion"
    c = r.choices[0]
    assert c.text and c.finish_reason in ("stop", "length")
    assert "".join(c.logprobs.tokens) == c.text
    assert all(len(t) == 2 for t in c.logprobs.top_logprobs)
    chunks = list(client.completions.create(model="m", prompt="The capital of France is", max_tokens=6, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == c.text
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens


def test_completions_token_prompt(srv):
    status, _, tok = srv.post("/tokenize", {"content": "Hello world"})
    assert status == 200
    status, _, r = srv.post("/v1/completions", {"prompt": tok["tokens"], "max_tokens": 2})
    assert status == 200 and r["usage"]["prompt_tokens"] == len(tok["tokens"])


def test_cached_tokens_on_repeated_system_prompt(client):
    system = {"role": "system", "content": "You are a terse assistant for a smart home. " * 8}
    client.chat.completions.create(model="m", messages=[system, {"role": "user", "content": "Lights on."}], max_tokens=2)
    r = client.chat.completions.create(model="m", messages=[system, {"role": "user", "content": "Heating off."}],
                                       max_tokens=2)
    assert r.usage.prompt_tokens_details.cached_tokens > 60
    assert r.usage.prompt_tokens_details.cached_tokens < r.usage.prompt_tokens


def test_tokenize_detokenize(srv):
    status, _, r = srv.post("/tokenize", {"content": "Hello, wörld!"})
    assert status == 200 and all(isinstance(t, int) for t in r["tokens"])
    status, _, d = srv.post("/detokenize", {"tokens": r["tokens"]})
    assert status == 200 and d["content"] == "Hello, wörld!"
    status, _, p = srv.post("/tokenize", {"content": "Hi there", "with_pieces": True})
    assert "".join(x["piece"] for x in p["tokens"]) == "Hi there"
    status, _, _ = srv.post("/detokenize", {"tokens": [10 ** 9]})
    assert status == 400


def test_refused_and_noop_fields(srv):
    base = {"messages": CHAT, "max_tokens": 1}
    # SmolLM2's template has no tool-call format: tools are refused, never ignored.
    for extra, param, code in (({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "invalid_tools"),
                               ({"functions": [{"name": "f"}]}, "functions", "invalid_tools"),
                               ({"tool_choice": "required"}, "tool_choice", "invalid_value"),
                               ({"function_call": {"name": "f"}}, "function_call", "invalid_value")):
        status, _, r = srv.post("/v1/chat/completions", {**base, **extra})
        assert status == 400, extra
        assert r["error"]["code"] == code and r["error"]["param"] == param, r
    assert "no tool-call format" in srv.post("/v1/chat/completions", {**base, "tools": [
        {"type": "function", "function": {"name": "f"}}]})[2]["error"]["message"]
    status, _, r = srv.post("/v1/completions", {"prompt": "a", "max_tokens": 1, "tools": []})
    assert status == 400 and r["error"]["param"] == "tools"
    status, _, r = srv.post("/v1/chat/completions", {**base, "n": 2})
    assert status == 400 and r["error"]["param"] == "n"
    # no-op values of those fields are fine; `none` offers nothing to call
    for extra in ({"tools": [], "response_format": {"type": "text"}, "n": 1},
                  {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"}):
        status, _, r = srv.post("/v1/chat/completions", {**base, **extra})
        assert status == 200, (extra, r)


def test_thinking_flags_and_sessions(srv):
    for extra in ({"think": True}, {"chat_template_kwargs": {"enable_thinking": False}},
                  {"conversation_id": "kitchen-1"}, {"nvext": {"agent_hints": {"session_id": "abc_DEF-9"}}}):
        status, _, r = srv.post("/v1/chat/completions", {"messages": CHAT, "max_tokens": 2, **extra})
        assert status == 200, (extra, r)
        assert "<think>" not in r["choices"][0]["message"]["content"]
    for bad in ({"conversation_id": "has space"}, {"conversation_id": "x" * 65}, {"conversation_id": ""},
                {"nvext": {"agent_hints": {"session_id": "é"}}}, {"conversation_id": 5}):
        status, _, r = srv.post("/v1/chat/completions", {"messages": CHAT, "max_tokens": 2, **bad})
        assert status == 400, bad


def test_metrics(srv):
    # Its own traffic, so the test does not depend on the ones before it: the same prompt
    # twice (the second reuses the cached prefix).
    for _ in range(2):
        status, _, _ = srv.post("/v1/chat/completions", {"messages": CHAT, "max_tokens": 2})
        assert status == 200
    m = srv.metrics()
    assert m['jllm_requests_total{endpoint="/v1/chat/completions",status="200"}'] >= 1
    assert m["jllm_prompt_tokens_total"] > 0 and m["jllm_completion_tokens_total"] > 0
    assert m["jllm_cached_tokens_total"] > 0
    assert m["jllm_model_weight_bytes"] > 0 and m["jllm_queue_capacity"] == 16
    assert "jllm_decode_tokens_per_second" in m and "jllm_queue_depth" in m


def test_client_disconnect_mid_stream_cancels(srv):
    before = srv.metrics()
    c = srv.conn()
    c.request("POST", "/v1/chat/completions",
              json.dumps({"messages": CHAT, "max_tokens": 450, "stream": True, "logit_bias": NO_EOS}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    got = b""
    while got.count(b"data: ") < 4:
        got += r.read1(4096)
    c.sock.close()  # hang up mid-stream
    c.close()
    deadline = time.time() + 20
    while time.time() < deadline:
        m = srv.metrics()
        if m.get('jllm_generations_total{finish="cancelled"}', 0) > before.get('jllm_generations_total{finish="cancelled"}', 0):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the generation was not cancelled after the client left")
    assert m["jllm_completion_tokens_total"] - before["jllm_completion_tokens_total"] < 450
    assert m["jllm_client_disconnects_total"] > before["jllm_client_disconnects_total"]
    t0 = time.time()
    status, _, _ = srv.post("/v1/chat/completions", {"messages": CHAT, "max_tokens": 2})
    assert status == 200 and time.time() - t0 < 10


def test_client_disconnect_non_streaming_cancels(srv):
    before = srv.metrics()
    c = srv.conn()
    c.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 450,
                                                      "logit_bias": NO_EOS}), {"Content-Type": "application/json"})
    time.sleep(1.0)
    c.sock.close()
    c.close()
    key = 'jllm_generations_total{finish="cancelled"}'
    deadline = time.time() + 20
    while time.time() < deadline and srv.metrics().get(key, 0) <= before.get(key, 0):
        time.sleep(0.1)
    assert srv.metrics().get(key, 0) > before.get(key, 0)
    srv.assert_healthy()


def long_request(port, results, i, max_tokens=300):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": max_tokens,
                                                          "logit_bias": NO_EOS}), {"Content-Type": "application/json"})
        r = c.getresponse()
        results[i] = (r.status, r.getheader("Retry-After"), json.loads(r.read()))
    except Exception as e:  # noqa: BLE001 — recorded for the assertion
        results[i] = (None, None, repr(e))
    finally:
        c.close()


def test_queue_overflow_503_and_health_while_busy():
    s = Server("--max-queue", "1")
    try:
        results = [None] * 4
        threads = [threading.Thread(target=long_request, args=(s.port, results, i, 300)) for i in range(4)]
        for t in threads:
            t.start()
            time.sleep(0.15)
        # /health and /metrics answer while a generation runs
        t0 = time.time()
        status, _, body = s.request("GET", "/health", timeout=5)
        assert status == 200 and time.time() - t0 < 2
        assert json.loads(body)["queue"]["generating"] is True
        assert s.metrics()["jllm_generating"] == 1
        for t in threads:
            t.join(120)
        statuses = sorted(r[0] for r in results)
        assert statuses == [200, 200, 503, 503], results
        for st, retry, body in results:
            if st == 503:
                assert retry is not None and body["error"]["code"] == "queue_full"
            else:
                assert body["choices"][0]["finish_reason"] == "length"
        s.assert_healthy()
    finally:
        s.stop()


def test_disconnect_while_queued_and_queue_timeout():
    s = Server("--max-queue", "4", "--timeout", "6", ctx=2048)  # room for a generation longer than 6 s
    try:
        results = [None]
        runner = threading.Thread(target=long_request, args=(s.port, results, 0, 2000))
        runner.start()
        time.sleep(0.5)
        c = s.conn()
        c.request("POST", "/v1/completions", json.dumps({"prompt": "Hi", "max_tokens": 2}),
                  {"Content-Type": "application/json"})
        deadline = time.time() + 5
        while s.metrics()["jllm_queue_depth"] < 1 and time.time() < deadline:
            time.sleep(0.05)
        assert s.metrics()["jllm_queue_depth"] == 1
        c.sock.close()  # give up while waiting
        c.close()
        deadline = time.time() + 5
        while s.metrics()["jllm_queue_depth"] > 0 and time.time() < deadline:
            time.sleep(0.05)
        m = s.metrics()
        assert m["jllm_queue_depth"] == 0 and m["jllm_client_disconnects_total"] >= 1
        # a request that waits past --timeout is refused with 503
        status, hdrs, body = s.post("/v1/completions", {"prompt": "Hi", "max_tokens": 2})
        runner.join(60)
        assert results[0][0] == 200 and results[0][2]["choices"][0]["finish_reason"] == "length"
        assert results[0][2]["usage"]["completion_tokens"] < 2000
        if status == 503:
            assert body["error"]["code"] == "timeout" and "Retry-After" in hdrs
        else:  # the long one ended (timeout) just before this one's own deadline
            assert status == 200
        s.assert_healthy()
    finally:
        s.stop()


def test_api_key(tmp_path):
    keyfile = tmp_path / "keys"
    keyfile.write_text("# keys\nfile-key\n")
    s = Server("--api-key", "secret-1", "--api-key-file", str(keyfile))
    try:
        status, _, _ = s.request("GET", "/health")
        assert status == 200  # open without a key
        for key in ("secret-1", "file-key"):
            c = openai.OpenAI(base_url=s.base + "/v1", api_key=key, max_retries=0)
            assert c.chat.completions.create(model="m", messages=CHAT, max_tokens=1).choices
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=s.base + "/v1", api_key="wrong", max_retries=0).chat.completions.create(
                model="m", messages=CHAT, max_tokens=1)
        status, _, body = s.post("/v1/chat/completions", {"messages": CHAT})
        assert status == 401 and body["error"]["type"] == "authentication_error"
        status, _, _ = s.request("GET", "/metrics")
        assert status == 401
        # a refused request leaves a kept-alive connection usable for the next one
        c = s.conn()
        body = json.dumps({"messages": CHAT, "max_tokens": 1})
        for key, want in (("bad", 401), ("secret-1", 200)):
            c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json",
                                                             "Authorization": "Bearer " + key})
            r = c.getresponse()
            r.read()
            assert r.status == want
        c.close()
    finally:
        s.stop()


def test_timeout_cuts_generation():
    s = Server("--timeout", "2", ctx=2048)
    try:
        t0 = time.time()
        status, _, r = s.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 2000, "logit_bias": NO_EOS})
        took = time.time() - t0
        assert status == 200 and r["choices"][0]["finish_reason"] == "length"
        assert r["usage"]["completion_tokens"] < 2000 and took < 10
        assert s.metrics()["jllm_request_timeouts_total"] >= 1
    finally:
        s.stop()


def test_sigterm_answers_in_flight_and_exits_0():
    s = Server()
    try:
        c = s.conn()
        c.request("POST", "/v1/chat/completions",
                  json.dumps({"messages": CHAT, "max_tokens": 450, "stream": True, "logit_bias": NO_EOS}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        got = b""
        while got.count(b"data: ") < 3:
            got += r.read1(4096)
        t0 = time.time()
        s.proc.send_signal(15)
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            got += chunk
        events = [e for e in got.decode().split("\n\n") if e.startswith("data: ")]
        assert events[-1] == "data: [DONE]"
        assert json.loads(events[-2][6:])["choices"][0]["finish_reason"] == "length"
        assert s.proc.wait(timeout=30) == 0
        assert time.time() - t0 < 15
    finally:
        s.stop()


def test_speculative_counts():
    # --spec ngram drafts whenever prompt lookup finds a match: a greedy answer that repeats its
    # prompt gets drafts, and the response's counts and /metrics agree.
    s = Server("--spec", "ngram", "--draft-max", "4")
    try:
        before = s.metrics()
        text = "one two three four five six seven eight " * 6
        status, _, r = s.post("/v1/completions", {"prompt": text, "max_tokens": 48, "temperature": 0})
        assert status == 200, r
        spec = r["jetson"]["speculative"]
        assert spec["drafted"] == spec["ngram"]["drafted"] > 0
        assert 0 < spec["accepted"] == spec["ngram"]["accepted"] <= spec["drafted"]
        assert spec["draft_model"] == {"drafted": 0, "accepted": 0}
        assert 0 < spec["decode_forwards"] < r["usage"]["completion_tokens"]
        assert r["timings"]["draft_n"] == spec["drafted"]
        assert r["timings"]["draft_n_accepted"] == spec["accepted"]
        after = s.metrics()
        key = 'jllm_draft_tokens_total{drafter="ngram"}'
        assert after[key] - before.get(key, 0) == spec["drafted"]
        key = 'jllm_draft_accepted_tokens_total{drafter="ngram"}'
        assert after[key] - before.get(key, 0) == spec["accepted"]
        # The same answer without speculation.
        plain = Server("--spec", "off")
        try:
            status, _, p = plain.post("/v1/completions", {"prompt": text, "max_tokens": 48, "temperature": 0})
            assert status == 200
            assert p["choices"][0]["text"] == r["choices"][0]["text"]
            assert p["jetson"]["speculative"]["drafted"] == 0
        finally:
            plain.stop()
    finally:
        s.stop()


def test_speculative_flags_refused():
    cases = ((("--spec", "draft"), "needs a draft model"), (("--draft", "8"), "--draft-max N"),
             (("--draft-max", "17"), "draft-max"), (("--spec", "bogus"), "spec"))
    for extra, why in cases:
        with pytest.raises(RuntimeError, match="exited early") as e:
            Server(*extra)
        assert why in str(e.value), (extra, str(e.value)[-400:])
