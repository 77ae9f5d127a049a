// server/responses_handler.cpp — POST /v1/responses on the shared generation path (queue, engine
// turn, sessions, metrics), answered as one response object or as the Responses API's SSE events
// (`event: <type>` + `data: <json>`); GET and DELETE /v1/responses/{id} on the response store.
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "server/responses_api.h"
#include "server/server_impl.h"

namespace jllm::server {

namespace {

ApiError response_not_found(const std::string& id) {
    ApiError e = invalid_request("response with id '" + id + "' not found", "response_id", "not_found");
    e.status = 404;
    return e;
}

}  // namespace

void HttpServer::Impl::handle_response_get(const std::string& id, httplib::Response& res) {
    const std::optional<ResponseStore::Entry> e = responses.get(id);
    if (!e) return send_error(res, response_not_found(id));
    send_json(res, e->response);
}

void HttpServer::Impl::handle_response_delete(const std::string& id, httplib::Response& res) {
    if (!responses.erase(id)) return send_error(res, response_not_found(id));
    send_json(res, Json{{"id", id}, {"object", "response"}, {"deleted", true}});
}

void HttpServer::Impl::handle_responses(const httplib::Request& req, const std::string& body, httplib::Response& res) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    auto rq = std::make_shared<ResponsesRequest>();
    if (const std::optional<ApiError> perr = parse_responses_request(j, opt.defaults, info.n_vocab, responses, *rq)) {
        return send_error(res, *perr);
    }
    ParsedRequest& pr = rq->pr;
    if (pr.enable_thinking && !info.thinking) {
        return send_error(res, invalid_request("this model has no reasoning mode; give 'reasoning.effort': none or leave "
                                               "'reasoning' out", "reasoning.effort"));
    }
    if (const std::optional<ApiError> terr = tokenize_prompt(pr)) return send_error(res, *terr);

    const std::string id = make_responses_id();
    auto job = make_job(req, id, pr.session_id);
    const std::shared_ptr<Turn> turn = enter_queue(*job, res, /*wait=*/!pr.stream);
    if (!turn) return;
    auto builder = std::make_shared<ResponsesBuilder>(id, alias, static_cast<int64_t>(std::time(nullptr)), rq->echo,
                                                      rq->reasoning_summary);
    // After the answer: the conversation, answer included, under the response's id.
    auto keep = [this, rq, builder, id] {
        if (!rq->store) return;
        Json msgs = rq->messages;
        for (const Json& m : builder->answer_messages()) msgs.push_back(m);
        responses.put(id, ResponseStore::Entry{std::move(msgs), builder->response()});
    };

    if (!pr.stream) {
        const GenerateResult r = run_generation(job, pr.gen, [&](const Piece& p) {
            builder->piece(p);
            return true;
        });
        if (answered_failure(r, *job, *turn, res)) return;
        builder->finish(r);
        keep();
        return send_body(turn, dump_json(builder->response()), res);
    }

    start_stream(res, "text/event-stream", job, turn, [this, job, rq, turn, builder, keep](httplib::DataSink& sink) {
        auto send = [&sink](const std::vector<Json>& events) {
            for (const Json& e : events) {
                const std::string s = "event: " + e["type"].get<std::string>() + "\ndata: " + dump_json(e) + "\n\n";
                if (!sink.write(s.data(), s.size())) return false;
            }
            return true;
        };
        auto error_event = [&](const std::string& code, const std::string& message) {
            return send({Json{{"type", "error"}, {"code", code}, {"message", message}}});
        };
        if (!await_turn_streaming(*job, *turn, sink, [&](const ApiError& e) {
                if (error_event(e.code, e.message)) sink.done();
            })) {
            turn->release();
            return false;
        }
        bool alive = send(builder->open());
        const GenerateResult r = alive ? run_generation(job, rq->pr.gen, [&](const Piece& p) {
            alive = send(builder->piece(p));
            if (!alive) job->cancel_reason.store(DISCONNECT);
            return alive;
        }) : GenerateResult{};
        if (!alive || job->cancel_reason.load() == DISCONNECT) {
            checkpoint_and_release(*turn);
            return false;
        }
        bool ok = true;
        if (r.finish == FinishReason::Error) {
            ok = error_event("server_error", "generation failed: " + r.error);
        } else {
            ok = send(builder->finish(r));
            keep();
        }
        if (ok) sink.done();
        checkpoint_and_release(*turn);
        return ok;
    });
}

}  // namespace jllm::server
