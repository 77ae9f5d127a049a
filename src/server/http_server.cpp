// server/http_server.cpp — routes, handlers, the generation path (validate, render, tokenize,
// queue, generate, answer or stream), the disconnect/timeout watchdog and the shutdown sequence.
// Threads: cpp-httplib's pool runs the handlers (one generation at a time through RequestQueue);
// a watchdog polls the running request's socket and deadline and calls Engine::cancel().
#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <thread>
#include <utility>

#include <sys/socket.h>

#include "core/error.h"
#include "core/log.h"
#include "engine/chat_template.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/json_util.h"
#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/request_queue.h"

namespace jllm::server {

namespace {

constexpr int LISTEN_BACKLOG = 1024;  // pending connections the kernel keeps for accept()

enum class State { Loading, Ready, Failed, Stopping };

enum CancelReason : int { NONE = 0, DISCONNECT = 1, TIMEOUT = 2, SHUTDOWN = 3 };

using Clock = std::chrono::steady_clock;

// One generation request while it waits or runs.
struct Job {
    std::string id;
    std::string session_id;
    int fd = -1;                    // the client's socket, for hang-up polls (-1: unknown)
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

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    res.set_content(dump_json(error_json(e)), "application/json");
}

void send_json(httplib::Response& res, const Json& j, int status = 200) {
    res.status = status;
    res.set_content(dump_json(j), "application/json");
}

std::string endpoint_label(const std::string& path) {
    static const char* known[] = {"/health", "/v1/models", "/models", "/v1/chat/completions", "/chat/completions",
                                  "/v1/completions", "/completions", "/tokenize", "/detokenize", "/metrics"};
    for (const char* k : known) {
        if (path == k) return k;
    }
    return "other";
}

std::string file_stem(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
    return name;
}

// Constant-time comparison: the time taken does not depend on where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
    return diff == 0 && !b.empty();
}

// True when the rendered prompt leaves the model inside an opened <think> block.
bool prompt_opens_thinking(const std::string& prompt) {
    size_t end = prompt.size();
    while (end > 0 && (prompt[end - 1] == '\n' || prompt[end - 1] == ' ')) end--;
    static const std::string tag = "<think>";
    return end >= tag.size() && prompt.compare(end - tag.size(), tag.size(), tag) == 0;
}

}  // namespace

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
    int port = -1;
    // The socket cpp-httplib last created for listening (its socket-options hook sees each one
    // before bind): bind() raises its backlog afterwards.
    socket_t listen_sock = INVALID_SOCKET;

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
    bool read_body(const httplib::ContentReader& reader, httplib::Response& res, std::string& body) const;

    void handle_health(httplib::Response& res);
    void handle_models(httplib::Response& res);
    void handle_metrics(httplib::Response& res);
    void handle_tokenize(const std::string& body, httplib::Response& res);
    void handle_detokenize(const std::string& body, httplib::Response& res);
    void handle_generate(const httplib::Request& req, const std::string& body, httplib::Response& res, bool chat);

    GenerateResult run_generation(const std::shared_ptr<Job>& job, const GenerateRequest& gen, const PieceCallback& cb);
};

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
    impl_->http.stop();
    impl_->watchdog_stop.store(true);
}

int HttpServer::bound_port() const { return impl_->port; }

bool HttpServer::bind(std::string& error) {
    Impl& m = *impl_;
    m.alias = m.opt.alias.empty() ? file_stem(m.opt.engine.model_path) : m.opt.alias;
    m.setup_routes();
    if (m.opt.port == 0) {
        m.port = m.http.bind_to_any_port(m.opt.host);
    } else {
        m.port = m.http.bind_to_port(m.opt.host, m.opt.port) ? m.opt.port : -1;
    }
    if (m.port <= 0) {
        error = strfmt("cannot listen on %s:%d (address in use, or not an address of this machine)",
                       m.opt.host.c_str(), m.opt.port);
        return false;
    }
    // The packaged cpp-httplib listens with a backlog of 5: a burst of new connections (clients
    // that open one per request) overflows it, and with SYN cookies the kernel then answers the
    // dropped connections' requests with a reset. listen() on a listening socket sets a new
    // backlog (the kernel caps it at net.core.somaxconn).
    if (m.listen_sock == INVALID_SOCKET || ::listen(m.listen_sock, LISTEN_BACKLOG) != 0) {
        log_msg(LogLevel::Warn, "server: could not raise the listen backlog to %d; bursts of connections may be refused",
                LISTEN_BACKLOG);
    }
    return true;
}

void HttpServer::request_shutdown() {
    Impl& m = *impl_;
    // Notified under the lock: run() may return and destroy the condition variable as soon as
    // it sees the flag, so this thread must be done with it by then.
    std::lock_guard<std::mutex> lk(m.stop_mu);
    m.stop_requested = true;
    m.stop_cv.notify_all();
}

int HttpServer::run() {
    Impl& m = *impl_;
    std::thread listener([&m] { m.http.listen_after_bind(); });
    std::thread watchdog([&m] { m.watchdog_loop(); });
    auto finish = [&](int code) {
        m.http.stop();
        listener.join();
        m.watchdog_stop.store(true);
        watchdog.join();
        return code;
    };

    // stop() only reaches a server that has started listening: wait for it, so a model that
    // fails to load at once cannot leave the listener running.
    const auto listen_deadline = Clock::now() + std::chrono::seconds(10);
    while (!m.http.is_running() && Clock::now() < listen_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    JLLM_LOG_INFO("[server] listening on http://%s:%d (model loading)", m.opt.host.c_str(), m.port);
    const Status st = m.engine.load(m.opt.engine);
    if (!st.ok) {
        JLLM_LOG_ERROR("%s", st.message.c_str());
        m.state.store(State::Failed);
        return finish(1);
    }
    m.info = m.engine.model_info();
    m.created_unix = static_cast<int64_t>(std::time(nullptr));
    {
        std::lock_guard<std::mutex> lk(m.stop_mu);
        if (!m.stop_requested) m.state.store(State::Ready);
    }
    JLLM_LOG_INFO("[server] ready: model '%s' (%s, %s), ctx %lld, KV %s, weights %.1f MiB, KV %.1f MiB, loaded in %.0f ms",
                  m.alias.c_str(), m.info.arch.c_str(), m.info.device.c_str(), static_cast<long long>(m.info.n_ctx),
                  m.info.kv_type.c_str(), m.info.weight_bytes / 1048576.0, m.info.kv_bytes / 1048576.0, m.info.load_ms);

    {
        std::unique_lock<std::mutex> lk(m.stop_mu);
        m.stop_cv.wait(lk, [&] { return m.stop_requested; });
    }
    JLLM_LOG_INFO("[server] shutting down: cancelling the running generation, refusing queued requests");
    m.state.store(State::Stopping);
    m.queue.wake_all();
    // The watchdog cancels the running generation; wait for its answer to be sent.
    const auto until = Clock::now() + std::chrono::seconds(20);
    while ((m.queue.busy() || m.queue.waiting() > 0) && Clock::now() < until) {
        m.engine.cancel();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return finish(0);
}

void HttpServer::Impl::watchdog_loop() {
    while (!watchdog_stop.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::lock_guard<std::mutex> lk(active_mu);
        if (!active) continue;
        int reason = NONE;
        if (state.load() == State::Stopping) {
            reason = SHUTDOWN;
        } else if (Clock::now() > active->deadline) {
            reason = TIMEOUT;
        } else if (connection_closed(active->fd)) {
            reason = DISCONNECT;
        }
        if (reason != NONE) {
            int expected = NONE;
            active->cancel_reason.compare_exchange_strong(expected, reason);
        }
        // Repeated while the job is active: a cancel() landing before generate() resets its flag
        // is not lost. Under active_mu, so it never reaches the next request's generation.
        if (active->cancel_reason.load() != NONE) engine.cancel();
    }
}

bool HttpServer::Impl::require_ready(httplib::Response& res) const {
    switch (state.load()) {
        case State::Ready: return true;
        case State::Loading: send_error(res, unavailable("the model is loading", "loading", 5)); return false;
        case State::Stopping: send_error(res, unavailable("the server is shutting down", "shutting_down", 5)); return false;
        case State::Failed: send_error(res, unavailable("the model failed to load", "load_failed", 0)); return false;
    }
    return false;
}

// The key is checked after the body is read, so a refused request leaves the connection in step
// for the client's next request on it.
bool HttpServer::Impl::authorized(const httplib::Request& req, httplib::Response& res) const {
    if (opt.api_keys.empty()) return true;
    std::string key;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.size() > 7 && (auth.compare(0, 7, "Bearer ") == 0 || auth.compare(0, 7, "bearer ") == 0)) {
        key = auth.substr(7);
    } else if (req.has_header("X-Api-Key")) {
        key = req.get_header_value("X-Api-Key");
    }
    bool ok = false;
    for (const std::string& k : opt.api_keys) ok |= same_secret(key, k);
    if (ok) return true;
    ApiError e;
    e.status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    e.message = key.empty() ? "an API key is required (send 'Authorization: Bearer KEY')" : "the API key is not valid";
    send_error(res, e);
    res.set_header("WWW-Authenticate", "Bearer");
    return false;
}

bool HttpServer::Impl::read_body(const httplib::ContentReader& reader, httplib::Response& res, std::string& body) const {
    bool too_big = false;
    const bool ok = reader([&](const char* data, size_t len) {
        if (body.size() + len > opt.max_body_bytes) {
            too_big = true;
            return false;
        }
        body.append(data, len);
        return true;
    });
    if (too_big || res.status == 413) {
        ApiError e = invalid_request(strfmt("the request body is larger than %zu bytes", opt.max_body_bytes), "",
                                     "payload_too_large");
        e.status = 413;
        send_error(res, e);
        res.set_header("Connection", "close");
        return false;
    }
    if (!ok) {
        send_error(res, invalid_request("the request body could not be read", "", "bad_body"));
        res.set_header("Connection", "close");
        return false;
    }
    return true;
}

void HttpServer::Impl::setup_routes() {
    const int threads = std::max(64, std::min(opt.max_queue, 1000) + 32);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    http.set_payload_max_length(opt.max_body_bytes);
    http.set_keep_alive_timeout(3);
    // cpp-httplib's default also sets SO_REUSEPORT, which would let a second server share the port.
    http.set_socket_options([this](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
        listen_sock = sock;
    });
    http.set_read_timeout(30, 0);
    http.set_write_timeout(10, 0);

    // Statuses set by cpp-httplib itself (404, 413, 400 for a malformed request) get a body here.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                       httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e;
        e.status = res.status;
        if (res.status == 404) {
            e.type = "not_found_error";
            e.code = "not_found";
            e.message = "no such endpoint: " + req.method + " " + req.path;
        } else if (res.status == 413) {
            e.code = "payload_too_large";
            e.message = strfmt("the request body is larger than %zu bytes", opt.max_body_bytes);
        } else if (res.status >= 500) {
            e.type = "server_error";
            e.code = "internal_error";
            e.message = "internal error";
        } else {
            e.code = "bad_request";
            e.message = "malformed HTTP request";
        }
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        JLLM_LOG_ERROR("[server] handler fault: %s", what.c_str());
        send_error(res, internal_error("internal error: " + what));
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        metrics.count_request(endpoint_label(req.path), res.status);
        JLLM_LOG_DEBUG("[server] %s %s -> %d", req.method.c_str(), req.path.c_str(), res.status);
    });

    // Every handler body is wrapped: nothing escapes as an exception (STYLE.md tier 4).
    auto guarded = [](auto&& fn, httplib::Response& res) {
        try {
            fn();
        } catch (const std::exception& e) {
            JLLM_LOG_ERROR("[server] handler fault: %s", e.what());
            send_error(res, internal_error(std::string("internal error: ") + e.what()));
        } catch (...) {
            send_error(res, internal_error("internal error"));
        }
    };

    http.Get("/health", [this, guarded](const httplib::Request&, httplib::Response& res) {
        guarded([&] { handle_health(res); }, res);
    });
    for (const char* path : {"/v1/models", "/models"}) {
        http.Get(path, [this, guarded](const httplib::Request& req, httplib::Response& res) {
            guarded([&] {
                if (authorized(req, res)) handle_models(res);
            }, res);
        });
    }
    http.Get("/metrics", [this, guarded](const httplib::Request& req, httplib::Response& res) {
        guarded([&] {
            if (authorized(req, res)) handle_metrics(res);
        }, res);
    });
    for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
        http.Post(path, [this, guarded](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
            guarded([&] {
                std::string body;
                if (read_body(reader, res, body) && authorized(req, res)) handle_generate(req, body, res, true);
            }, res);
        });
    }
    for (const char* path : {"/v1/completions", "/completions"}) {
        http.Post(path, [this, guarded](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
            guarded([&] {
                std::string body;
                if (read_body(reader, res, body) && authorized(req, res)) handle_generate(req, body, res, false);
            }, res);
        });
    }
    http.Post("/tokenize", [this, guarded](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
        guarded([&] {
            std::string body;
            if (read_body(reader, res, body) && authorized(req, res)) handle_tokenize(body, res);
        }, res);
    });
    http.Post("/detokenize", [this, guarded](const httplib::Request& req, httplib::Response& res,
                                             const httplib::ContentReader& reader) {
        guarded([&] {
            std::string body;
            if (read_body(reader, res, body) && authorized(req, res)) handle_detokenize(body, res);
        }, res);
    });
}

void HttpServer::Impl::handle_health(httplib::Response& res) {
    const State s = state.load();
    const char* status = s == State::Ready ? "ok" : s == State::Loading ? "loading" : s == State::Stopping ? "shutting_down" : "error";
    Json j = {{"status", status}, {"model", alias}};
    if (s == State::Ready || s == State::Stopping) {
        j["model_info"] = {{"path", info.path}, {"arch", info.arch}, {"name", info.name}, {"backend", info.backend},
                           {"device", info.device}, {"n_ctx", info.n_ctx}, {"n_ctx_train", info.n_ctx_train},
                           {"n_vocab", info.n_vocab}};
        j["memory"] = {{"weight_bytes", info.weight_bytes}, {"kv_bytes", info.kv_bytes}, {"kv_type", info.kv_type},
                       {"file_bytes", info.file_bytes}, {"process_rss_bytes", process_rss_bytes()}};
        j["kv"] = {{"used_tokens", kv_used.load()}, {"n_ctx", info.n_ctx}};
    } else {
        j["model_info"] = nullptr;
        j["memory"] = nullptr;
        j["kv"] = nullptr;
    }
    j["queue"] = {{"waiting", queue.waiting()}, {"capacity", queue.capacity()}, {"generating", queue.busy()}};
    j["thermal"] = nullptr;  // the Jetson HAL is not wired in yet
    j["power"] = nullptr;
    send_json(res, j, s == State::Ready ? 200 : 503);
    if (s == State::Loading) res.set_header("Retry-After", "5");
}

void HttpServer::Impl::handle_models(httplib::Response& res) {
    if (!require_ready(res)) return;
    Json model = {{"id", alias},
                  {"object", "model"},
                  {"created", created_unix},
                  {"owned_by", "jetson-llm"},
                  {"meta", {{"arch", info.arch}, {"n_ctx", info.n_ctx}, {"n_ctx_train", info.n_ctx_train},
                            {"n_vocab", info.n_vocab}, {"n_embd", info.n_embd}, {"size", info.file_bytes}}}};
    send_json(res, Json{{"object", "list"}, {"data", Json::array({model})}});
}

void HttpServer::Impl::handle_metrics(httplib::Response& res) {
    GaugeSnapshot g;
    g.queue_waiting = queue.waiting();
    g.queue_capacity = queue.capacity();
    g.generating = queue.busy();
    g.ready = state.load() == State::Ready;
    if (g.ready || state.load() == State::Stopping) {
        g.n_ctx = info.n_ctx;
        g.weight_bytes = info.weight_bytes;
        g.kv_bytes = info.kv_bytes;
    }
    g.kv_used_tokens = kv_used.load();
    g.rss_bytes = process_rss_bytes();
    res.status = 200;
    res.set_content(metrics.render(g), "text/plain; version=0.0.4");
}

void HttpServer::Impl::handle_tokenize(const std::string& body, httplib::Response& res) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    if (!j.is_object()) return send_error(res, invalid_request("the request body must be a JSON object"));
    const auto c = j.find("content");
    if (c == j.end() || !c->is_string()) return send_error(res, invalid_request("'content' must be a string", "content"));
    bool add_special = false, parse_special = false, with_pieces = false;
    for (auto [key, dst] : {std::pair<const char*, bool*>{"add_special", &add_special},
                            {"parse_special", &parse_special}, {"with_pieces", &with_pieces}}) {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null()) continue;
        if (!it->is_boolean()) return send_error(res, invalid_request(std::string("'") + key + "' must be a boolean", key));
        *dst = it->get<bool>();
    }
    const std::vector<int32_t> ids = engine.tokenize(c->get<std::string>(), parse_special, add_special);
    Json tokens = Json::array();
    for (const int32_t id : ids) {
        if (!with_pieces) {
            tokens.push_back(id);
            continue;
        }
        const std::string piece = engine.detokenize({id});
        Json p = {{"id", id}};
        if (is_valid_utf8(piece)) {
            p["piece"] = piece;
        } else {
            Json bytes = Json::array();
            for (const char ch : piece) bytes.push_back(static_cast<int>(static_cast<unsigned char>(ch)));
            p["piece"] = bytes;
        }
        tokens.push_back(p);
    }
    send_json(res, Json{{"tokens", tokens}});
}

void HttpServer::Impl::handle_detokenize(const std::string& body, httplib::Response& res) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    if (!j.is_object()) return send_error(res, invalid_request("the request body must be a JSON object"));
    const auto t = j.find("tokens");
    if (t == j.end() || !t->is_array()) return send_error(res, invalid_request("'tokens' must be an array of token ids", "tokens"));
    std::vector<int32_t> ids;
    ids.reserve(t->size());
    for (const Json& v : *t) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= info.n_vocab) {
            return send_error(res, invalid_request(strfmt("'tokens' must hold integers in [0, %lld)",
                                                          static_cast<long long>(info.n_vocab)), "tokens"));
        }
        ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    send_json(res, Json{{"content", engine.detokenize(ids)}});
}

GenerateResult HttpServer::Impl::run_generation(const std::shared_ptr<Job>& job, const GenerateRequest& gen,
                                                const PieceCallback& cb) {
    {
        std::lock_guard<std::mutex> lk(active_mu);
        active = job;
    }
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

void HttpServer::Impl::handle_generate(const httplib::Request& req, const std::string& body, httplib::Response& res,
                                       bool chat) {
    if (!require_ready(res)) return;
    Json j;
    std::string err;
    if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
    auto pr = std::make_shared<ParsedRequest>();
    const std::optional<ApiError> perr = chat ? parse_chat_request(j, opt.defaults, info.n_vocab, *pr)
                                              : parse_completion_request(j, opt.defaults, info.n_vocab, *pr);
    if (perr) return send_error(res, *perr);

    // The prompt as tokens: counted (context check) before queueing; the engine gets the ids.
    std::vector<int32_t> tokens;
    const char* prompt_param = chat ? "messages" : "prompt";
    if (chat) {
        ChatRenderOptions ro;
        ro.enable_thinking = pr->enable_thinking;
        std::string prompt;
        try {
            prompt = engine.render_chat(pr->messages, ro);
        } catch (const std::exception& e) {
            return send_error(res, invalid_request(e.what(), "messages"));
        }
        pr->gen.thinking_open = prompt_opens_thinking(prompt);
        tokens = engine.tokenize(prompt, /*parse_special=*/true, /*add_bos=*/false);  // the template places BOS
    } else if (pr->prompt_is_tokens) {
        tokens = pr->prompt_tokens;
    } else {
        tokens = engine.tokenize(pr->prompt_text, /*parse_special=*/false, /*add_bos=*/true);
    }
    if (tokens.empty()) return send_error(res, invalid_request("the prompt is empty", prompt_param));
    if (static_cast<int64_t>(tokens.size()) >= info.n_ctx) {
        return send_error(res, invalid_request(strfmt("the prompt has %zu tokens; the context holds %lld (the prompt and at "
                                                      "least one generated token)",
                                                      tokens.size(), static_cast<long long>(info.n_ctx)),
                                               prompt_param, "context_length_exceeded"));
    }
    pr->gen.prompt_tokens = std::move(tokens);
    pr->gen.prompt.clear();

    auto job = std::make_shared<Job>();
    job->id = make_response_id(chat ? "chatcmpl-" : "cmpl-");
    job->session_id = pr->session_id;
    job->deadline = Clock::now() + std::chrono::seconds(opt.timeout_s);
    job->fd = find_connection_fd(req.remote_addr, req.remote_port, req.local_port);

    const uint64_t ticket = queue.enter();
    if (ticket == 0) {
        return send_error(res, unavailable(strfmt("the server is busy: %d requests are waiting (--max-queue)", queue.capacity()),
                                           "queue_full", 1));
    }
    auto turn = std::make_shared<Turn>(queue, ticket);
    while (!queue.wait_turn(ticket, std::chrono::milliseconds(50))) {
        if (state.load() == State::Stopping) {
            return send_error(res, unavailable("the server is shutting down", "shutting_down", 5));
        }
        if (Clock::now() > job->deadline) {
            metrics.count_timeout();
            return send_error(res, unavailable("timed out waiting for the engine (--timeout)", "timeout", 1));
        }
        if (connection_closed(job->fd)) {
            metrics.count_disconnect();
            res.status = 499;  // client closed the request; nobody reads this answer
            return;
        }
    }
    if (state.load() == State::Stopping) {
        return send_error(res, unavailable("the server is shutting down", "shutting_down", 5));
    }

    ResponseHead head;
    head.id = job->id;
    head.created = static_cast<int64_t>(std::time(nullptr));
    head.model = alias;

    if (!pr->stream) {
        Json lp = nullptr;
        if (pr->logprobs) lp = chat ? Json{{"content", Json::array()}} : empty_completion_logprobs();
        size_t offset = 0;
        const GenerateResult r = run_generation(job, pr->gen, [&](const Piece& p) {
            if (p.channel != Channel::Content) return true;
            if (pr->logprobs) {
                if (chat) {
                    lp["content"].push_back(chat_logprob_entry(p));
                } else {
                    append_completion_logprob(lp, p, offset, pr->top_logprobs > 0);
                }
            }
            offset += p.text.size();
            return true;
        });
        turn->release();
        if (r.finish == FinishReason::Error) {
            return send_error(res, internal_error("generation failed: " + r.error));
        }
        if (job->cancel_reason.load() == DISCONNECT) {
            res.status = 499;
            return;
        }
        const char* finish = openai_finish_reason(r.finish);
        send_json(res, chat ? chat_completion_json(head, r, finish, lp) : completion_json(head, r, finish, lp));
        return;
    }

    // Streaming: headers go out when this handler returns; the provider runs the generation and
    // writes one SSE event per piece. The turn is held until the provider is done (or dropped).
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, pr, turn, head, chat](size_t, httplib::DataSink& sink) -> bool {
            try {
                auto send = [&](const Json& ev) {
                    const std::string s = "data: " + dump_json(ev) + "\n\n";
                    return sink.write(s.data(), s.size());
                };
                bool alive = true;
                if (chat) alive = send(chat_chunk_json(head, Json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
                if (!alive) {
                    job->cancel_reason.store(DISCONNECT);
                    metrics.count_disconnect();
                    return false;
                }
                size_t offset = 0;
                const GenerateResult r = run_generation(job, pr->gen, [&](const Piece& p) {
                    Json lp = nullptr;
                    const bool content = p.channel == Channel::Content;
                    if (pr->logprobs && content) {
                        if (chat) {
                            lp = Json{{"content", Json::array({chat_logprob_entry(p)})}};
                        } else {
                            lp = empty_completion_logprobs();
                            append_completion_logprob(lp, p, offset, pr->top_logprobs > 0);
                        }
                    }
                    if (content) offset += p.text.size();
                    if (chat) {
                        const Json delta = content ? Json{{"content", p.text}} : Json{{"reasoning_content", p.text}};
                        alive = send(chat_chunk_json(head, delta, nullptr, lp));
                    } else {
                        if (!content) return true;
                        alive = send(completion_chunk_json(head, p.text, nullptr, lp));
                    }
                    if (!alive) job->cancel_reason.store(DISCONNECT);
                    return alive;
                });
                turn->release();
                if (!alive || job->cancel_reason.load() == DISCONNECT) return false;
                if (r.finish == FinishReason::Error) {
                    send(error_json(internal_error("generation failed: " + r.error)));
                } else {
                    const char* finish = openai_finish_reason(r.finish);
                    alive = chat ? send(chat_chunk_json(head, Json::object(), finish, nullptr))
                                 : send(completion_chunk_json(head, "", finish, nullptr));
                    if (alive && pr->include_usage) {
                        alive = send(chat ? chat_usage_chunk_json(head, r.stats) : completion_usage_chunk_json(head, r.stats));
                    }
                }
                static const char done[] = "data: [DONE]\n\n";
                if (!sink.write(done, sizeof done - 1)) return false;
                sink.done();
                return true;
            } catch (const std::exception& e) {
                JLLM_LOG_ERROR("[server] stream fault: %s", e.what());
                turn->release();
                return false;
            }
        },
        [turn](bool) { turn->release(); });
}

}  // namespace jllm::server
