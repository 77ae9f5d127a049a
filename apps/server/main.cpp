// apps/server/main.cpp — `jetson-llm-server`: flags (DESIGN.md's flag table plus the server's own,
// and llama-server spellings that mean something here), signal handling (SIGTERM/SIGINT: graceful
// shutdown, exit 0; a second signal exits at once), then HttpServer::run(). Flag errors are one
// line on stderr and exit 2; a model that fails to load exits 1.
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine_flags.h"
#include "jllm.h"
#include "jllm_version.h"
#include "server/http_server.h"

namespace {

const char* PROG = "jetson-llm-server";

// llama-server flags with no counterpart here: accepted with a note (harmless to ignore) or
// refused (ignoring would change what the user asked for).
struct ForeignFlag {
    const char* names;  // '|'-separated spellings
    bool takes_value;
    bool refuse;
    const char* why;
};

const ForeignFlag FOREIGN_FLAGS[] = {
    {"-ngl|--n-gpu-layers|--gpu-layers", true, false,
     "ignored: the whole model runs on the --device backend (auto picks CUDA when present)"},
    {"-cb|--cont-batching|-nocb|--no-cont-batching", false, false, "ignored: one generation runs at a time"},
    {"--metrics", false, false, "ignored: /metrics is always served"},
    {"--jinja", false, false, "ignored: chat templates are built-in renderers (--chat-template)"},
    {"--mlock", false, false, "ignored: weights are mapped or copied per --weights"},
    {"-b|--batch-size|-ub|--ubatch-size", true, false, "ignored: the engine picks its prefill batch"},
    {"--threads-http", true, false, "ignored: the HTTP thread pool is sized from --max-queue"},
    {"--no-webui", false, false, "ignored: there is no web UI"},
    {"--lora|--lora-scaled|--control-vector", true, true, "adapters are not supported"},
    {"--mmproj|--mmproj-url", true, true, "multimodal projectors are not supported"},
    {"--embedding|--embeddings|--reranking|--rerank", false, true, "embeddings and reranking are not supported"},
    {"--ssl-key-file|--ssl-cert-file", true, true, "TLS is not supported (put a proxy in front, or keep 127.0.0.1)"},
    {"--path|--api-prefix", true, true, "static files and API prefixes are not supported"},
    {"-hf|--hf-repo|-mu|--model-url", true, true, "downloads are not supported: pass a local GGUF with -m"},
    {"--slots|--no-slots", false, false, "GET /slots is always served"},
    {"--slot-save-path", true, true, "slot files go to <--kv-dir>/slots: give --kv-dir DIR"},
    {"-sps|--slot-prompt-similarity", true, true, "slots are not supported (one generation at a time)"},
    {"--grammar|--grammar-file|--json-schema", true, true, "a server-wide grammar is not supported: send grammar, json_schema or response_format per request"},
};

// The --help footer: every llama-server spelling this server takes, maps, ignores or refuses.
std::string foreign_flags_help() {
    std::string out =
        "llama-server spellings:\n"
        "  mapped:   -np/--parallel 1 (one generation at a time; other values refused),\n"
        "            -ctk/-ctv/--cache-type-k/--cache-type-v q8_0|f16 (= --kv-type int8|fp16),\n"
        "            -to (= --timeout), --no-mmap (= --weights copy), --cache-reuse N (above),\n"
        "            -md/--model-draft FILE (= --draft FILE), --draft-n/--draft-max N (= --draft-max N;\n"
        "            llama-server's --draft N is refused with this hint: --draft takes the file here)\n"
        "  noted:    -fa/--flash-attn [on|off|auto]: attention kernels are the backend's\n";
    for (bool refuse : {false, true}) {
        for (const ForeignFlag& f : FOREIGN_FLAGS) {
            if (f.refuse != refuse) continue;
            std::string names = f.names;
            std::replace(names.begin(), names.end(), '|', '/');
            std::string why = f.why;
            if (why.rfind("ignored: ", 0) == 0) why.erase(0, 9);
            out += std::string(refuse ? "  refused:  " : "  ignored:  ") + names + (f.takes_value ? " X" : "") +
                   ": " + why + "\n";
        }
    }
    return out;
}

bool name_in(const char* names, const std::string& arg) {
    std::string list = names;
    size_t start = 0;
    while (start <= list.size()) {
        const size_t bar = list.find('|', start);
        const std::string n = list.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
        if (n == arg) return true;
        if (bar == std::string::npos) break;
        start = bar + 1;
    }
    return false;
}

// Removes llama-server-only flags from argv (with a note) or refuses them; maps the few that
// translate (-np 1, -ctk/-ctv, --no-mmap). Returns false after printing an error.
bool filter_foreign_flags(std::vector<std::string>& args) {
    std::vector<std::string> out;
    std::string cache_type;  // -ctk / -ctv: K and V share one type here, so they must agree
    for (size_t i = 0; i < args.size(); ++i) {
        std::string a = args[i];
        std::string value;
        const size_t eq = a.find('=');
        const bool has_eq = a.rfind("--", 0) == 0 && eq != std::string::npos;
        if (has_eq) {
            value = a.substr(eq + 1);
            a = a.substr(0, eq);
        }
        auto take_value = [&]() -> bool {
            if (has_eq) return true;
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "%s: error: %s needs a value\n", PROG, a.c_str());
                return false;
            }
            value = args[++i];
            return true;
        };
        if (a == "-np" || a == "--parallel") {
            if (!take_value()) return false;
            if (value != "1") {
                std::fprintf(stderr, "%s: error: %s %s: one generation runs at a time (requests queue, see --max-queue)\n",
                             PROG, a.c_str(), value.c_str());
                return false;
            }
            continue;
        }
        if (a == "-ctk" || a == "--cache-type-k" || a == "-ctv" || a == "--cache-type-v") {
            if (!take_value()) return false;
            std::string type;
            if (value == "q8_0" || value == "int8") {
                type = "int8";
            } else if (value == "f16" || value == "fp16") {
                type = "fp16";
            } else {
                std::fprintf(stderr, "%s: error: %s %s: the KV cache is int8 (q8_0) or fp16 (f16)\n", PROG, a.c_str(),
                             value.c_str());
                return false;
            }
            if (!cache_type.empty() && cache_type != type) {
                std::fprintf(stderr, "%s: error: -ctk and -ctv differ: K and V share one cache type here\n", PROG);
                return false;
            }
            if (cache_type.empty()) out.push_back("--kv-type=" + type);
            cache_type = type;
            continue;
        }
        if (a == "-to") {  // llama-server's short spelling (CLI11 short flags are one letter)
            out.push_back("--timeout");
            continue;
        }
        if (a == "-md") {  // llama-server's draft model
            out.push_back("--model-draft");
            continue;
        }
        if (a == "--no-mmap") {
            out.push_back("--weights=copy");
            continue;
        }
        // -fa / --flash-attn [on|off|auto] (llama-server's value is optional).
        if (a == "-fa" || a == "--flash-attn") {
            static const char* const VALUES[] = {"on", "off", "auto", "1", "0", "true", "false"};
            auto known = [&](const std::string& v) {
                return std::find(std::begin(VALUES), std::end(VALUES), v) != std::end(VALUES);
            };
            if (has_eq && !known(value)) {
                std::fprintf(stderr, "%s: error: %s=%s: expected on, off or auto\n", PROG, a.c_str(), value.c_str());
                return false;
            }
            if (!has_eq && i + 1 < args.size() && known(args[i + 1])) value = args[++i];
            std::fprintf(stderr, "%s: note: %s%s%s ignored: attention kernels are chosen by the backend\n", PROG,
                         a.c_str(), value.empty() ? "" : " ", value.c_str());
            continue;
        }
        bool handled = false;
        for (const ForeignFlag& f : FOREIGN_FLAGS) {
            if (!name_in(f.names, a)) continue;
            handled = true;
            if (f.takes_value && !take_value()) return false;
            if (f.refuse) {
                std::fprintf(stderr, "%s: error: %s is not supported: %s\n", PROG, a.c_str(), f.why);
                return false;
            }
            std::fprintf(stderr, "%s: note: %s %s\n", PROG, a.c_str(), f.why);
            break;
        }
        if (!handled) out.push_back(args[i]);
    }
    args.swap(out);
    return true;
}

bool read_key_file(const std::string& path, std::vector<std::string>& keys) {
    std::ifstream in(path);
    if (!in) return false;
    std::string line;
    while (std::getline(in, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        size_t s = 0;
        while (s < line.size() && (line[s] == ' ' || line[s] == '\t')) s++;
        line = line.substr(s);
        if (!line.empty() && line[0] != '#') keys.push_back(line);
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (!filter_foreign_flags(args)) return 2;

    jllm::server::ServerOptions o;
    bool verbose = false, version = false;
    std::vector<std::string> api_keys;
    std::string api_key_file;
    jllm::flags::EngineFlags f;
    f.n_predict = o.defaults.max_tokens;
    // OpenAI clients expect temperature 0 to pick the model's most likely token; a hidden
    // repetition penalty would not (presence/frequency penalties are the OpenAI knobs).
    f.sampling.repeat_penalty = 1.0f;

    CLI::App app{"jetson-llm-server — OpenAI-compatible HTTP server for one GGUF model", PROG};
    jllm::flags::add_engine_flags(app, f, jllm::flags::ALL, true);
    app.add_option("--host", o.host, "Address to listen on")->capture_default_str();
    app.add_option("-p,--port", o.port, "Port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
    app.add_option("--api-key", api_keys, "API key clients must send as 'Authorization: Bearer KEY' (repeatable; "
                                          "comma-separated lists accepted)");
    app.add_option("--api-key-file", api_key_file, "File with API keys, one per line (# comments)");
    app.add_option("-a,--alias", o.alias, "Model name to serve (default: the model file's name)");
    app.add_option("--cors", o.cors_origins, "Let browser pages from ORIGIN call the API (CORS; '*': any origin; "
                                             "repeatable). Off by default")
        ->type_name("ORIGIN");
    app.add_option("--max-queue", o.max_queue, "Requests that may wait behind the running one (more: 503)")
        ->capture_default_str()->check(CLI::Range(0, 100000));
    app.add_option("--timeout", o.timeout_s, "Per-request time limit in seconds, queue wait included")
        ->capture_default_str()->check(CLI::Range(1, 86400 * 7));
    std::string log_file;
    app.add_option("--log-file", log_file, "Append the log to FILE instead of stderr; SIGHUP reopens it (logrotate)");
    app.add_flag("-v,--verbose", verbose, "Log every request");
    app.add_flag("--version", version, "Print the version and exit");
    app.footer(foreign_flags_help());

    std::vector<std::string> rev(args.rbegin(), args.rend());
    try {
        if (std::find(args.begin(), args.end(), "--version") != args.end()) {
            std::printf("%s %s (commit %s)\n", PROG, JLLM_VERSION, JLLM_GIT_COMMIT);
            return 0;
        }
        app.parse(rev);
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const CLI::ExtrasError&) {
        std::fprintf(stderr, "%s: error: %s (see --help)\n", PROG, jllm::flags::leftover_message(app.remaining()).c_str());
        return 2;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "%s: error: %s (see --help)\n", PROG, e.what());
        return 2;
    }
    (void)version;
    {  // a model that cannot be read is reported before anything listens
        std::FILE* m = std::fopen(f.config.model_path.c_str(), "rb");
        if (!m) {
            std::fprintf(stderr, "%s: error: cannot open model '%s': %s\n", PROG, f.config.model_path.c_str(),
                         std::strerror(errno));
            return 1;
        }
        std::fclose(m);
    }

    for (const std::string& k : api_keys) {
        size_t start = 0;
        while (start <= k.size()) {
            const size_t comma = k.find(',', start);
            const std::string one = k.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            if (!one.empty()) o.api_keys.push_back(one);
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    if (!api_key_file.empty()) {
        if (!read_key_file(api_key_file, o.api_keys)) {
            std::fprintf(stderr, "%s: error: cannot read --api-key-file '%s'\n", PROG, api_key_file.c_str());
            return 2;
        }
        if (o.api_keys.empty()) {
            std::fprintf(stderr, "%s: error: --api-key-file '%s' holds no key\n", PROG, api_key_file.c_str());
            return 2;
        }
    }
    o.engine = f.config;
    o.engine.sysfs_root = jllm::default_sysfs_root();
    o.defaults.sampling = f.sampling;
    o.defaults.max_tokens = f.n_predict;
    if (verbose) jllm::set_log_level(jllm::LogLevel::Debug);
    if (o.host != "127.0.0.1" && o.host != "localhost" && o.host != "::1" && o.api_keys.empty()) {
        std::fprintf(stderr, "%s: warning: listening on %s without --api-key\n", PROG, o.host.c_str());
    }

    // --log-file: stderr (the engine's and the server's log lines) goes to the file, reopened on
    // SIGHUP so a rotated log is let go.
    auto open_log = [&log_file]() -> bool {
        if (log_file.empty()) return true;
        if (!std::freopen(log_file.c_str(), "a", stderr)) return false;
        std::setvbuf(stderr, nullptr, _IOLBF, 0);
        return true;
    };
    if (!open_log()) {
        std::fprintf(stdout, "%s: error: cannot open --log-file '%s': %s\n", PROG, log_file.c_str(), std::strerror(errno));
        return 2;
    }

#ifdef __GLIBC__
    // glibc raises its mmap threshold each time a large block is freed, up to 32 MiB, after which
    // a request's megabytes (body, parsed JSON, tokens) come from the heap of whichever of the
    // many worker threads' arenas served it and stay there: 20 rejected 1.5 MB bodies left RSS
    // 176 MB above steady. A fixed threshold keeps large blocks in their own mappings, returned
    // on free (RSS back within 2 MB); the server also trims after large bodies. And each of the
    // HTTP pool's threads would get an arena of its own (up to 8 per core), each keeping what its
    // requests freed: the soak's heap grew 23 MB in 90 s that way, flat with two arenas (one
    // generation runs at a time; handlers only parse and render).
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_ARENA_MAX, 2);
#endif

    // Signals are taken by one thread with sigwait(); every other thread blocks them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);

    jllm::server::HttpServer server(o);
    std::string err;
    if (!server.bind(err)) {
        std::fprintf(stderr, "%s: error: %s\n", PROG, err.c_str());
        return 1;
    }
    std::thread([&server, set, open_log, log_file] {
        int sig = 0;
        bool stopping = false;
        while (true) {
            sigwait(&set, &sig);
            if (sig == SIGHUP) {  // reopen the log (logrotate's postrotate / systemctl reload)
                if (log_file.empty()) {
                    std::fprintf(stderr, "%s: SIGHUP: the log is stderr; nothing to reopen\n", PROG);
                } else if (open_log()) {
                    std::fprintf(stderr, "%s: SIGHUP: reopened %s\n", PROG, log_file.c_str());
                }
                continue;
            }
            if (stopping) std::_Exit(128 + sig);
            stopping = true;
            std::fprintf(stderr, "%s: signal %d: shutting down (a second signal exits at once)\n", PROG, sig);
            server.request_shutdown();
        }
    }).detach();
    return server.run();
}
