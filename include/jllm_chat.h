// include/jllm_chat.h — a conversation as Engine::render_chat() takes it: messages (with tool calls
// and their results) and the rendering options. The renderers reproduce each model family's own
// chat template byte for byte (docs/chat_templates.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jllm {

struct ChatToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // JSON text exactly as the template emits it (see chat_messages_from_json)
};

struct ChatMessage {
    std::string role;               // system | user | assistant | tool (Llama 3 also: ipython)
    std::string content;
    std::string reasoning_content;  // earlier thinking of an assistant turn; empty = none given
    std::vector<ChatToolCall> tool_calls;
    std::string tool_call_id;
    std::string name;
};

struct ChatRenderOptions {
    bool add_generation_prompt = true;
    bool enable_thinking = false;  // Qwen3: false emits the empty <think></think> block
    std::string tools_json;        // JSON array of OpenAI tool definitions, or empty / "null"
    std::string date_string;       // Llama 3.1 header, "26 Jul 2024" style; empty = today
    std::string bos_token;         // emitted where the template places bos_token (Llama 3)
    // A final assistant message is the start of the answer: the prompt ends inside it (no
    // end-of-turn after it, no new generation prompt), so the model continues it.
    bool continue_final_message = false;
};

// Parses an OpenAI `messages` array. `content` may be a string, null (-> empty) or an array of
// {"type":"text","text":...} parts (concatenated). Tool-call `arguments` given as a JSON string
// are kept verbatim; given as an object they are serialised the way the templates' `tojson`
// does (Python json.dumps). Malformed input throws std::runtime_error naming the offending message.
std::vector<ChatMessage> chat_messages_from_json(std::string_view messages_json);

}  // namespace jllm
