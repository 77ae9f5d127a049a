// tests/unit/chat/chat_template_test.cpp — chat template pieces without a Jinja golden:
// detection and name parsing, Python-style JSON serialisation (expected values printed by
// Python's json.dumps), message parsing, the Llama 3.1 tool format (Meta's published format,
// hand-written expectations) and the errors each renderer raises.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/chat_template.h"
#include "engine/python_json.h"

namespace {

using jllm::ChatMessage;
using jllm::ChatRenderOptions;
using jllm::ChatTemplateKind;
using jllm::ChatToolCall;

ChatMessage msg(const std::string& role, const std::string& content) {
    ChatMessage m;
    m.role = role;
    m.content = content;
    return m;
}

ChatMessage call_msg(std::vector<ChatToolCall> calls) {
    ChatMessage m = msg("assistant", "");
    m.tool_calls = std::move(calls);
    return m;
}

const char* const TOOLS_JSON =
    R"([{"type":"function","function":{"name":"set_light","description":"Licht schalten",)"
    R"("parameters":{"type":"object","properties":{"room":{"type":"string"}},"required":["room"]}}}])";

// ---------------------------------------------------------------------------------------------
// Detection and names.

TEST(ChatTemplateDetect, FromTemplateText) {
    EXPECT_EQ(jllm::detect_chat_template("{{ '<|start_header_id|>' }}", "qwen3"), ChatTemplateKind::Llama3);
    EXPECT_EQ(jllm::detect_chat_template("<|im_start|> ... <think>", "llama"), ChatTemplateKind::Qwen3);
    EXPECT_EQ(jllm::detect_chat_template("<|im_start|> enable_thinking", ""), ChatTemplateKind::Qwen3);
    // SmolLM2: a llama-architecture model that speaks ChatML.
    EXPECT_EQ(jllm::detect_chat_template("<|im_start|>system", "llama"), ChatTemplateKind::ChatML);
}

TEST(ChatTemplateDetect, FromArchitectureWhenNoTemplate) {
    EXPECT_EQ(jllm::detect_chat_template("", "qwen3"), ChatTemplateKind::Qwen3);
    EXPECT_EQ(jllm::detect_chat_template("", "qwen2"), ChatTemplateKind::ChatML);
    EXPECT_EQ(jllm::detect_chat_template("", "llama"), ChatTemplateKind::Llama3);
    EXPECT_EQ(jllm::detect_chat_template("", "gpt2"), ChatTemplateKind::ChatML);
    EXPECT_EQ(jllm::detect_chat_template("{{ unknown format }}", "qwen3"), ChatTemplateKind::Qwen3);
}

TEST(ChatTemplateDetect, NamesOverrideDetection) {
    const char* qwen_like = "<|im_start|><think>";
    EXPECT_EQ(jllm::parse_chat_template_name("auto", qwen_like, "qwen3"), ChatTemplateKind::Qwen3);
    EXPECT_EQ(jllm::parse_chat_template_name("", qwen_like, "qwen3"), ChatTemplateKind::Qwen3);
    EXPECT_EQ(jllm::parse_chat_template_name("chatml", qwen_like, "qwen3"), ChatTemplateKind::ChatML);
    EXPECT_EQ(jllm::parse_chat_template_name("llama3", qwen_like, "qwen3"), ChatTemplateKind::Llama3);
    EXPECT_EQ(jllm::parse_chat_template_name("qwen3", "", "llama"), ChatTemplateKind::Qwen3);
    EXPECT_THROW(jllm::parse_chat_template_name("mistral", qwen_like, "qwen3"), jllm::JllmError);
    EXPECT_THROW(jllm::parse_chat_template_name("ChatML", "", ""), jllm::JllmError);
    for (ChatTemplateKind k : {ChatTemplateKind::ChatML, ChatTemplateKind::Qwen3, ChatTemplateKind::Llama3}) {
        EXPECT_EQ(jllm::parse_chat_template_name(jllm::chat_template_kind_name(k), "", ""), k);
    }
}

TEST(ChatTemplateDetect, DefaultSystemPromptWithEscapedNewline) {
    // A Qwen2.5-style template writes the newline as the escape \n inside the literal and also
    // builds a system turn from the conversation (not a default).
    const std::string tmpl =
        "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] "
        "+ '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Bob, a \\'fine\\' bot.<|im_end|>\\n' }}"
        "{%- endif %}";
    EXPECT_EQ(jllm::chatml_default_system_prompt(tmpl), "You are Bob, a 'fine' bot.");
    EXPECT_EQ(jllm::chatml_default_system_prompt(""), "");
}

// ---------------------------------------------------------------------------------------------
// JSON exactly as Python's json.dumps(ensure_ascii=False) writes it.

TEST(ChatTemplateJson, NumbersLikePythonRepr) {
    EXPECT_EQ(jllm::python_json_dumps("[1e-05, 0.0001, 1e16, 1e15, 0.1, 2.0, -0.0, 1.5e300, 123456789.123, "
                                      "1e22, 5e-324, 1.7976931348623157e308, 0.30000000000000004, 100, -7, "
                                      "12345678901234567]"),
              "[1e-05, 0.0001, 1e+16, 1000000000000000.0, 0.1, 2.0, -0.0, 1.5e+300, 123456789.123, "
              "1e+22, 5e-324, 1.7976931348623157e+308, 0.30000000000000004, 100, -7, 12345678901234567]");
}

TEST(ChatTemplateJson, KeyOrderAndContainers) {
    EXPECT_EQ(jllm::python_json_dumps(R"({"z":1,"a":[true,false,null],"m":{},"e":[]})"),
              R"({"z": 1, "a": [true, false, null], "m": {}, "e": []})");
}

TEST(ChatTemplateJson, StringEscapes) {
    // Only '"', '\\' and C0 controls are escaped; DEL, non-ASCII and U+2028 stay raw.
    EXPECT_EQ(jllm::python_json_dumps(R"("ctl\u0001\u001f\u007f tab\t nl\n q\" bs\\ \u00e9 \ud83c\udf27 \u2028")"),
              "\"ctl\\u0001\\u001f\x7f tab\\t nl\\n q\\\" bs\\\\ \xc3\xa9 \xf0\x9f\x8c\xa7 \xe2\x80\xa8\"");
}

TEST(ChatTemplateJson, Indent) {
    EXPECT_EQ(jllm::python_json_dumps(R"({"b": {"c": [1, {"d": "x"}], "e": {}}, "a": []})", 4),
              "{\n    \"b\": {\n        \"c\": [\n            1,\n            {\n                \"d\": \"x\"\n"
              "            }\n        ],\n        \"e\": {}\n    },\n    \"a\": []\n}");
}

TEST(ChatTemplateJson, InvalidJsonIsAnError) {
    EXPECT_THROW(jllm::python_json_dumps("{\"a\": "), jllm::JllmError);
}

// ---------------------------------------------------------------------------------------------
// OpenAI-shaped messages.

TEST(ChatMessagesJson, ParsesOpenAIShapes) {
    const auto msgs = jllm::chat_messages_from_json(R"([
        {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "assistant", "content": null, "reasoning_content": "think",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"b": 1.0, "ä": [1]}}},
                        {"name": "h"}]},
        {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "ok"}])");
    ASSERT_EQ(msgs.size(), 3u);
    EXPECT_EQ(msgs[0].content, "Be brief.");
    EXPECT_EQ(msgs[1].content, "");
    EXPECT_EQ(msgs[1].reasoning_content, "think");
    ASSERT_EQ(msgs[1].tool_calls.size(), 3u);
    EXPECT_EQ(msgs[1].tool_calls[0].id, "c1");
    EXPECT_EQ(msgs[1].tool_calls[0].name, "f");
    EXPECT_EQ(msgs[1].tool_calls[0].arguments, "{\"a\":1}");              // a string stays verbatim
    EXPECT_EQ(msgs[1].tool_calls[1].arguments, "{\"b\": 1.0, \"\xc3\xa4\": [1]}");  // an object: json.dumps
    EXPECT_EQ(msgs[1].tool_calls[2].arguments, "{}");
    EXPECT_EQ(msgs[2].tool_call_id, "c1");
    EXPECT_EQ(msgs[2].name, "f");
}

TEST(ChatMessagesJson, RejectsMalformedInput) {
    EXPECT_THROW(jllm::chat_messages_from_json("{\"role\": \"user\"}"), jllm::JllmError);
    EXPECT_THROW(jllm::chat_messages_from_json("[{\"content\": \"x\"}]"), jllm::JllmError);
    EXPECT_THROW(jllm::chat_messages_from_json("[{\"role\": \"user\", \"content\": 5}]"), jllm::JllmError);
    EXPECT_THROW(jllm::chat_messages_from_json(
                     "[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]"), jllm::JllmError);
    EXPECT_THROW(jllm::chat_messages_from_json(
                     "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {}}]}]"), jllm::JllmError);
    EXPECT_THROW(jllm::chat_messages_from_json("[{\"role\": \"user\""), jllm::JllmError);
}

// ---------------------------------------------------------------------------------------------
// Llama 3.1 tool turns (Meta's published format; no Jinja golden for 3.1 in the shared data).

TEST(ChatLlama31, ToolsGoInTheFirstUserMessage) {
    ChatRenderOptions opt;
    opt.tools_json = TOOLS_JSON;
    opt.date_string = "26 Jul 2024";
    opt.bos_token = "<|begin_of_text|>";
    const std::string got = jllm::render_chat(
        ChatTemplateKind::Llama3, {msg("system", " Be brief. "), msg("user", "Kitchen light on\n")}, opt);
    const std::string expected =
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
        "Be brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\n"
        "Given the following functions, please respond with a JSON for a function call with its proper "
        "arguments that best answers the given prompt.\n\n"
        "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and "
        "its value}.Do not use variables.\n\n"
        "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"set_light\",\n"
        "        \"description\": \"Licht schalten\",\n        \"parameters\": {\n"
        "            \"type\": \"object\",\n            \"properties\": {\n                \"room\": {\n"
        "                    \"type\": \"string\"\n                }\n            },\n"
        "            \"required\": [\n                \"room\"\n            ]\n        }\n    }\n}\n\n"
        "Kitchen light on<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n";
    EXPECT_EQ(got, expected);
}

TEST(ChatLlama31, ToolCallAndIpythonResult) {
    ChatRenderOptions opt;
    opt.date_string = "01 Jan 2025";
    ChatToolCall tc{"c1", "set_light", "{\"room\":\"kitchen\",\"on\":true}"};
    ChatMessage tool = msg("tool", "{\"ok\": true}");
    const std::string got = jllm::render_chat(
        ChatTemplateKind::Llama3, {msg("user", "Light?"), call_msg({tc}), tool, msg("assistant", "Done.")}, opt);
    const std::string expected =
        "<|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 01 Jan 2025\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nLight?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{\"name\": \"set_light\", \"parameters\": {\"room\": \"kitchen\", \"on\": true}}<|eot_id|>"
        "<|start_header_id|>ipython<|end_header_id|>\n\n{\"ok\": true}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nDone.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n";
    EXPECT_EQ(got, expected);
}

TEST(ChatLlama31, HeaderFromA31TemplateEvenWithoutTools) {
    ChatRenderOptions opt;
    opt.date_string = "26 Jul 2024";
    opt.add_generation_prompt = false;
    const std::string got = jllm::render_chat(ChatTemplateKind::Llama3, {msg("user", "Hi")}, opt,
                                              "... Cutting Knowledge Date: December 2023 ... <|start_header_id|>");
    EXPECT_EQ(got,
              "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
              "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatLlama31, DefaultDateIsToday) {
    ChatRenderOptions opt;
    opt.tools_json = TOOLS_JSON;
    const std::string got = jllm::render_chat(ChatTemplateKind::Llama3, {msg("user", "Hi")}, opt);
    const size_t at = got.find("Today Date: ");
    ASSERT_NE(at, std::string::npos);
    const std::string date = got.substr(at + 12, got.find('\n', at) - at - 12);
    EXPECT_EQ(date.size(), 11u) << date;  // "29 Nov 2026"
    EXPECT_EQ(date[2], ' ');
    EXPECT_EQ(date[6], ' ');
}

TEST(ChatLlama31, Errors) {
    ChatRenderOptions opt;
    opt.date_string = "26 Jul 2024";
    ChatToolCall a{"c1", "f", "{}"};
    ChatToolCall b{"c2", "g", "{}"};
    // One call per assistant turn in Llama 3.1.
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Llama3, {msg("user", "x"), call_msg({a, b})}, opt),
                 jllm::JllmError);
    // Arguments must be JSON.
    ChatToolCall bad{"c1", "f", "{not json"};
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Llama3, {msg("user", "x"), call_msg({bad})}, opt),
                 jllm::JllmError);
    // Tool definitions need a first user message to travel in.
    opt.tools_json = TOOLS_JSON;
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Llama3, {msg("system", "s")}, opt), jllm::JllmError);
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Llama3, {msg("assistant", "a"), msg("user", "u")}, opt),
                 jllm::JllmError);
    opt.tools_json = "";
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Llama3, {msg("robot", "x")}, opt), jllm::JllmError);
}

// ---------------------------------------------------------------------------------------------
// Qwen3 and ChatML errors and edges.

TEST(ChatQwen3, Errors) {
    ChatRenderOptions opt;
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Qwen3, {}, opt), jllm::JllmError);
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Qwen3, {msg("robot", "x")}, opt), jllm::JllmError);
    ChatToolCall bad{"c1", "f", "{\"a\": }"};
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Qwen3, {msg("user", "x"), call_msg({bad})}, opt),
                 jllm::JllmError);
    for (const char* tools : {"{\"type\": \"function\"}", "[1, 2]", "[{\"type\": ", "\"tools\""}) {
        opt.tools_json = tools;
        EXPECT_THROW(jllm::render_chat(ChatTemplateKind::Qwen3, {msg("user", "x")}, opt), jllm::JllmError)
            << tools;
    }
}

TEST(ChatQwen3, EmptyToolListMeansNoToolBlock) {
    ChatRenderOptions opt;
    const std::string plain = jllm::render_chat(ChatTemplateKind::Qwen3, {msg("user", "x")}, opt);
    for (const char* tools : {"[]", "null", ""}) {
        opt.tools_json = tools;
        EXPECT_EQ(jllm::render_chat(ChatTemplateKind::Qwen3, {msg("user", "x")}, opt), plain) << tools;
    }
    EXPECT_EQ(plain, "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatChatML, PlainWithoutTemplateAndErrors) {
    ChatRenderOptions opt;
    EXPECT_EQ(jllm::render_chat(ChatTemplateKind::ChatML, {msg("user", "Hi")}, opt),
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(jllm::render_chat(ChatTemplateKind::ChatML, {}, opt), "<|im_start|>assistant\n");
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::ChatML, {msg("tool", "r")}, opt), jllm::JllmError);
    ChatToolCall tc{"c1", "f", "{}"};
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::ChatML, {msg("user", "x"), call_msg({tc})}, opt),
                 jllm::JllmError);
    opt.tools_json = TOOLS_JSON;
    EXPECT_THROW(jllm::render_chat(ChatTemplateKind::ChatML, {msg("user", "x")}, opt), jllm::JllmError);
}

// Arbitrary bytes (malformed UTF-8 included) in every field render without a crash.
TEST(ChatRobustness, ArbitraryBytesInContent) {
    std::mt19937 rng(1234);
    const char* const roles[] = {"system", "user", "assistant", "tool"};
    const auto random_text = [&]() {
        std::string s(rng() % 24, '\0');
        for (char& c : s) c = static_cast<char>(rng() % 256);
        return s;
    };
    for (int iter = 0; iter < 300; ++iter) {
        std::vector<ChatMessage> msgs;
        const size_t n = 1 + rng() % 6;
        for (size_t i = 0; i < n; ++i) {
            ChatMessage m = msg(roles[rng() % 4], random_text());
            if (m.role == "assistant" && rng() % 2) m.reasoning_content = random_text();
            if (m.role == "assistant" && rng() % 3 == 0) m.content += "</think>" + random_text();
            msgs.push_back(m);
        }
        ChatRenderOptions opt;
        opt.add_generation_prompt = rng() % 2;
        opt.enable_thinking = rng() % 2;
        opt.date_string = "26 Jul 2024";
        EXPECT_NO_THROW(jllm::render_chat(ChatTemplateKind::Qwen3, msgs, opt));
        EXPECT_NO_THROW(jllm::render_chat(ChatTemplateKind::Llama3, msgs, opt));
        for (ChatMessage& m : msgs) {
            if (m.role == "tool") m.role = "user";
        }
        EXPECT_NO_THROW(jllm::render_chat(ChatTemplateKind::ChatML, msgs, opt));
    }
}

}  // namespace
