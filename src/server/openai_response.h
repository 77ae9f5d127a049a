// server/openai_response.h — OpenAI response shapes: chat.completion and its SSE chunks,
// text_completion and its chunks, usage, logprobs, ids. llama-server's `timings` object rides
// along for users of that server.
#pragma once

#include <cstdint>
#include <string>

#include "jllm_engine.h"
#include "server/json_util.h"

namespace jllm::server {

// What every response of one request shares.
struct ResponseHead {
    std::string id;       // chatcmpl-... / cmpl-...
    int64_t created = 0;  // unix seconds
    std::string model;    // the alias
};

// "chatcmpl-" / "cmpl-" followed by 24 random hex digits (plus a process-wide counter mixed in).
std::string make_response_id(const char* prefix);
std::string system_fingerprint();

const char* openai_finish_reason(FinishReason f);

Json usage_json(const GenerateStats& st);
Json timings_json(const GenerateStats& st);

// One chat logprobs entry for a piece: {token, logprob, bytes, top_logprobs}.
Json chat_logprob_entry(const Piece& p);
// Appends a piece to completion logprobs {tokens, token_logprobs, top_logprobs, text_offset}.
void append_completion_logprob(Json& lp, const Piece& p, size_t text_offset, bool with_top);
Json empty_completion_logprobs();

Json chat_completion_json(const ResponseHead& h, const GenerateResult& r, const char* finish, const Json& logprobs);
// A chunk with one choice; `delta` an object, `finish` nullptr while streaming.
Json chat_chunk_json(const ResponseHead& h, const Json& delta, const char* finish, const Json& logprobs);
// The usage chunk: choices [] and usage.
Json chat_usage_chunk_json(const ResponseHead& h, const GenerateStats& st);

Json completion_json(const ResponseHead& h, const GenerateResult& r, const char* finish, const Json& logprobs);
Json completion_chunk_json(const ResponseHead& h, const std::string& text, const char* finish, const Json& logprobs);
Json completion_usage_chunk_json(const ResponseHead& h, const GenerateStats& st);

}  // namespace jllm::server
