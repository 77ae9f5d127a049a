"""tests/python/test_server_responses.py — OpenAI's Responses API (/v1/responses) on
jetson-llm-server with the official openai client, on the real Qwen2.5-Coder-0.5B-Instruct: text
answers whole and streamed (the event sequence the client parses), function tools with
tool_choice required, a function_call_output continued by previous_response_id with cached
tokens, store false, retrieve and delete, text.format json_schema, max_output_tokens, refusals,
and a replay of Home Assistant's OpenAI integration (developer prompt, flat function tools,
stream, store false, calls read from response.output_item.done)."""
import json

import httpx
import jsonschema
import openai
import pytest

from server_harness import QWEN_MODEL, Server
from test_server_ollama import HA_SYSTEM
from test_server_tools import SCHEMAS, TOOLS

# The Responses API's tools are flat: {"type": "function", "name", "description", "parameters"}.
FLAT = [{"type": "function", **t["function"]} for t in TOOLS]
TEMP = [{"type": "function", "name": "get_temperature", "description": "The temperature of a room in degrees Celsius",
         "parameters": {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}}]
INSTRUCTIONS = ("You are a home assistant. Call a tool when you need data; once a tool result is there, answer the "
                "user in one sentence.")


@pytest.fixture(scope="module")
def srv():
    s = Server(ctx=8192, model=QWEN_MODEL)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_text_whole_and_streamed(client):
    kw = dict(model="any", input="Write one sentence about the sea.", temperature=0, max_output_tokens=80)
    r = client.responses.create(**kw)
    assert r.id.startswith("resp_") and r.object == "response" and r.status == "completed", r
    [msg] = r.output
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_"), msg
    assert r.output_text and r.usage.output_tokens < 80 and r.usage.input_tokens > 5, r.usage
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    events = list(client.responses.create(**kw, stream=True))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"], types
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"], types
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == r.output_text == events[-1].response.output_text, (text, r.output_text)
    # The helper that accumulates the stream agrees.
    with client.responses.stream(**kw) as s:
        for _ in s:
            pass
        assert s.get_final_response().output_text == r.output_text


def test_developer_role_is_system(client):
    kw = dict(model="any", temperature=0, max_output_tokens=16)
    a = client.responses.create(input=[{"role": "developer", "content": "Answer in French."},
                                       {"role": "user", "content": "Name a colour."}], **kw)
    b = client.responses.create(instructions="Answer in French.", input="Name a colour.", **kw)
    assert a.output_text == b.output_text and a.usage.input_tokens == b.usage.input_tokens, (a, b)


def test_required_function_call(client):
    r = client.responses.create(model="any", input="Turn on the kitchen light", tools=FLAT, tool_choice="required",
                                temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls and r.status == "completed", r
    for c in calls:
        assert c.call_id.startswith("call_") and c.id.startswith("fc_") and c.status == "completed", c
        jsonschema.validate(json.loads(c.arguments), SCHEMAS[c.name])
    events = list(client.responses.create(model="any", input="Turn on the kitchen light", tools=FLAT,
                                          tool_choice="required", temperature=0, stream=True))
    done = [e.item for e in events if e.type == "response.output_item.done" and e.item.type == "function_call"]
    assert [(c.name, c.arguments) for c in done] == [(c.name, c.arguments) for c in calls]
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert args == "".join(c.arguments for c in calls)
    # A named function.
    r = client.responses.create(model="any", input="It is cold in here", tools=FLAT, temperature=0,
                                tool_choice={"type": "function", "name": "HassClimateSetTemperature"})
    assert [o.name for o in r.output if o.type == "function_call"] == ["HassClimateSetTemperature"], r


def test_function_call_output_and_previous_response_id(client):
    r = client.responses.create(model="any", instructions=INSTRUCTIONS, input="What is the temperature in the living "
                                "room?", tools=TEMP, tool_choice="required", temperature=0)
    [call] = [o for o in r.output if o.type == "function_call"]
    assert call.name == "get_temperature" and json.loads(call.arguments)["room"], call
    r2 = client.responses.create(model="any", instructions=INSTRUCTIONS, previous_response_id=r.id, tools=TEMP,
                                 tool_choice="none", temperature=0, max_output_tokens=60,
                                 input=[{"type": "function_call_output", "call_id": call.call_id,
                                         "output": json.dumps({"celsius": 21.5})}])
    assert r2.previous_response_id == r.id and "21.5" in r2.output_text, r2
    assert r2.usage.input_tokens_details.cached_tokens > 0, r2.usage
    assert client.responses.retrieve(r2.id).output_text == r2.output_text
    # The same turn, streamed, from the same stored response.
    events = list(client.responses.create(model="any", instructions=INSTRUCTIONS, previous_response_id=r.id,
                                          tools=TEMP, tool_choice="none", temperature=0, max_output_tokens=60,
                                          stream=True, input=[{"type": "function_call_output",
                                                               "call_id": call.call_id,
                                                               "output": json.dumps({"celsius": 21.5})}]))
    final = events[-1].response
    assert final.output_text == r2.output_text and final.usage.input_tokens_details.cached_tokens > 0, final


def test_store_false_retrieve_delete_and_unknown_ids(client):
    r = client.responses.create(model="any", input="Hi", store=False, max_output_tokens=4)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="any", input="Again", previous_response_id=r.id, max_output_tokens=4)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    kept = client.responses.create(model="any", input="Hi", max_output_tokens=4)
    assert client.responses.retrieve(kept.id).id == kept.id
    client.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="any", input="x", previous_response_id="resp_nothing")


def test_json_schema_and_token_limit(client):
    schema = {"type": "object", "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}},
              "required": ["room", "on"], "additionalProperties": False}
    r = client.responses.create(model="any", input="The kitchen light is on.", instructions="Describe it as JSON.",
                                temperature=0, max_output_tokens=80,
                                text={"format": {"type": "json_schema", "name": "light", "schema": schema}})
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), schema)
    r = client.responses.create(model="any", input="Write a long story about a lighthouse.", max_output_tokens=5)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens", r
    assert r.usage.output_tokens == 5


@pytest.mark.parametrize("kw,words", [
    (dict(input="hi", tools=[{"type": "web_search"}]), "only 'function' tools"),
    (dict(input=[{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]), "text only"),
    (dict(input="hi", reasoning={"effort": "high"}), "no reasoning mode"),
    (dict(input="hi", background=True), "background"),
    (dict(input="hi", truncation="auto"), "truncation"),
    (dict(input="hi", temperature=3), "temperature"),
    (dict(input=[{"type": "item_reference", "id": "x"}]), "item_reference"),
])
def test_refusals(srv, client, kw, words):
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="any", max_output_tokens=4, **kw)
    assert words in e.value.message, e.value.message
    assert srv.proc.poll() is None


def test_bad_bodies(srv):
    for body in (b"{not json", b"[]", b"{}", b'{"input": 5}'):
        r = httpx.post(srv.base + "/v1/responses", content=body)
        assert r.status_code == 400 and r.json()["error"]["message"], r.text


# --- Home Assistant's OpenAI integration, replayed -------------------------------------------
# It streams responses.create with the prompt as a developer message, its Assist tools as flat
# function tools, store=False and the whole history as input items (function_call and
# function_call_output included) each turn; it gathers text from response.output_text.delta and
# each call from response.output_item.done (arguments parsed with json.loads).
def ha_turn(client, items):
    text, calls, usage = "", [], None
    for e in client.responses.create(model="any", input=items, tools=FLAT, stream=True, store=False,
                                     max_output_tokens=150, temperature=0, top_p=1.0):
        if e.type == "response.output_text.delta":
            text += e.delta
        elif e.type == "response.output_item.done" and e.item.type == "function_call":
            calls.append((e.item.call_id, e.item.name, json.loads(e.item.arguments)))
        elif e.type in ("response.incomplete", "response.failed", "error"):
            raise AssertionError(e)
        elif e.type == "response.completed":
            usage = e.response.usage
    return text, calls, usage


def test_home_assistant_openai_replay(client):
    items = [{"role": "developer", "content": HA_SYSTEM}, {"role": "user", "content": "Turn on the kitchen light"}]
    text, calls, usage = ha_turn(client, items)
    assert calls and calls[0][1] == "HassTurnOn" and "kitchen" in json.dumps(calls[0][2]).lower(), (text, calls)
    for _, name, args in calls:
        jsonschema.validate(args, SCHEMAS[name])
    for call_id, name, args in calls:
        items.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)})
        items.append({"type": "function_call_output", "call_id": call_id,
                      "output": json.dumps({"response_type": "action_done", "data": {"success": [
                          {"name": "Kitchen Light", "type": "entity", "id": "light.kitchen"}], "failed": []}})})
    text, calls2, usage = ha_turn(client, items)
    assert text or calls2, "an answer the integration can speak or act on"
    assert usage.input_tokens_details.cached_tokens > 0, usage  # the history was warm
