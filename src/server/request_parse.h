// server/request_parse.h — OpenAI request bodies (chat completions, completions) validated and
// turned into an engine request. Pure functions of the JSON: no engine, no I/O. Every problem is
// an ApiError naming the field; unknown fields are ignored, features not built yet are refused.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "jllm_engine.h"
#include "server/api_error.h"
#include "server/json_util.h"

namespace jllm::server {

// What a request gets for each field it leaves out (the server's flags).
struct RequestDefaults {
    SamplingParams sampling;  // temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n
    int max_tokens = -1;      // -1: until the end-of-generation token or the context is full
};

struct ParsedRequest {
    bool chat = true;
    std::vector<ChatMessage> messages;   // chat
    bool enable_thinking = false;        // chat: chat_template_kwargs.enable_thinking or "think"
    std::string prompt_text;             // completions: a text prompt
    std::vector<int32_t> prompt_tokens;  // completions: a token-id prompt (prompt_text unused)
    bool prompt_is_tokens = false;
    bool prompt_special = false;         // completions: parse <|...|> in prompt_text (Ollama's raw prompts)
    bool add_bos = true;                 // completions: BOS first where the model asks for one
    GenerateRequest gen;                 // sampling, stop, max_tokens, n_logprobs (prompt filled later)
    bool stream = false;
    bool include_usage = false;
    bool logprobs = false;               // report logprobs (chat: logprobs=true; completions: logprobs=N)
    int top_logprobs = 0;
    std::string session_id;              // conversation_id or nvext.agent_hints.session_id
    // chat: `tools` / `tool_choice` / `parallel_tool_calls` in gen.tools, or the legacy
    // `functions` / `function_call` (legacy_functions: answered as `function_call`, one call).
    bool legacy_functions = false;
    // chat: the last message is the assistant's; the prompt continues it (gen.assistant_prefix).
    bool continue_final = false;
};

// `n_vocab` bounds logit_bias ids and token prompts.
std::optional<ApiError> parse_chat_request(const Json& body, const RequestDefaults& defaults, int64_t n_vocab,
                                           ParsedRequest& out);
std::optional<ApiError> parse_completion_request(const Json& body, const RequestDefaults& defaults, int64_t n_vocab,
                                                 ParsedRequest& out);

// `[A-Za-z0-9_-]{1,64}`.
bool valid_session_id(const std::string& id);

}  // namespace jllm::server
