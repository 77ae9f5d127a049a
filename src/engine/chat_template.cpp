// engine/chat_template.cpp — the built-in chat template renderers and their helpers.
// Each renderer mirrors one Jinja template statement by statement, so the comments name the
// template behaviour being reproduced (docs/chat_templates.md has the overview). JSON that the
// templates print through `tojson` is re-serialised here the way Python's json.dumps does it.
#include "engine/chat_template.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace jllm {

using OrderedJson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Python-compatible JSON serialisation (json.dumps with ensure_ascii=False, sort_keys=False).

namespace {

// Python's float repr: the shortest digit string that round-trips, printed in fixed notation
// when the decimal exponent is in [-4, 16), else as d.ddde+XX (at least two exponent digits).
std::string python_float_repr(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";

    char buf[40];
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    // buf = [-]d[.ddd]e(+|-)XX
    std::string s(buf);
    bool neg = false;
    if (s[0] == '-') {
        neg = true;
        s.erase(0, 1);
    }
    const size_t epos = s.find('e');
    const int exp10 = std::atoi(s.c_str() + epos + 1);
    std::string digits;
    for (size_t i = 0; i < epos; ++i) {
        if (s[i] != '.') digits += s[i];
    }
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

    std::string out = neg ? "-" : "";
    const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
        } else if (static_cast<size_t>(decpt) >= digits.size()) {
            out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
                   digits.substr(static_cast<size_t>(decpt));
        }
    } else {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char ebuf[16];
        std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
        out += ebuf;
    }
    return out;
}

// Escapes only what json.dumps(ensure_ascii=False) escapes: '"', '\\' and C0 controls.
void python_json_string(const std::string& s, std::string& out) {
    out += '"';
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char esc[8];
                    std::snprintf(esc, sizeof(esc), "\\u%04x", c);
                    out += esc;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

void python_json_value(const OrderedJson& j, int indent, int level, std::string& out) {
    const auto newline = [&](int lvl) {
        out += '\n';
        out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
    };
    const char* item_sep = indent >= 0 ? "," : ", ";
    switch (j.type()) {
        case OrderedJson::value_t::null: out += "null"; break;
        case OrderedJson::value_t::boolean: out += j.get<bool>() ? "true" : "false"; break;
        case OrderedJson::value_t::number_integer: out += std::to_string(j.get<int64_t>()); break;
        case OrderedJson::value_t::number_unsigned: out += std::to_string(j.get<uint64_t>()); break;
        case OrderedJson::value_t::number_float: out += python_float_repr(j.get<double>()); break;
        case OrderedJson::value_t::string: python_json_string(j.get_ref<const std::string&>(), out); break;
        case OrderedJson::value_t::array: {
            if (j.empty()) {
                out += "[]";
                break;
            }
            out += '[';
            bool first = true;
            for (const auto& el : j) {
                if (!first) out += item_sep;
                first = false;
                if (indent >= 0) newline(level + 1);
                python_json_value(el, indent, level + 1, out);
            }
            if (indent >= 0) newline(level);
            out += ']';
            break;
        }
        case OrderedJson::value_t::object: {
            if (j.empty()) {
                out += "{}";
                break;
            }
            out += '{';
            bool first = true;
            for (auto it = j.begin(); it != j.end(); ++it) {
                if (!first) out += item_sep;
                first = false;
                if (indent >= 0) newline(level + 1);
                python_json_string(it.key(), out);
                out += ": ";
                python_json_value(it.value(), indent, level + 1, out);
            }
            if (indent >= 0) newline(level);
            out += '}';
            break;
        }
        default:
            throw JllmError("chat template: JSON value of an unsupported type (binary)");
    }
}

std::string dumps(const OrderedJson& j, int indent = -1) {
    std::string out;
    python_json_value(j, indent, 0, out);
    return out;
}

OrderedJson parse_json(std::string_view text, const char* what) {
    try {
        return OrderedJson::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        throw JllmError(strfmt("chat template: %s is not valid JSON (%s)", what, e.what()));
    }
}

// ---------------------------------------------------------------------------------------------
// String helpers with the semantics of the Python methods the templates call.

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

std::string lstrip_nl(std::string_view s) {
    size_t b = 0;
    while (b < s.size() && s[b] == '\n') ++b;
    return std::string(s.substr(b));
}
std::string rstrip_nl(std::string_view s) {
    size_t e = s.size();
    while (e > 0 && s[e - 1] == '\n') --e;
    return std::string(s.substr(0, e));
}
std::string strip_nl(std::string_view s) { return lstrip_nl(rstrip_nl(s)); }

// Python's str.isspace() code points (Jinja's `trim` is str.strip()).
bool is_python_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// Decodes the UTF-8 sequence at s[i..]; returns its length, 0 when malformed.
size_t utf8_decode(std::string_view s, size_t i, uint32_t& cp) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    } else if ((b0 & 0xe0) == 0xc0) {
        len = 2;
        cp = b0 & 0x1f;
    } else if ((b0 & 0xf0) == 0xe0) {
        len = 3;
        cp = b0 & 0x0f;
    } else if ((b0 & 0xf8) == 0xf0) {
        len = 4;
        cp = b0 & 0x07;
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3f);
    }
    return len;
}

std::string python_strip(std::string_view s) {
    size_t b = 0;
    while (b < s.size()) {
        uint32_t cp = 0;
        const size_t len = utf8_decode(s, b, cp);
        if (len == 0 || !is_python_space(cp)) break;
        b += len;
    }
    size_t e = s.size();
    while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
        uint32_t cp = 0;
        const size_t len = utf8_decode(s, start, cp);
        if (len != e - start || !is_python_space(cp)) break;
        e = start;
    }
    return std::string(s.substr(b, e - b));
}

// Tool definitions as the templates print them: one json.dumps per array element.
std::vector<OrderedJson> parse_tools(const std::string& tools_json) {
    std::vector<OrderedJson> tools;
    if (tools_json.empty()) return tools;
    const OrderedJson j = parse_json(tools_json, "tools");
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
// ChatML (SmolLM2, Qwen2.5 without tools): <|im_start|>ROLE\nCONTENT<|im_end|>\n per message.

std::string render_chatml(const std::vector<ChatMessage>& msgs, const ChatRenderOptions& opt,
                          std::string_view gguf_template) {
    if (!parse_tools(opt.tools_json).empty()) {
        throw JllmError("chat template chatml: tools are not supported by this format "
                        "(use --chat-template qwen3 or llama3)");
    }
    const std::string default_system = chatml_default_system_prompt(gguf_template);
    std::string out;
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role != "system" && m.role != "user" && m.role != "assistant") {
            throw JllmError(strfmt("chat template chatml: message %zu has role '%s'; expected "
                                   "system, user or assistant", i, m.role.c_str()));
        }
        if (!m.tool_calls.empty()) {
            throw JllmError(strfmt("chat template chatml: message %zu carries tool calls, which "
                                   "this format cannot express", i));
        }
        // The default system prompt comes in only before a first message that is not system.
        if (i == 0 && m.role != "system" && !default_system.empty()) {
            out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
        }
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
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
        out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
        for (const OrderedJson& t : tools) out += "\n" + dumps(t);
        out += "\n</tools>\n\nFor each function call, return a json object with function name and "
               "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
               "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
               "<|im_end|>\n";
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
        for (const OrderedJson& t : tools) out += dumps(t, 4) + "\n\n";
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
                tc.arguments.empty() ? "{}" : dumps(parse_json(tc.arguments, "tool-call arguments"));
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
    switch (kind) {
        case ChatTemplateKind::ChatML: return render_chatml(msgs, opt, gguf_template);
        case ChatTemplateKind::Qwen3: return render_qwen3(msgs, opt);
        case ChatTemplateKind::Llama3: return render_llama3(msgs, opt, gguf_template);
    }
    throw JllmError("render_chat: unknown template kind");
}

std::vector<ChatMessage> chat_messages_from_json(std::string_view messages_json) {
    const OrderedJson j = parse_json(messages_json, "messages");
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
                const auto args = fn.find("arguments");
                if (args == fn.end() || args->is_null()) {
                    tc.arguments = "{}";
                } else if (args->is_string()) {
                    tc.arguments = args->get<std::string>();
                } else {
                    tc.arguments = dumps(*args);
                }
                msg.tool_calls.push_back(std::move(tc));
            }
        }
        out.push_back(std::move(msg));
    }
    return out;
}

std::string python_json_dumps(std::string_view json_text, int indent) {
    return dumps(parse_json(json_text, "input"), indent);
}

}  // namespace jllm
