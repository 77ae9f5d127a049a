// server/ollama_api.cpp — Ollama's request fields mapped onto the OpenAI parser's, and Ollama's
// answer objects. Field names and shapes follow Ollama's API documentation; where Ollama takes
// an option this engine cannot honour per request, it is refused by name.
#include "server/ollama_api.h"

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <regex>

#include "core/error.h"

namespace jllm::server {

namespace {

using Err = std::optional<ApiError>;

const char* type_name(const Json& v) { return v.type_name(); }

bool has(const Json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && !it->is_null();
}

// The sampling options that map one to one onto the OpenAI parser's fields.
const char* const SAMPLING_OPTIONS[] = {"temperature",      "top_k",           "top_p",          "min_p",
                                        "seed",             "presence_penalty", "frequency_penalty",
                                        "repeat_penalty",   "repeat_last_n",   "stop"};

// Options fixed when the server starts (flags), so a request cannot change them.
const char* const LOAD_OPTIONS[] = {"numa",       "num_batch", "num_gpu",     "main_gpu",  "low_vram",
                                    "f16_kv",     "logits_all", "vocab_only", "use_mmap",  "use_mlock",
                                    "embedding_only", "num_thread", "num_keep"};

// Options with no sampler here, accepted at the value that turns them off.
struct NeutralOption {
    const char* name;
    double off;
};
const NeutralOption NEUTRAL_OPTIONS[] = {{"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}};

// Ollama's `options` onto the OpenAI body `o`; num_predict and num_ctx checked here.
Err map_options(const Json& body, int64_t n_ctx, Json& o, OllamaRequest& out) {
    const auto it = body.find("options");
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_object()) return invalid_request(strfmt("'options' must be an object, got %s", type_name(*it)), "options");
    for (auto kv = it->begin(); kv != it->end(); ++kv) {
        const std::string& k = kv.key();
        const Json& v = kv.value();
        if (v.is_null()) continue;
        bool done = false;
        for (const char* s : SAMPLING_OPTIONS) {
            if (k == s) {
                o[k] = v;
                done = true;
            }
        }
        if (done) continue;
        if (k == "num_predict") {
            if (!v.is_number_integer() || v.get<int64_t>() < -2 || v.get<int64_t>() > INT32_MAX) {
                return invalid_request("'options.num_predict' must be an integer >= -2 (-1: no limit, -2: fill the "
                                       "context)", "options.num_predict");
            }
            o["max_tokens"] = v.get<int64_t>() < 0 ? -1 : v.get<int64_t>();
            continue;
        }
        if (k == "num_ctx") {
            if (!v.is_number_integer() || v.get<int64_t>() < 1) {
                return invalid_request("'options.num_ctx' must be a positive integer", "options.num_ctx");
            }
            out.num_ctx = v.get<int64_t>();
            if (out.num_ctx > n_ctx) {
                return invalid_request(strfmt("'options.num_ctx' is %lld tokens but this server's context holds %lld "
                                              "(its -c); ask for at most that, or restart the server with a larger -c",
                                              static_cast<long long>(out.num_ctx), static_cast<long long>(n_ctx)),
                                       "options.num_ctx", "context_length_exceeded");
            }
            continue;
        }
        for (const char* s : LOAD_OPTIONS) {
            if (k == s) {
                return invalid_request(strfmt("'options.%s' is fixed when the server starts (its flags); a request "
                                              "cannot change it", s), "options." + k, "unsupported_option");
            }
        }
        for (const NeutralOption& n : NEUTRAL_OPTIONS) {
            if (k == n.name) {
                if (!v.is_number() || v.get<double>() != n.off) {
                    return invalid_request(strfmt("'options.%s' is not supported (only %g, which turns it off)", n.name, n.off),
                                           "options." + k, "unsupported_option");
                }
                done = true;
            }
        }
        if (done) continue;
        return invalid_request("'options." + k + "' is not an option this server knows", "options." + k, "unsupported_option");
    }
    return std::nullopt;
}

// `format`: "json", a JSON Schema object, or nothing.
Err map_format(const Json& body, Json& o) {
    const auto it = body.find("format");
    if (it == body.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty())) return std::nullopt;
    if (it->is_string() && it->get<std::string>() == "json") {
        o["response_format"] = Json{{"type", "json_object"}};
    } else if (it->is_object()) {
        o["response_format"] = Json{{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *it}}}};
    } else {
        return invalid_request("'format' must be \"json\" or a JSON Schema object", "format");
    }
    return std::nullopt;
}

// `keep_alive`: a duration ("5m", "1h30m", "-1", "0") or seconds. The model stays loaded for
// the service's life whatever it says (docs/home-assistant.md); a malformed one is refused.
Err check_keep_alive(const Json& body) {
    const auto it = body.find("keep_alive");
    if (it == body.end() || it->is_null() || it->is_number()) return std::nullopt;
    static const std::regex duration(R"(^-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^-?[0-9]+$)");
    if (!it->is_string() || !std::regex_match(it->get<std::string>(), duration)) {
        return invalid_request("'keep_alive' must be a duration such as \"5m\" or a number of seconds", "keep_alive");
    }
    return std::nullopt;
}

// `think`: true or false (reasoning levels belong to models that have them).
Err map_think(const Json& body, Json& o) {
    const auto it = body.find("think");
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) {
        return invalid_request(strfmt("'think' must be true or false, got %s", it->dump().c_str()), "think");
    }
    o["think"] = *it;
    return std::nullopt;
}

Err refuse_images(const Json& j, const std::string& where) {
    if (const auto it = j.find("images"); it != j.end() && !it->is_null() && !(it->is_array() && it->empty())) {
        return invalid_request(where + ".images: this model reads text only", "images", "unsupported_input");
    }
    return std::nullopt;
}

// What chat and generate share: model, stream (default true), format, options, think, keep_alive.
Err map_common(const Json& body, int64_t n_ctx, Json& o, OllamaRequest& out) {
    if (!body.is_object()) return invalid_request(strfmt("the request body must be a JSON object, got %s", type_name(body)));
    const auto m = body.find("model");
    if (m == body.end() || !m->is_string() || m->get<std::string>().empty()) {
        return invalid_request("'model' is required", "model");
    }
    out.model = m->get<std::string>();
    o["stream"] = true;
    if (has(body, "stream")) {
        if (!body["stream"].is_boolean()) return invalid_request("'stream' must be a boolean", "stream");
        o["stream"] = body["stream"];
    }
    for (const char* k : {"logprobs", "top_logprobs"}) {
        if (has(body, k)) o[k] = body[k];
    }
    if (Err e = map_format(body, o)) return e;
    if (Err e = map_options(body, n_ctx, o, out)) return e;
    if (Err e = map_think(body, o)) return e;
    return check_keep_alive(body);
}

std::string human_count(uint64_t n) {
    if (n >= 1000000000ull) return strfmt("%.1fB", n / 1e9);
    if (n >= 1000000ull) return strfmt("%.2fM", n / 1e6);
    if (n >= 1000ull) return strfmt("%.2fK", n / 1e3);
    return std::to_string(n);
}

std::string hex64(uint64_t v) { return strfmt("%016" PRIx64, v); }

}  // namespace

std::string ollama_model_name(const std::string& alias) {
    return alias.find(':') == std::string::npos ? alias + ":latest" : alias;
}

bool ollama_names_model(const std::string& requested, const std::string& alias) {
    return requested == alias || requested == ollama_model_name(alias);
}

int64_t unix_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string ollama_time(int64_t unix_ns) {
    const std::time_t s = static_cast<std::time_t>(unix_ns / 1000000000);
    std::tm tm{};
    gmtime_r(&s, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(unix_ns % 1000000000));
    return buf;
}

Err parse_ollama_chat(const Json& body, const RequestDefaults& d, int64_t n_vocab, int64_t n_ctx, OllamaRequest& out) {
    out = OllamaRequest{};
    out.chat = true;
    Json o = Json::object();
    if (Err e = map_common(body, n_ctx, o, out)) return e;
    const auto msgs = body.find("messages");
    if (msgs == body.end() || msgs->is_null() || (msgs->is_array() && msgs->empty())) {
        out.load_only = true;
        return std::nullopt;
    }
    if (!msgs->is_array()) return invalid_request(strfmt("'messages' must be an array, got %s", type_name(*msgs)), "messages");
    Json om = Json::array();
    for (size_t i = 0; i < msgs->size(); ++i) {
        const Json& m = (*msgs)[i];
        if (!m.is_object()) return invalid_request(strfmt("messages[%zu] must be an object", i), "messages");
        if (Err e = refuse_images(m, strfmt("messages[%zu]", i))) return e;
        Json x = Json::object();
        for (auto kv = m.begin(); kv != m.end(); ++kv) {
            const std::string& k = kv.key();
            if (k == "role" || k == "content" || k == "tool_calls") {
                x[k] = kv.value();
            } else if (k == "thinking") {
                x["reasoning_content"] = kv.value();  // an earlier turn's reasoning
            } else if (k == "tool_name") {
                x["name"] = kv.value();  // the function a tool result answers
            }
        }
        if (x.contains("content") && !x["content"].is_null() && !x["content"].is_string()) {
            return invalid_request(strfmt("messages[%zu].content must be a string", i), "messages");
        }
        om.push_back(std::move(x));
    }
    o["messages"] = std::move(om);
    if (has(body, "tools")) o["tools"] = body["tools"];
    if (Err e = parse_chat_request(o, d, n_vocab, out.pr)) return e;
    return std::nullopt;
}

Err parse_ollama_generate(const Json& body, const RequestDefaults& d, int64_t n_vocab, int64_t n_ctx,
                          OllamaRequest& out) {
    out = OllamaRequest{};
    out.chat = false;
    Json o = Json::object();
    if (Err e = map_common(body, n_ctx, o, out)) return e;
    if (Err e = refuse_images(body, "the request")) return e;
    auto text_field = [&](const char* k, std::string& dst) -> Err {
        if (!has(body, k)) return std::nullopt;
        if (!body[k].is_string()) return invalid_request(strfmt("'%s' must be a string", k), k);
        dst = body[k].get<std::string>();
        return std::nullopt;
    };
    std::string prompt, system, suffix, tmpl;
    if (Err e = text_field("prompt", prompt)) return e;
    if (Err e = text_field("system", system)) return e;
    if (Err e = text_field("suffix", suffix)) return e;
    if (Err e = text_field("template", tmpl)) return e;
    if (!suffix.empty()) return invalid_request("'suffix' (fill-in-the-middle) is not supported", "suffix", "unsupported_feature");
    if (!tmpl.empty()) {
        return invalid_request("'template' overrides are not supported: prompts are rendered with the model's own chat "
                               "template (or send 'raw': true with the prompt already formatted)", "template",
                               "unsupported_feature");
    }
    bool raw = false;
    if (has(body, "raw")) {
        if (!body["raw"].is_boolean()) return invalid_request("'raw' must be a boolean", "raw");
        raw = body["raw"].get<bool>();
    }
    if (has(body, "context")) {
        const Json& c = body["context"];
        if (!c.is_array()) return invalid_request("'context' must be an array of token ids", "context");
        for (const Json& v : c) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n_vocab) {
                return invalid_request(strfmt("'context' must hold token ids of this model, in [0, %lld)",
                                              static_cast<long long>(n_vocab)), "context");
            }
            out.context.push_back(static_cast<int32_t>(v.get<int64_t>()));
        }
    }
    if (prompt.empty() && system.empty()) {
        out.load_only = true;
        return std::nullopt;
    }
    if (raw) {
        if (!system.empty()) return invalid_request("'system' has no place in a raw prompt; put it in 'prompt'", "system");
        o["prompt"] = prompt;
        if (Err e = parse_completion_request(o, d, n_vocab, out.pr)) return e;
        out.pr.prompt_special = true;  // a raw prompt carries the template's own tokens
        out.pr.gen.split_thinking = true;
    } else {
        Json msgs = Json::array();
        if (!system.empty()) msgs.push_back(Json{{"role", "system"}, {"content", system}});
        msgs.push_back(Json{{"role", "user"}, {"content", prompt}});
        o["messages"] = std::move(msgs);
        if (Err e = parse_chat_request(o, d, n_vocab, out.pr)) return e;
    }
    if (!out.context.empty()) out.pr.add_bos = false;  // the context already starts the sequence
    return std::nullopt;
}

Json ollama_error(const std::string& message) { return Json{{"error", message}}; }

Json ollama_details(const ModelInfo& info) {
    return Json{{"parent_model", ""},
                {"format", "gguf"},
                {"family", info.arch},
                {"families", Json::array({info.arch})},
                {"parameter_size", human_count(info.n_params)},
                {"quantization_level", info.file_type.empty() ? "unknown" : info.file_type}};
}

Json ollama_tags(const OllamaModel& m) {
    const std::string name = ollama_model_name(m.alias);
    Json e = {{"name", name},
              {"model", name},
              {"modified_at", ollama_time(m.modified_unix * 1000000000)},
              {"size", m.info.file_bytes},
              {"digest", hex64(m.info.fingerprint)},
              {"details", ollama_details(m.info)}};
    return Json{{"models", Json::array({e})}};
}

Json ollama_ps(const OllamaModel& m) {
    const std::string name = ollama_model_name(m.alias);
    Json e = {{"name", name},
              {"model", name},
              {"size", m.info.weight_bytes + m.info.kv_bytes},
              {"digest", hex64(m.info.fingerprint)},
              {"details", ollama_details(m.info)},
              // Resident for the service's life: no keep_alive unloads it.
              {"expires_at", "9999-12-31T23:59:59Z"},
              {"size_vram", m.device_bytes},
              {"context_length", m.info.n_ctx}};
    return Json{{"models", Json::array({e})}};
}

Json ollama_show(const OllamaModel& m) {
    const ModelInfo& i = m.info;
    const SamplingParams& s = m.defaults.sampling;
    std::string params = strfmt("temperature %g\ntop_k %d\ntop_p %g\nmin_p %g\nrepeat_penalty %g\nrepeat_last_n %d\n"
                                "num_ctx %lld\n",
                                s.temperature, s.top_k, s.top_p, s.min_p, s.repeat_penalty, s.repeat_last_n,
                                static_cast<long long>(i.n_ctx));
    if (m.defaults.max_tokens >= 0) params += strfmt("num_predict %d\n", m.defaults.max_tokens);
    const std::string a = i.arch;
    Json info = {{"general.architecture", a},
                 {"general.name", i.name},
                 {"general.parameter_count", i.n_params},
                 {a + ".context_length", i.n_ctx_train},
                 {a + ".embedding_length", i.n_embd},
                 {a + ".block_count", i.n_layer},
                 {a + ".feed_forward_length", i.n_ff},
                 {a + ".attention.head_count", i.n_head},
                 {a + ".attention.head_count_kv", i.n_head_kv},
                 {a + ".attention.key_length", i.head_dim},
                 {a + ".vocab_size", i.n_vocab}};
    Json caps = Json::array({"completion"});
    if (i.tools) caps.push_back("tools");
    if (i.thinking) caps.push_back("thinking");
    return Json{{"license", ""},
                {"modelfile", "# Served by jetson-llm-server: the model is chosen when the service starts.\nFROM " +
                                  i.path + "\n"},
                {"parameters", params},
                {"template", i.chat_template_text},
                {"details", ollama_details(i)},
                {"model_info", info},
                {"capabilities", caps},
                {"modified_at", ollama_time(m.modified_unix * 1000000000)}};
}

const char* ollama_done_reason(FinishReason f) { return f == FinishReason::Length ? "length" : "stop"; }

OllamaShape::OllamaShape(bool chat, std::string model, int64_t start_ns)
    : chat_(chat), model_(std::move(model)), start_ns_(start_ns) {}

Json OllamaShape::head() const { return Json{{"model", model_}, {"created_at", ollama_time(unix_now_ns())}}; }

Json OllamaShape::message(const std::string& content) const {
    return Json{{"role", "assistant"}, {"content", content}};
}

std::optional<Json> OllamaShape::piece_chunk(const Piece& p, const Json& logprobs) const {
    if (p.channel == Channel::ToolCall) return std::nullopt;
    const bool thinking = p.channel == Channel::Reasoning;
    Json j = head();
    if (chat_) {
        Json msg = message(thinking ? "" : p.text);
        if (thinking) msg["thinking"] = p.text;
        j["message"] = std::move(msg);
    } else {
        j["response"] = thinking ? "" : p.text;
        if (thinking) j["thinking"] = p.text;
    }
    j["done"] = false;
    if (!logprobs.is_null()) j["logprobs"] = logprobs;
    return j;
}

namespace {

Json calls_json(const std::vector<ToolCall>& calls) {
    Json a = Json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        // The arguments were generated under their schema's grammar: an object, always.
        a.push_back(Json{{"id", calls[i].id},
                         {"function", {{"index", i}, {"name", calls[i].name}, {"arguments", Json::parse(calls[i].arguments)}}}});
    }
    return a;
}

}  // namespace

Json OllamaShape::calls_chunk(const std::vector<ToolCall>& calls) const {
    Json j = head();
    Json msg = message("");
    msg["tool_calls"] = calls_json(calls);
    j["message"] = std::move(msg);
    j["done"] = false;
    return j;
}

void OllamaShape::add_stats(Json& j, const GenerateResult& r, int64_t queue_ns) const {
    const GenerateStats& s = r.stats;
    j["done_reason"] = ollama_done_reason(r.finish);
    j["total_duration"] = unix_now_ns() - start_ns_;
    j["load_duration"] = queue_ns;
    j["prompt_eval_count"] = s.prompt_tokens;
    j["prompt_eval_duration"] = static_cast<int64_t>(std::llround(s.prefill_ms * 1e6));
    j["eval_count"] = s.completion_tokens;
    j["eval_duration"] = static_cast<int64_t>(std::llround(s.decode_ms * 1e6));
}

Json OllamaShape::done_line() const {
    Json j = head();
    if (chat_) {
        j["message"] = message("");
    } else {
        j["response"] = "";
    }
    j["done"] = true;
    return j;
}

Json OllamaShape::final_chunk(const GenerateResult& r, int64_t queue_ns, const std::vector<int32_t>* context) const {
    Json j = done_line();
    add_stats(j, r, queue_ns);
    if (context != nullptr) j["context"] = *context;
    return j;
}

Json OllamaShape::response(const GenerateResult& r, int64_t queue_ns, const std::vector<int32_t>* context,
                           const Json& logprobs) const {
    Json j = head();
    if (chat_) {
        Json msg = message(r.text);
        if (!r.reasoning.empty()) msg["thinking"] = r.reasoning;
        if (!r.tool_calls.empty()) msg["tool_calls"] = calls_json(r.tool_calls);
        j["message"] = std::move(msg);
    } else {
        j["response"] = r.text;
        if (!r.reasoning.empty()) j["thinking"] = r.reasoning;
    }
    j["done"] = true;
    add_stats(j, r, queue_ns);
    if (context != nullptr) j["context"] = *context;
    if (!logprobs.is_null()) j["logprobs"] = logprobs;
    return j;
}

Json OllamaShape::load_response() const {
    Json j = done_line();
    j["done_reason"] = "load";
    return j;
}

}  // namespace jllm::server
