// tests/unit/engine/test_tool_calls.cpp — the tool-call grammar (every call it admits parses and
// fits its function's schema; the call names it admits are the offered ones) and ToolCallStream
// (calls out of the streamed text at any split, nothing of a call left in the content).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../grammar/grammar_test_util.h"
#include "core/error.h"
#include "engine/tool_calls.h"
#include "grammar/json_schema.h"

namespace jllm {
namespace {

using test::Match;
using Json = nlohmann::json;

const char* TOOLS = R"([
 {"type": "function", "function": {"name": "light_turn_on", "description": "Turn a light on",
  "parameters": {"type": "object", "properties": {
    "entity_id": {"type": "string", "enum": ["light.kitchen", "light.hall"]},
    "brightness": {"type": "integer", "minimum": 0, "maximum": 255}},
   "required": ["entity_id"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "get_time", "description": "The time"}}
])";

Match match(const OutputConstraint& c, const std::string& text) { return test::gbnf_match(c.text, text); }

ToolRequest request(ToolChoice choice, const std::string& name = "", bool parallel = true) {
    ToolRequest t;
    t.tools_json = TOOLS;
    t.choice = choice;
    t.name = name;
    t.parallel = parallel;
    return t;
}

const std::string KITCHEN = "<tool_call>\n{\"name\": \"light_turn_on\", \"arguments\": {\"entity_id\": \"light.kitchen\"}}\n</tool_call>";
const std::string TIME = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

TEST(ToolFunctions, ParsesNamesAndSchemas) {
    const std::vector<ToolFunction> f = parse_tool_functions(TOOLS);
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f[0].name, "light_turn_on");
    EXPECT_EQ(Json::parse(f[0].parameters)["required"], Json::array({"entity_id"}));
    EXPECT_EQ(f[1].name, "get_time");
    EXPECT_EQ(Json::parse(f[1].parameters)["additionalProperties"], false);  // no parameters: no arguments
}

TEST(ToolFunctions, RefusesBadDefinitions) {
    const std::vector<std::pair<const char*, const char*>> bad = {
        {"{}", "must be an array"},
        {"[1]", "tools[0]: must be an object"},
        {R"([{"type": "retrieval"}])", "tools[0].type"},
        {R"([{"type": "function"}])", "tools[0].function"},
        {R"([{"type": "function", "function": {"name": "bad name"}}])", "tools[0].function.name"},
        {R"([{"type": "function", "function": {}}])", "tools[0].function.name"},
        {R"([{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}])",
         "defined twice"},
        {R"([{"type": "function", "function": {"name": "a", "parameters": [1]}}])", "parameters"},
        {"[", "not valid JSON"},
    };
    for (const auto& [json, why] : bad) {
        try {
            parse_tool_functions(json);
            ADD_FAILURE() << json << " was accepted";
        } catch (const JllmError& e) {
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << json << ": " << e.what();
        }
    }
}

TEST(ToolConstraint, RequiredAdmitsOnlyValidCalls) {
    const OutputConstraint c = tool_constraint(ToolFormat::Hermes, request(ToolChoice::Required));
    EXPECT_TRUE(c.triggers.empty());
    EXPECT_EQ(match(c, KITCHEN), Match::Full);
    EXPECT_EQ(match(c, TIME), Match::Full);
    EXPECT_EQ(match(c, KITCHEN + "\n" + TIME), Match::Full);  // parallel calls
    EXPECT_EQ(match(c, KITCHEN + "\n"), Match::Prefix);
    // Unknown function, a value outside the enum or range, a missing required key, extra keys,
    // text before the call.
    EXPECT_EQ(match(c, "<tool_call>\n{\"name\": \"unlock_door\""), Match::Refused);
    EXPECT_EQ(match(c, "<tool_call>\n{\"name\": \"light_turn_on\", \"arguments\": {\"entity_id\": \"light.garage\"}}"),
              Match::Refused);
    EXPECT_EQ(match(c, "<tool_call>\n{\"name\": \"light_turn_on\", \"arguments\": {\"entity_id\": \"light.hall\", "
                       "\"brightness\": 256}}\n</tool_call>"),
              Match::Refused);
    EXPECT_EQ(match(c, "<tool_call>\n{\"name\": \"light_turn_on\", \"arguments\": {}}"), Match::Refused);
    EXPECT_EQ(match(c, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"x\": 1}}"), Match::Refused);
    EXPECT_EQ(match(c, "Sure! " + KITCHEN), Match::Refused);
}

TEST(ToolConstraint, NamedAndSerial) {
    const OutputConstraint named = tool_constraint(ToolFormat::Hermes, request(ToolChoice::Named, "get_time"));
    EXPECT_EQ(match(named, TIME), Match::Full);
    EXPECT_EQ(match(named, KITCHEN), Match::Refused);
    EXPECT_EQ(match(named, TIME + "\n"), Match::Refused);  // one call of the named function
    const OutputConstraint one = tool_constraint(ToolFormat::Hermes, request(ToolChoice::Required, "", false));
    EXPECT_EQ(match(one, KITCHEN + "\n"), Match::Refused);
    EXPECT_THROW(tool_constraint(ToolFormat::Hermes, request(ToolChoice::Named, "nope")), JllmError);
    EXPECT_THROW(tool_constraint(ToolFormat::None, request(ToolChoice::Auto)), JllmError);
}

const std::string BARE = "{\"name\": \"light_turn_on\", \"arguments\": {\"entity_id\": \"light.hall\"}}";

TEST(ToolConstraint, AutoIsLazyFromTheCallMarker) {
    const OutputConstraint c = tool_constraint(ToolFormat::Hermes, request(ToolChoice::Auto));
    ASSERT_EQ(c.triggers, std::vector<std::string>{"<tool_call>"});
    ASSERT_EQ(c.start_triggers, (std::vector<std::string>{"{\"name\": \"", "```json"}));
    EXPECT_EQ(match(c, KITCHEN), Match::Full);  // the grammar starts at the trigger
    EXPECT_EQ(match(c, BARE), Match::Full);     // or at the bare call that opens the answer
    EXPECT_EQ(match(c, "```json\n" + BARE + "\n```"), Match::Full);  // or the same in a code block
    EXPECT_EQ(match(c, BARE + "\n"), Match::Refused);
    EXPECT_EQ(match(c, "```json\n{\"state\": 1}"), Match::Refused);
    // Required keeps to the tagged form.
    EXPECT_EQ(match(tool_constraint(ToolFormat::Hermes, request(ToolChoice::Required)), BARE), Match::Refused);
}

TEST(ToolConstraint, Llama31OneCallAsTheAnswer) {
    const OutputConstraint c = tool_constraint(ToolFormat::Llama31, request(ToolChoice::Required));
    EXPECT_EQ(match(c, "{\"name\": \"get_time\", \"parameters\": {}}"), Match::Full);
    EXPECT_EQ(match(c, "{\"name\": \"get_time\", \"parameters\": {}}\n"), Match::Refused);
    EXPECT_EQ(match(c, "{\"name\": \"get_time\", \"arguments\": {}}"), Match::Refused);
}

TEST(ToolConstraint, UnenforceableParameterSchemaNamesTheFunction) {
    ToolRequest t;
    t.tools_json = R"([{"type": "function", "function": {"name": "f", "parameters":
        {"type": "object", "properties": {"x": {"type": "string", "contentEncoding": "base64"}}}}}])";
    t.choice = ToolChoice::Required;
    try {
        tool_constraint(ToolFormat::Hermes, t);
        ADD_FAILURE() << "accepted";
    } catch (const SchemaError& e) {
        EXPECT_NE(std::string(e.what()).find("'f'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("contentEncoding"), std::string::npos) << e.what();
    }
}

// Feeds `text` in pieces of `step` bytes; returns the content and the calls.
struct Streamed {
    std::string content;
    std::vector<std::string> args;  // per call, reassembled from its pieces
    std::vector<std::string> names;
    std::vector<ToolCall> calls;
};

Streamed stream(ToolFormat f, const std::string& text, size_t step) {
    ToolCallStream s(f);
    std::vector<ToolCallStream::Part> out;
    for (size_t i = 0; i < text.size(); i += step) s.push(std::string_view(text).substr(i, step), out);
    s.flush(out);
    Streamed r;
    for (const ToolCallStream::Part& p : out) {
        if (p.channel == Channel::Content) {
            r.content += p.text;
            continue;
        }
        EXPECT_EQ(p.channel, Channel::ToolCall);
        if (p.start) {
            EXPECT_EQ(p.tool, static_cast<int>(r.args.size()));  // calls open in order
            r.args.emplace_back();
            r.names.push_back(s.call(p.tool).name);
        }
        if (p.tool < 0 || p.tool >= static_cast<int>(r.args.size())) {
            ADD_FAILURE() << "a piece of call " << p.tool << " before its start";
            continue;
        }
        r.args[static_cast<size_t>(p.tool)] += p.text;
    }
    r.calls = s.calls();
    return r;
}

TEST(ToolCallStream, HermesCallsAtEverySplit) {
    const std::string text = "Turning it on.\n" + KITCHEN + "\n" + TIME;
    for (size_t step = 1; step <= text.size(); ++step) {
        const Streamed r = stream(ToolFormat::Hermes, text, step);
        ASSERT_EQ(r.content, "Turning it on.\n") << step;
        ASSERT_EQ(r.calls.size(), 2u) << step;
        EXPECT_EQ(r.calls[0].name, "light_turn_on");
        EXPECT_EQ(r.calls[0].arguments, "{\"entity_id\": \"light.kitchen\"}");
        EXPECT_EQ(r.calls[1].name, "get_time");
        EXPECT_EQ(r.calls[1].arguments, "{}");
        EXPECT_EQ(r.names, (std::vector<std::string>{"light_turn_on", "get_time"}));
        ASSERT_EQ(r.args.size(), 2u);
        EXPECT_EQ(r.args[0], r.calls[0].arguments) << step;  // the streamed pieces are the arguments
        EXPECT_EQ(r.args[1], r.calls[1].arguments) << step;
        EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
        EXPECT_NE(r.calls[0].id, r.calls[1].id);
    }
}

TEST(ToolCallStream, TextThatOnlyLooksLikeACallStaysContent) {
    const std::string text = "Use <tool and <tool_cal tags; a < b.";
    for (size_t step = 1; step <= text.size(); ++step) {
        const Streamed r = stream(ToolFormat::Hermes, text, step);
        EXPECT_EQ(r.content, text) << step;
        EXPECT_TRUE(r.calls.empty());
    }
}

TEST(ToolCallStream, CallCutShortIsLeftOut) {
    const std::string text = KITCHEN + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {";
    const Streamed r = stream(ToolFormat::Hermes, text, 3);
    ASSERT_EQ(r.calls.size(), 1u);  // the second never closed (finish reason length)
    EXPECT_EQ(r.calls[0].name, "light_turn_on");
    EXPECT_TRUE(r.content.empty());
}

// `text` at every split is one call of `name` with `args`, nothing in the content.
void expect_one_call_at_every_split(ToolFormat f, const std::string& text, const std::string& name,
                                    const std::string& args) {
    for (size_t step = 1; step <= text.size(); ++step) {
        const Streamed r = stream(f, text, step);
        ASSERT_EQ(r.calls.size(), 1u) << step;
        EXPECT_EQ(r.calls[0].name, name);
        EXPECT_EQ(r.calls[0].arguments, args);
        ASSERT_EQ(r.args.size(), 1u);
        EXPECT_EQ(r.args[0], args) << step;  // the streamed pieces are the arguments
        EXPECT_TRUE(r.content.empty()) << step;
    }
}

TEST(ToolCallStream, Llama31WholeAnswerIsTheCall) {
    expect_one_call_at_every_split(
        ToolFormat::Llama31, "{\"name\": \"light_turn_on\", \"parameters\": {\"entity_id\": \"light.hall\", \"brightness\": 10}}",
        "light_turn_on", "{\"entity_id\": \"light.hall\", \"brightness\": 10}");
}

TEST(ToolCallStream, HermesBareOrFencedCallOpeningTheAnswer) {
    const std::string args = "{\"entity_id\": \"light.hall\"}";
    expect_one_call_at_every_split(ToolFormat::Hermes, "\n " + BARE, "light_turn_on", args);
    expect_one_call_at_every_split(ToolFormat::Hermes, "```json\n" + BARE + "\n```", "light_turn_on", args);
    EXPECT_EQ(stream(ToolFormat::Hermes, "```json\n[1]\n```", 2).content, "```json\n[1]\n```");
    // Later in the answer the same text is content.
    const Streamed r = stream(ToolFormat::Hermes, "Like this: " + BARE, 4);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "Like this: " + BARE);
}

TEST(ToolCallStream, MalformedCallIsAnError) {
    ToolCallStream s(ToolFormat::Hermes);
    std::vector<ToolCallStream::Part> out;
    EXPECT_THROW(s.push("<tool_call>\n{\"name\": \"x\" , \"args\": {\"a\": 1}}", out), JllmError);
}

TEST(ToolFormat, FromTheTemplate) {
    EXPECT_EQ(tool_format(ChatTemplateKind::Qwen3, ""), ToolFormat::Hermes);
    EXPECT_EQ(tool_format(ChatTemplateKind::Llama3, ""), ToolFormat::Llama31);
    EXPECT_EQ(tool_format(ChatTemplateKind::ChatML, "{{ '<tools>' }}{{ '<tool_call>' }}"), ToolFormat::Hermes);
    EXPECT_EQ(tool_format(ChatTemplateKind::ChatML, "{{ messages }}"), ToolFormat::None);
}

}  // namespace
}  // namespace jllm
