// server/openai_response.cpp — JSON builders for the OpenAI response shapes, chat and
// completion side by side, and ResponseShape choosing between them.
#include "server/openai_response.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>

#include "jllm_version.h"

namespace jllm::server {

std::string make_response_id(ResponseKind kind) {
    static std::atomic<uint64_t> counter{0};
    thread_local std::mt19937_64 rng{std::random_device{}() ^
                                     (static_cast<uint64_t>(std::random_device{}()) << 32)};
    const uint64_t a = rng() ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
    const uint64_t b = rng();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b & 0xFFFFFFFFull));
    return std::string(kind == ResponseKind::Chat ? "chatcmpl-" : "cmpl-") + buf;
}

std::string system_fingerprint() { return std::string("jllm-") + JLLM_VERSION + "-" + JLLM_GIT_COMMIT; }

const char* openai_finish_reason(FinishReason f, bool legacy_functions) {
    if (f == FinishReason::Stop) return "stop";
    if (f == FinishReason::ToolCalls) return legacy_functions ? "function_call" : "tool_calls";
    // Cancelled here means a server limit (timeout, shutdown) cut the answer short.
    return "length";
}

Json timings_json(const GenerateStats& st) {
    return Json{{"prompt_n", st.prompt_tokens - st.reused_tokens},
                {"cache_n", st.reused_tokens},
                {"prompt_ms", st.prefill_ms},
                {"prompt_per_second", st.prefill_tps},
                {"predicted_n", st.completion_tokens},
                {"predicted_ms", st.decode_ms},
                {"predicted_per_second", st.decode_tps},
                {"draft_n", st.drafted()},
                {"draft_n_accepted", st.accepted()},
                {"ttft_ms", st.ttft_ms}};
}

namespace {

Json usage_json(const GenerateStats& st) {
    return Json{{"prompt_tokens", st.prompt_tokens},
                {"completion_tokens", st.completion_tokens},
                {"total_tokens", st.prompt_tokens + st.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", st.reused_tokens}}},
                {"completion_tokens_details", {{"reasoning_tokens", st.reasoning_tokens}}}};
}


// The engine's own report beside OpenAI's fields: where the reused prompt tokens came from.
// And speculative decoding's counts: drafted and accepted tokens per drafter, decode forwards.
Json jetson_json(const GenerateStats& st) {
    return Json{{"cache", {{"tokens_reused", st.reused_tokens},
                           {"source", cache_source_name(st.cache_source)},
                           {"restored_tokens", st.restored_tokens},
                           {"restore_ms", st.restore_ms}}},
                {"speculative", {{"drafted", st.drafted()},
                                 {"accepted", st.accepted()},
                                 {"ngram", {{"drafted", st.ngram_drafted}, {"accepted", st.ngram_accepted}}},
                                 {"draft_model", {{"drafted", st.model_drafted}, {"accepted", st.model_accepted}}},
                                 {"decode_forwards", st.decode_forwards},
                                 {"draft_ms", st.draft_ms},
                                 {"draft_prefill_ms", st.draft_prefill_ms}}}};
}

Json bytes_of(const std::string& s) {
    Json b = Json::array();
    for (const char c : s) b.push_back(static_cast<int>(static_cast<unsigned char>(c)));
    return b;
}

// JSON has no -inf; a probability that underflowed is reported as a very small logprob.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

// One chat logprobs entry for a piece: {token, logprob, bytes, top_logprobs}.
Json chat_logprob_entry(const Piece& p) {
    Json top = Json::array();
    for (const TokenLogprob& t : p.top) {
        top.push_back({{"token", t.piece}, {"logprob", finite_logprob(t.logprob)}, {"bytes", bytes_of(t.piece)}});
    }
    return Json{{"token", p.text}, {"logprob", finite_logprob(p.logprob)}, {"bytes", bytes_of(p.text)},
                {"top_logprobs", top}};
}

Json empty_completion_logprobs() {
    return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                {"text_offset", Json::array()}};
}

// Appends a piece to completion logprobs {tokens, token_logprobs, top_logprobs, text_offset}.
void append_completion_logprob(Json& lp, const Piece& p, size_t text_offset, bool with_top) {
    lp["tokens"].push_back(p.text);
    lp["token_logprobs"].push_back(finite_logprob(p.logprob));
    if (with_top) {
        Json top = Json::object();
        for (const TokenLogprob& t : p.top) top[t.piece] = finite_logprob(t.logprob);
        lp["top_logprobs"].push_back(top);
    } else {
        lp["top_logprobs"].push_back(nullptr);
    }
    lp["text_offset"].push_back(text_offset);
}

// The fields every response and chunk starts with.
Json envelope(const ResponseHead& h, const char* object) {
    return Json{{"id", h.id},
                {"object", object},
                {"created", h.created},
                {"model", h.model},
                {"system_fingerprint", system_fingerprint()}};
}

Json tool_call_json(const ToolCall& c) {
    return Json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

Json chat_completion_json(const ResponseHead& h, const GenerateResult& r, const char* finish, const Json& logprobs) {
    Json msg = {{"role", "assistant"}, {"content", r.text}};
    if (!r.reasoning.empty()) msg["reasoning_content"] = r.reasoning;
    if (!r.tool_calls.empty()) {
        if (r.text.empty()) msg["content"] = nullptr;
        if (h.legacy_functions) {
            msg["function_call"] = tool_call_json(r.tool_calls.front())["function"];
        } else {
            Json calls = Json::array();
            for (const ToolCall& c : r.tool_calls) calls.push_back(tool_call_json(c));
            msg["tool_calls"] = std::move(calls);
        }
    }
    Json j = envelope(h, "chat.completion");
    j["choices"] = Json::array({Json{{"index", 0}, {"message", msg}, {"logprobs", logprobs},
                                 {"finish_reason", finish}}});
    j["usage"] = usage_json(r.stats);
    j["timings"] = timings_json(r.stats);
    j["jetson"] = jetson_json(r.stats);
    return j;
}

// A chunk with one choice; `delta` an object, `finish` nullptr while streaming.
Json chat_chunk_json(const ResponseHead& h, const Json& delta, const char* finish, const Json& logprobs) {
    Json choice = {{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
    if (finish) choice["finish_reason"] = finish;
    Json j = envelope(h, "chat.completion.chunk");
    j["choices"] = Json::array({choice});
    return j;
}

Json completion_json(const ResponseHead& h, const GenerateResult& r, const char* finish, const Json& logprobs) {
    Json j = envelope(h, "text_completion");
    j["choices"] = Json::array({Json{{"index", 0}, {"text", r.text}, {"logprobs", logprobs},
                                 {"finish_reason", finish}}});
    j["usage"] = usage_json(r.stats);
    j["timings"] = timings_json(r.stats);
    j["jetson"] = jetson_json(r.stats);
    return j;
}

Json completion_chunk_json(const ResponseHead& h, const std::string& text, const char* finish, const Json& logprobs) {
    Json choice = {{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
    if (finish) choice["finish_reason"] = finish;
    Json j = envelope(h, "text_completion");
    j["choices"] = Json::array({choice});
    return j;
}

}  // namespace

ResponseShape::ResponseShape(ResponseKind kind, ResponseHead head) : kind_(kind), head_(std::move(head)) {}

Json ResponseShape::empty_logprobs() const {
    return kind_ == ResponseKind::Chat ? Json{{"content", Json::array()}} : empty_completion_logprobs();
}

void ResponseShape::append_logprob(Json& logprobs, const Piece& p, size_t text_offset, bool with_top) const {
    if (kind_ == ResponseKind::Chat) {
        logprobs["content"].push_back(chat_logprob_entry(p));
    } else {
        append_completion_logprob(logprobs, p, text_offset, with_top);
    }
}

Json ResponseShape::response(const GenerateResult& r, const Json& logprobs) const {
    const char* finish = openai_finish_reason(r.finish, head_.legacy_functions);
    return kind_ == ResponseKind::Chat ? chat_completion_json(head_, r, finish, logprobs)
                                       : completion_json(head_, r, finish, logprobs);
}

std::optional<Json> ResponseShape::opening_chunk() const {
    if (kind_ != ResponseKind::Chat) return std::nullopt;
    return chat_chunk_json(head_, Json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
}

std::optional<Json> ResponseShape::piece_chunk(const Piece& p, const Json& logprobs) const {
    const bool content = p.channel == Channel::Content;
    if (kind_ == ResponseKind::Chat) {
        if (p.channel == Channel::ToolCall) return chat_chunk_json(head_, tool_call_delta(p), nullptr, nullptr);
        const Json delta = content ? Json{{"content", p.text}} : Json{{"reasoning_content", p.text}};
        return chat_chunk_json(head_, delta, nullptr, logprobs);
    }
    if (!content) return std::nullopt;
    return completion_chunk_json(head_, p.text, nullptr, logprobs);
}

Json ResponseShape::final_chunk(FinishReason f) const {
    const char* finish = openai_finish_reason(f, head_.legacy_functions);
    return kind_ == ResponseKind::Chat ? chat_chunk_json(head_, Json::object(), finish, nullptr)
                                       : completion_chunk_json(head_, "", finish, nullptr);
}

// A call's delta: its first carries id, type, name and empty arguments; later ones a piece of the
// arguments under the call's index (legacy: `function_call`, no index).
Json ResponseShape::tool_call_delta(const Piece& p) const {
    Json fn = Json::object();
    if (!p.tool_name.empty()) fn["name"] = p.tool_name;
    fn["arguments"] = p.text;
    if (head_.legacy_functions) return Json{{"function_call", fn}};
    Json call = {{"index", p.tool_index}};
    if (!p.tool_id.empty()) {
        call["id"] = p.tool_id;
        call["type"] = "function";
    }
    call["function"] = std::move(fn);
    return Json{{"tool_calls", Json::array({call})}};
}

Json ResponseShape::usage_chunk(const GenerateStats& st) const {
    Json j = envelope(head_, kind_ == ResponseKind::Chat ? "chat.completion.chunk" : "text_completion");
    j["choices"] = Json::array();
    j["usage"] = usage_json(st);
    j["timings"] = timings_json(st);
    j["jetson"] = jetson_json(st);
    return j;
}

}  // namespace jllm::server
