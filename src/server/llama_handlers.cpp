// server/llama_handlers.cpp — llama-server's own endpoints for its clients: POST /completion (its
// native completion: `n_predict`, `cache_prompt`, `grammar`, `json_schema`, its answer and SSE
// shapes), GET /props, GET /slots, POST /apply-template, and OpenAI's GET /v1/models/{id}.
#include <algorithm>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "jllm_version.h"
#include "server/server_impl.h"

namespace jllm::server {

namespace {

// llama-server's generation settings of a request (or the defaults).
Json generation_settings(const GenerateRequest& g, int64_t n_ctx) {
    const SamplingParams& s = g.sampling;
    return Json{{"n_ctx", n_ctx},
                {"n_predict", g.max_tokens},
                {"temperature", s.temperature},
                {"top_k", s.top_k},
                {"top_p", s.top_p},
                {"min_p", s.min_p},
                {"repeat_penalty", s.repeat_penalty},
                {"repeat_last_n", s.repeat_last_n},
                {"presence_penalty", s.presence_penalty},
                {"frequency_penalty", s.frequency_penalty},
                {"seed", s.seed == UINT64_MAX ? Json(-1) : Json(s.seed)},
                {"stop", g.stop}};
}

const char* stop_type(const GenerateResult& r) {
    if (r.finish == FinishReason::Length) return "limit";
    return r.stop_word.empty() ? "eos" : "word";
}

// llama-server's body onto the OpenAI completion parser's: n_predict -> max_tokens, logit_bias
// as [[id, bias], ...] -> an object; its other fields checked here.
std::optional<ApiError> parse_llama_completion(const Json& body, const RequestDefaults& d, int64_t n_vocab,
                                               ParsedRequest& out) {
    if (!body.is_object()) return invalid_request("the request body must be a JSON object");
    Json o = body;
    o.erase("n_predict");
    if (const auto it = body.find("n_predict"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<int64_t>() < -1) {
            return invalid_request("'n_predict' must be an integer >= -1 (-1: no limit)", "n_predict");
        }
        o["max_tokens"] = *it;
    }
    if (const auto it = body.find("logit_bias"); it != body.end() && it->is_array()) {
        Json obj = Json::object();
        for (const Json& pair : *it) {
            if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() ||
                !(pair[1].is_number() || pair[1].is_boolean())) {
                return invalid_request("'logit_bias' pairs must be [token id, bias]", "logit_bias");
            }
            // false: never this token (llama-server's spelling of -inf).
            obj[std::to_string(pair[0].get<int64_t>())] = pair[1].is_boolean() ? (pair[1].get<bool>() ? 0.0 : -100.0)
                                                                              : pair[1].get<double>();
        }
        o["logit_bias"] = obj;
    }
    for (const char* k : {"n_probs", "n_indent", "n_keep", "t_max_predict_ms"}) {
        if (const auto it = body.find(k); it != body.end() && it->is_number() && it->get<double>() > 0) {
            return invalid_request(strfmt("'%s' is not supported by this server", k), k, "unsupported_feature");
        }
    }
    for (const char* k : {"ignore_eos", "return_tokens"}) {
        if (const auto it = body.find(k); it != body.end() && !it->is_null() && !it->is_boolean()) {
            return invalid_request(strfmt("'%s' must be a boolean", k), k);
        }
    }
    if (body.value("ignore_eos", false)) return invalid_request("'ignore_eos' is not supported by this server", "ignore_eos",
                                                                "unsupported_feature");
    if (const auto it = body.find("id_slot"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer() || (it->get<int64_t>() != 0 && it->get<int64_t>() != -1)) {
            return invalid_request("'id_slot' must be 0 or -1: this server has one slot", "id_slot");
        }
    }
    if (std::optional<ApiError> e = parse_completion_request(o, d, n_vocab, out)) return e;
    out.prompt_special = true;  // llama-server parses <|...|> in its prompts
    if (const auto it = body.find("cache_prompt"); it != body.end() && !it->is_null()) {
        if (!it->is_boolean()) return invalid_request("'cache_prompt' must be a boolean", "cache_prompt");
        out.gen.reuse_prefix = it->get<bool>();
    }
    return std::nullopt;
}

}  // namespace

Json HttpServer::Impl::model_json() const {
    return Json{{"id", alias},
                {"object", "model"},
                {"created", created_unix},
                {"owned_by", "jetson-llm"},
                {"meta", {{"arch", info.arch}, {"n_ctx", info.n_ctx}, {"n_ctx_train", info.n_ctx_train},
                          {"n_vocab", info.n_vocab}, {"n_embd", info.n_embd}, {"size", info.file_bytes}}}};
}

void HttpServer::Impl::handle_model(const std::string& id, httplib::Response& res) {
    if (!require_ready(res)) return;
    if (id != alias) {
        ApiError e = invalid_request("the model '" + id + "' does not exist; this server serves '" + alias + "'", "model",
                                     "model_not_found");
        e.status = 404;
        e.type = "not_found_error";
        return send_error(res, e);
    }
    send_json(res, model_json());
}

void HttpServer::Impl::handle_props(httplib::Response& res) {
    if (!require_ready(res)) return;
    GenerateRequest g;
    g.sampling = opt.defaults.sampling;
    g.max_tokens = opt.defaults.max_tokens;
    send_json(res, Json{{"default_generation_settings",
                         {{"id", 0}, {"n_ctx", info.n_ctx}, {"speculative", info.spec != "off"},
                          {"params", generation_settings(g, info.n_ctx)}}},
                        {"total_slots", 1},
                        {"model_alias", alias},
                        {"model_path", info.path},
                        {"chat_template", info.chat_template_text},
                        {"chat_template_renderer", info.chat_template},
                        {"modalities", {{"vision", false}, {"audio", false}}},
                        {"build_info", std::string(JLLM_VERSION) + "-" + JLLM_GIT_COMMIT}});
}

void HttpServer::Impl::handle_slots(httplib::Response& res) {
    if (!require_ready(res)) return;
    GenerateRequest g;
    g.sampling = opt.defaults.sampling;
    g.max_tokens = opt.defaults.max_tokens;
    send_json(res, Json::array({Json{{"id", 0},
                                     {"n_ctx", info.n_ctx},
                                     {"speculative", info.spec != "off"},
                                     {"is_processing", queue.busy()},
                                     {"n_past", kv_used.load()},
                                     {"params", generation_settings(g, info.n_ctx)}}}));
}

void HttpServer::Impl::handle_apply_template(const std::string& body, httplib::Response& res) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    ParsedRequest pr;
    if (const std::optional<ApiError> e = parse_chat_request(j, opt.defaults, info.n_vocab, pr)) return send_error(res, *e);
    std::string prompt;
    if (const std::optional<ApiError> e = render_prompt(pr, prompt)) return send_error(res, *e);
    send_json(res, Json{{"prompt", prompt}});
}

void HttpServer::Impl::handle_llama_completion(const httplib::Request& req, const std::string& body,
                                               httplib::Response& res) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    auto pr = std::make_shared<ParsedRequest>();
    if (const std::optional<ApiError> e = parse_llama_completion(j, opt.defaults, info.n_vocab, *pr)) {
        return send_error(res, *e);
    }
    if (const std::optional<ApiError> e = tokenize_prompt(*pr)) return send_error(res, *e);
    const bool return_tokens = j.value("return_tokens", false);
    auto job = make_job(req, make_response_id(ResponseKind::Completion), pr->session_id);
    const std::shared_ptr<Turn> turn = enter_queue(*job, res, /*wait=*/!pr->stream);
    if (!turn) return;

    const int64_t n_ctx = info.n_ctx;
    const std::string model = alias;
    auto final_json = [pr, n_ctx, model](const GenerateResult& r, const std::vector<int32_t>& tokens) {
        Json o = {{"index", 0},
                  {"content", r.text},
                  {"tokens", tokens},
                  {"id_slot", 0},
                  {"stop", true},
                  {"model", model},
                  {"tokens_predicted", r.stats.completion_tokens},
                  {"tokens_evaluated", r.stats.prompt_tokens},
                  {"tokens_cached", r.stats.reused_tokens},
                  {"generation_settings", generation_settings(pr->gen, n_ctx)},
                  {"truncated", false},
                  {"stop_type", stop_type(r)},
                  {"stopping_word", r.stop_word},
                  {"timings", timings_json(r.stats)}};
        return o;
    };

    if (!pr->stream) {
        std::vector<int32_t> tokens;
        const GenerateResult r = run_generation(job, pr->gen, [&](const Piece& p) {
            if (return_tokens && p.token >= 0) tokens.push_back(p.token);
            return true;
        });
        if (answered_failure(r, *job, *turn, res)) return;
        return send_body(turn, dump_json(final_json(r, tokens)), res);
    }
    start_stream(res, "text/event-stream", job, turn,
                 [this, job, pr, turn, final_json, return_tokens](httplib::DataSink& sink) {
        auto send = [&sink](const Json& e) {
            const std::string s = "data: " + dump_json(e) + "\n\n";
            return sink.write(s.data(), s.size());
        };
        if (!await_turn_streaming(*job, *turn, sink, [&](const ApiError& e) {
                if (send(error_json(e))) sink.done();
            })) {
            turn->release();
            return false;
        }
        bool alive = true;
        const GenerateResult r = run_generation(job, pr->gen, [&](const Piece& p) {
            if (p.channel != Channel::Content) return true;
            Json e = {{"index", 0}, {"content", p.text}, {"tokens", Json::array()}, {"stop", false}, {"id_slot", 0}};
            if (return_tokens && p.token >= 0) e["tokens"].push_back(p.token);
            alive = send(e);
            if (!alive) job->cancel_reason.store(DISCONNECT);
            return alive;
        });
        if (!alive || job->cancel_reason.load() == DISCONNECT) {
            checkpoint_and_release(*turn);
            return false;
        }
        Json last = r.finish == FinishReason::Error ? error_json(internal_error("generation failed: " + r.error))
                                                    : final_json(r, {});
        if (r.finish != FinishReason::Error) last["content"] = "";  // the text went out in pieces
        const bool ok = send(last);
        if (ok) sink.done();
        checkpoint_and_release(*turn);
        return ok;
    });
}

}  // namespace jllm::server
