// server/request_parse.cpp — field-by-field validation of OpenAI request bodies. Ranges follow the
// OpenAI reference where it gives one (temperature 0..2, top_p 0..1, penalties -2..2,
// top_logprobs 0..20, logit_bias -100..100); llama.cpp's extra fields get sane bounds.
#include "server/request_parse.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "engine/tool_calls.h"

namespace jllm::server {

namespace {

using Err = std::optional<ApiError>;

const char* type_name(const Json& v) { return v.type_name(); }

// Absent or null: leave `out` alone.
Err get_number(const Json& body, const char* key, double lo, double hi, float& out) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) {
        return invalid_request(strfmt("'%s' must be a number, got %s", key, type_name(*it)), key);
    }
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
        return invalid_request(strfmt("'%s' must be between %g and %g, got %g", key, lo, hi, v), key);
    }
    out = static_cast<float>(v);
    return std::nullopt;
}

// Integers; a float with an integral value (10.0) is accepted too.
Err get_int64(const Json& v, const std::string& name, int64_t lo, int64_t hi, int64_t& out) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(hi)) {
            return invalid_request(strfmt("'%s' must be between %lld and %lld", name.c_str(),
                                          static_cast<long long>(lo), static_cast<long long>(hi)), name);
        }
        out = static_cast<int64_t>(u);
        return std::nullopt;
    }
    if (v.is_number_integer()) {
        out = v.get<int64_t>();
    } else if (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
               std::fabs(v.get<double>()) < 9.0e18) {
        out = static_cast<int64_t>(v.get<double>());
    } else {
        return invalid_request(strfmt("'%s' must be an integer, got %s", name.c_str(), type_name(v)), name);
    }
    if (out < lo || out > hi) {
        return invalid_request(strfmt("'%s' must be between %lld and %lld, got %lld", name.c_str(),
                                      static_cast<long long>(lo), static_cast<long long>(hi),
                                      static_cast<long long>(out)), name);
    }
    return std::nullopt;
}

Err get_int(const Json& body, const char* key, int64_t lo, int64_t hi, int& out) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return std::nullopt;
    int64_t v = 0;
    if (Err e = get_int64(*it, key, lo, hi, v)) return e;
    out = static_cast<int>(v);
    return std::nullopt;
}

Err get_bool(const Json& body, const char* key, bool& out) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) return invalid_request(strfmt("'%s' must be a boolean, got %s", key, type_name(*it)), key);
    out = it->get<bool>();
    return std::nullopt;
}

Err check_session_id(const Json& v, const char* name, std::string& out) {
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) return invalid_request(strfmt("'%s' must be a string, got %s", name, type_name(v)), name);
    const std::string id = v.get<std::string>();
    if (!valid_session_id(id)) {
        return invalid_request(strfmt("'%s' must match [A-Za-z0-9_-]{1,64}", name), name);
    }
    out = id;
    return std::nullopt;
}

// The output constraint: response_format (text, json_object — with llama-server's `schema` —,
// json_schema), or llama-server's `grammar` (GBNF) or `json_schema`; at most one; compiled here so a
// bad one is a 400 (invalid_grammar / invalid_json_schema) before the request queues.
Err parse_constraint(const Json& body, OutputConstraint& c) {
    const char* from = nullptr;  // the field that set it
    auto set = [&](const char* field, OutputConstraint::Kind kind, std::string text) -> Err {
        if (from != nullptr) {
            return invalid_request(strfmt("'%s' and '%s' both constrain the output; give one", from, field), field);
        }
        from = field;
        c.kind = kind;
        c.text = std::move(text);
        return std::nullopt;
    };
    auto schema_text = [](const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    if (const auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) return invalid_request(strfmt("'grammar' must be a string, got %s", type_name(*it)), "grammar");
        if (!it->get<std::string>().empty()) {
            if (Err e = set("grammar", OutputConstraint::Kind::Grammar, it->get<std::string>())) return e;
        }
    }
    if (const auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
        if (!it->is_object() && !it->is_string() && !it->is_boolean()) {
            return invalid_request(strfmt("'json_schema' must be a schema object, got %s", type_name(*it)), "json_schema");
        }
        if (!(it->is_string() && it->get<std::string>().empty())) {
            if (Err e = set("json_schema", OutputConstraint::Kind::JsonSchema, schema_text(*it))) return e;
        }
    }
    if (const auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) {
            return invalid_request(strfmt("'response_format' must be an object, got %s", type_name(*it)), "response_format");
        }
        const auto t = it->find("type");
        if (t == it->end() || !t->is_string()) return invalid_request("'response_format.type' must be a string", "response_format");
        const std::string type = t->get<std::string>();
        if (type == "json_object") {
            const auto sc = it->find("schema");  // llama-server's form
            Err e = sc != it->end() && !sc->is_null()
                        ? set("response_format", OutputConstraint::Kind::JsonSchema, schema_text(*sc))
                        : set("response_format", OutputConstraint::Kind::JsonObject, "");
            if (e) return e;
        } else if (type == "json_schema") {
            const auto js = it->find("json_schema");
            if (js == it->end() || !js->is_object()) {
                return invalid_request("'response_format.json_schema' must be an object with a 'schema'", "response_format");
            }
            const auto sc = js->find("schema");
            if (sc == js->end() || sc->is_null()) {
                return invalid_request("'response_format.json_schema.schema' is missing", "response_format");
            }
            if (Err e = set("response_format", OutputConstraint::Kind::JsonSchema, schema_text(*sc))) return e;
        } else if (type != "text") {
            return invalid_request("'response_format.type' must be text, json_object or json_schema, got '" + type + "'",
                                   "response_format");
        }
    }
    if (from != nullptr) {
        const Status st = check_output_constraint(c);
        if (!st.ok) {
            const bool grammar = c.kind == OutputConstraint::Kind::Grammar;
            return invalid_request(st.message, from, grammar ? "invalid_grammar" : "invalid_json_schema");
        }
    }
    return std::nullopt;
}

// `tool_choice` (or the legacy `function_call`, `legacy`): auto, none, required (not legacy) or a
// named function — {"type": "function", "function": {"name": ...}}, legacy {"name": ...}.
Err parse_tool_choice(const Json& v, const char* field, bool legacy, ToolRequest& t) {
    if (v.is_string()) {
        const std::string c = v.get<std::string>();
        if (c == "auto") {
            t.choice = ToolChoice::Auto;
        } else if (c == "none") {
            t.choice = ToolChoice::None;
        } else if (c == "required" && !legacy) {
            t.choice = ToolChoice::Required;
        } else {
            return invalid_request(strfmt("'%s' must be %s or a named function, got '%s'", field,
                                          legacy ? "auto, none" : "auto, none, required", c.c_str()), field);
        }
        return std::nullopt;
    }
    const Json* fn = nullptr;
    if (v.is_object() && legacy) {
        fn = &v;
    } else if (v.is_object() && v.value("type", Json()) == "function" && v.contains("function") && v["function"].is_object()) {
        fn = &v["function"];
    }
    if (fn == nullptr || !fn->contains("name") || !(*fn)["name"].is_string()) {
        return invalid_request(strfmt("'%s' must be %s, got %s", field,
                                      legacy ? "auto, none or {\"name\": ...}"
                                             : "auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                                      v.dump().c_str()), field);
    }
    t.choice = ToolChoice::Named;
    t.name = (*fn)["name"].get<std::string>();
    return std::nullopt;
}

// The functions a chat request offers: `tools` with `tool_choice` and `parallel_tool_calls`, or
// the legacy `functions` with `function_call` (one call, answered in the legacy shape). Each
// definition is checked here; whether this model can enforce them, by the handler
// (Engine::check_tools).
Err parse_tools(const Json& body, ParsedRequest& out) {
    ToolRequest& t = out.gen.tools;
    Json tools = Json::array();
    const auto fresh = body.find("tools");
    const auto legacy = body.find("functions");
    const bool has_fresh = fresh != body.end() && !fresh->is_null();
    const bool has_legacy = legacy != body.end() && !legacy->is_null();
    if (has_fresh && has_legacy) return invalid_request("give 'tools' or the legacy 'functions', not both", "functions");
    if (has_fresh) {
        if (!fresh->is_array()) return invalid_request(strfmt("'tools' must be an array, got %s", type_name(*fresh)), "tools");
        tools = *fresh;
    } else if (has_legacy) {
        if (!legacy->is_array()) {
            return invalid_request(strfmt("'functions' must be an array, got %s", type_name(*legacy)), "functions");
        }
        for (const Json& f : *legacy) tools.push_back(Json{{"type", "function"}, {"function", f}});
        out.legacy_functions = true;
        t.parallel = false;
    }
    const char* tools_field = out.legacy_functions ? "functions" : "tools";
    const auto choice = body.find("tool_choice");
    const auto legacy_choice = body.find("function_call");
    const bool has_choice = choice != body.end() && !choice->is_null();
    const bool has_legacy_choice = legacy_choice != body.end() && !legacy_choice->is_null();
    if (has_choice && has_legacy_choice) {
        return invalid_request("give 'tool_choice' or the legacy 'function_call', not both", "function_call");
    }
    if (has_choice) {
        if (Err e = parse_tool_choice(*choice, "tool_choice", false, t)) return e;
    } else if (has_legacy_choice) {
        if (Err e = parse_tool_choice(*legacy_choice, "function_call", true, t)) return e;
    }
    if (const auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            return invalid_request(strfmt("'parallel_tool_calls' must be a boolean, got %s", type_name(*it)),
                                   "parallel_tool_calls");
        }
        t.parallel = it->get<bool>();
    }
    if (tools.empty()) {
        if (t.choice == ToolChoice::Required || t.choice == ToolChoice::Named) {
            return invalid_request(strfmt("'%s' asks for a call but no '%s' are given", has_choice ? "tool_choice" : "function_call",
                                          tools_field), has_choice ? "tool_choice" : "function_call");
        }
        t = ToolRequest{};
        return std::nullopt;
    }
    t.tools_json = tools.dump();
    try {
        const std::vector<ToolFunction> fns = parse_tool_functions(t.tools_json);
        if (t.choice == ToolChoice::Named &&
            std::none_of(fns.begin(), fns.end(), [&](const ToolFunction& f) { return f.name == t.name; })) {
            const char* f = has_choice ? "tool_choice" : "function_call";
            return invalid_request(strfmt("'%s' names '%s', which is not in '%s'", f, t.name.c_str(), tools_field), f);
        }
    } catch (const std::exception& e) {
        std::string why = e.what();
        if (out.legacy_functions && why.rfind("tools", 0) == 0) why = "functions" + why.substr(5);
        return invalid_request(why, tools_field, "invalid_tools");
    }
    if (t.choice != ToolChoice::None && out.gen.constraint.kind != OutputConstraint::Kind::None) {
        return invalid_request(strfmt("'%s' and 'response_format' / 'grammar' / 'json_schema' both constrain the "
                                      "output; give one", tools_field), tools_field);
    }
    return std::nullopt;
}

// Fields shared by both endpoints: sampling, stop, n, stream, session ids, refused features.
Err parse_common(const Json& body, const RequestDefaults& d, int64_t n_vocab, ParsedRequest& out) {
    if (!body.is_object()) return invalid_request(strfmt("the request body must be a JSON object, got %s", type_name(body)));
    SamplingParams& s = out.gen.sampling;
    s = d.sampling;
    out.gen.max_tokens = d.max_tokens;

    if (Err e = parse_constraint(body, out.gen.constraint)) return e;

    if (Err e = get_number(body, "temperature", 0.0, 2.0, s.temperature)) return e;
    if (Err e = get_number(body, "top_p", 0.0, 1.0, s.top_p)) return e;
    if (Err e = get_int(body, "top_k", 0, 1 << 24, s.top_k)) return e;
    if (Err e = get_number(body, "min_p", 0.0, 1.0, s.min_p)) return e;
    if (Err e = get_number(body, "presence_penalty", -2.0, 2.0, s.presence_penalty)) return e;
    if (Err e = get_number(body, "frequency_penalty", -2.0, 2.0, s.frequency_penalty)) return e;
    if (Err e = get_number(body, "repeat_penalty", 0.0, 10.0, s.repeat_penalty)) return e;
    if (s.repeat_penalty <= 0.0f) return invalid_request("'repeat_penalty' must be greater than 0", "repeat_penalty");
    if (Err e = get_int(body, "repeat_last_n", -1, 1 << 20, s.repeat_last_n)) return e;

    if (const auto it = body.find("seed"); it != body.end() && !it->is_null()) {
        int64_t seed = 0;
        if (it->is_number_unsigned()) {
            s.seed = it->get<uint64_t>();
        } else {
            if (Err e = get_int64(*it, "seed", std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max(), seed)) {
                return e;
            }
            s.seed = static_cast<uint64_t>(seed);  // -1 -> all ones -> random
        }
    }

    if (const auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) {
            return invalid_request(strfmt("'logit_bias' must be an object, got %s", type_name(*it)), "logit_bias");
        }
        if (it->size() > 1024) return invalid_request("'logit_bias' has more than 1024 entries", "logit_bias");
        s.logit_bias.clear();
        for (auto kv = it->begin(); kv != it->end(); ++kv) {
            const std::string& key = kv.key();
            char* end = nullptr;
            const long long id = key.empty() ? -1 : std::strtoll(key.c_str(), &end, 10);
            if (key.empty() || *end != '\0' || id < 0 || id >= n_vocab) {
                return invalid_request("'logit_bias' key '" + key + "' is not a token id of this model", "logit_bias");
            }
            if (!kv.value().is_number()) return invalid_request("'logit_bias' values must be numbers", "logit_bias");
            const double b = kv.value().get<double>();
            if (!std::isfinite(b) || b < -100.0 || b > 100.0) {
                return invalid_request("'logit_bias' values must be between -100 and 100", "logit_bias");
            }
            s.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
        }
    }

    if (const auto it = body.find("stop"); it != body.end() && !it->is_null()) {
        out.gen.stop.clear();
        if (it->is_string()) {
            if (!it->get<std::string>().empty()) out.gen.stop.push_back(it->get<std::string>());
        } else if (it->is_array()) {
            if (it->size() > 16) return invalid_request("'stop' has more than 16 strings", "stop");
            for (const Json& v : *it) {
                if (!v.is_string()) return invalid_request("'stop' must be a string or an array of strings", "stop");
                if (v.get<std::string>().size() > 1024) return invalid_request("a 'stop' string is longer than 1024 bytes", "stop");
                if (!v.get<std::string>().empty()) out.gen.stop.push_back(v.get<std::string>());
            }
        } else {
            return invalid_request(strfmt("'stop' must be a string or an array of strings, got %s", type_name(*it)), "stop");
        }
    }

    int n = 1;
    if (Err e = get_int(body, "n", 1, 128, n)) return e;
    if (n != 1) return invalid_request("only 'n': 1 is supported (one generation at a time)", "n");

    if (Err e = get_bool(body, "stream", out.stream)) return e;
    if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) {
            return invalid_request(strfmt("'stream_options' must be an object, got %s", type_name(*it)), "stream_options");
        }
        if (Err e = get_bool(*it, "include_usage", out.include_usage)) {
            e->param = "stream_options.include_usage";
            return e;
        }
    }

    if (const auto it = body.find("conversation_id"); it != body.end()) {
        if (Err e = check_session_id(*it, "conversation_id", out.session_id)) return e;
    }
    if (const auto it = body.find("nvext"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) return invalid_request(strfmt("'nvext' must be an object, got %s", type_name(*it)), "nvext");
        if (const auto h = it->find("agent_hints"); h != it->end() && !h->is_null()) {
            if (!h->is_object()) return invalid_request("'nvext.agent_hints' must be an object", "nvext.agent_hints");
            if (const auto sid = h->find("session_id"); sid != h->end()) {
                if (Err e = check_session_id(*sid, "nvext.agent_hints.session_id", out.session_id)) return e;
            }
        }
    }
    out.gen.session_id = out.session_id;
    return std::nullopt;
}

Err parse_max_tokens(const Json& body, ParsedRequest& out) {
    const int64_t hi = std::numeric_limits<int32_t>::max();
    if (Err e = get_int(body, "max_tokens", -1, hi, out.gen.max_tokens)) return e;
    // The newer name wins when both are given.
    if (Err e = get_int(body, "max_completion_tokens", -1, hi, out.gen.max_tokens)) return e;
    return std::nullopt;
}

}  // namespace

bool valid_session_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    for (const char c : id) {
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

Err parse_chat_request(const Json& body, const RequestDefaults& d, int64_t n_vocab, ParsedRequest& out) {
    out = ParsedRequest{};
    out.chat = true;
    if (Err e = parse_common(body, d, n_vocab, out)) return e;
    if (Err e = parse_max_tokens(body, out)) return e;

    const auto msgs = body.find("messages");
    if (msgs == body.end() || msgs->is_null()) return invalid_request("'messages' is required", "messages");
    if (!msgs->is_array()) return invalid_request(strfmt("'messages' must be an array, got %s", type_name(*msgs)), "messages");
    if (msgs->empty()) return invalid_request("'messages' must hold at least one message", "messages");
    for (size_t i = 0; i < msgs->size(); ++i) {
        const Json& m = (*msgs)[i];
        if (!m.is_object()) return invalid_request(strfmt("messages[%zu] must be an object, got %s", i, type_name(m)), "messages");
        const auto role = m.find("role");
        if (role == m.end() || !role->is_string()) {
            return invalid_request(strfmt("messages[%zu].role must be a string", i), "messages");
        }
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer" && r != "function") {
            return invalid_request(strfmt("messages[%zu].role '%s' is not one of system, developer, user, assistant, "
                                          "tool, function", i, r.c_str()), "messages");
        }
        const auto content = m.find("content");
        if (content != m.end() && !content->is_null() && !content->is_string() && !content->is_array()) {
            return invalid_request(strfmt("messages[%zu].content must be a string or an array of text parts, got %s", i,
                                          type_name(*content)), "messages");
        }
    }
    try {
        out.messages = chat_messages_from_json(dump_json(*msgs));
    } catch (const std::exception& e) {
        return invalid_request(e.what(), "messages");
    }
    for (ChatMessage& m : out.messages) {
        if (m.role == "developer") m.role = "system";  // OpenAI's newer name for the system role
    }
    if (Err e = parse_tools(body, out)) return e;
    // Assistant prefill: a final assistant message (without calls) is the start of the answer.
    if (out.messages.back().role == "assistant" && out.messages.back().tool_calls.empty() &&
        !out.messages.back().content.empty()) {
        out.continue_final = true;
        out.gen.assistant_prefix = out.messages.back().content;
    }

    if (Err e = get_bool(body, "think", out.enable_thinking)) return e;
    if (const auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) {
            return invalid_request(strfmt("'chat_template_kwargs' must be an object, got %s", type_name(*it)),
                                   "chat_template_kwargs");
        }
        if (Err e = get_bool(*it, "enable_thinking", out.enable_thinking)) {
            e->param = "chat_template_kwargs.enable_thinking";
            return e;
        }
    }

    if (Err e = get_bool(body, "logprobs", out.logprobs)) return e;
    if (const auto it = body.find("top_logprobs"); it != body.end() && !it->is_null()) {
        if (Err e = get_int(body, "top_logprobs", 0, 20, out.top_logprobs)) return e;
        if (!out.logprobs) return invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
    out.gen.n_logprobs = out.logprobs ? out.top_logprobs : -1;
    out.gen.split_thinking = true;
    return std::nullopt;
}

Err parse_completion_request(const Json& body, const RequestDefaults& d, int64_t n_vocab, ParsedRequest& out) {
    out = ParsedRequest{};
    out.chat = false;
    if (Err e = parse_common(body, d, n_vocab, out)) return e;
    if (Err e = parse_max_tokens(body, out)) return e;
    for (const char* chat_only : {"tools", "functions", "tool_choice", "function_call"}) {
        if (const auto it = body.find(chat_only); it != body.end() && !it->is_null()) {
            return invalid_request(strfmt("'%s' is a field of /v1/chat/completions", chat_only), chat_only);
        }
    }

    const auto p = body.find("prompt");
    if (p == body.end() || p->is_null()) return invalid_request("'prompt' is required", "prompt");
    const Json* prompt = &*p;
    // A one-element batch is the same as its element.
    if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
        prompt = &(*prompt)[0];
    }
    if (prompt->is_string()) {
        out.prompt_text = prompt->get<std::string>();
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
        out.prompt_is_tokens = true;
        for (const Json& v : *prompt) {
            int64_t id = 0;
            if (Err e = get_int64(v, "prompt", 0, n_vocab - 1, id)) {
                e->message = "'prompt' token ids must be integers in [0, " + std::to_string(n_vocab) + ")";
                return e;
            }
            out.prompt_tokens.push_back(static_cast<int32_t>(id));
        }
    } else if (prompt->is_array() && prompt->size() > 1) {
        return invalid_request("'prompt' batches are not supported (send one prompt per request)", "prompt");
    } else {
        return invalid_request(strfmt("'prompt' must be a string or an array of token ids, got %s", type_name(*prompt)),
                               "prompt");
    }

    if (const auto it = body.find("suffix"); it != body.end() && !it->is_null() &&
                                             !(it->is_string() && it->get<std::string>().empty())) {
        return unsupported_feature("suffix");
    }
    bool echo = false;
    if (Err e = get_bool(body, "echo", echo)) return e;
    if (echo) return unsupported_feature("echo");
    int best_of = 1;
    if (Err e = get_int(body, "best_of", 1, 128, best_of)) return e;
    if (best_of != 1) return invalid_request("only 'best_of': 1 is supported", "best_of");

    if (const auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
        if (it->is_boolean()) {  // tolerated: true means the chosen token's logprob only
            out.logprobs = it->get<bool>();
        } else {
            if (Err e = get_int(body, "logprobs", 0, 5, out.top_logprobs)) return e;
            out.logprobs = true;
        }
    }
    out.gen.n_logprobs = out.logprobs ? out.top_logprobs : -1;
    out.gen.split_thinking = false;  // raw text completion: the text is returned as generated
    return std::nullopt;
}

}  // namespace jllm::server
