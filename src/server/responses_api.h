// server/responses_api.h — OpenAI's Responses API (POST /v1/responses, GET/DELETE
// /v1/responses/{id}) on the chat generation path. A request's `input` items (messages,
// function_call, function_call_output), `instructions`, `tools`, `tool_choice`, `text.format`,
// `reasoning` and sampling fields become an OpenAI chat body for the chat parser, so both APIs
// enforce the same ranges; `previous_response_id` puts the stored conversation before them.
// ResponsesBuilder turns the generation's pieces into output items and the stream's events.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jllm_engine.h"
#include "server/api_error.h"
#include "server/json_util.h"
#include "server/request_parse.h"

namespace jllm::server {

// Stored responses (`store`, default true): the conversation up to and including each answer,
// as chat messages, and the response object for GET. In memory, bounded by count and bytes;
// the oldest go first. Thread-safe.
class ResponseStore {
public:
    struct Entry {
        Json messages;  // the chat messages of the whole conversation, the answer included
        Json response;  // the response object
    };
    ResponseStore(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}
    void put(const std::string& id, Entry e);
    std::optional<Entry> get(const std::string& id) const;
    bool erase(const std::string& id);
    size_t size() const;

private:
    struct Slot {
        Entry entry;
        size_t bytes = 0;
        std::list<std::string>::iterator age;
    };
    void evict_locked();
    mutable std::mutex mu_;
    std::unordered_map<std::string, Slot> map_;
    std::list<std::string> order_;  // oldest first
    size_t bytes_ = 0;
    size_t max_entries_, max_bytes_;
};

struct ResponsesRequest {
    ParsedRequest pr;
    Json messages;              // the conversation sent to the model (stored with the answer)
    Json echo;                  // the request fields the response object repeats
    bool store = true;
    std::string previous_response_id;
    bool reasoning_summary = false;  // reasoning.summary: the reasoning also as summary_text
};

// `store`: where previous_response_id is looked up. An unknown id is a 404.
std::optional<ApiError> parse_responses_request(const Json& body, const RequestDefaults& defaults, int64_t n_vocab,
                                                const ResponseStore& store, ResponsesRequest& out);

// "resp_" + 48 hex digits; item ids share its digits.
std::string make_responses_id();

class ResponsesBuilder {
public:
    ResponsesBuilder(std::string id, std::string model, int64_t created, Json echo, bool reasoning_summary);

    // The opening events (response.created, response.in_progress).
    std::vector<Json> open();
    // One piece: the events it makes (an item opened or closed, a delta).
    std::vector<Json> piece(const Piece& p);
    // The end: open items closed, then response.completed (or response.incomplete at the token
    // limit). response() is the final response object after it.
    std::vector<Json> finish(const GenerateResult& r);
    const Json& response() const { return final_; }
    // The answer as chat messages (for the stored conversation).
    Json answer_messages() const;

private:
    enum class Kind { None, Reasoning, Message, Call };
    Json event(const char* type, Json body);
    Json snapshot(const char* status) const;
    void close(std::vector<Json>& ev);
    void begin(Kind k, const Piece& p, std::vector<Json>& ev);

    std::string id_, token_, model_;
    int64_t created_;
    Json echo_;
    bool reasoning_summary_;
    int seq_ = 0;
    Json items_ = Json::array();  // finished items
    Kind kind_ = Kind::None;
    Json open_;                   // the open item
    std::string text_;            // its text or arguments so far
    int call_index_ = -1;
    Json final_;
};

}  // namespace jllm::server
