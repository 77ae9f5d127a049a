// engine/chat_template.h — built-in chat template renderers (ChatML, Qwen3, Llama 3.x), their
// detection from GGUF metadata, and OpenAI-shaped message parsing (the types: include/jllm_chat.h).
// The renderers reproduce the models' own Jinja templates byte for byte (goldens rendered by
// jinja2 live in tests/data/chat/); docs/chat_templates.md lists what is covered and the few
// deliberate differences.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jllm_chat.h"  // ChatMessage, ChatRenderOptions, chat_messages_from_json

namespace jllm {

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

}  // namespace jllm
