"""tests/python/test_server_ollama.py — Ollama's native API (/api/*) on jetson-llm-server, driven by
the official `ollama` Python client against the real Qwen2.5-Coder-0.5B-Instruct: the listings
(list, show, ps, version), chat streamed and not, tool calls the client parses and a tool-result
round trip, `format` json and JSON Schema, generate (with `context` and `raw`), options.num_ctx,
and every refused endpoint or field raising the client's ResponseError. Then a replay of Home
Assistant's Ollama integration: its request shape (system prompt with the exposed entities, the
Assist tools, num_ctx 8192, keep_alive, streaming) parsed the way that integration parses it."""
import json

import httpx
import jsonschema
import ollama
import pytest

from server_harness import QWEN_MODEL, Server
from test_server_tools import SCHEMAS, SYSTEM, TOOLS

N_CTX = 8192  # Home Assistant's default num_ctx
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def srv():
    s = Server(ctx=N_CTX, model=QWEN_MODEL)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(srv):
    return ollama.Client(host=srv.base, timeout=300)


@pytest.fixture(scope="module")
def name(client):
    [m] = client.list().models
    return m.model


def user(text, system=SYSTEM):
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]


def test_listings(srv, client, name):
    [m] = client.list().models
    assert name.endswith(":latest") and name.startswith("qwen2.5-coder-0.5b"), name
    assert m.size == 491400064 and len(m.digest) == 16, m
    d = m.details
    assert (d.format, d.family, d.families, d.quantization_level) == ("gguf", "qwen2", ["qwen2"], "Q4_K_M"), d
    assert d.parameter_size.endswith("M"), d
    s = client.show(name)
    assert set(s.capabilities) == {"completion", "tools"}, s.capabilities  # Qwen2.5 has no reasoning switch
    assert "<tool_call>" in s.template and s.modelinfo["general.architecture"] == "qwen2", s
    assert s.modelinfo["qwen2.block_count"] == 24 and "num_ctx %d" % N_CTX in s.parameters, s
    assert client.show(name.split(":")[0]).details == d  # the alias without its tag names it too
    [p] = client.ps().models
    assert p.model == name and p.context_length == N_CTX and p.size_vram == 0 and p.size > m.size // 2, p
    v = httpx.get(srv.base + "/api/version").json()
    assert tuple(int(x) for x in v["version"].split(".")) >= (0, 12, 0), v


def test_chat_streamed_equals_whole(client, name):
    msgs = user("Write one sentence about the sea.", system=None)
    opts = {**GREEDY, "num_predict": 12}
    whole = client.chat(model=name, messages=msgs, options=opts, stream=False)
    # Greedy text depends on the host's kernels (AVX2 or AVX-512 sums): the sentence may end first.
    n = whole.eval_count
    reason = "length" if n == 12 else "stop"
    assert whole.done and whole.done_reason == reason and whole.message.role == "assistant", whole
    assert 0 < n <= 12 and whole.prompt_eval_count > 5, whole
    assert whole.total_duration >= whole.eval_duration > 0 and whole.prompt_eval_duration >= 0, whole
    parts = list(client.chat(model=name, messages=msgs, options=opts, stream=True))
    assert all(not p.done for p in parts[:-1]) and parts[-1].done, parts[-1]
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert parts[-1].done_reason == reason and parts[-1].eval_count == n, parts[-1]
    # A stop string ends the answer there ("stop"), never shown.
    r = client.chat(model=name, messages=user("Count from 1 to 9, comma separated.", system=None),
                    options={**GREEDY, "stop": ["5"], "num_predict": 64})
    assert r.done_reason == "stop" and "4" in r.message.content and "5" not in r.message.content, r


def test_tool_calls_parse_in_the_client(client, name):
    r = client.chat(model=name, messages=user("Turn on the kitchen light"), tools=TOOLS, options=GREEDY)
    assert r.done_reason == "stop" and not r.message.content, r  # no call text left in the content
    [call] = r.message.tool_calls
    assert call.function.name == "HassTurnOn", call
    assert isinstance(call.function.arguments, dict) and "kitchen" in json.dumps(call.function.arguments).lower()
    jsonschema.validate(call.function.arguments, SCHEMAS["HassTurnOn"])
    # Streamed: the call arrives whole in one chunk, the same as the whole answer's.
    parts = list(client.chat(model=name, messages=user("Turn on the kitchen light"), tools=TOOLS, options=GREEDY,
                             stream=True))
    calls = [c for p in parts for c in (p.message.tool_calls or [])]
    assert [(c.function.name, c.function.arguments) for c in calls] == [(call.function.name, call.function.arguments)]
    assert "".join(p.message.content for p in parts) == "" and parts[-1].done, parts


def test_tool_result_round_trip(client, name):
    tools = [{"type": "function", "function": {
        "name": "get_temperature", "description": "The temperature of a room in degrees Celsius",
        "parameters": {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}}}]
    msgs = user("What is the temperature in the living room?",
                system="You are a home assistant. Call a tool when you need data; once a tool result is there, "
                       "answer the user in one sentence.")
    r = client.chat(model=name, messages=msgs, tools=tools, options=GREEDY)
    [call] = r.message.tool_calls
    assert call.function.name == "get_temperature" and call.function.arguments["room"], call
    # Back as the client sends it: the assistant message with its calls, then a `tool` message
    # (without `tools` this time: Ollama has no tool_choice, and this 0.5B model asks again).
    msgs += [r.message, {"role": "tool", "tool_name": "get_temperature", "content": json.dumps({"celsius": 21.5})}]
    r = client.chat(model=name, messages=msgs, options={**GREEDY, "num_predict": 60})
    assert not r.message.tool_calls and "21.5" in r.message.content, r


def test_format_json_and_schema(client, name):
    r = client.chat(model=name, messages=user("List three colours as a JSON object.", system=None), format="json",
                    options={**GREEDY, "num_predict": 120})
    assert r.done_reason == "stop" and isinstance(json.loads(r.message.content), dict), r
    schema = {"type": "object", "properties": {"room": {"type": "string"}, "on": {"type": "boolean"},
                                               "brightness": {"type": "integer", "minimum": 0, "maximum": 100}},
              "required": ["room", "on", "brightness"], "additionalProperties": False}
    for ask in ("The kitchen light is on at 40%.", "Nothing is on in the bedroom."):
        r = client.chat(model=name, messages=user(ask, system="Describe the light as JSON."), format=schema,
                        options={**GREEDY, "num_predict": 120})
        jsonschema.validate(json.loads(r.message.content), schema)
    r = client.generate(model=name, prompt="Describe the kitchen light as a JSON object.", format=schema,
                        options={"temperature": 0.8, "seed": 7, "num_predict": 120})
    assert r.done_reason == "stop", r
    jsonschema.validate(json.loads(r.response), schema)


def test_generate_context_and_raw(client, name):
    opts = {**GREEDY, "num_predict": 12}
    r = client.generate(model=name, prompt="Name a colour.", options=opts)
    assert r.done and r.response and r.context and r.eval_count == len(r.context) - r.prompt_eval_count, r
    parts = list(client.generate(model=name, prompt="Name a colour.", options=opts, stream=True))
    assert "".join(p.response for p in parts) == r.response and parts[-1].context == r.context
    # `context` continues the conversation: the model sees its own last answer.
    r2 = client.generate(model=name, prompt="Say that again.", context=r.context, options=opts)
    assert r2.context[:len(r.context)] == r.context and r2.prompt_eval_count > len(r.context), r2
    # raw: the prompt goes in as written, template tokens included (Qwen2.5's default system turn too).
    raw = client.generate(model=name, raw=True, options=opts,
                          prompt="<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                                 "assistant.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n"
                                 "<|im_start|>assistant\n")
    assert raw.response == r.response, (raw.response, r.response)
    # No prompt: Ollama's load request.
    assert client.generate(model=name).done_reason == "load"
    assert client.chat(model=name, messages=[]).done_reason == "load"


def test_num_ctx_bounds_the_request(client, name):
    msgs = user("Write a long story about a lighthouse.", system=None)
    whole = client.chat(model=name, messages=msgs, options={**GREEDY, "num_predict": 8})
    r = client.chat(model=name, messages=msgs, options={**GREEDY, "num_ctx": whole.prompt_eval_count + 5})
    assert r.done_reason == "length" and r.eval_count == 5, r
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model=name, messages=msgs, options={"num_ctx": N_CTX * 2})
    assert e.value.status_code == 400 and "num_ctx" in e.value.error, e.value
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model=name, messages=msgs, options={"num_ctx": 4})
    assert e.value.status_code == 400 and "context" in e.value.error, e.value


@pytest.mark.parametrize("call,status,words", [
    (lambda c, n: c.pull("llama3.2"), 403, "managed by the service"),
    (lambda c, n: c.push(n), 403, "managed by the service"),
    (lambda c, n: c.create(model="mine", from_=n), 403, "managed by the service"),
    (lambda c, n: c.copy(n, "other"), 403, "managed by the service"),
    (lambda c, n: c.delete(n), 403, "managed by the service"),
    (lambda c, n: c.embed(model=n, input="hello"), 501, "embeddings"),
    (lambda c, n: c.chat(model="llama3.2:latest", messages=user("hi")), 404, "not found"),
    (lambda c, n: c.show("llama3.2"), 404, "not found"),
    (lambda c, n: c.chat(model=n, messages=[{"role": "user", "content": "what is this?", "images": ["aGVsbG8="]}]),
     400, "text only"),
    (lambda c, n: c.chat(model=n, messages=user("hi"), think=True), 400, "does not support thinking"),
    (lambda c, n: c.chat(model=n, messages=user("hi"), options={"num_gpu": 1}), 400, "fixed when the server starts"),
    (lambda c, n: c.chat(model=n, messages=user("hi"), options={"mirostat": 2}), 400, "mirostat"),
    (lambda c, n: c.chat(model=n, messages=user("hi"), options={"temperature": -1}), 400, "temperature"),
    (lambda c, n: c.chat(model=n, messages=user("hi"), keep_alive="soon"), 400, "keep_alive"),
    (lambda c, n: c.generate(model=n, prompt="hi", suffix="bye"), 400, "suffix"),
    (lambda c, n: c.generate(model=n, prompt="hi", template="{{ .Prompt }}"), 400, "template"),
])
def test_refusals_raise_response_error(srv, client, name, call, status, words):
    with pytest.raises(ollama.ResponseError) as e:
        r = call(client, name)
        if hasattr(r, "__next__"):
            list(r)
    assert e.value.status_code == status and words in e.value.error, (e.value.status_code, e.value.error)
    assert srv.proc.poll() is None


def test_bad_bodies_get_ollama_errors(srv, name):
    n = name.encode()
    for path, body in (("chat", b"{not json"), ("chat", b'{"messages": []}'), ("chat", b"[]"),
                       ("chat", b'{"model": "%s", "messages": [], "format": "yaml"}' % n),
                       ("chat", b'{"model": "%s", "messages": [{"role": "user", "content": ["x"]}]}' % n),
                       ("chat", b'{"model": "%s", "messages": [], "think": "high"}' % n),
                       ("chat", b'{"model": "%s", "messages": [], "options": {"num_predict": "8"}}' % n),
                       ("generate", b'{"model": "%s", "prompt": "x", "context": [-1]}' % n),
                       ("generate", b'{"model": "%s", "prompt": "x", "raw": true, "system": "y"}' % n)):
        r = httpx.post(srv.base + "/api/" + path, content=body)
        assert r.status_code == 400 and isinstance(r.json()["error"], str), (body, r.text)
    r = httpx.get(srv.base + "/api/nothing")
    assert r.status_code == 404 and isinstance(r.json()["error"], str), r.text


# --- Home Assistant's Ollama integration, replayed -------------------------------------------
# Its conversation agent sends the exposed entities in the system prompt and the Assist API's
# intent tools, with options {"num_ctx": 8192}, keep_alive in seconds ("-1s": forever) and
# stream=True; it reads message.content deltas and message.tool_calls[].function.{name, arguments
# (an object)} from each chunk, runs the tools, and sends their results back as `tool` messages.
HA_SYSTEM = (
    "You are a voice assistant for Home Assistant.\nAnswer questions about the world truthfully.\n"
    "Answer in plain text. Keep it simple and to the point.\n"
    "When controlling Home Assistant always call the intent tools. Use HassTurnOn to turn on or open, "
    "HassTurnOff to turn off or close, HassLightSet to set the brightness or the colour of a light. "
    "Use GetLiveContext to learn the state of the devices.\n"
    "An overview of the areas and the devices in this smart home:\n"
    "- names: Kitchen Light\n  domain: light\n  areas: Kitchen\n"
    "- names: Living Room Lamp\n  domain: light\n  areas: Living Room\n"
    "- names: Bedroom Fan\n  domain: fan\n  areas: Bedroom\n"
    "- names: Garage Door\n  domain: cover\n  areas: Garage\n"
    "- names: Hall Thermostat\n  domain: climate\n  areas: Hall\n")


def ha_turn(client, name, messages):
    """One agent turn as the integration runs it: streamed, deltas gathered, calls parsed."""
    content, calls = "", []
    for chunk in client.chat(model=name, messages=messages, tools=TOOLS, stream=True, keep_alive="-1s",
                             options={"num_ctx": N_CTX, "temperature": 0}):
        msg = chunk["message"]
        content += msg.get("content") or ""
        for tc in msg.get("tool_calls") or []:
            calls.append((tc["function"]["name"], dict(tc["function"]["arguments"])))
    return content, calls


def test_home_assistant_replay(client, name):
    history = [{"role": "system", "content": HA_SYSTEM}, {"role": "user", "content": "Turn on the kitchen light"}]
    content, calls = ha_turn(client, name, history)
    assert calls and content == "", (content, calls)
    for tool, args in calls:
        assert tool in SCHEMAS, tool
        jsonschema.validate(args, SCHEMAS[tool])
    assert calls[0][0] == "HassTurnOn" and "kitchen" in json.dumps(calls[0][1]).lower(), calls
    # The integration sends the calls back with their results, then reads the spoken answer.
    history.append({"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": t, "arguments": a}} for t, a in calls]})
    for tool, _ in calls:
        history.append({"role": "tool", "tool_name": tool, "content": json.dumps(
            {"speech": {}, "response_type": "action_done", "data": {"success": [
                {"name": "Kitchen Light", "type": "entity", "id": "light.kitchen"}], "failed": []}})})
    content, calls = ha_turn(client, name, history)
    assert content.strip() and not calls, (content, calls)
    # The next voice command: a new conversation on the same system prompt (warm in the cache).
    content, calls = ha_turn(client, name, [history[0], {"role": "user", "content": "Set the brightness of "
                                                                                   "the living room lamp to 30%"}])
    assert calls and calls[0][0] == "HassLightSet" and calls[0][1].get("brightness") == 30, (content, calls)
