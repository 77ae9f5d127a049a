// server/responses_api.cpp — the Responses API's request items mapped onto chat messages, and its
// output items and stream events (the sequence the official client parses: response.created,
// response.in_progress, per item output_item.added / content_part.added / deltas / done events,
// then response.completed or response.incomplete).
#include "server/responses_api.h"

#include <random>

#include "core/error.h"

namespace jllm::server {

namespace {

using Err = std::optional<ApiError>;

bool has(const Json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && !it->is_null();
}

Err unsupported(const std::string& what, const std::string& param) {
    return invalid_request(what + " is not supported by this server", param, "unsupported_feature");
}

// A message's content: a string, or text parts (input_text / output_text). Anything else is not
// text and is refused.
Err content_text(const Json& c, size_t i, std::string& out) {
    if (c.is_null()) return std::nullopt;
    if (c.is_string()) {
        out = c.get<std::string>();
        return std::nullopt;
    }
    if (!c.is_array()) return invalid_request(strfmt("input[%zu].content must be a string or an array of parts", i), "input");
    for (const Json& part : c) {
        const std::string type = part.is_object() ? part.value("type", "") : "";
        if ((type == "input_text" || type == "output_text" || type == "text") && part.contains("text") &&
            part["text"].is_string()) {
            out += part["text"].get<std::string>();
        } else if (type == "refusal" && part.contains("refusal") && part["refusal"].is_string()) {
            out += part["refusal"].get<std::string>();
        } else {
            return invalid_request(strfmt("input[%zu].content: this model reads text only (got a '%s' part)", i,
                                          type.c_str()), "input", "unsupported_input");
        }
    }
    return std::nullopt;
}

// The last assistant message of `msgs` that may take more calls, or a new one.
Json& assistant_for_calls(Json& msgs) {
    if (msgs.empty() || msgs.back().value("role", "") != "assistant") {
        msgs.push_back(Json{{"role", "assistant"}, {"content", nullptr}});
    }
    return msgs.back();
}

Err input_items(const Json& input, Json& msgs) {
    if (input.is_string()) {
        msgs.push_back(Json{{"role", "user"}, {"content", input}});
        return std::nullopt;
    }
    if (!input.is_array()) return invalid_request("'input' must be a string or an array of items", "input");
    std::string pending_reasoning;
    for (size_t i = 0; i < input.size(); ++i) {
        const Json& it = input[i];
        if (!it.is_object()) return invalid_request(strfmt("input[%zu] must be an object", i), "input");
        const std::string type = it.value("type", has(it, "role") ? "message" : "");
        if (type == "message") {
            const std::string role = it.contains("role") && it["role"].is_string() ? it["role"].get<std::string>() : "";
            if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
                return invalid_request(strfmt("input[%zu].role must be user, system, developer or assistant", i), "input");
            }
            std::string text;
            if (Err e = content_text(it.value("content", Json()), i, text)) return e;
            Json m = {{"role", role == "developer" ? "system" : role}, {"content", text}};
            if (role == "assistant" && !pending_reasoning.empty()) {
                m["reasoning_content"] = pending_reasoning;
                pending_reasoning.clear();
            }
            msgs.push_back(std::move(m));
        } else if (type == "function_call") {
            for (const char* k : {"call_id", "name", "arguments"}) {
                if (!it.contains(k) || !it[k].is_string()) {
                    return invalid_request(strfmt("input[%zu] (function_call) needs string '%s'", i, k), "input");
                }
            }
            Json& a = assistant_for_calls(msgs);
            if (!pending_reasoning.empty()) {
                a["reasoning_content"] = pending_reasoning;
                pending_reasoning.clear();
            }
            a["tool_calls"].push_back(Json{{"id", it["call_id"]}, {"type", "function"},
                                           {"function", {{"name", it["name"]}, {"arguments", it["arguments"]}}}});
        } else if (type == "function_call_output") {
            if (!it.contains("call_id") || !it["call_id"].is_string()) {
                return invalid_request(strfmt("input[%zu] (function_call_output) needs a string 'call_id'", i), "input");
            }
            std::string out;
            if (Err e = content_text(it.value("output", Json()), i, out)) return e;
            Json m = {{"role", "tool"}, {"tool_call_id", it["call_id"]}, {"content", out}};
            // The function's name, from the call it answers.
            for (const Json& prev : msgs) {
                for (const Json& c : prev.value("tool_calls", Json::array())) {
                    if (c.value("id", "") == it["call_id"].get<std::string>()) m["name"] = c["function"]["name"];
                }
            }
            msgs.push_back(std::move(m));
        } else if (type == "reasoning") {
            // An earlier answer's reasoning: it goes with the assistant turn that follows it.
            for (const char* k : {"content", "summary"}) {
                for (const Json& part : it.value(k, Json::array())) {
                    if (part.is_object() && part.contains("text") && part["text"].is_string() && pending_reasoning.empty()) {
                        pending_reasoning = part["text"].get<std::string>();
                    }
                }
            }
        } else {
            return unsupported(strfmt("input[%zu]: an item of type '%s'", i, type.c_str()), "input");
        }
    }
    return std::nullopt;
}

Err map_tools(const Json& body, Json& o) {
    if (has(body, "tools")) {
        if (!body["tools"].is_array()) return invalid_request("'tools' must be an array", "tools");
        Json tools = Json::array();
        for (const Json& t : body["tools"]) {
            const std::string type = t.is_object() ? t.value("type", "") : "";
            if (type != "function") return unsupported("a tool of type '" + type + "' (only 'function' tools)", "tools");
            Json fn = Json::object();
            for (const char* k : {"name", "description", "parameters"}) {
                if (has(t, k)) fn[k] = t[k];
            }
            tools.push_back(Json{{"type", "function"}, {"function", fn}});
        }
        if (!tools.empty()) o["tools"] = std::move(tools);
    }
    if (has(body, "tool_choice")) {
        const Json& c = body["tool_choice"];
        if (c.is_string()) {
            o["tool_choice"] = c;
        } else if (c.is_object() && c.value("type", "") == "function" && c.contains("name")) {
            o["tool_choice"] = Json{{"type", "function"}, {"function", {{"name", c["name"]}}}};
        } else {
            return invalid_request("'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}",
                                   "tool_choice");
        }
    }
    if (has(body, "parallel_tool_calls")) o["parallel_tool_calls"] = body["parallel_tool_calls"];
    return std::nullopt;
}

Err map_text(const Json& body, Json& o) {
    if (!has(body, "text")) return std::nullopt;
    const Json& t = body["text"];
    if (!t.is_object()) return invalid_request("'text' must be an object", "text");
    if (has(t, "verbosity") && t["verbosity"] != "medium") return unsupported("'text.verbosity' other than medium", "text.verbosity");
    if (!has(t, "format")) return std::nullopt;
    const Json& f = t["format"];
    const std::string type = f.is_object() ? f.value("type", "") : "";
    if (type == "text") return std::nullopt;
    if (type == "json_object") {
        o["response_format"] = Json{{"type", "json_object"}};
    } else if (type == "json_schema") {
        if (!has(f, "schema")) return invalid_request("'text.format.schema' is missing", "text.format");
        o["response_format"] = Json{{"type", "json_schema"},
                                    {"json_schema", {{"name", f.value("name", "format")}, {"schema", f["schema"]}}}};
    } else {
        return invalid_request("'text.format.type' must be text, json_object or json_schema", "text.format");
    }
    return std::nullopt;
}

Err map_reasoning(const Json& body, Json& o, ResponsesRequest& out) {
    if (!has(body, "reasoning")) return std::nullopt;
    const Json& r = body["reasoning"];
    if (!r.is_object()) return invalid_request("'reasoning' must be an object", "reasoning");
    if (has(r, "effort")) {
        const std::string e = r["effort"].is_string() ? r["effort"].get<std::string>() : "";
        if (e == "none" || e == "minimal") {
            o["think"] = false;
        } else if (e == "low" || e == "medium" || e == "high") {
            o["think"] = true;  // this engine's reasoning has one level: on
        } else {
            return invalid_request("'reasoning.effort' must be none, minimal, low, medium or high", "reasoning.effort");
        }
    }
    if (has(r, "summary")) {
        const std::string s = r["summary"].is_string() ? r["summary"].get<std::string>() : "";
        if (s != "auto" && s != "concise" && s != "detailed") {
            return invalid_request("'reasoning.summary' must be auto, concise or detailed", "reasoning.summary");
        }
        out.reasoning_summary = true;
    }
    return std::nullopt;
}

}  // namespace

void ResponseStore::put(const std::string& id, Entry e) {
    std::lock_guard<std::mutex> lk(mu_);
    const size_t bytes = e.messages.dump().size() + e.response.dump().size() + id.size();
    if (auto it = map_.find(id); it != map_.end()) {
        bytes_ -= it->second.bytes;
        order_.erase(it->second.age);
        map_.erase(it);
    }
    order_.push_back(id);
    map_[id] = Slot{std::move(e), bytes, std::prev(order_.end())};
    bytes_ += bytes;
    evict_locked();
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) const {
    std::lock_guard<std::mutex> lk(mu_);
    const auto it = map_.find(id);
    if (it == map_.end()) return std::nullopt;
    return it->second.entry;
}

bool ResponseStore::erase(const std::string& id) {
    std::lock_guard<std::mutex> lk(mu_);
    const auto it = map_.find(id);
    if (it == map_.end()) return false;
    bytes_ -= it->second.bytes;
    order_.erase(it->second.age);
    map_.erase(it);
    return true;
}

size_t ResponseStore::size() const {
    std::lock_guard<std::mutex> lk(mu_);
    return map_.size();
}

void ResponseStore::evict_locked() {
    while (!order_.empty() && (map_.size() > max_entries_ || bytes_ > max_bytes_)) {
        const auto it = map_.find(order_.front());
        bytes_ -= it->second.bytes;
        map_.erase(it);
        order_.pop_front();
    }
}

Err parse_responses_request(const Json& body, const RequestDefaults& d, int64_t n_vocab, const ResponseStore& store,
                            ResponsesRequest& out) {
    out = ResponsesRequest{};
    if (!body.is_object()) return invalid_request("the request body must be a JSON object");
    for (const char* k : {"background", "conversation", "prompt"}) {
        if (has(body, k) && body[k] != false) return unsupported(strfmt("'%s'", k), k);
    }
    if (has(body, "truncation") && body["truncation"] != "disabled") {
        return unsupported("'truncation': auto (a prompt that does not fit is refused)", "truncation");
    }
    if (has(body, "include") && !(body["include"].is_array() && body["include"].empty())) {
        return unsupported("'include'", "include");
    }
    if (has(body, "store")) {
        if (!body["store"].is_boolean()) return invalid_request("'store' must be a boolean", "store");
        out.store = body["store"].get<bool>();
    }
    Json history = Json::array();  // the conversation without this request's instructions
    if (has(body, "previous_response_id")) {
        if (!body["previous_response_id"].is_string()) {
            return invalid_request("'previous_response_id' must be a string", "previous_response_id");
        }
        out.previous_response_id = body["previous_response_id"].get<std::string>();
        const std::optional<ResponseStore::Entry> prev = store.get(out.previous_response_id);
        if (!prev) {
            ApiError e = invalid_request("previous response with id '" + out.previous_response_id + "' not found",
                                         "previous_response_id", "previous_response_not_found");
            e.status = 404;
            return e;
        }
        history = prev->messages;
    }
    if (!has(body, "input")) return invalid_request("'input' is required", "input");
    if (Err e = input_items(body["input"], history)) return e;
    Json msgs = Json::array();
    if (has(body, "instructions")) {
        if (!body["instructions"].is_string()) return invalid_request("'instructions' must be a string", "instructions");
        msgs.push_back(Json{{"role", "system"}, {"content", body["instructions"]}});
    }
    for (const Json& m : history) msgs.push_back(m);
    out.messages = history;

    Json o = {{"messages", msgs}};
    if (Err e = map_tools(body, o)) return e;
    if (Err e = map_text(body, o)) return e;
    if (Err e = map_reasoning(body, o, out)) return e;
    for (const char* k : {"temperature", "top_p", "stream"}) {
        if (has(body, k)) o[k] = body[k];
    }
    if (has(body, "max_output_tokens")) {
        if (!body["max_output_tokens"].is_number_integer() || body["max_output_tokens"].get<int64_t>() < 1) {
            return invalid_request("'max_output_tokens' must be a positive integer", "max_output_tokens");
        }
        o["max_tokens"] = body["max_output_tokens"];
    }
    if (Err e = parse_chat_request(o, d, n_vocab, out.pr)) return e;

    // What the response object repeats of the request.
    out.echo = Json::object();
    const SamplingParams& s = out.pr.gen.sampling;
    out.echo["instructions"] = has(body, "instructions") ? body["instructions"] : Json(nullptr);
    out.echo["max_output_tokens"] = has(body, "max_output_tokens") ? body["max_output_tokens"] : Json(nullptr);
    out.echo["parallel_tool_calls"] = out.pr.gen.tools.parallel;
    out.echo["previous_response_id"] = out.previous_response_id.empty() ? Json(nullptr) : Json(out.previous_response_id);
    out.echo["reasoning"] = has(body, "reasoning") ? body["reasoning"] : Json{{"effort", nullptr}, {"summary", nullptr}};
    out.echo["store"] = out.store;
    out.echo["temperature"] = s.temperature;
    out.echo["text"] = has(body, "text") ? body["text"] : Json{{"format", {{"type", "text"}}}};
    out.echo["tool_choice"] = has(body, "tool_choice") ? body["tool_choice"] : Json("auto");
    out.echo["tools"] = has(body, "tools") ? body["tools"] : Json::array();
    out.echo["top_p"] = s.top_p;
    out.echo["truncation"] = "disabled";
    out.echo["metadata"] = has(body, "metadata") && body["metadata"].is_object() ? body["metadata"] : Json::object();
    return std::nullopt;
}

std::string make_responses_id() {
    thread_local std::mt19937_64 rng{std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32)};
    return strfmt("resp_%016llx%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()), static_cast<unsigned long long>(rng()));
}

ResponsesBuilder::ResponsesBuilder(std::string id, std::string model, int64_t created, Json echo, bool reasoning_summary)
    : id_(std::move(id)), token_(id_.substr(5)), model_(std::move(model)), created_(created), echo_(std::move(echo)),
      reasoning_summary_(reasoning_summary) {}

Json ResponsesBuilder::event(const char* type, Json body) {
    Json e = {{"type", type}, {"sequence_number", seq_++}};
    for (auto it = body.begin(); it != body.end(); ++it) e[it.key()] = it.value();
    return e;
}

Json ResponsesBuilder::snapshot(const char* status) const {
    Json r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}, {"error", nullptr},
              {"incomplete_details", nullptr}, {"model", model_}, {"output", items_}};
    for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
    r["usage"] = nullptr;
    return r;
}

std::vector<Json> ResponsesBuilder::open() {
    return {event("response.created", {{"response", snapshot("in_progress")}}),
            event("response.in_progress", {{"response", snapshot("in_progress")}})};
}

void ResponsesBuilder::begin(Kind k, const Piece& p, std::vector<Json>& ev) {
    const int index = static_cast<int>(items_.size());
    const std::string n = "_" + std::to_string(index);
    kind_ = k;
    text_.clear();
    if (k == Kind::Message) {
        open_ = {{"id", "msg_" + token_ + n}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                 {"content", Json::array()}};
        ev.push_back(event("response.output_item.added", {{"output_index", index}, {"item", open_}}));
        ev.push_back(event("response.content_part.added",
                           {{"item_id", open_["id"]}, {"output_index", index}, {"content_index", 0},
                            {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}}));
    } else if (k == Kind::Reasoning) {
        open_ = {{"id", "rs_" + token_ + n}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}};
        ev.push_back(event("response.output_item.added", {{"output_index", index}, {"item", open_}}));
    } else {
        call_index_ = p.tool_index;
        open_ = {{"id", "fc_" + token_ + n}, {"type", "function_call"}, {"status", "in_progress"},
                 {"call_id", p.tool_id}, {"name", p.tool_name}, {"arguments", ""}};
        ev.push_back(event("response.output_item.added", {{"output_index", index}, {"item", open_}}));
    }
}

void ResponsesBuilder::close(std::vector<Json>& ev) {
    if (kind_ == Kind::None) return;
    const int index = static_cast<int>(items_.size());
    const Json id = open_["id"];
    if (kind_ == Kind::Message) {
        const Json part = {{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
        ev.push_back(event("response.output_text.done", {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                                                          {"text", text_}, {"logprobs", Json::array()}}));
        ev.push_back(event("response.content_part.done",
                           {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", part}}));
        open_["status"] = "completed";
        open_["content"] = Json::array({part});
    } else if (kind_ == Kind::Reasoning) {
        ev.push_back(event("response.reasoning_text.done",
                           {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text_}}));
        open_["content"] = Json::array({{{"type", "reasoning_text"}, {"text", text_}}});
        if (reasoning_summary_) open_["summary"] = Json::array({{{"type", "summary_text"}, {"text", text_}}});
    } else {
        ev.push_back(event("response.function_call_arguments.done",
                           {{"item_id", id}, {"output_index", index}, {"name", open_["name"]}, {"arguments", text_}}));
        open_["arguments"] = text_;
        open_["status"] = "completed";
    }
    ev.push_back(event("response.output_item.done", {{"output_index", index}, {"item", open_}}));
    items_.push_back(open_);
    kind_ = Kind::None;
}

std::vector<Json> ResponsesBuilder::piece(const Piece& p) {
    std::vector<Json> ev;
    const Kind k = p.channel == Channel::Reasoning ? Kind::Reasoning : p.channel == Channel::ToolCall ? Kind::Call : Kind::Message;
    if (k != Kind::Call && p.text.empty()) return ev;
    if (k != kind_ || (k == Kind::Call && p.tool_index != call_index_)) {
        close(ev);
        begin(k, p, ev);
    }
    if (p.text.empty()) return ev;
    text_ += p.text;
    const int index = static_cast<int>(items_.size());
    const Json id = open_["id"];
    if (k == Kind::Message) {
        ev.push_back(event("response.output_text.delta", {{"item_id", id}, {"output_index", index}, {"content_index", 0},
                                                           {"delta", p.text}, {"logprobs", Json::array()}}));
    } else if (k == Kind::Reasoning) {
        ev.push_back(event("response.reasoning_text.delta",
                           {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"delta", p.text}}));
    } else {
        ev.push_back(event("response.function_call_arguments.delta",
                           {{"item_id", id}, {"output_index", index}, {"delta", p.text}}));
    }
    return ev;
}

std::vector<Json> ResponsesBuilder::finish(const GenerateResult& r) {
    std::vector<Json> ev;
    if (kind_ == Kind::Call && r.finish == FinishReason::Length) open_["status"] = "incomplete";  // cut short
    close(ev);
    bool any = false;
    for (const Json& it : items_) any = any || it["type"] != "reasoning";
    if (!any) {  // an empty answer is still a message
        begin(Kind::Message, Piece{}, ev);
        close(ev);
    }
    const bool incomplete = r.finish == FinishReason::Length;
    final_ = snapshot(incomplete ? "incomplete" : "completed");
    if (incomplete) final_["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
    const GenerateStats& s = r.stats;
    final_["usage"] = {{"input_tokens", s.prompt_tokens},
                       {"input_tokens_details", {{"cached_tokens", s.reused_tokens}}},
                       {"output_tokens", s.completion_tokens},
                       {"output_tokens_details", {{"reasoning_tokens", s.reasoning_tokens}}},
                       {"total_tokens", s.prompt_tokens + s.completion_tokens}};
    ev.push_back(event(incomplete ? "response.incomplete" : "response.completed", {{"response", final_}}));
    return ev;
}

Json ResponsesBuilder::answer_messages() const {
    Json m = {{"role", "assistant"}, {"content", nullptr}};
    std::string text;
    for (const Json& it : items_) {
        if (it["type"] == "message") {
            for (const Json& part : it["content"]) text += part["text"].get<std::string>();
        } else if (it["type"] == "reasoning" && !it["content"].empty()) {
            m["reasoning_content"] = it["content"][0]["text"];
        } else if (it["type"] == "function_call" && it["status"] == "completed") {
            m["tool_calls"].push_back(Json{{"id", it["call_id"]}, {"type", "function"},
                                           {"function", {{"name", it["name"]}, {"arguments", it["arguments"]}}}});
        }
    }
    if (!text.empty()) m["content"] = text;
    return Json::array({m});
}

}  // namespace jllm::server
