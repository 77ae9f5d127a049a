// tests/unit/server/test_server_shapes.cpp — the server's pure request/answer code without a
// model: the Responses API's store (eviction by count and bytes), its event builder (item order,
// sequence numbers, ids shared with the final object), the mapping of its input items onto chat
// messages; Ollama's request mapping (options, format, keep_alive, names) and answer shapes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/ollama_api.h"
#include "server/responses_api.h"

namespace jllm::server {
namespace {

Piece piece(Channel ch, std::string text, int tool = -1, std::string id = {}, std::string name = {}) {
    Piece p;
    p.channel = ch;
    p.text = std::move(text);
    p.tool_index = tool;
    p.tool_id = std::move(id);
    p.tool_name = std::move(name);
    return p;
}

TEST(ResponseStore, EvictsTheOldestByCountAndBytes) {
    ResponseStore s(3, 1 << 20);
    for (int i = 0; i < 5; ++i) s.put("r" + std::to_string(i), {Json::array(), Json{{"i", i}}});
    EXPECT_EQ(s.size(), 3u);
    EXPECT_FALSE(s.get("r0") && s.get("r1"));
    ASSERT_TRUE(s.get("r4"));
    EXPECT_EQ(s.get("r4")->response["i"], 4);
    EXPECT_TRUE(s.erase("r4"));
    EXPECT_FALSE(s.erase("r4"));
    ResponseStore small(100, 300);
    small.put("a", {Json::array({std::string(200, 'x')}), Json::object()});
    small.put("b", {Json::array({std::string(200, 'y')}), Json::object()});
    EXPECT_FALSE(small.get("a"));  // over 300 bytes with both: the older went
    EXPECT_TRUE(small.get("b"));
}

TEST(ResponsesBuilder, ItemsInOrderWithSequenceNumbers) {
    ResponsesBuilder b("resp_abc", "m", 1, Json{{"store", true}}, /*reasoning_summary=*/true);
    std::vector<Json> ev = b.open();
    for (const Piece& p : {piece(Channel::Reasoning, "think"), piece(Channel::Content, "Hi"),
                           piece(Channel::Content, " there"), piece(Channel::ToolCall, "", 0, "call_1", "f"),
                           piece(Channel::ToolCall, "{\"a\":1}", 0), piece(Channel::ToolCall, "", 1, "call_2", "g"),
                           piece(Channel::ToolCall, "{}", 1)}) {
        for (Json& e : b.piece(p)) ev.push_back(std::move(e));
    }
    GenerateResult r;
    r.finish = FinishReason::ToolCalls;
    r.stats.prompt_tokens = 10;
    r.stats.reused_tokens = 4;
    r.stats.completion_tokens = 7;
    for (Json& e : b.finish(r)) ev.push_back(std::move(e));
    for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i]["sequence_number"], static_cast<int>(i));
    std::vector<std::string> types;
    for (const Json& e : ev) types.push_back(e["type"]);
    const std::vector<std::string> want = {
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done",
        "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
    EXPECT_EQ(types, want);
    const Json& out = b.response()["output"];
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(out[0]["summary"][0]["text"], "think");
    EXPECT_EQ(out[1]["content"][0]["text"], "Hi there");
    EXPECT_EQ(out[2]["call_id"], "call_1");
    EXPECT_EQ(out[2]["arguments"], "{\"a\":1}");
    EXPECT_EQ(out[3]["name"], "g");
    // The streamed item ids are the final object's.
    EXPECT_EQ(ev[6]["item"]["id"], out[1]["id"]);
    EXPECT_EQ(b.response()["usage"]["input_tokens_details"]["cached_tokens"], 4);
    EXPECT_EQ(b.response()["status"], "completed");
    const Json msgs = b.answer_messages();
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0]["content"], "Hi there");
    EXPECT_EQ(msgs[0]["tool_calls"].size(), 2u);
}

TEST(ResponsesBuilder, EmptyAnswerIsAMessageAndLengthIsIncomplete) {
    ResponsesBuilder b("resp_x", "m", 1, Json::object(), false);
    GenerateResult r;
    r.finish = FinishReason::Length;
    const std::vector<Json> ev = b.finish(r);
    EXPECT_EQ(ev.back()["type"], "response.incomplete");
    EXPECT_EQ(b.response()["output"].size(), 1u);
    EXPECT_EQ(b.response()["output"][0]["type"], "message");
    EXPECT_EQ(b.response()["incomplete_details"]["reason"], "max_output_tokens");
}

TEST(ResponsesRequest, InputItemsBecomeChatMessages) {
    ResponseStore store(8, 1 << 20);
    store.put("resp_prev", {Json::array({Json{{"role", "user"}, {"content", "earlier"}}}), Json::object()});
    const Json body = Json::parse(R"({"model": "m", "previous_response_id": "resp_prev", "instructions": "Be brief.",
        "input": [{"role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                  {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c1", "output": "42"}]})");
    ResponsesRequest rq;
    ASSERT_FALSE(parse_responses_request(body, RequestDefaults{}, 1000, store, rq));
    ASSERT_EQ(rq.pr.messages.size(), 5u);  // instructions, earlier, dev, the call, its result
    EXPECT_EQ(rq.pr.messages[0].role, "system");
    EXPECT_EQ(rq.pr.messages[1].content, "earlier");
    EXPECT_EQ(rq.pr.messages[2].role, "system");
    EXPECT_EQ(rq.pr.messages[3].tool_calls.size(), 1u);
    EXPECT_EQ(rq.pr.messages[4].role, "tool");
    EXPECT_EQ(rq.pr.messages[4].name, "f");
    EXPECT_EQ(rq.messages.size(), 4u);  // stored without the instructions
    const Json unknown = Json::parse(R"({"input": "x", "previous_response_id": "resp_nope"})");
    const std::optional<ApiError> e = parse_responses_request(unknown, RequestDefaults{}, 1000, store, rq);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status, 404);
}

TEST(OllamaRequest, OptionsFormatAndKeepAlive) {
    const RequestDefaults d;
    OllamaRequest o;
    const Json ok = Json::parse(R"({"model": "m:latest", "messages": [{"role": "user", "content": "hi"}],
        "format": {"type": "object"}, "keep_alive": "1h30m", "stream": false,
        "options": {"temperature": 0.1, "num_predict": -2, "num_ctx": 64, "mirostat": 0, "stop": ["x"]}})");
    ASSERT_FALSE(parse_ollama_chat(ok, d, 1000, 128, o));
    EXPECT_FLOAT_EQ(o.pr.gen.sampling.temperature, 0.1f);
    EXPECT_EQ(o.pr.gen.max_tokens, -1);
    EXPECT_EQ(o.num_ctx, 64);
    EXPECT_EQ(o.pr.gen.constraint.kind, OutputConstraint::Kind::JsonSchema);
    EXPECT_FALSE(o.pr.stream);
    EXPECT_EQ(o.pr.gen.stop, std::vector<std::string>{"x"});
    for (const char* bad : {R"({"model": "m", "messages": [], "options": {"num_ctx": 999}})",
                            R"({"model": "m", "messages": [], "options": {"num_thread": 4}})",
                            R"({"model": "m", "messages": [], "options": {"mirostat": 1}})",
                            R"({"model": "m", "messages": [], "options": {"unknown": 1}})",
                            R"({"model": "m", "messages": [], "keep_alive": "soon"})",
                            R"({"model": "m", "messages": [], "format": "xml"})",
                            R"({"model": "m", "messages": [], "think": "high"})",
                            R"({"messages": []})"}) {
        EXPECT_TRUE(parse_ollama_chat(Json::parse(bad), d, 1000, 128, o)) << bad;
    }
    ASSERT_FALSE(parse_ollama_chat(Json::parse(R"({"model": "m"})"), d, 1000, 128, o));
    EXPECT_TRUE(o.load_only);
    EXPECT_TRUE(ollama_names_model("qwen:latest", "qwen"));
    EXPECT_TRUE(ollama_names_model("qwen", "qwen"));
    EXPECT_FALSE(ollama_names_model("llama", "qwen"));
    EXPECT_EQ(ollama_model_name("a:b"), "a:b");
}

TEST(OllamaShape, ChatLinesAndCalls) {
    OllamaShape s(/*chat=*/true, "m:latest", 0);
    const std::optional<Json> c = s.piece_chunk(piece(Channel::Content, "Hi"), Json(nullptr));
    ASSERT_TRUE(c);
    EXPECT_EQ((*c)["message"]["content"], "Hi");
    EXPECT_EQ((*c)["done"], false);
    EXPECT_FALSE(s.piece_chunk(piece(Channel::ToolCall, "{", 0), Json(nullptr)));
    const std::optional<Json> t = s.piece_chunk(piece(Channel::Reasoning, "hmm"), Json(nullptr));
    EXPECT_EQ((*t)["message"]["thinking"], "hmm");
    ToolCall call{"call_1", "HassTurnOn", R"({"name": "Kitchen"})"};
    const Json calls = s.calls_chunk({call});
    EXPECT_EQ(calls["message"]["tool_calls"][0]["function"]["arguments"]["name"], "Kitchen");
    GenerateResult r;
    r.finish = FinishReason::Length;
    r.stats.prompt_tokens = 5;
    r.stats.completion_tokens = 3;
    r.stats.decode_ms = 2.0;
    const Json last = s.final_chunk(r, 1000, nullptr);
    EXPECT_EQ(last["done"], true);
    EXPECT_EQ(last["done_reason"], "length");
    EXPECT_EQ(last["eval_duration"], 2000000);
    EXPECT_EQ(last["load_duration"], 1000);
    EXPECT_EQ(ollama_time(1500000000123456789LL), "2017-07-14T02:40:00.123456789Z");
}

}  // namespace
}  // namespace jllm::server
