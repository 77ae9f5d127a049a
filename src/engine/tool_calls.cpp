// engine/tool_calls.cpp — see tool_calls.h.
#include "engine/tool_calls.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/error.h"
#include "grammar/json_schema.h"

namespace jllm {

namespace {

using Json = nlohmann::ordered_json;

// A format's calls: tagged ones (open NAME mid ARGS close, several joined by sep) anywhere in the
// answer, and a bare one that is the whole answer (bare NAME mid ARGS "}"), also fenced as a JSON
// code block (FENCE_OPEN bare FENCE_CLOSE).
struct Format {
    const char* open;  // a tagged call up to the name ("": none)
    const char* mid;   // between the name and the arguments
    const char* close;
    const char* sep;   // between tagged calls
    const char* bare;  // a bare call up to the name ("": none)
    const char* trigger;  // what starts a tagged call: from there on the grammar holds the rest
};

// Qwen2.5 and Qwen3 are trained on the tagged form; the small ones often answer a bare call, or
// one in a code block.
constexpr const char* FENCE_OPEN = "```json\n";
constexpr const char* FENCE_CLOSE = "\n```";
constexpr const char* FENCE_TRIGGER = "```json";
const Format HERMES = {"<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "\n", "{\"name\": \"",
                        "<tool_call>"};
const Format LLAMA31 = {"", "\", \"parameters\": ", "", "", "{\"name\": \"", ""};

const Format& format_of(ToolFormat f) { return f == ToolFormat::Llama31 ? LLAMA31 : HERMES; }

bool valid_name(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

}  // namespace

ToolFormat tool_format(ChatTemplateKind kind, std::string_view gguf_template) {
    if (kind == ChatTemplateKind::Qwen3) return ToolFormat::Hermes;
    if (kind == ChatTemplateKind::Llama3) return ToolFormat::Llama31;
    const bool hermes = gguf_template.find("<tool_call>") != std::string_view::npos &&
                        gguf_template.find("<tools>") != std::string_view::npos;
    return hermes ? ToolFormat::Hermes : ToolFormat::None;
}

std::vector<ToolFunction> parse_tool_functions(const std::string& tools_json) {
    Json tools;
    try {
        tools = Json::parse(tools_json);
    } catch (const nlohmann::json::exception& e) {
        throw JllmError(std::string("tools: not valid JSON: ") + e.what());
    }
    if (!tools.is_array()) throw JllmError("tools: must be an array");
    std::vector<ToolFunction> out;
    for (size_t i = 0; i < tools.size(); ++i) {
        const Json& t = tools[i];
        const std::string at = "tools[" + std::to_string(i) + "]";
        if (!t.is_object()) throw JllmError(at + ": must be an object");
        if (!t.contains("type") || t["type"] != "function") throw JllmError(at + ".type: must be \"function\"");
        if (!t.contains("function") || !t["function"].is_object()) throw JllmError(at + ".function: must be an object");
        const Json& f = t["function"];
        if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>())) {
            throw JllmError(at + ".function.name: must match [A-Za-z0-9_-]{1,64}");
        }
        ToolFunction fn;
        fn.name = f["name"].get<std::string>();
        for (const ToolFunction& o : out) {
            if (o.name == fn.name) throw JllmError(at + ".function.name: '" + fn.name + "' is defined twice");
        }
        if (f.contains("parameters") && !f["parameters"].is_null()) {
            if (!f["parameters"].is_object()) throw JllmError(at + ".function.parameters: must be a JSON Schema object");
            fn.parameters = f["parameters"].dump();
        } else {
            fn.parameters = R"({"type": "object", "properties": {}, "additionalProperties": false})";
        }
        out.push_back(std::move(fn));
    }
    return out;
}

OutputConstraint tool_constraint(ToolFormat f, const ToolRequest& t) {
    if (f == ToolFormat::None) throw JllmError("tools: this model's chat template has no tool-call format");
    const Format& fm = format_of(f);
    std::vector<ToolFunction> fns = parse_tool_functions(t.tools_json);
    if (fns.empty()) throw JllmError("tools: no function to call");
    if (t.choice == ToolChoice::Named) {
        auto it = std::find_if(fns.begin(), fns.end(), [&](const ToolFunction& x) { return x.name == t.name; });
        if (it == fns.end()) throw JllmError("tool_choice: no function named '" + t.name + "' in tools");
        fns = {*it};
    }
    std::string rules;
    std::string alts;
    for (size_t i = 0; i < fns.size(); ++i) {
        const std::string rule = "args" + std::to_string(i);
        try {
            rules += json_schema_rules(fns[i].parameters, rule);
        } catch (const SchemaError& e) {
            throw SchemaError(std::string("tools: the parameters of '") + fns[i].name + "': " + e.what());
        }
        alts += std::string(i ? " | " : "") + gbnf_literal(fns[i].name + fm.mid) + " " + rule;
    }
    // Required / Named: the tagged form where the format has one; Auto: either form, from the
    // tagged opening anywhere or the bare or fenced one at the answer's start.
    const bool tagged = fm.open[0] != '\0';
    const bool bare = fm.bare[0] != '\0' && (!tagged || t.choice == ToolChoice::Auto);
    const bool many = t.parallel && t.choice != ToolChoice::Named;
    std::string root;
    std::string g;
    if (tagged) {
        root = "tagged";
        g += "tagged ::= call" + (many ? " ( " + gbnf_literal(fm.sep) + " call )*" : std::string()) + "\n";
        g += "call ::= " + gbnf_literal(fm.open) + " ( " + alts + " ) " + gbnf_literal(fm.close) + "\n";
    }
    if (bare) {
        root += std::string(root.empty() ? "" : " | ") + "bare";
        g += "bare ::= " + gbnf_literal(fm.bare) + " ( " + alts + " ) \"}\"\n";
        if (t.choice == ToolChoice::Auto) {
            root += " | fenced";
            g += "fenced ::= " + gbnf_literal(FENCE_OPEN) + " bare " + gbnf_literal(FENCE_CLOSE) + "\n";
        }
    }
    OutputConstraint c;
    c.kind = OutputConstraint::Kind::Grammar;
    c.text = "root ::= " + root + "\n" + g + rules + json_primitives_gbnf();
    if (t.choice == ToolChoice::Auto) {
        if (tagged) c.triggers = {fm.trigger};
        if (bare) c.start_triggers = {fm.bare, FENCE_TRIGGER};
    }
    return c;
}

ToolCallStream::ToolCallStream(ToolFormat f) : rng_(std::random_device{}()) {
    const Format& fm = format_of(f);
    open_ = fm.open;
    mid_ = fm.mid;
    close_ = fm.close;
    sep_ = fm.sep;
    bare_open_ = fm.bare;
}

void ToolCallStream::emit_args(std::string_view s, std::vector<Part>& out) {
    if (s.empty()) return;
    calls_.back().arguments.append(s);
    out.push_back(Part{Channel::ToolCall, std::string(s), static_cast<int>(calls_.size()) - 1, false});
}

void ToolCallStream::push(std::string_view text, std::vector<Part>& out) {
    buf_.append(text);
    for (;;) {
        if (state_ == State::Text) {
            if (at_start_ && !bare_open_.empty()) {  // a bare or fenced call must open the answer
                const size_t ws = buf_.find_first_not_of(" \t\r\n");
                if (ws == std::string::npos) return;
                const std::string_view rest = std::string_view(buf_).substr(ws);
                const std::string fenced = FENCE_OPEN + bare_open_;
                bool could = false, opened = false;
                for (const std::string* o : {static_cast<const std::string*>(&bare_open_), &fenced}) {
                    if (rest.substr(0, o->size()) == *o) {
                        end_tail_ = o == &fenced ? std::string("}") + FENCE_CLOSE : std::string("}");
                        buf_.erase(0, ws + o->size());
                        opened = true;
                        break;
                    }
                    could = could || std::string_view(*o).substr(0, rest.size()) == rest;
                }
                if (opened) {
                    state_ = State::Name;
                    continue;
                }
                if (could) return;
                at_start_ = false;
            }
            const size_t at = open_.empty() ? std::string::npos : buf_.find(open_);
            if (at == std::string::npos) {
                // Hold back the longest tail that could start the opening.
                size_t keep = std::min(buf_.size(), open_.empty() ? 0 : open_.size() - 1);
                while (keep > 0 && buf_.compare(buf_.size() - keep, keep, open_, 0, keep) != 0) --keep;
                if (buf_.size() > keep) out.push_back(Part{Channel::Content, buf_.substr(0, buf_.size() - keep)});
                buf_.erase(0, buf_.size() - keep);
                return;
            }
            if (at > 0) out.push_back(Part{Channel::Content, buf_.substr(0, at)});
            buf_.erase(0, at + open_.size());
            state_ = State::Name;
        } else if (state_ == State::Name) {
            const size_t q = buf_.find('"');
            if (q == std::string::npos || buf_.size() < q + mid_.size()) return;
            if (buf_.compare(q, mid_.size(), mid_) != 0) throw JllmError("tool call: a malformed call in the output");
            ToolCall c;
            c.name = buf_.substr(0, q);
            static const char* const HEX = "0123456789abcdef";
            c.id = "call_";
            for (int k = 0; k < 24; ++k) c.id += HEX[rng_() & 15];
            calls_.push_back(std::move(c));
            complete_.push_back(false);
            out.push_back(Part{Channel::ToolCall, std::string(), static_cast<int>(calls_.size()) - 1, true});
            buf_.erase(0, q + mid_.size());
            state_ = State::Args;
        } else if (state_ == State::Args) {
            if (!end_tail_.empty()) {  // the answer's end closes the call: hold back that much
                const size_t keep = std::min(buf_.size(), end_tail_.size());
                emit_args(std::string_view(buf_).substr(0, buf_.size() - keep), out);
                buf_.erase(0, buf_.size() - keep);
                return;
            }
            const size_t at = buf_.find(close_);
            if (at == std::string::npos) {
                const size_t keep = std::min(buf_.size(), close_.size() - 1);
                emit_args(std::string_view(buf_).substr(0, buf_.size() - keep), out);
                buf_.erase(0, buf_.size() - keep);
                return;
            }
            emit_args(std::string_view(buf_).substr(0, at), out);
            complete_.back() = true;
            buf_.erase(0, at + close_.size());
            state_ = State::After;
        } else {  // After a tagged call: the separator and the next call, or nothing
            const std::string next = sep_ + open_;
            if (buf_.size() >= next.size()) {
                if (buf_.compare(0, next.size(), next) != 0) throw JllmError("tool call: text after the calls");
                buf_.erase(0, next.size());
                state_ = State::Name;
            } else {
                if (next.compare(0, buf_.size(), buf_) != 0) throw JllmError("tool call: text after the calls");
                return;
            }
        }
    }
}

void ToolCallStream::flush(std::vector<Part>& out) {
    if (state_ == State::Text && !buf_.empty()) out.push_back(Part{Channel::Content, buf_});
    if (state_ == State::Args && !end_tail_.empty() && buf_ == end_tail_) complete_.back() = true;
    buf_.clear();
}

std::vector<ToolCall> ToolCallStream::calls() const {
    std::vector<ToolCall> out;
    for (size_t i = 0; i < calls_.size(); ++i) {
        if (complete_[i]) out.push_back(calls_[i]);
    }
    return out;
}

}  // namespace jllm
