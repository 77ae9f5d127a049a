// server/openai_response.h — OpenAI response shapes: chat.completion and its SSE chunks,
// text_completion and its chunks, usage, logprobs, ids. ResponseShape is the one place where a
// chat answer and a completion answer differ; llama-server's `timings` object rides along for
// users of that server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "jllm_engine.h"
#include "server/json_util.h"

namespace jllm::server {

// Which endpoint an answer is for: /v1/chat/completions or /v1/completions.
enum class ResponseKind { Chat, Completion };

// What every response of one request shares.
struct ResponseHead {
    std::string id;       // chatcmpl-... / cmpl-...
    int64_t created = 0;  // unix seconds
    std::string model;    // the alias
    // The request offered the legacy `functions`: a call is answered as `function_call` (one)
    // with finish reason "function_call", not as `tool_calls`.
    bool legacy_functions = false;
};

// "chatcmpl-" / "cmpl-" followed by 24 random hex digits (plus a process-wide counter mixed in).
std::string make_response_id(ResponseKind kind);
std::string system_fingerprint();

const char* openai_finish_reason(FinishReason f, bool legacy_functions = false);

// llama-server's `timings` object: prompt and cached counts, times and rates, drafts, TTFT.
Json timings_json(const GenerateStats& st);

// The JSON of one answer in the shape of its endpoint. Chat: `message` / `delta` objects, the
// role chunk first, reasoning as `reasoning_content`, calls as `tool_calls` (content null when
// the answer is calls only; streamed per call index, the first delta with id, type and name,
// later ones appending arguments), logprobs {"content": [{token, logprob, bytes, top_logprobs}]}. Completions: `text`, no reasoning, logprobs {tokens, token_logprobs,
// top_logprobs, text_offset}. Both: usage and timings on the answer or the usage chunk.
class ResponseShape {
public:
    ResponseShape(ResponseKind kind, ResponseHead head);

    ResponseKind kind() const { return kind_; }

    // Logprobs holding no token yet; append_logprob adds a content piece whose text starts at
    // byte `text_offset` of the answer (`with_top`: completions' top_logprobs, else null).
    Json empty_logprobs() const;
    void append_logprob(Json& logprobs, const Piece& p, size_t text_offset, bool with_top) const;

    // The whole answer (no streaming).
    Json response(const GenerateResult& r, const Json& logprobs) const;

    // Streaming: the chunk before any piece (chat: the assistant role; completions: none), one
    // piece (none for a piece the shape does not show: completions' reasoning), the chunk with
    // the finish reason, and the usage chunk (choices []).
    std::optional<Json> opening_chunk() const;
    std::optional<Json> piece_chunk(const Piece& p, const Json& logprobs) const;
    Json final_chunk(FinishReason finish) const;
    Json usage_chunk(const GenerateStats& st) const;

private:
    Json tool_call_delta(const Piece& p) const;

    ResponseKind kind_;
    ResponseHead head_;
};

}  // namespace jllm::server
