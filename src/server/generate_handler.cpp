// server/generate_handler.cpp — /v1/chat/completions and /v1/completions: validate the request,
// turn its prompt into tokens, queue for the engine, generate, and answer in one JSON body or as
// an SSE stream. Where the two endpoints' answers differ is ResponseShape's business
// (openai_response.h); the stream's framing is SseStream's (sse_stream.h).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "engine/chat_template.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/half_closed.h"
#include "server/json_util.h"
#include "server/openai_response.h"
#include "server/request_parse.h"
#include "server/server_impl.h"
#include "server/sse_stream.h"

namespace jllm::server {

namespace {

// True when the rendered prompt leaves the model inside an opened <think> block.
bool prompt_opens_thinking(const std::string& prompt) {
    size_t end = prompt.size();
    while (end > 0 && (prompt[end - 1] == '\n' || prompt[end - 1] == ' ')) end--;
    static const std::string tag = "<think>";
    return end >= tag.size() && prompt.compare(end - tag.size(), tag.size(), tag) == 0;
}

}  // namespace

void HttpServer::Impl::handle_generate(const httplib::Request& req, const std::string& body, httplib::Response& res,
                                       ResponseKind kind) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    auto pr = std::make_shared<ParsedRequest>();
    const std::optional<ApiError> perr = kind == ResponseKind::Chat
                                             ? parse_chat_request(j, opt.defaults, info.n_vocab, *pr)
                                             : parse_completion_request(j, opt.defaults, info.n_vocab, *pr);
    if (perr) return send_error(res, *perr);
    if (const std::optional<ApiError> terr = tokenize_prompt(*pr)) return send_error(res, *terr);

    auto job = make_job(req, make_response_id(kind), pr->session_id);
    const std::shared_ptr<Turn> turn = enter_queue(*job, res, /*wait=*/!pr->stream);
    if (!turn) return;

    ResponseHead head;
    head.id = job->id;
    head.created = static_cast<int64_t>(std::time(nullptr));
    head.model = alias;
    head.legacy_functions = pr->legacy_functions;
    const ResponseShape shape(kind, std::move(head));
    if (pr->stream) {
        stream(shape, job, pr, turn, res);
    } else {
        answer(shape, job, *pr, turn, res);
    }
}

std::shared_ptr<Job> HttpServer::Impl::make_job(const httplib::Request& req, std::string id, const std::string& session_id) {
    auto job = std::make_shared<Job>();
    job->id = std::move(id);
    job->session_id = session_id;
    job->deadline = Clock::now() + std::chrono::seconds(opt.timeout_s);
    job->peer.fd = find_connection_fd(req.remote_addr, req.remote_port, req.local_port);
    job->peer.http11 = req.version == "HTTP/1.1";
    return job;
}

std::shared_ptr<Turn> HttpServer::Impl::enter_queue(Job& job, httplib::Response& res, bool wait) {
    const uint64_t ticket = queue.enter();
    if (ticket == 0) {
        send_error(res, unavailable(strfmt("the server is busy: %d requests are waiting (--max-queue)", queue.capacity()),
                                    "queue_full", 1));
        return nullptr;
    }
    auto turn = std::make_shared<Turn>(queue, ticket);
    if (wait && !wait_turn(job, ticket, res)) return nullptr;
    return turn;
}

// A stream waits for the engine after its headers went out, with an SSE comment every second so
// that clients with a short read timeout keep waiting. False when the turn never came: the
// server stops or the deadline passes (`on_error` told the client), or the client hung up.
bool HttpServer::Impl::await_turn_streaming(Job& job, Turn& turn, httplib::DataSink& sink,
                                            const std::function<void(const ApiError&)>& on_error) {
    static const std::string comment = ": waiting for the engine\n\n";
    Clock::time_point last = Clock::now() - std::chrono::seconds(1);
    while (!queue.wait_turn(turn.ticket, std::chrono::milliseconds(50))) {
        if (state.load() == State::Stopping) break;
        const Clock::time_point now = Clock::now();
        if (now > job.deadline) {
            metrics.count_timeout();
            on_error(unavailable("timed out waiting for the engine (--timeout)", "timeout", 1));
            return false;
        }
        if (now - last >= std::chrono::seconds(1)) {
            if (!sink.write(comment.data(), comment.size())) {
                metrics.count_disconnect();
                return false;
            }
            last = now;
        }
    }
    if (state.load() == State::Stopping) {
        on_error(unavailable("the server is shutting down", "shutting_down", 5));
        return false;
    }
    return true;
}

// A chat request's messages (and tools) through the model's template.
std::optional<ApiError> HttpServer::Impl::render_prompt(ParsedRequest& pr, std::string& prompt) {
    ChatRenderOptions ro;
    ro.enable_thinking = pr.enable_thinking;
    ro.continue_final_message = pr.continue_final;
    const char* tools_param = pr.legacy_functions ? "functions" : "tools";
    if (!pr.gen.tools.tools_json.empty() && pr.gen.tools.choice != ToolChoice::None) {
        const Status st = engine.check_tools(pr.gen.tools);
        if (!st.ok) return invalid_request(st.message, tools_param, "invalid_tools");
        ro.tools_json = pr.gen.tools.tools_json;  // with `none` the model is not shown them
    }
    try {
        prompt = engine.render_chat(pr.messages, ro);
    } catch (const std::exception& e) {
        return invalid_request(e.what(), "messages");
    }
    pr.gen.thinking_open = prompt_opens_thinking(prompt);
    pr.gen.thinking_may_open = pr.enable_thinking && !pr.gen.thinking_open && !pr.continue_final;
    return std::nullopt;
}

// The prompt as tokens: counted (context check) before queueing; the engine gets the ids.
std::optional<ApiError> HttpServer::Impl::tokenize_prompt(ParsedRequest& pr) {
    std::vector<int32_t> tokens;
    const char* prompt_param = pr.chat ? "messages" : "prompt";
    if (pr.chat) {
        std::string prompt;
        if (std::optional<ApiError> e = render_prompt(pr, prompt)) return e;
        tokens = engine.tokenize(prompt, /*parse_special=*/true, /*add_bos=*/false);  // the template places BOS
    } else if (pr.prompt_is_tokens) {
        tokens = pr.prompt_tokens;
    } else {
        tokens = engine.tokenize(pr.prompt_text, pr.prompt_special, pr.add_bos);
    }
    if (tokens.empty()) return invalid_request("the prompt is empty", prompt_param);
    if (static_cast<int64_t>(tokens.size()) >= info.n_ctx) {
        return invalid_request(strfmt("the prompt has %zu tokens; the context holds %lld (the prompt and at "
                                      "least one generated token)",
                                      tokens.size(), static_cast<long long>(info.n_ctx)),
                               prompt_param, "context_length_exceeded");
    }
    pr.gen.prompt_tokens = std::move(tokens);
    pr.gen.prompt.clear();
    return std::nullopt;
}

// Waits in the queue until the engine is this request's; false (answered) when the server stops,
// the deadline passes or the client hangs up first.
bool HttpServer::Impl::wait_turn(Job& job, uint64_t ticket, httplib::Response& res) {
    while (!queue.wait_turn(ticket, std::chrono::milliseconds(50))) {
        if (state.load() == State::Stopping) {
            send_error(res, unavailable("the server is shutting down", "shutting_down", 5));
            return false;
        }
        if (Clock::now() > job.deadline) {
            metrics.count_timeout();
            send_error(res, unavailable("timed out waiting for the engine (--timeout)", "timeout", 1));
            return false;
        }
        if (client_gone(job.peer, /*may_probe=*/true, /*writes_tell=*/false)) {
            metrics.count_disconnect();
            res.status = 499;  // client closed the request; nobody reads this answer
            return false;
        }
    }
    if (state.load() == State::Stopping) {
        send_error(res, unavailable("the server is shutting down", "shutting_down", 5));
        return false;
    }
    return true;
}

// The whole answer in one JSON body. The engine's turn is held until the body has been written;
// then the sequence is stored as a session snapshot (off the response path) and the turn ends.
void HttpServer::Impl::answer(const ResponseShape& shape, const std::shared_ptr<Job>& job, const ParsedRequest& pr,
                              const std::shared_ptr<Turn>& turn, httplib::Response& res) {
    Json lp = pr.logprobs ? shape.empty_logprobs() : Json(nullptr);
    size_t offset = 0;
    const GenerateResult r = run_generation(job, pr.gen, [&](const Piece& p) {
        if (p.channel != Channel::Content) return true;  // the result carries reasoning and calls
        if (pr.logprobs) shape.append_logprob(lp, p, offset, pr.top_logprobs > 0);
        offset += p.text.size();
        return true;
    });
    if (answered_failure(r, *job, *turn, res)) return;
    send_body(turn, dump_json(shape.response(r, lp)), res);
}

bool HttpServer::Impl::answered_failure(const GenerateResult& r, const Job& job, Turn& turn, httplib::Response& res) {
    if (r.finish == FinishReason::Error) {
        checkpoint_and_release(turn);
        send_error(res, internal_error("generation failed: " + r.error));
        return true;
    }
    if (job.cancel_reason.load() == DISCONNECT) {
        checkpoint_and_release(turn);
        res.status = 499;  // nobody reads it
        return true;
    }
    return false;
}

void HttpServer::Impl::send_body(const std::shared_ptr<Turn>& turn, std::string text, httplib::Response& res) {
    auto body = std::make_shared<std::string>(std::move(text));
    res.status = 200;
    res.set_content_provider(
        body->size(), "application/json",
        [body](size_t offset, size_t length, httplib::DataSink& sink) {
            return sink.write(body->data() + offset, std::min(length, body->size() - offset));
        },
        [this, turn](bool) { checkpoint_and_release(*turn); });
}

void HttpServer::Impl::start_stream(httplib::Response& res, const char* content_type, const std::shared_ptr<Job>& job,
                                    const std::shared_ptr<Turn>& turn, std::function<bool(httplib::DataSink&)> body) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        content_type,
        [job, turn, body = std::move(body)](size_t, httplib::DataSink& sink) -> bool {
            job->response_started.store(true);  // the headers are out
            StreamSink out(sink, job->peer.fd);  // a client half-closing from here on still gets it all
            try {
                return body(out.sink());
            } catch (const std::exception& e) {
                JLLM_LOG_ERROR("[server] stream fault: %s", e.what());
                turn->release();
                return false;
            }
        },
        [this, turn](bool) { checkpoint_and_release(*turn); });
}

// After an answer: the generation's sequence becomes a session snapshot, then the next request
// may have the engine.
void HttpServer::Impl::checkpoint_and_release(Turn& turn) {
    if (!turn.released.load()) engine.checkpoint();
    turn.release();
}

// Streaming: headers go out when the handler returns; the provider runs the generation and
// writes one SSE event per piece. The turn is held until the provider is done (or dropped).
void HttpServer::Impl::stream(const ResponseShape& shape, const std::shared_ptr<Job>& job,
                              const std::shared_ptr<ParsedRequest>& pr, const std::shared_ptr<Turn>& turn,
                              httplib::Response& res) {
    start_stream(res, "text/event-stream", job, turn, [this, job, pr, turn, shape](httplib::DataSink& sink) {
        SseStream sse(shape, pr->logprobs, pr->top_logprobs > 0,
                      [&sink](const char* data, size_t size) { return sink.write(data, size); });
        if (!await_turn_streaming(*job, *turn, sink, [&](const ApiError& e) {
                if (sse.error(e) && sse.done()) sink.done();
            })) {
            turn->release();
            return false;
        }
        bool alive = sse.open();
        if (!alive) {
            job->cancel_reason.store(DISCONNECT);
            metrics.count_disconnect();
            return false;
        }
        const GenerateResult r = run_generation(job, pr->gen, [&](const Piece& p) {
            alive = sse.piece(p);
            if (!alive) job->cancel_reason.store(DISCONNECT);
            return alive;
        });
        if (!alive || job->cancel_reason.load() == DISCONNECT) {
            checkpoint_and_release(*turn);
            return false;
        }
        if (r.finish == FinishReason::Error) {
            sse.error(internal_error("generation failed: " + r.error));
        } else {
            sse.finish(r.finish, pr->include_usage ? &r.stats : nullptr);
        }
        const bool done = sse.done();
        if (done) sink.done();
        checkpoint_and_release(*turn);  // the client has the whole stream
        return done;
    });
}

GenerateResult HttpServer::Impl::run_generation(const std::shared_ptr<Job>& job, const GenerateRequest& gen,
                                                const PieceCallback& cb) {
    {
        std::lock_guard<std::mutex> lk(active_mu);
        active = job;
    }
    t_generated = true;
    GenerateResult r = engine.generate(gen, [&](const Piece& p) {
        if (job->cancel_reason.load() != NONE) return false;
        return cb(p);
    });
    {
        std::lock_guard<std::mutex> lk(active_mu);
        active.reset();
    }
    // Only the engine's turn holder reads its resident sequence.
    kv_used.store(static_cast<int64_t>(engine.resident_tokens().size()));
    const int reason = job->cancel_reason.load();
    const char* label = r.finish == FinishReason::Cancelled
                            ? (reason == TIMEOUT ? "timeout" : reason == SHUTDOWN ? "shutdown" : "cancelled")
                            : finish_reason_name(r.finish);
    metrics.count_generation(r.stats, label);
    if (reason == TIMEOUT) metrics.count_timeout();
    if (reason == DISCONNECT) metrics.count_disconnect();
    JLLM_LOG_INFO("[server] %s finish=%s prompt=%d cached=%d completion=%d prefill=%.1f tok/s decode=%.1f tok/s "
                  "ttft=%.0f ms%s%s%s",
                  job->id.c_str(), label, r.stats.prompt_tokens, r.stats.reused_tokens, r.stats.completion_tokens,
                  r.stats.prefill_tps, r.stats.decode_tps, r.stats.ttft_ms,
                  job->session_id.empty() ? "" : " session=", job->session_id.c_str(),
                  r.finish == FinishReason::Error ? (" error: " + r.error).c_str() : "");
    return r;
}

}  // namespace jllm::server
