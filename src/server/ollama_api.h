// server/ollama_api.h — Ollama's native API (/api/chat, /api/generate and the model listings) on
// the same engine and port as the OpenAI endpoints. Requests are validated and turned into the
// ParsedRequest the generation path runs (the OpenAI parser does the shared fields, so both
// APIs enforce the same ranges); answers are Ollama's objects and NDJSON lines. Pure functions
// of the JSON and the model's description: no engine, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jllm_engine.h"
#include "server/api_error.h"
#include "server/json_util.h"
#include "server/request_parse.h"

namespace jllm::server {

// The release of Ollama whose API these endpoints follow (GET /api/version): clients gate
// features such as `think` and `tool_name` on it.
constexpr const char* OLLAMA_API_VERSION = "0.12.0";

// The served model as Ollama clients name it: the alias, with ":latest" where it has no tag.
std::string ollama_model_name(const std::string& alias);
// Whether a request's `model` names the served model (the alias, or its Ollama name).
bool ollama_names_model(const std::string& requested, const std::string& alias);

// A timestamp as Ollama writes them: RFC 3339 in UTC with nanoseconds.
std::string ollama_time(int64_t unix_ns);
int64_t unix_now_ns();

struct OllamaRequest {
    ParsedRequest pr;
    std::string model;              // as requested
    bool chat = true;               // /api/chat (else /api/generate)
    bool load_only = false;         // no prompt / no messages: Ollama's "load the model" request
    int64_t num_ctx = 0;            // options.num_ctx (0: the server's context)
    std::vector<int32_t> context;   // /api/generate's `context`: token ids the prompt continues
};

// `n_ctx`: the server's context; options.num_ctx above it is refused.
std::optional<ApiError> parse_ollama_chat(const Json& body, const RequestDefaults& defaults, int64_t n_vocab,
                                          int64_t n_ctx, OllamaRequest& out);
std::optional<ApiError> parse_ollama_generate(const Json& body, const RequestDefaults& defaults, int64_t n_vocab,
                                              int64_t n_ctx, OllamaRequest& out);

// Ollama's error object: {"error": message}.
Json ollama_error(const std::string& message);

// What /api/tags, /api/ps and /api/show say of the model.
struct OllamaModel {
    std::string alias;
    ModelInfo info;
    int64_t modified_unix = 0;       // the file's modification time
    uint64_t device_bytes = 0;       // weights and KV on the accelerator (0: the CPU backend)
    RequestDefaults defaults;        // the server's sampling defaults (show's `parameters`)
};
Json ollama_details(const ModelInfo& info);
Json ollama_tags(const OllamaModel& m);
Json ollama_ps(const OllamaModel& m);
Json ollama_show(const OllamaModel& m);

// The answers of one /api/chat or /api/generate request, as one object or as NDJSON lines.
class OllamaShape {
public:
    OllamaShape(bool chat, std::string model, int64_t start_ns);

    // One streamed piece: content or reasoning (`thinking`); none for a tool-call piece (calls
    // go out whole, in calls_chunk). `logprobs`: the piece's entries, or null.
    std::optional<Json> piece_chunk(const Piece& p, const Json& logprobs) const;
    // The calls of the turn, whole (Ollama streams calls once they are complete).
    Json calls_chunk(const std::vector<ToolCall>& calls) const;
    // The last line: done, done_reason, counts and durations (ns); generate adds `context`.
    Json final_chunk(const GenerateResult& r, int64_t queue_ns, const std::vector<int32_t>* context) const;
    // The whole answer (stream false).
    Json response(const GenerateResult& r, int64_t queue_ns, const std::vector<int32_t>* context,
                  const Json& logprobs) const;
    // The answer to a load request (no prompt).
    Json load_response() const;

private:
    Json head() const;
    Json message(const std::string& content) const;
    Json done_line() const;  // done: true with an empty message / response
    void add_stats(Json& j, const GenerateResult& r, int64_t queue_ns) const;

    bool chat_;
    std::string model_;
    int64_t start_ns_;
};

const char* ollama_done_reason(FinishReason f);

}  // namespace jllm::server
