// server/http_server.h — jetson-llm-server's HTTP service: one Engine behind a bounded FIFO
// queue, the OpenAI-compatible endpoints, SSE streaming, API-key check, cancellation on client
// disconnect and timeout, and a graceful shutdown. Handlers never throw: every failure becomes
// an OpenAI error object with its HTTP status (docs/server.md lists them).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "jllm_engine.h"
#include "server/request_parse.h"

namespace jllm::server {

struct ServerOptions {
    EngineConfig engine;
    std::string host = "127.0.0.1";
    int port = 8080;                     // 0: any free port (bound_port() says which)
    std::vector<std::string> api_keys;   // empty: no key needed
    std::string alias;                   // the model name served; empty: the model file's stem
    int max_queue = 16;                  // requests waiting behind the one generating
    int timeout_s = 600;                 // per request, queue wait included
    RequestDefaults defaults;            // for fields a request leaves out
    size_t max_body_bytes = 16u << 20;   // larger bodies: 413
    std::vector<std::string> cors_origins;  // --cors: origins browsers may call from ("*": any); empty: no CORS
};

class HttpServer {
public:
    explicit HttpServer(ServerOptions options);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds the listening socket; false with a message when it cannot.
    bool bind(std::string& error);
    int bound_port() const;

    // Serves (answering /health with 503 while the model loads), loads the model, then serves
    // until request_shutdown(). Returns the process exit code: 0 after a clean shutdown, 1 when
    // the model failed to load.
    int run();

    // Any thread (not a signal handler): stop taking requests, cancel the running generation,
    // answer it, and make run() return.
    void request_shutdown();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace jllm::server
