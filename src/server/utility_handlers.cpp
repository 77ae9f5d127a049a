// server/utility_handlers.cpp — the endpoints that do not generate: /health, /v1/models,
// /metrics, /tokenize and /detokenize.
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/timer.h"
#include "server/connection_watch.h"
#include "server/api_error.h"
#include "server/json_util.h"
#include "server/metrics.h"
#include "server/server_impl.h"

namespace jllm::server {

namespace {

// The body as a JSON object; false once a 400 has been sent.
bool parse_object_body(const std::string& body, httplib::Response& res, Json& j) {
    std::string err;
    if (!parse_json_body(body, j, err)) {
        send_error(res, invalid_request(err, "", "invalid_json"));
        return false;
    }
    if (!j.is_object()) {
        send_error(res, invalid_request("the request body must be a JSON object"));
        return false;
    }
    return true;
}

}  // namespace

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
    send_json(res, Json{{"object", "list"}, {"data", Json::array({model_json()})}});
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
        g.sessions = engine.session_stats();
    }
    g.kv_used_tokens = kv_used.load();
    g.rss_bytes = process_rss_bytes();
    res.status = 200;
    res.set_content(metrics.render(g), "text/plain; version=0.0.4");
}

void HttpServer::Impl::handle_tokenize(const std::string& body, httplib::Response& res) {
    Json j;
    if (!require_ready(res) || !parse_object_body(body, res, j)) return;
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
    Json j;
    if (!require_ready(res) || !parse_object_body(body, res, j)) return;
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

// POST /slots/0?action=save|restore|erase, body {"filename": NAME} (save, restore): the resident
// sequence to or from a snapshot file under <kv-dir>/slots/, as llama-server's slot API. Run in the
// engine's turn, like a generation.
void HttpServer::Impl::handle_slot_action(const httplib::Request& req, const std::string& body, httplib::Response& res) {
    if (!require_ready(res)) return;
    if (req.matches.size() < 2 || req.matches[1] != "0") {
        return send_error(res, invalid_request("this server has one slot: id 0", "id_slot", "invalid_slot"));
    }
    const std::string action = req.has_param("action") ? req.get_param_value("action") : "";
    if (action != "save" && action != "restore" && action != "erase") {
        return send_error(res, invalid_request("action must be save, restore or erase", "action"));
    }
    std::string filename;
    if (action != "erase") {
        Json j;
        std::string err;
        if (!parse_json_body(body, j, err)) return send_error(res, invalid_request(err, "", "invalid_json"));
        const auto it = j.is_object() ? j.find("filename") : j.end();
        if (it == j.end() || !it->is_string()) return send_error(res, invalid_request("'filename' (a string) is required", "filename"));
        filename = it->get<std::string>();
        const bool bad = filename.empty() || filename.size() > 200 || filename[0] == '.' ||
                         filename.find('/') != std::string::npos || filename.find('\\') != std::string::npos;
        if (bad) return send_error(res, invalid_request("'filename' must be a plain file name (no path, not hidden)", "filename"));
        if (opt.engine.kv_dir.empty()) {
            return send_error(res, invalid_request("slot save and restore need the server's --kv-dir", "filename", "no_kv_dir"));
        }
    }
    Job job;
    job.deadline = Clock::now() + std::chrono::seconds(opt.timeout_s);
    job.peer.fd = find_connection_fd(req.remote_addr, req.remote_port, req.local_port);
    job.peer.http11 = req.version == "HTTP/1.1";
    const uint64_t ticket = queue.enter();
    if (ticket == 0) return send_error(res, unavailable("the server is busy (--max-queue)", "queue_full", 1));
    Turn turn(queue, ticket);
    if (!wait_turn(job, ticket, res)) return;
    if (action == "erase") {
        const int64_t n = static_cast<int64_t>(engine.resident_tokens().size());
        engine.clear_cache();
        kv_used.store(0);
        return send_json(res, Json{{"id_slot", 0}, {"n_erased", n}});
    }
    const std::string folder = opt.engine.kv_dir + "/slots";
    if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
        return send_error(res, internal_error(strfmt("cannot create %s: %s", folder.c_str(), std::strerror(errno))));
    }
    const std::string path = folder + "/" + filename;
    int n = 0;
    int64_t bytes = 0;
    const double t0 = now_ms();
    const Status st = action == "save" ? engine.save_sequence(path, &n, &bytes) : engine.restore_sequence(path, &n, &bytes);
    const double ms = now_ms() - t0;
    if (!st.ok) return send_error(res, invalid_request(action + " failed: " + st.message, "filename", "slot_" + action + "_failed"));
    kv_used.store(static_cast<int64_t>(engine.resident_tokens().size()));
    if (action == "save") {
        return send_json(res, Json{{"id_slot", 0}, {"filename", filename}, {"n_saved", n}, {"n_written", bytes},
                                   {"timings", {{"save_ms", ms}}}});
    }
    send_json(res, Json{{"id_slot", 0}, {"filename", filename}, {"n_restored", n}, {"n_read", bytes},
                        {"timings", {{"restore_ms", ms}}}});
}

}  // namespace jllm::server
