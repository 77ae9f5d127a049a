"""tests/python/test_server_tools.py — tool calls through jetson-llm-server on a real model that
knows the Hermes <tool_call> format (Qwen2.5-Coder-0.5B-Instruct Q4_K_M), with the official
openai client: `required` and named calls validate against their function's schema every time,
`auto` calls when asked to act, a whole call -> result -> answer loop, streamed calls reassemble
to the whole answer's, the legacy `functions` shape, assistant prefill, JSON Schema output on 20
prompts, and bad tool definitions refused with the reason."""
import json

import jsonschema
import openai
import pytest

from server_harness import QWEN_MODEL, Server

# Home Assistant's intent tools, as its LLM API offers them (shapes, not its text).
TOOLS = [
    {"type": "function", "function": {
        "name": "HassTurnOn", "description": "Turns on/opens a device or entity",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string"}, "area": {"type": "string"},
            "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch", "fan", "cover"]}}},
            "required": []}}},
    {"type": "function", "function": {
        "name": "HassTurnOff", "description": "Turns off/closes a device or entity",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "area": {"type": "string"}},
                       "required": []}}},
    {"type": "function", "function": {
        "name": "HassLightSet", "description": "Sets the brightness or color of a light",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string"}, "area": {"type": "string"},
            "brightness": {"type": "integer", "minimum": 0, "maximum": 100},
            "color": {"type": "string", "enum": ["red", "green", "blue", "white", "warm_white"]}},
            "required": ["brightness"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "HassClimateSetTemperature", "description": "Sets the target temperature of a thermostat",
        "parameters": {"type": "object", "properties": {
            "area": {"type": "string"}, "temperature": {"type": "number", "minimum": 5, "maximum": 35}},
            "required": ["temperature"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "GetLiveContext", "description": "The current state of the devices in the home"}},
]
NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}
SCHEMAS = {t["function"]["name"]: t["function"].get("parameters", NO_ARGS) for t in TOOLS}
SYSTEM = "You are a voice assistant for Home Assistant. Use the tools to control the devices of the home."
ASKS = ["Turn on the kitchen light", "Switch off the fan in the bedroom", "Dim the living room lights to 30 percent",
        "Set the thermostat in the hall to 21 degrees", "Make the office light blue", "Close the garage door",
        "Is anything on in the house right now?", "Turn the porch light off"]


@pytest.fixture(scope="module")
def srv():
    s = Server(ctx=4096, model=QWEN_MODEL)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=300)


def chat(client, text, system=SYSTEM, **kw):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 200)
    return client.chat.completions.create(model="any", messages=msgs, **kw).choices[0]


def check_call(call, names=SCHEMAS):
    assert call.type == "function" and call.id.startswith("call_"), call
    assert call.function.name in names, call
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_required_calls_always_validate(client):
    for i, ask in enumerate(ASKS):
        c = chat(client, ask, tools=TOOLS, tool_choice="required", temperature=0.7 if i % 2 else 0, seed=i)
        assert c.finish_reason == "tool_calls", (ask, c)
        assert c.message.content is None and c.message.tool_calls, (ask, c)
        for call in c.message.tool_calls:
            check_call(call)
    # One call only without parallel calls.
    c = chat(client, "Turn on the kitchen light and the hall light", tools=TOOLS, tool_choice="required",
             parallel_tool_calls=False)
    assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1, c
    check_call(c.message.tool_calls[0])


def test_named_call_is_that_function(client):
    for name, ask in (("HassLightSet", "Turn on the kitchen light"), ("HassClimateSetTemperature", "It is cold in here"),
                      ("GetLiveContext", "Hello")):
        c = chat(client, ask, tools=TOOLS, tool_choice={"type": "function", "function": {"name": name}})
        assert c.finish_reason == "tool_calls", c
        assert [t.function.name for t in c.message.tool_calls] == [name], c
        check_call(c.message.tool_calls[0], [name])


def test_auto_calls_when_asked_to_act(client):
    c = chat(client, "Turn on the kitchen light", tools=TOOLS)
    assert c.finish_reason == "tool_calls", c
    assert not c.message.content, c  # no call text left in the content
    [call] = c.message.tool_calls
    check_call(call)
    assert call.function.name == "HassTurnOn" and "kitchen" in call.function.arguments.lower(), call


def test_full_loop_call_result_answer(client):
    tools = [{"type": "function", "function": {
        "name": "get_temperature", "description": "The temperature of a room in degrees Celsius",
        "parameters": {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"],
                       "additionalProperties": False}}}]
    msgs = [{"role": "system", "content": "You are a home assistant. Call a tool when you need data; once a tool "
                                          "result is there, answer the user in one sentence."},
            {"role": "user", "content": "What is the temperature in the living room?"}]
    r = client.chat.completions.create(model="any", messages=msgs, tools=tools, temperature=0, max_tokens=100)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    [call] = c.message.tool_calls
    assert call.function.name == "get_temperature" and json.loads(call.function.arguments)["room"], call
    # The call and its result go back as the client sends them: the assistant's tool_calls, then
    # a `tool` message; the model answers from the result (tool_choice none: no second call).
    msgs.append({"role": "assistant", "content": None, "tool_calls": [call.model_dump()]})
    msgs.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"celsius": 21.5})})
    r = client.chat.completions.create(model="any", messages=msgs, tools=tools, tool_choice="none", temperature=0,
                                       max_tokens=100)
    c = r.choices[0]
    assert c.finish_reason == "stop" and not c.message.tool_calls, c
    assert "21.5" in c.message.content, c


def streamed(client, text, **kw):
    """The streamed answer's calls reassembled by index as a client does, its content and finish."""
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
    calls, content, finish = {}, "", None
    for ev in client.chat.completions.create(model="any", messages=msgs, stream=True, temperature=0,
                                             max_tokens=200, **kw):
        if not ev.choices:
            continue
        d = ev.choices[0].delta
        content += d.content or ""
        for t in d.tool_calls or []:
            if t.index not in calls:  # the first delta of a call names it
                assert t.id and t.type == "function" and t.function.name and t.function.arguments == "", t
                calls[t.index] = {"id": t.id, "name": t.function.name, "arguments": ""}
            else:
                assert t.id is None and t.function.name is None, t
            calls[t.index]["arguments"] += t.function.arguments or ""
        finish = ev.choices[0].finish_reason or finish
    return [calls[i] for i in sorted(calls)], content, finish


def test_streamed_calls_reassemble_to_the_whole_answer(client):
    for ask, kw in (("Turn on the kitchen light", {}), ("Dim the living room lights to 30 percent", {}),
                    ("Turn on the kitchen light and the hall light", {"tool_choice": "required"}),
                    ("It is cold in here", {"tool_choice": {"type": "function",
                                                            "function": {"name": "HassClimateSetTemperature"}}})):
        whole = chat(client, ask, tools=TOOLS, **kw)
        calls, content, finish = streamed(client, ask, tools=TOOLS, **kw)
        assert finish == whole.finish_reason == "tool_calls", (ask, whole)
        assert [(c["name"], c["arguments"]) for c in calls] == \
               [(t.function.name, t.function.arguments) for t in whole.message.tool_calls], ask
        assert content == (whole.message.content or ""), ask
        assert "<tool_call>" not in content and '"name"' not in content, content


def test_legacy_functions(client):
    fns = [t["function"] for t in TOOLS]
    c = chat(client, "Set the thermostat in the hall to 21 degrees", functions=fns,
             function_call={"name": "HassClimateSetTemperature"})
    assert c.finish_reason == "function_call", c
    assert c.message.tool_calls is None and c.message.function_call.name == "HassClimateSetTemperature", c
    jsonschema.validate(json.loads(c.message.function_call.arguments), SCHEMAS["HassClimateSetTemperature"])
    c = chat(client, "Turn on the kitchen light", functions=fns)  # function_call auto
    assert c.finish_reason == "function_call" and c.message.function_call.name in SCHEMAS, c
    c = chat(client, "Turn on the kitchen light", functions=fns, function_call="none")
    assert c.finish_reason == "stop" and c.message.function_call is None, c


def test_assistant_prefill_is_continued(client):
    msgs = [{"role": "user", "content": "Describe a cat as a JSON object."}, {"role": "assistant", "content": '{"name": "'}]
    r = client.chat.completions.create(model="any", messages=msgs, response_format={"type": "json_object"},
                                       temperature=0, max_tokens=100)
    c = r.choices[0]
    assert c.finish_reason == "stop", c
    assert isinstance(json.loads('{"name": "' + c.message.content)["name"], str), c  # the prefix is not repeated
    # A call opened by the client is finished under the tool's schema.
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Make the office light blue"},
            {"role": "assistant", "content": '<tool_call>\n{"name": "HassLightSet", "arguments": {"brightness": '}]
    c = client.chat.completions.create(model="any", messages=msgs, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=100).choices[0]
    assert c.finish_reason == "tool_calls", c
    [call] = c.message.tool_calls
    assert call.function.name == "HassLightSet", call
    check_call(call)


STATE = {"type": "object", "properties": {
    "entity_id": {"type": "string", "pattern": "^[a-z_]{1,20}\\.[a-z_]{1,32}$"},
    "state": {"type": "string", "enum": ["on", "off", "unavailable"]},
    "attributes": {"type": "object", "properties": {
        "brightness": {"type": "integer", "minimum": 0, "maximum": 255},
        "friendly_name": {"type": "string", "maxLength": 40}}, "additionalProperties": False}},
    "required": ["entity_id", "state"], "additionalProperties": False}
SCENE = {"type": "object", "properties": {
    "scene": {"type": "string", "minLength": 1, "maxLength": 30},
    "actions": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "object", "properties": {
        "entity_id": {"type": "string"}, "service": {"type": "string", "enum": ["turn_on", "turn_off", "toggle"]}},
        "required": ["entity_id", "service"], "additionalProperties": False}}},
    "required": ["scene", "actions"], "additionalProperties": False}
INTENT = {"type": "object", "properties": {
    "intent": {"type": "string", "enum": ["turn_on", "turn_off", "set_temperature", "query", "other"]},
    "area": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "when": {"type": "string", "format": "time"}},
    "required": ["intent", "area"], "additionalProperties": False}
JSON_ASKS = [
    (STATE, "Report the kitchen light as a Home Assistant state object."),
    (STATE, "The hall fan is off. Give its state."),
    (STATE, "Describe the porch light, on at half brightness."),
    (STATE, "What is the state of switch.coffee_maker?"),
    (STATE, "The garage door sensor is unavailable."),
    (STATE, "Bedroom lamp: on, friendly name Reading Lamp."),
    (STATE, "Give the state of the living room TV."),
    (SCENE, "Make a movie-night scene: dim the living room light, turn off the kitchen light."),
    (SCENE, "A good-morning scene that opens the blinds and starts the coffee maker."),
    (SCENE, "Bedtime: turn everything off."),
    (SCENE, "Party scene with the garden lights toggled."),
    (SCENE, "Leaving home: lights off, fan off."),
    (SCENE, "Reading scene for the study."),
    (INTENT, "Turn on the kitchen light at 7 in the morning."),
    (INTENT, "Is the front door locked?"),
    (INTENT, "Set the bedroom to 19 degrees."),
    (INTENT, "Switch off the hallway fan."),
    (INTENT, "Tell me a joke."),
    (INTENT, "Warm up the bathroom before 6:30."),
    (INTENT, "What's the humidity in the basement?"),
]


def test_json_schema_twenty_prompts_twenty_valid_documents(client):
    assert len(JSON_ASKS) == 20
    for i, (schema, ask) in enumerate(JSON_ASKS):
        rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
        c = chat(client, ask, system="You answer with JSON only.", response_format=rf, max_tokens=300,
                 temperature=0 if i % 2 == 0 else 0.8, seed=i)
        assert c.finish_reason == "stop", (ask, c)
        doc = json.loads(c.message.content)
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(doc)


def test_bad_tools_are_400_with_the_reason(srv):
    msgs = [{"role": "user", "content": "hi"}]
    good = TOOLS[:1]
    cases = [
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools", "invalid_tools", "function.name"),
        ({"tools": [{"type": "code_interpreter"}]}, "tools", "invalid_tools", "tools[0].type"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "x": {"type": "string", "contentEncoding": "base64"}}}}}]}, "tools", "invalid_tools", "contentEncoding"),
        ({"tools": good + good}, "tools", "invalid_tools", "defined twice"),
        ({"tools": "x"}, "tools", "invalid_value", "must be an array"),
        ({"tools": good, "tool_choice": "sometimes"}, "tool_choice", "invalid_value", "sometimes"),
        ({"tools": good, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
         "invalid_value", "nope"),
        ({"tools": good, "response_format": {"type": "json_object"}}, "tools", "invalid_value", "both constrain"),
        ({"tools": good, "functions": [good[0]["function"]]}, "functions", "invalid_value", "not both"),
        ({"tools": good, "parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid_value", "boolean"),
        ({"functions": [{"name": "f", "parameters": 5}]}, "functions", "invalid_tools", "functions[0]"),
    ]
    for extra, param, code, why in cases:
        status, _, r = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 4, **extra})
        assert status == 400, (extra, r)
        assert r["error"]["param"] == param and r["error"]["code"] == code, (extra, r)
        assert why in r["error"]["message"], (extra, r)
    srv.assert_healthy()
