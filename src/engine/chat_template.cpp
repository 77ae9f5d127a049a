// engine/chat_template.cpp — the built-in chat template renderers, template detection and
// OpenAI message parsing. Each renderer mirrors one Jinja template statement by statement, so the
// comments name the template behaviour being reproduced (docs/chat_templates.md has the
// overview). JSON the templates print through `tojson` goes through engine/python_json.h; the
// Python string methods they call are in engine/python_str.h.
#include "engine/chat_template.h"

#include <cstdint>
#include <ctime>

#include "core/error.h"
#include "engine/python_json.h"
#include "engine/python_str.h"

namespace jllm {

namespace {

// Tool definitions as the templates print them: one json.dumps per array element.
std::vector<OrderedJson> parse_tools(const std::string& tools_json) {
    std::vector<OrderedJson> tools;
    if (tools_json.empty()) return tools;
    const OrderedJson j = parse_ordered_json(tools_json, "tools");
    if (j.is_null()) return tools;
    if (!j.is_array()) {
        throw JllmError(strfmt("chat template: tools must be a JSON array, got %s", j.type_name()));
    }
    for (const auto& t : j) {
        if (!t.is_object()) {
            throw JllmError(strfmt("chat template: each tool must be a JSON object, got %s",
                                   t.type_name()));
        }
        tools.push_back(t);
    }
    return tools;
}

// Tool-call arguments must be JSON; an empty string stands for no arguments.
void check_arguments(const ChatToolCall& tc) {
    if (tc.arguments.empty()) return;
    if (!OrderedJson::accept(tc.arguments)) {
        throw JllmError(strfmt("chat template: arguments of tool call '%s' are not valid JSON: %s",
                               tc.name.c_str(), tc.arguments.c_str()));
    }
}

[[noreturn]] void bad_role(const char* kind, size_t i, const std::string& role) {
    throw JllmError(strfmt("chat template %s: message %zu has role '%s'; expected system, user, "
                           "assistant or tool", kind, i, role.c_str()));
}

// ---------------------------------------------------------------------------------------------
// ChatML (SmolLM2, Qwen2.5): <|im_start|>ROLE\nCONTENT<|im_end|>\n per message. A template that
// carries Hermes tool calls (Qwen2.5's: <tools> and <tool_call>) also takes tools, assistant tool
// calls and tool results: the tools block opens the system turn (after the system message, or the
// template's default system prompt), each call is <tool_call>\n{"name": .., "arguments": ..}
// \n</tool_call>, consecutive tool results share one user turn.

// The tools system block of the Hermes format (Qwen2.5, Qwen3).
std::string hermes_tools_block(const std::vector<OrderedJson>& tools) {
    std::string out = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const OrderedJson& t : tools) out += "\n" + python_json_dumps_value(t);
    out += "\n</tools>\n\nFor each function call, return a json object with function name and "
           "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
           "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
    return out;
}

std::string render_chatml(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opt,
                          std::string_view gguf_template) {
    const std::vector<OrderedJson> tools = parse_tools(opt.tools_json);
    const bool hermes = contains(gguf_template, "<tool_call>") && contains(gguf_template, "<tools>");
    if (!tools.empty() && !hermes) {
        throw JllmError("chat template chatml: tools are not supported by this model's template "
                        "(use --chat-template qwen3 or llama3)");
    }
    const std::string default_system = chatml_default_system_prompt(gguf_template);
    const size_t n = msgs.size();
    std::string out;
    if (!tools.empty()) {
        out += "<|im_start|>system\n" + (n > 0 && msgs[0].role == "system" ? msgs[0].content : default_system) +
               "\n\n" + hermes_tools_block(tools) + "<|im_end|>\n";
    }
    for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = msgs[i];
        const bool tool_role = hermes && m.role == "tool";
        if (m.role != "system" && m.role != "user" && m.role != "assistant" && !tool_role) {
            throw JllmError(strfmt("chat template chatml: message %zu has role '%s'; expected "
                                   "system, user or assistant%s", i, m.role.c_str(), hermes ? " or tool" : ""));
        }
        if (!m.tool_calls.empty() && !hermes) {
            throw JllmError(strfmt("chat template chatml: message %zu carries tool calls, which "
                                   "this model's template cannot express", i));
        }
        if (i == 0 && m.role == "system" && !tools.empty()) continue;  // in the tools block above
        // The default system prompt comes in only before a first message that is not system.
        if (i == 0 && m.role != "system" && !default_system.empty() && tools.empty()) {
            out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
        }
        if (tool_role) {
            if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
            out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
            if (i + 1 == n || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
        } else if (!m.tool_calls.empty()) {
            out += "<|im_start|>assistant";
            if (!m.content.empty()) out += "\n" + m.content;
            for (const ChatToolCall& tc : m.tool_calls) {
                check_arguments(tc);
                // The template writes `arguments | tojson`: the arguments object as json.dumps does.
                out += "\n<tool_call>\n{\"name\": \"" + tc.name + "\", \"arguments\": " +
                       python_json_dumps(tc.arguments) + "}\n</tool_call>";
            }
            out += "<|im_end|>\n";
        } else {
            out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
        }
    }
    if (opt.add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

// ---------------------------------------------------------------------------------------------
// Qwen3: ChatML plus the tools system block, <think> handling and Hermes-style tool calls.

std::string render_qwen3(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opt) {
    if (msgs.empty()) throw JllmError("chat template qwen3: the conversation has no messages");
    const std::vector<OrderedJson> tools = parse_tools(opt.tools_json);
    const size_t n = msgs.size();
    for (size_t i = 0; i < n; ++i) {
        const std::string& r = msgs[i].role;
        if (r != "system" && r != "user" && r != "assistant" && r != "tool") bad_role("qwen3", i, r);
        for (const ChatToolCall& tc : msgs[i].tool_calls) check_arguments(tc);
    }

    std::string out;
    if (!tools.empty()) {
        out += "<|im_start|>system\n";
        if (msgs[0].role == "system") out += msgs[0].content + "\n\n";
        out += hermes_tools_block(tools) + "<|im_end|>\n";
    } else if (msgs[0].role == "system") {
        out += "<|im_start|>system\n" + msgs[0].content + "<|im_end|>\n";
    }

    // The last real user query: later assistant turns keep their reasoning. User messages that
    // are wrapped tool responses do not count.
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        const ChatMessage& m = msgs[k];
        if (m.role == "user" && !(starts_with(m.content, "<tool_response>") &&
                                  ends_with(m.content, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }

    for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = msgs[i];
        const bool last = i + 1 == n;
        if (m.role == "user" || (m.role == "system" && i != 0)) {
            out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
        } else if (m.role == "assistant") {
            std::string content = m.content;
            std::string reasoning;
            if (!m.reasoning_content.empty()) {
                reasoning = m.reasoning_content;
            } else if (contains(m.content, "</think>")) {
                // content.split('</think>')[-1] / [0], then the text after the last <think>.
                const size_t last_close = m.content.rfind("</think>");
                content = lstrip_nl(std::string_view(m.content).substr(last_close + 8));
                const std::string before = rstrip_nl(m.content.substr(0, m.content.find("</think>")));
                const size_t open = before.rfind("<think>");
                reasoning = lstrip_nl(open == std::string::npos ? std::string_view(before)
                                                                : std::string_view(before).substr(open + 7));
            }
            if (i > last_query && (last || !reasoning.empty())) {
                out += "<|im_start|>assistant\n<think>\n" + strip_nl(reasoning) + "\n</think>\n\n" +
                       lstrip_nl(content);
            } else {
                out += "<|im_start|>assistant\n" + content;
            }
            for (size_t k = 0; k < m.tool_calls.size(); ++k) {
                const ChatToolCall& tc = m.tool_calls[k];
                if (k > 0 || !content.empty()) out += "\n";
                out += "<tool_call>\n{\"name\": \"" + tc.name + "\", \"arguments\": " + tc.arguments +
                       "}\n</tool_call>";
            }
            out += "<|im_end|>\n";
        } else if (m.role == "tool") {
            // Consecutive tool responses share one user turn.
            if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
            out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
            if (last || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
        }
        // A leading system message was printed above.
    }
    if (opt.add_generation_prompt) {
        out += "<|im_start|>assistant\n";
        if (!opt.enable_thinking) out += "<think>\n\n</think>\n\n";
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Llama 3.x. Plain conversations follow the Llama 3 template (bos, header, trimmed content,
// <|eot_id|>). Tools, tool calls and tool results follow Meta's Llama 3.1 format: a system header
// with "Environment: ipython" and the dates, the tool definitions in the first user message,
// calls as {"name": ..., "parameters": ...} and results in `ipython` turns.

std::string today_date_string() {
    const std::time_t now = std::time(nullptr);
    std::tm tm_local{};
    localtime_r(&now, &tm_local);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%d %b %Y", &tm_local);
    return buf;
}

std::string llama3_header(const std::string& role) {
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n";
}

std::string render_llama3(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opt,
                          std::string_view gguf_template) {
    const std::vector<OrderedJson> tools = parse_tools(opt.tools_json);
    bool tool_turns = false;
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role == "tool" || m.role == "ipython" || !m.tool_calls.empty()) tool_turns = true;
        if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool" &&
            m.role != "ipython") {
            bad_role("llama3", i, m.role);
        }
    }
    const bool v31 = !tools.empty() || tool_turns || contains(gguf_template, "Cutting Knowledge Date");

    std::string out = opt.bos_token;
    if (!v31) {
        for (const ChatMessage& m : msgs) {
            out += llama3_header(m.role) + python_strip(m.content) + "<|eot_id|>";
        }
        // The first Llama 3 template appends the assistant header unconditionally (it never
        // reads add_generation_prompt); follow the model's own template byte for byte.
        const bool always_header = !gguf_template.empty() && !contains(gguf_template, "add_generation_prompt");
        if (opt.add_generation_prompt || always_header) out += llama3_header("assistant");
        return out;
    }

    size_t first = 0;
    std::string system_message;
    if (!msgs.empty() && msgs[0].role == "system") {
        system_message = python_strip(msgs[0].content);
        first = 1;
    }
    out += llama3_header("system");
    if (!tools.empty()) out += "Environment: ipython\n";
    out += "Cutting Knowledge Date: December 2023\n";
    out += "Today Date: " + (opt.date_string.empty() ? today_date_string() : opt.date_string) + "\n\n";
    out += system_message + "<|eot_id|>";

    if (!tools.empty()) {
        // Custom tool definitions travel in the first user message.
        if (first >= msgs.size() || msgs[first].role != "user") {
            throw JllmError("chat template llama3: with tools the first message after the system "
                            "message must be a user message (the tool definitions go there)");
        }
        out += llama3_header("user");
        out += "Given the following functions, please respond with a JSON for a function call "
               "with its proper arguments that best answers the given prompt.\n\n"
               "Respond in the format {\"name\": function name, \"parameters\": dictionary of "
               "argument name and its value}.Do not use variables.\n\n";
        for (const OrderedJson& t : tools) out += python_json_dumps_value(t, 4) + "\n\n";
        out += python_strip(msgs[first].content) + "<|eot_id|>";
        ++first;
    }

    for (size_t i = first; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (!m.tool_calls.empty()) {
            if (m.tool_calls.size() != 1) {
                throw JllmError(strfmt("chat template llama3: message %zu has %zu tool calls; "
                                       "Llama 3.1 takes one tool call per assistant turn",
                                       i, m.tool_calls.size()));
            }
            const ChatToolCall& tc = m.tool_calls[0];
            check_arguments(tc);
            const std::string params =
                tc.arguments.empty()
                    ? "{}"
                    : python_json_dumps_value(parse_ordered_json(tc.arguments, "tool-call arguments"));
            out += llama3_header("assistant") + "{\"name\": \"" + tc.name +
                   "\", \"parameters\": " + params + "}<|eot_id|>";
        } else if (m.role == "tool" || m.role == "ipython") {
            out += llama3_header("ipython") + m.content + "<|eot_id|>";
        } else {
            out += llama3_header(m.role) + python_strip(m.content) + "<|eot_id|>";
        }
    }
    if (opt.add_generation_prompt) out += llama3_header("assistant");
    return out;
}

// Reads a Jinja string literal's body from `pos` up to `<|im_end|>`; fails at a quote.
bool read_literal_until_im_end(std::string_view t, size_t pos, std::string& text) {
    text.clear();
    const std::string_view end_tag = "<|im_end|>";
    while (pos < t.size()) {
        if (t.substr(pos, end_tag.size()) == end_tag) return !text.empty();
        const char c = t[pos];
        if (c == '\'' || c == '"' || c == '{' || c == '}') return false;
        if (c == '\\' && pos + 1 < t.size()) {
            const char e = t[pos + 1];
            switch (e) {
                case 'n': text += '\n'; break;
                case 't': text += '\t'; break;
                case '\\': text += '\\'; break;
                case '\'': text += '\''; break;
                case '"': text += '"'; break;
                default: text += '\\'; text += e;
            }
            pos += 2;
            continue;
        }
        text += c;
        ++pos;
    }
    return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

const char* chat_template_kind_name(ChatTemplateKind kind) {
    switch (kind) {
        case ChatTemplateKind::ChatML: return "chatml";
        case ChatTemplateKind::Qwen3: return "qwen3";
        case ChatTemplateKind::Llama3: return "llama3";
    }
    return "?";
}

ChatTemplateKind detect_chat_template(std::string_view gguf_template, std::string_view arch) {
    // The template text is the better witness: SmolLM2 is a `llama` model speaking ChatML.
    if (contains(gguf_template, "<|start_header_id|>")) return ChatTemplateKind::Llama3;
    if (contains(gguf_template, "<|im_start|>")) {
        if (contains(gguf_template, "<think>") || contains(gguf_template, "enable_thinking")) {
            return ChatTemplateKind::Qwen3;
        }
        return ChatTemplateKind::ChatML;
    }
    if (arch == "qwen3") return ChatTemplateKind::Qwen3;
    if (arch == "llama") return ChatTemplateKind::Llama3;
    return ChatTemplateKind::ChatML;  // qwen2 and anything unknown
}

ChatTemplateKind parse_chat_template_name(std::string_view name, std::string_view gguf_template,
                                          std::string_view arch) {
    if (name.empty() || name == "auto") return detect_chat_template(gguf_template, arch);
    if (name == "chatml") return ChatTemplateKind::ChatML;
    if (name == "qwen3") return ChatTemplateKind::Qwen3;
    if (name == "llama3") return ChatTemplateKind::Llama3;
    throw JllmError(strfmt("unknown chat template '%.*s'; expected auto, chatml, qwen3 or llama3",
                           static_cast<int>(name.size()), name.data()));
}

std::string chatml_default_system_prompt(std::string_view t) {
    // Looks for a literal '<|im_start|>system\n<TEXT><|im_end|>' (newline written either raw or
    // as the escape \n), i.e. a system turn whose text is fixed by the template itself.
    const std::string_view head = "<|im_start|>system";
    for (size_t pos = t.find(head); pos != std::string_view::npos; pos = t.find(head, pos + 1)) {
        size_t p = pos + head.size();
        if (p < t.size() && t[p] == '\n') {
            p += 1;
        } else if (t.substr(p, 2) == "\\n") {
            p += 2;
        } else {
            continue;
        }
        std::string text;
        if (read_literal_until_im_end(t, p, text)) return text;
    }
    return {};
}

std::string render_chat(ChatTemplateKind kind, const std::vector<ChatMessage>& msgs,
                        const ChatRenderOptions& opt, std::string_view gguf_template) {
    if (opt.continue_final_message) {
        // Rendered closed, then cut after the message's text: what the template puts around an
        // assistant turn's start (Qwen3's empty think block) stays, its end-of-turn goes.
        if (msgs.empty() || msgs.back().role != "assistant") {
            throw JllmError("continue_final_message: the last message is not the assistant's");
        }
        if (!msgs.back().tool_calls.empty()) {
            throw JllmError("continue_final_message: a final assistant message with tool_calls cannot be continued");
        }
        ChatRenderOptions o = opt;
        o.continue_final_message = false;
        const std::string& start = msgs.back().content;
        if (start.empty()) {
            o.add_generation_prompt = true;
            return render_chat(kind, std::vector<ChatMessage>(msgs.begin(), msgs.end() - 1), o, gguf_template);
        }
        o.add_generation_prompt = false;
        const std::string s = render_chat(kind, msgs, o, gguf_template);
        const size_t at = s.rfind(start);
        if (at == std::string::npos) {
            throw JllmError("continue_final_message: the chat template does not show the final assistant message as given");
        }
        return s.substr(0, at + start.size());
    }
    switch (kind) {
        case ChatTemplateKind::ChatML: return render_chatml(msgs, opt, gguf_template);
        case ChatTemplateKind::Qwen3: return render_qwen3(msgs, opt);
        case ChatTemplateKind::Llama3: return render_llama3(msgs, opt, gguf_template);
    }
    throw JllmError("render_chat: unknown template kind");
}

std::vector<ChatMessage> chat_messages_from_json(std::string_view messages_json) {
    const OrderedJson j = parse_ordered_json(messages_json, "messages");
    if (!j.is_array()) {
        throw JllmError(strfmt("messages must be a JSON array, got %s", j.type_name()));
    }
    const auto opt_string = [](const OrderedJson& obj, const char* key, size_t i) -> std::string {
        const auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) return {};
        if (!it->is_string()) {
            throw JllmError(strfmt("messages[%zu].%s must be a string, got %s", i, key, it->type_name()));
        }
        return it->get<std::string>();
    };

    // A call's arguments: a JSON string verbatim, an object as the templates' tojson writes it.
    const auto arguments_of = [](const OrderedJson& fn) -> std::string {
        const auto args = fn.find("arguments");
        if (args == fn.end() || args->is_null()) return "{}";
        return args->is_string() ? args->get<std::string>() : python_json_dumps_value(*args);
    };

    std::vector<ChatMessage> out;
    for (size_t i = 0; i < j.size(); ++i) {
        const OrderedJson& m = j[i];
        if (!m.is_object()) throw JllmError(strfmt("messages[%zu] must be an object", i));
        ChatMessage msg;
        msg.role = opt_string(m, "role", i);
        if (msg.role.empty()) throw JllmError(strfmt("messages[%zu] has no role", i));

        const auto content = m.find("content");
        if (content != m.end() && content->is_array()) {
            for (const auto& part : *content) {
                if (!part.is_object() || part.value("type", "") != "text" ||
                    !part.contains("text") || !part["text"].is_string()) {
                    throw JllmError(strfmt("messages[%zu].content: only text parts are supported", i));
                }
                msg.content += part["text"].get<std::string>();
            }
        } else {
            msg.content = opt_string(m, "content", i);
        }
        msg.reasoning_content = opt_string(m, "reasoning_content", i);
        msg.tool_call_id = opt_string(m, "tool_call_id", i);
        msg.name = opt_string(m, "name", i);

        const auto calls = m.find("tool_calls");
        if (calls != m.end() && !calls->is_null()) {
            if (!calls->is_array()) throw JllmError(strfmt("messages[%zu].tool_calls must be an array", i));
            for (size_t k = 0; k < calls->size(); ++k) {
                const OrderedJson& c = (*calls)[k];
                if (!c.is_object()) {
                    throw JllmError(strfmt("messages[%zu].tool_calls[%zu] must be an object", i, k));
                }
                // OpenAI nests name/arguments under "function"; a flat call is accepted too.
                const auto fn_it = c.find("function");
                const OrderedJson& fn = (fn_it != c.end() && fn_it->is_object()) ? *fn_it : c;
                ChatToolCall tc;
                if (c.contains("id") && c["id"].is_string()) tc.id = c["id"].get<std::string>();
                if (!fn.contains("name") || !fn["name"].is_string()) {
                    throw JllmError(strfmt("messages[%zu].tool_calls[%zu] has no function name", i, k));
                }
                tc.name = fn["name"].get<std::string>();
                tc.arguments = arguments_of(fn);
                msg.tool_calls.push_back(std::move(tc));
            }
        }
        // The legacy single call of an assistant turn and the `function` role of its result.
        const auto legacy = m.find("function_call");
        if (msg.tool_calls.empty() && legacy != m.end() && !legacy->is_null()) {
            if (!legacy->is_object() || !legacy->contains("name") || !(*legacy)["name"].is_string()) {
                throw JllmError(strfmt("messages[%zu].function_call must be an object with a name", i));
            }
            ChatToolCall tc;
            tc.name = (*legacy)["name"].get<std::string>();
            tc.arguments = arguments_of(*legacy);
            msg.tool_calls.push_back(std::move(tc));
        }
        if (msg.role == "function") msg.role = "tool";
        out.push_back(std::move(msg));
    }
    return out;
}

}  // namespace jllm
