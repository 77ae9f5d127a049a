"""tests/python/test_server_llama_api.py — llama-server's own endpoints on jetson-llm-server
(/completion whole and streamed with its stop types, cache_prompt, logit_bias pairs, grammar;
/props, /slots, /apply-template, /v1/models/{id}), CORS with and without --cors, and SSE
keep-alive comments for a stream that waits in the queue behind a long generation."""
import http.client
import json
import threading
import time

import pytest

from server_harness import NO_EOS, Server

GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def srv():
    s = Server("--cors", "http://ha.example:8123")
    yield s
    s.stop()


def completion(srv, **body):
    status, _, r = srv.post("/completion", body)
    assert status == 200, r
    return r


def stream_events(srv, path, body):
    c = srv.conn(120)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream"), r.status
    events = [json.loads(line[6:]) for line in r.read().decode().split("\n") if line.startswith("data: ")]
    c.close()
    return events


def test_completion_whole_and_streamed(srv):
    body = {"prompt": "The capital of France is", "n_predict": 12, **GREEDY}
    r = completion(srv, **body)
    assert r["stop"] and r["stop_type"] == "limit" and r["tokens_predicted"] == 12, r
    assert r["tokens_evaluated"] > 3 and r["timings"]["predicted_n"] == 12 and r["id_slot"] == 0, r
    assert r["generation_settings"]["n_predict"] == 12 and r["model"], r
    ev = stream_events(srv, "/completion", {**body, "stream": True})
    assert all(not e["stop"] for e in ev[:-1]) and ev[-1]["stop"] and ev[-1]["stop_type"] == "limit", ev[-1]
    assert "".join(e["content"] for e in ev) == r["content"]
    # A stop string: "word", named, not in the content.
    word = r["content"].split()[1]
    w = completion(srv, **{**body, "stop": [word]})
    assert w["stop_type"] == "word" and w["stopping_word"] == word and word not in w["content"], w
    # The end-of-generation token: "eos".
    e = completion(srv, prompt="<|im_start|>user\nSay OK.<|im_end|>\n<|im_start|>assistant\n", n_predict=64, **GREEDY)
    assert e["stop_type"] == "eos" and e["stopping_word"] == "", e
    # return_tokens: the ids, as many as were predicted.
    t = completion(srv, **body, return_tokens=True)
    assert len(t["tokens"]) == 12 and all(isinstance(x, int) for x in t["tokens"]), t


def test_cache_prompt_and_logit_bias_pairs(srv):
    body = {"prompt": "Once upon a time in a small village there lived", "n_predict": 4, **GREEDY}
    completion(srv, **body)
    assert completion(srv, **body)["tokens_cached"] > 0
    assert completion(srv, **body, cache_prompt=False)["tokens_cached"] == 0
    first = completion(srv, **body, return_tokens=True)["tokens"][0]
    biased = completion(srv, **body, return_tokens=True, logit_bias=[[first, False]])
    assert biased["tokens"][0] != first, biased
    g = completion(srv, prompt="Answer yes or no:", n_predict=8, grammar='root ::= "yes" | "no"', **GREEDY)
    assert g["content"] in ("yes", "no"), g


@pytest.mark.parametrize("body,words", [
    ({"prompt": "x", "id_slot": 3}, "one slot"),
    ({"prompt": "x", "n_probs": 5}, "n_probs"),
    ({"prompt": "x", "ignore_eos": True}, "ignore_eos"),
    ({"prompt": "x", "n_predict": -5}, "n_predict"),
    ({"prompt": "x", "logit_bias": [[1]]}, "logit_bias"),
    ({"prompt": "x", "cache_prompt": "yes"}, "cache_prompt"),
    ({"prompt": "x", "grammar": "root ::= ("}, "grammar"),
])
def test_completion_refusals(srv, body, words):
    status, _, r = srv.post("/completion", body)
    assert status == 400 and words in r["error"]["message"], r
    srv.assert_healthy()


def test_props_slots_template_model(srv):
    status, _, p = srv.request("GET", "/props")
    p = json.loads(p)
    assert status == 200 and p["total_slots"] == 1 and p["default_generation_settings"]["n_ctx"] == 512, p
    assert "<|im_start|>" in p["chat_template"] and p["modalities"] == {"vision": False, "audio": False}, p
    status, _, s = srv.request("GET", "/slots")
    [slot] = json.loads(s)
    assert status == 200 and slot["id"] == 0 and slot["n_ctx"] == 512 and slot["is_processing"] is False, slot
    status, _, t = srv.post("/apply-template", {"messages": [{"role": "system", "content": "Be brief."},
                                                             {"role": "user", "content": "Hello there"}]})
    assert status == 200 and "Be brief." in t["prompt"] and t["prompt"].endswith("<|im_start|>assistant\n"), t
    status, _, t = srv.post("/apply-template", {"messages": []})
    assert status == 400, t
    status, _, models = srv.request("GET", "/v1/models")
    name = json.loads(models)["data"][0]["id"]
    status, _, m = srv.request("GET", "/v1/models/" + name)
    assert status == 200 and json.loads(m)["id"] == name
    status, _, m = srv.request("GET", "/v1/models/gpt-4o")
    assert status == 404 and json.loads(m)["error"]["code"] == "model_not_found", m


def test_cors(srv):
    ok = {"Origin": "http://ha.example:8123"}
    status, h, _ = srv.request("OPTIONS", "/v1/chat/completions",
                               headers={**ok, "Access-Control-Request-Method": "POST",
                                        "Access-Control-Request-Headers": "authorization, content-type"})
    assert status == 204 and h["Access-Control-Allow-Origin"] == ok["Origin"], h
    assert "POST" in h["Access-Control-Allow-Methods"] and "authorization" in h["Access-Control-Allow-Headers"], h
    status, h, _ = srv.request("GET", "/health", headers=ok)
    assert status == 200 and h["Access-Control-Allow-Origin"] == ok["Origin"], h
    status, h, _ = srv.request("GET", "/health", headers={"Origin": "http://elsewhere.example"})
    assert status == 200 and "Access-Control-Allow-Origin" not in h, h
    status, h, _ = srv.request("OPTIONS", "/v1/chat/completions", headers={"Origin": "http://elsewhere.example"})
    assert "Access-Control-Allow-Origin" not in h, h


def test_no_cors_without_the_flag():
    s = Server()
    try:
        status, h, _ = s.request("GET", "/health", headers={"Origin": "http://ha.example:8123"})
        assert status == 200 and "Access-Control-Allow-Origin" not in h, h
        status, h, _ = s.request("OPTIONS", "/v1/chat/completions", headers={"Origin": "http://ha.example:8123"})
        assert status != 204 and "Access-Control-Allow-Origin" not in h, (status, h)
    finally:
        s.stop()


def test_queued_stream_gets_headers_and_keepalives_at_once(srv):
    # A long generation holds the engine...
    long_body = {"messages": [{"role": "user", "content": "Tell a long story."}], "max_tokens": 400,
                 "logit_bias": NO_EOS, **GREEDY}
    done = {}
    t = threading.Thread(target=lambda: done.setdefault("r", srv.post("/v1/chat/completions", long_body,
                                                                         timeout=300)))
    t.start()
    deadline = time.time() + 30
    while not json.loads(srv.request("GET", "/slots")[2])[0]["is_processing"] and time.time() < deadline:
        time.sleep(0.05)
    # ...a stream behind it has its headers and a comment within a second or two, then its answer.
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)  # a short read timeout
    start = time.time()
    c.request("POST", "/v1/chat/completions", headers={"Content-Type": "application/json"},
              body=json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True}))
    r = c.getresponse()
    assert r.status == 200 and time.time() - start < 3, time.time() - start
    first = r.readline()
    assert first.startswith(b": "), first
    assert "r" not in done, "the long generation should still be running"
    c.sock.settimeout(300)
    rest = r.read().decode()
    assert "data: [DONE]" in rest and '"finish_reason"' in rest, rest[-500:]
    t.join()
    assert done["r"][0] == 200
