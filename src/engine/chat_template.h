// engine/chat_template.h — built-in chat template renderers (ChatML, Qwen3, Llama 3.x), their
// detection from GGUF metadata, and OpenAI-shaped message parsing.
// The renderers reproduce the models' own Jinja templates byte for byte (goldens rendered by
// jinja2 live in tests/data/chat/); docs/chat_templates.md lists what is covered and the few
// deliberate differences.
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
};

enum class ChatTemplateKind { ChatML, Qwen3, Llama3 };

// "chatml", "qwen3", "llama3".
const char* chat_template_kind_name(ChatTemplateKind kind);

// Picks the renderer for a model from its `tokenizer.chat_template` text and
// `general.architecture`; falls back to ChatML when neither says anything known.
ChatTemplateKind detect_chat_template(std::string_view gguf_template, std::string_view arch);

// `name` is auto|chatml|qwen3|llama3; "auto" (or empty) detects. Unknown name -> JllmError.
ChatTemplateKind parse_chat_template_name(std::string_view name, std::string_view gguf_template,
                                          std::string_view arch);

// The default system prompt a ChatML template inserts when the conversation has none (SmolLM2,
// Qwen2.5), read from the template's own string literal; empty when it has none.
std::string chatml_default_system_prompt(std::string_view gguf_template);

// Renders the conversation into prompt text. `gguf_template` is the model's own template text
// (may be empty): ChatML reads its default system prompt from it, Llama 3 uses the 3.1 header
// when it carries one. Errors (roles the format cannot express, bad tool JSON) -> JllmError.
std::string render_chat(ChatTemplateKind kind, const std::vector<ChatMessage>& msgs,
                        const ChatRenderOptions& opt, std::string_view gguf_template = {});

// Parses an OpenAI `messages` array. `content` may be a string, null (-> empty) or an array of
// {"type":"text","text":...} parts (concatenated). Tool-call `arguments` given as a JSON string
// are kept verbatim; given as an object they are serialised the way the templates' `tojson`
// does (Python json.dumps). Malformed input -> JllmError naming the offending message.
std::vector<ChatMessage> chat_messages_from_json(std::string_view messages_json);

// Re-serialises JSON text the way Python's json.dumps(ensure_ascii=False) does — keys in the
// given order, ", " and ": " separators (or newline + `indent` spaces when indent >= 0), non-ASCII
// kept, floats in Python repr. Invalid JSON -> JllmError.
std::string python_json_dumps(std::string_view json_text, int indent = -1);

}  // namespace jllm
