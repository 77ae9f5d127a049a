// server/ollama_handler.cpp — the /api/* endpoints: Ollama's chat and generate on the shared
// generation path (same queue, engine turn, sessions and metrics as /v1/*), answered as one JSON
// object or as NDJSON lines; the model listings; the model-management endpoints refused. Error
// bodies get Ollama's shape ({"error": message}) in http_server.cpp's post-routing hook, so the
// shared helpers (queue, auth, body limits) need not know which API asked.

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "server/ollama_api.h"
#include "server/server_impl.h"

namespace jllm::server {

namespace {

// 404 for a request naming another model than the one served.
ApiError model_not_found(const std::string& asked, const std::string& alias) {
    ApiError e = invalid_request(strfmt("model '%s' not found; this server serves '%s' (models are managed by the service)",
                                        asked.c_str(), ollama_model_name(alias).c_str()),
                                 "model", "model_not_found");
    e.status = 404;
    return e;
}

}  // namespace

OllamaModel HttpServer::Impl::ollama_model() const {
    OllamaModel m;
    m.alias = alias;
    m.info = info;
    m.modified_unix = model_modified_unix;
    m.device_bytes = info.backend == "cpu" ? 0 : info.weight_bytes + info.kv_bytes;
    m.defaults = opt.defaults;
    return m;
}

void HttpServer::Impl::handle_ollama_tags(httplib::Response& res) {
    if (require_ready(res)) send_json(res, ollama_tags(ollama_model()));
}

void HttpServer::Impl::handle_ollama_ps(httplib::Response& res) {
    if (require_ready(res)) send_json(res, ollama_ps(ollama_model()));
}

void HttpServer::Impl::handle_ollama_show(const std::string& body, httplib::Response& res) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    // `model`, or the older `name`.
    const Json* m = nullptr;
    for (const char* k : {"model", "name"}) {
        if (j.is_object() && j.contains(k) && j[k].is_string()) {
            m = &j[k];
            break;
        }
    }
    if (m == nullptr) return send_error(res, invalid_request("'model' is required", "model"));
    if (!ollama_names_model(m->get<std::string>(), alias)) return send_error(res, model_not_found(m->get<std::string>(), alias));
    send_json(res, ollama_show(ollama_model()));
}

void HttpServer::Impl::handle_ollama_generate(const httplib::Request& req, const std::string& body,
                                              httplib::Response& res, bool chat) {
    const int64_t start_ns = unix_now_ns();
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    auto orq = std::make_shared<OllamaRequest>();
    const std::optional<ApiError> perr = chat ? parse_ollama_chat(j, opt.defaults, info.n_vocab, info.n_ctx, *orq)
                                              : parse_ollama_generate(j, opt.defaults, info.n_vocab, info.n_ctx, *orq);
    if (perr) return send_error(res, *perr);
    if (!ollama_names_model(orq->model, alias)) return send_error(res, model_not_found(orq->model, alias));
    auto shape = std::make_shared<OllamaShape>(chat, orq->model, start_ns);
    if (orq->load_only) return send_json(res, shape->load_response());
    ParsedRequest& pr = orq->pr;
    if (pr.enable_thinking && !info.thinking) {
        return send_error(res, invalid_request(strfmt("'%s' does not support thinking", orq->model.c_str()), "think"));
    }
    if (const std::optional<ApiError> terr = tokenize_prompt(pr)) return send_error(res, *terr);
    if (!orq->context.empty()) {
        pr.gen.prompt_tokens.insert(pr.gen.prompt_tokens.begin(), orq->context.begin(), orq->context.end());
    }
    const int64_t n_prompt = static_cast<int64_t>(pr.gen.prompt_tokens.size());
    const int64_t limit = orq->num_ctx > 0 ? orq->num_ctx : info.n_ctx;
    if (n_prompt >= limit) {
        return send_error(res, invalid_request(strfmt("the prompt has %lld tokens; the context (%s) holds %lld (the prompt "
                                                      "and at least one generated token)",
                                                      static_cast<long long>(n_prompt),
                                                      orq->num_ctx > 0 ? "options.num_ctx" : "the server's -c",
                                                      static_cast<long long>(limit)),
                                               orq->num_ctx > 0 ? "options.num_ctx" : "messages", "context_length_exceeded"));
    }
    if (orq->num_ctx > 0 && (pr.gen.max_tokens < 0 || n_prompt + pr.gen.max_tokens > orq->num_ctx)) {
        pr.gen.max_tokens = static_cast<int>(orq->num_ctx - n_prompt);  // num_ctx bounds the whole sequence
    }

    auto job = make_job(req, make_response_id(chat ? ResponseKind::Chat : ResponseKind::Completion), pr.session_id);
    const std::shared_ptr<Turn> turn = enter_queue(*job, res);
    if (!turn) return;
    const int64_t queue_ns = unix_now_ns() - start_ns;
    if (pr.stream) return ollama_stream(shape, job, orq, turn, queue_ns, res);

    // One object: generated with the turn held until it is written (as answer() does).
    const ResponseShape lp_shape(ResponseKind::Chat, ResponseHead{});
    Json lp = pr.logprobs ? lp_shape.empty_logprobs() : Json(nullptr);
    size_t offset = 0;
    const GenerateResult r = run_generation(job, pr.gen, [&](const Piece& p) {
        if (p.channel == Channel::Content && pr.logprobs) {
            lp_shape.append_logprob(lp, p, offset, false);
            offset += p.text.size();
        }
        return true;
    });
    if (answered_failure(r, *job, *turn, res)) return;
    const std::vector<int32_t> context = engine.resident_tokens();  // the prompt and the answer
    send_body(turn, dump_json(shape->response(r, queue_ns, chat ? nullptr : &context,
                                              pr.logprobs ? lp["content"] : Json(nullptr))), res);
}

// NDJSON: one object per line, the last with done true (or an {"error"} line in its place).
void HttpServer::Impl::ollama_stream(const std::shared_ptr<OllamaShape>& shape, const std::shared_ptr<Job>& job,
                                     const std::shared_ptr<OllamaRequest>& orq, const std::shared_ptr<Turn>& turn,
                                     int64_t queue_ns, httplib::Response& res) {
    start_stream(res, "application/x-ndjson", job, turn, [this, job, orq, turn, shape, queue_ns](httplib::DataSink& sink) {
        const ParsedRequest& pr = orq->pr;
        auto line = [&sink](const Json& j) {
            const std::string s = dump_json(j) + "\n";
            return sink.write(s.data(), s.size());
        };
        const ResponseShape lp_shape(ResponseKind::Chat, ResponseHead{});
        size_t offset = 0;
        bool alive = true;
        const GenerateResult r = run_generation(job, pr.gen, [&](const Piece& p) {
            Json lp(nullptr);
            if (p.channel == Channel::Content && pr.logprobs) {
                Json one = lp_shape.empty_logprobs();
                lp_shape.append_logprob(one, p, offset, false);
                lp = one["content"];
                offset += p.text.size();
            }
            const std::optional<Json> chunk = shape->piece_chunk(p, lp);
            if (chunk) alive = line(*chunk);
            if (!alive) job->cancel_reason.store(DISCONNECT);
            return alive;
        });
        if (!alive || job->cancel_reason.load() == DISCONNECT) {  // counted by run_generation
            checkpoint_and_release(*turn);
            return false;
        }
        bool ok = true;
        if (r.finish == FinishReason::Error) {
            ok = line(ollama_error("generation failed: " + r.error));
        } else {
            if (!r.tool_calls.empty()) ok = line(shape->calls_chunk(r.tool_calls));
            const std::vector<int32_t> context = engine.resident_tokens();
            if (ok) ok = line(shape->final_chunk(r, queue_ns, orq->chat ? nullptr : &context));
        }
        if (ok) sink.done();
        checkpoint_and_release(*turn);
        return ok;
    });
}

}  // namespace jllm::server
