// server/server_impl.h — internal to server/: HttpServer::Impl (the state every handler shares),
// a generation request while it waits or runs (Job), its place in the queue (Turn), and the
// helpers that answer with JSON. http_server.cpp holds the lifecycle and the routes,
// utility_handlers.cpp and generate_handler.cpp the endpoints.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "jllm_engine.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/http_server.h"
#include "server/json_util.h"
#include "server/metrics.h"
#include "server/ollama_api.h"
#include "server/openai_response.h"
#include "server/request_parse.h"
#include "server/request_queue.h"
#include "server/responses_api.h"

namespace jllm::server {

enum class State { Loading, Ready, Failed, Stopping };

enum CancelReason : int { NONE = 0, DISCONNECT = 1, TIMEOUT = 2, SHUTDOWN = 3 };

using Clock = std::chrono::steady_clock;

// One generation request while it waits or runs.
struct Job {
    std::string id;
    std::string session_id;
    PeerWatch peer;                 // the client's socket, for hang-up polls (fd -1: unknown)
    std::atomic<bool> response_started{false};  // a stream's headers are out: its writes notice a reset
    Clock::time_point deadline;
    std::atomic<int> cancel_reason{NONE};
};

// The ticket of a request in RequestQueue; leaving is idempotent and happens at the latest when
// the last owner (handler or stream provider) lets go.
struct Turn {
    RequestQueue& queue;
    uint64_t ticket;
    std::atomic<bool> released{false};
    Turn(RequestQueue& q, uint64_t t) : queue(q), ticket(t) {}
    ~Turn() { release(); }
    void release() {
        if (!released.exchange(true)) queue.leave(ticket);
    }
};

// Set on the worker thread whose request ran a generation: its freed memory is trimmed after the
// answer (http_server.cpp's logger).
extern thread_local bool t_generated;
// Set while an /api/* (Ollama) request is handled: send_error writes {"error": message}.
extern thread_local bool t_ollama_api;

void send_error(httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const Json& j, int status = 200);

struct HttpServer::Impl {
    ServerOptions opt;
    httplib::Server http;
    Engine engine;
    ModelInfo info;  // written once before state becomes Ready
    std::string alias;
    std::atomic<State> state{State::Loading};
    RequestQueue queue;
    Metrics metrics;
    std::atomic<int64_t> kv_used{0};
    int64_t created_unix = 0;
    int64_t model_modified_unix = 0;  // the model file's mtime at load (Ollama's modified_at)
    int port = -1;
    // The socket cpp-httplib last created for listening (its socket-options hook sees each one
    // before bind): bind() raises its backlog afterwards.
    socket_t listen_sock = INVALID_SOCKET;

    // Stored Responses-API answers (previous_response_id): at most 1,024 or 64 MiB, oldest out.
    ResponseStore responses{1024, size_t{64} << 20};

    std::mutex active_mu;
    std::shared_ptr<Job> active;  // the generating request

    std::mutex stop_mu;
    std::condition_variable stop_cv;
    bool stop_requested = false;
    std::atomic<bool> watchdog_stop{false};

    explicit Impl(ServerOptions o) : opt(std::move(o)), queue(opt.max_queue) {}

    void setup_routes();
    void watchdog_loop();

    bool require_ready(httplib::Response& res) const;
    bool authorized(const httplib::Request& req, httplib::Response& res) const;
    // The Access-Control-Allow-Origin for this request under --cors ("" : none).
    std::string cors_origin(const httplib::Request& req) const;
    bool read_body(const httplib::ContentReader& reader, httplib::Response& res, std::string& body) const;

    void handle_health(httplib::Response& res);
    void handle_models(httplib::Response& res);
    void handle_metrics(httplib::Response& res);
    void handle_tokenize(const std::string& body, httplib::Response& res);
    void handle_detokenize(const std::string& body, httplib::Response& res);
    void handle_slot_action(const httplib::Request& req, const std::string& body, httplib::Response& res);

    // The generation path (generate_handler.cpp): validate, tokenize, queue, then answer or stream.
    void handle_generate(const httplib::Request& req, const std::string& body, httplib::Response& res,
                         ResponseKind kind);
    std::optional<ApiError> render_prompt(ParsedRequest& pr, std::string& prompt);  // chat: the template's text
    std::optional<ApiError> tokenize_prompt(ParsedRequest& pr);
    std::shared_ptr<Job> make_job(const httplib::Request& req, std::string id, const std::string& session_id);
    // The engine's turn for `job`, or null (answered) when the queue is full, the server stops,
    // the deadline passes or the client hangs up first.
    // `wait` false: the ticket only (a stream waits in await_turn_streaming, headers already out).
    std::shared_ptr<Turn> enter_queue(Job& job, httplib::Response& res, bool wait = true);
    bool await_turn_streaming(Job& job, Turn& turn, httplib::DataSink& sink,
                              const std::function<void(const ApiError&)>& on_error);
    bool wait_turn(Job& job, uint64_t ticket, httplib::Response& res);
    void answer(const ResponseShape& shape, const std::shared_ptr<Job>& job, const ParsedRequest& pr,
                const std::shared_ptr<Turn>& turn, httplib::Response& res);
    void checkpoint_and_release(Turn& turn);
    // After a whole-answer generation: an error (500) or a hung-up client (499) answered here,
    // the turn released; false when the answer is the caller's to send.
    bool answered_failure(const GenerateResult& r, const Job& job, Turn& turn, httplib::Response& res);
    // A whole answer's body; the engine's turn is held until it is written.
    void send_body(const std::shared_ptr<Turn>& turn, std::string body, httplib::Response& res);
    // A stream: the headers go out when the handler returns, then `body` writes the stream from
    // the content provider (waiting for the engine there first); a fault is logged and ends it.
    void start_stream(httplib::Response& res, const char* content_type, const std::shared_ptr<Job>& job,
                      const std::shared_ptr<Turn>& turn, std::function<bool(httplib::DataSink&)> body);
    void stream(const ResponseShape& shape, const std::shared_ptr<Job>& job, const std::shared_ptr<ParsedRequest>& pr,
                const std::shared_ptr<Turn>& turn, httplib::Response& res);
    // Ollama's API (ollama_handler.cpp): /api/chat and /api/generate (`chat` false), the model
    // listings, and the model-management endpoints refused.
    void handle_ollama_generate(const httplib::Request& req, const std::string& body, httplib::Response& res, bool chat);
    void ollama_stream(const std::shared_ptr<OllamaShape>& shape, const std::shared_ptr<Job>& job,
                       const std::shared_ptr<OllamaRequest>& orq, const std::shared_ptr<Turn>& turn, int64_t queue_ns,
                       httplib::Response& res);
    void handle_ollama_tags(httplib::Response& res);
    void handle_ollama_ps(httplib::Response& res);
    void handle_ollama_show(const std::string& body, httplib::Response& res);
    OllamaModel ollama_model() const;

    // llama-server's endpoints and /v1/models/{id} (llama_handlers.cpp).
    Json model_json() const;
    void handle_model(const std::string& id, httplib::Response& res);
    void handle_props(httplib::Response& res);
    void handle_slots(httplib::Response& res);
    void handle_apply_template(const std::string& body, httplib::Response& res);
    void handle_llama_completion(const httplib::Request& req, const std::string& body, httplib::Response& res);

    // OpenAI's Responses API (responses_handler.cpp).
    void handle_responses(const httplib::Request& req, const std::string& body, httplib::Response& res);
    void handle_response_get(const std::string& id, httplib::Response& res);
    void handle_response_delete(const std::string& id, httplib::Response& res);

    GenerateResult run_generation(const std::shared_ptr<Job>& job, const GenerateRequest& gen, const PieceCallback& cb);
};

}  // namespace jllm::server
