// server/http_server.cpp — the server's lifecycle and plumbing: bind, run (load the model,
// serve, shut down gracefully), the disconnect/timeout watchdog, the API-key and body checks,
// and the routes. The endpoints are in utility_handlers.cpp and generate_handler.cpp.
// Threads: cpp-httplib's pool runs the handlers (one generation at a time through RequestQueue);
// a watchdog polls the running request's socket and deadline and calls Engine::cancel().
#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>
#include <utility>

#include <malloc.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/half_closed.h"
#include "server/json_util.h"
#include "server/ollama_api.h"
#include "server/server_impl.h"
#include "server/service_notify.h"

namespace jllm::server {

namespace {

constexpr int LISTEN_BACKLOG = 1024;  // pending connections the kernel keeps for accept()
constexpr size_t LARGE_BODY = 1u << 20;  // after a body this large, free heap pages go back

// Set by read_body on the worker thread that serves the request; read by the logger, which runs
// on the same thread after the response has been written.
thread_local bool t_large_body = false;
}  // namespace

// Set on the worker thread whose request ran a generation (see the logger).
thread_local bool t_generated = false;

namespace {

std::string endpoint_label(const std::string& path) {
    static const char* known[] = {"/health", "/v1/models", "/models", "/v1/chat/completions", "/chat/completions",
                                  "/v1/completions", "/completions", "/tokenize", "/detokenize", "/metrics",
                                  "/v1/responses", "/completion", "/props", "/slots", "/apply-template",
                                  "/api/chat", "/api/generate", "/api/tags", "/api/show", "/api/ps", "/api/version"};
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

}  // namespace

thread_local bool t_ollama_api = false;

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    res.set_content(dump_json(t_ollama_api ? ollama_error(e.message) : error_json(e)), "application/json");
}

void send_json(httplib::Response& res, const Json& j, int status) {
    res.status = status;
    res.set_content(dump_json(j), "application/json");
}

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
        // Idle keep-alive connections would hold the listener's workers for their idle timeout.
        const int idle = m.port > 0 ? shut_down_reads(m.port) : 0;
        if (idle > 0) JLLM_LOG_DEBUG("[server] closed %d idle connection(s)", idle);
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
    notify_status("loading " + m.opt.engine.model_path);
    // Under systemd's watchdog: pings while the listener runs (loading included).
    Watchdog watchdog_pings([&m] { return m.http.is_running(); });
    const Status st = m.engine.load(m.opt.engine);
    if (!st.ok) {
        JLLM_LOG_ERROR("%s", st.message.c_str());
        notify_status("the model failed to load: " + st.message);
        m.state.store(State::Failed);
        return finish(1);
    }
    m.info = m.engine.model_info();
    m.created_unix = static_cast<int64_t>(std::time(nullptr));
    {
        struct stat mst{};
        m.model_modified_unix = ::stat(m.info.path.c_str(), &mst) == 0 ? static_cast<int64_t>(mst.st_mtime) : m.created_unix;
    }
    {
        std::lock_guard<std::mutex> lk(m.stop_mu);
        if (!m.stop_requested) m.state.store(State::Ready);
    }
    JLLM_LOG_INFO("[server] ready: model '%s' (%s, %s), ctx %lld, KV %s, weights %.1f MiB, KV %.1f MiB, loaded in %.0f ms",
                  m.alias.c_str(), m.info.arch.c_str(), m.info.device.c_str(), static_cast<long long>(m.info.n_ctx),
                  m.info.kv_type.c_str(), m.info.weight_bytes / 1048576.0, m.info.kv_bytes / 1048576.0, m.info.load_ms);
    JLLM_LOG_INFO("[server] speculative decoding: %s%s%s", m.info.spec.c_str(),
                  m.info.draft_path.empty() ? "" : ", draft model ",
                  m.info.draft_path.empty()
                      ? ""
                      : strfmt("%s (%s), drafting from %lld of %lld tokens and the request's own, while p >= %g",
                               m.info.draft_name.c_str(), m.info.draft_path.c_str(),
                               static_cast<long long>(m.info.draft_vocab), static_cast<long long>(m.info.n_vocab),
                               static_cast<double>(m.info.draft_p_min))
                            .c_str());
    notify_ready(strfmt("serving '%s' on http://%s:%d", m.alias.c_str(), m.opt.host.c_str(), m.port));

    {
        std::unique_lock<std::mutex> lk(m.stop_mu);
        m.stop_cv.wait(lk, [&] { return m.stop_requested; });
    }
    JLLM_LOG_INFO("[server] shutting down: cancelling the running generation, refusing queued requests");
    notify_stopping("shutting down");
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
        } else if (client_gone(active->peer, /*may_probe=*/!active->response_started.load(),
                               /*writes_tell=*/active->response_started.load())) {
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

std::string HttpServer::Impl::cors_origin(const httplib::Request& req) const {
    const std::string origin = req.get_header_value("Origin");
    for (const std::string& o : opt.cors_origins) {
        if (o == "*") return "*";
        if (!origin.empty() && o == origin) return origin;
    }
    return {};
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
    t_large_body = too_big || body.size() >= LARGE_BODY;
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
        t_ollama_api = req.path.compare(0, 5, "/api/") == 0;
        send_error(res, e);
        t_ollama_api = false;
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
    // CORS, with --cors: preflights answered before routing, the allowed origin on every answer.
    if (!opt.cors_origins.empty()) {
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (req.method != "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
            res.status = 204;
            if (const std::string origin = cors_origin(req); !origin.empty()) {
                res.set_header("Access-Control-Allow-Origin", origin);
                res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
                const std::string asked = req.get_header_value("Access-Control-Request-Headers");
                res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
                res.set_header("Access-Control-Max-Age", "600");
                res.set_header("Vary", "Origin");
            }
            return httplib::Server::HandlerResponse::Handled;
        });
    }
    // A client that half-closed after its request still gets the answer (see half_closed.h).
    http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!opt.cors_origins.empty() && req.method != "OPTIONS") {
            if (const std::string origin = cors_origin(req); !origin.empty()) {
                res.set_header("Access-Control-Allow-Origin", origin);
                res.set_header("Vary", "Origin");
            }
        }
        deliver_to_half_closed(req, res);
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        metrics.count_request(endpoint_label(req.path), res.status);
#ifdef __GLIBC__
        // After a large body or a generation, the request's freed heap pages go back to the
        // system, so RSS between requests is what is live. After the answer is out, off the
        // client's path: 0.12 ms median, 0.6 ms at most over a soak's 158 generations.
        if (t_large_body || t_generated) malloc_trim(0);
#endif
        t_large_body = false;
        t_generated = false;
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

    // Ollama's endpoints: their errors in Ollama's shape, whichever helper sends them.
    auto api = [guarded](auto&& fn, httplib::Response& res) {
        t_ollama_api = true;
        guarded(fn, res);
        t_ollama_api = false;
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
                if (read_body(reader, res, body) && authorized(req, res)) handle_generate(req, body, res, ResponseKind::Chat);
            }, res);
        });
    }
    for (const char* path : {"/v1/completions", "/completions"}) {
        http.Post(path, [this, guarded](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
            guarded([&] {
                std::string body;
                if (read_body(reader, res, body) && authorized(req, res)) handle_generate(req, body, res, ResponseKind::Completion);
            }, res);
        });
    }
    // llama-server's own endpoints (llama_handlers.cpp).
    http.Post("/completion", [this, guarded](const httplib::Request& req, httplib::Response& res,
                                             const httplib::ContentReader& reader) {
        guarded([&] {
            std::string body;
            if (read_body(reader, res, body) && authorized(req, res)) handle_llama_completion(req, body, res);
        }, res);
    });
    http.Post("/apply-template", [this, guarded](const httplib::Request& req, httplib::Response& res,
                                                 const httplib::ContentReader& reader) {
        guarded([&] {
            std::string body;
            if (read_body(reader, res, body) && authorized(req, res)) handle_apply_template(body, res);
        }, res);
    });
    http.Get("/props", [this, guarded](const httplib::Request& req, httplib::Response& res) {
        guarded([&] {
            if (authorized(req, res)) handle_props(res);
        }, res);
    });
    http.Get("/slots", [this, guarded](const httplib::Request& req, httplib::Response& res) {
        guarded([&] {
            if (authorized(req, res)) handle_slots(res);
        }, res);
    });
    http.Get(R"(/v1/models/(.+))", [this, guarded](const httplib::Request& req, httplib::Response& res) {
        guarded([&] {
            if (authorized(req, res)) handle_model(req.matches[1], res);
        }, res);
    });

    // OpenAI's Responses API (responses_handler.cpp).
    for (const char* path : {"/v1/responses", "/responses"}) {
        http.Post(path, [this, guarded](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
            guarded([&] {
                std::string body;
                if (read_body(reader, res, body) && authorized(req, res)) handle_responses(req, body, res);
            }, res);
        });
    }
    http.Get(R"(/v1/responses/([A-Za-z0-9_]+))", [this, guarded](const httplib::Request& req, httplib::Response& res) {
        guarded([&] {
            if (authorized(req, res)) handle_response_get(req.matches[1], res);
        }, res);
    });
    http.Delete(R"(/v1/responses/([A-Za-z0-9_]+))", [this, guarded](const httplib::Request& req, httplib::Response& res) {
        guarded([&] {
            if (authorized(req, res)) handle_response_delete(req.matches[1], res);
        }, res);
    });

    // Ollama's API (ollama_handler.cpp).
    for (auto [path, chat] : {std::pair<const char*, bool>{"/api/chat", true}, {"/api/generate", false}}) {
        http.Post(path, [this, api, chat = chat](const httplib::Request& req, httplib::Response& res,
                                                     const httplib::ContentReader& reader) {
            api([&] {
                std::string body;
                if (read_body(reader, res, body) && authorized(req, res)) handle_ollama_generate(req, body, res, chat);
            }, res);
        });
    }
    http.Get("/api/version", [api](const httplib::Request&, httplib::Response& res) {
        api([&] { send_json(res, Json{{"version", OLLAMA_API_VERSION}}); }, res);
    });
    http.Get("/api/tags", [this, api](const httplib::Request& req, httplib::Response& res) {
        api([&] {
            if (authorized(req, res)) handle_ollama_tags(res);
        }, res);
    });
    http.Get("/api/ps", [this, api](const httplib::Request& req, httplib::Response& res) {
        api([&] {
            if (authorized(req, res)) handle_ollama_ps(res);
        }, res);
    });
    http.Post("/api/show", [this, api](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
        api([&] {
            std::string body;
            if (read_body(reader, res, body) && authorized(req, res)) handle_ollama_show(body, res);
        }, res);
    });
    // No embeddings from a generator; models are chosen when the service starts.
    auto refuse = [this, api](int status, std::string message) {
        return [this, api, status, message](const httplib::Request& req, httplib::Response& res,
                                                const httplib::ContentReader& reader) {
            api([&] {
                std::string body;
                if (!read_body(reader, res, body) || !authorized(req, res)) return;
                ApiError e = invalid_request(message, "", "unsupported_endpoint");
                e.status = status;
                send_error(res, e);
            }, res);
        };
    };
    for (const char* path : {"/api/embed", "/api/embeddings"}) {
        http.Post(path, refuse(501, "this server does not compute embeddings: its model is a text generator"));
    }
    for (const char* path : {"/api/pull", "/api/push", "/api/create", "/api/copy", "/api/delete", R"(/api/blobs/(.+))"}) {
        const std::string what = std::string(path).substr(5, std::string(path).find_first_of("/(", 5) - 5);
        const std::string msg = "models are managed by the service: the model is chosen when jetson-llm-server starts "
                                "(-m), so /api/" + what + " is not available";
        http.Post(path, refuse(403, msg));
        if (what == "delete") http.Delete(path, refuse(403, msg));
    }

    // llama-server's slot actions on the one slot (the resident sequence): /slots/0?action=...
    http.Post(R"(/slots/(\d+))", [this, guarded](const httplib::Request& req, httplib::Response& res,
                                                 const httplib::ContentReader& reader) {
        guarded([&] {
            std::string body;
            if (read_body(reader, res, body) && authorized(req, res)) handle_slot_action(req, body, res);
        }, res);
    });
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

}  // namespace jllm::server
