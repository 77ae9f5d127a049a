// apps/cli/main.cpp — `jetson-llm`, the command-line front end: one prompt, interactive chat,
// model info, tokenizer tools. Flags follow DESIGN.md's one flag table; every error is one line
// on stderr and a non-zero exit. Generated text streams to stdout; engine lines go to stderr.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine_flags.h"
#include "jllm.h"
#include "jllm_version.h"

namespace {

// The CLI's own flags; the engine's are flags::EngineFlags (one table for every program).
struct CliOptions {
    jllm::flags::EngineFlags engine;
    std::string prompt;
    std::string file;
    std::vector<std::string> stop;
    bool interactive = false;
    bool chat = false;
    bool raw = false;
    std::string system;
    bool think = false;
    bool no_think = false;
    std::string dump_hal;
    bool info = false;
    bool tokenize = false;
    bool detokenize = false;
    bool special = false;
    std::string dump_logits;
    std::string grammar_file;      // --grammar: GBNF the output must follow
    std::string json_schema_file;  // --json-schema: a JSON Schema the output must follow
    bool json = false;             // --json: the output is a JSON object
    std::string session;           // --session: the snapshot name in --kv-dir
    bool verbose = false;
    bool version = false;
};

// Failures of this program's own steps (the engine reports through Status / FinishReason).
[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error(msg); }

std::atomic<jllm::Engine*> g_engine{nullptr};
std::atomic<bool> g_generating{false};
std::atomic<int> g_interrupts{0};

void on_sigint(int) {
    g_interrupts.fetch_add(1);
    jllm::Engine* e = g_engine.load();
    if (e && g_generating.load()) {
        e->cancel();
        return;
    }
    std::_Exit(130);
}

int run_info(const CliOptions& o) {
    std::string text;
    const jllm::Status st = jllm::describe_model(o.engine.config.model_path, o.verbose, text);
    if (!st.ok) fail(st.message);
    std::fputs(text.c_str(), stdout);
    return 0;
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read prompt file '" + path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void print_stats(const jllm::GenerateResult& r) {
    const jllm::GenerateStats& s = r.stats;
    if (s.reused_tokens > 0) {
        std::fprintf(stderr, "[engine] Reused: %d of %d prompt tokens from the cache (%s", s.reused_tokens,
                     s.prompt_tokens, jllm::cache_source_name(s.cache_source));
        if (s.restored_tokens > 0) std::fprintf(stderr, ", %d restored in %.1f ms", s.restored_tokens, s.restore_ms);
        std::fprintf(stderr, ")\n");
    }
    std::fprintf(stderr, "[engine] Prefill: %d tokens in %.1f ms (%.1f tok/s)\n", s.prompt_tokens - s.reused_tokens,
                 s.prefill_ms, s.prefill_tps);
    std::fprintf(stderr, "[engine] Decode: %d tokens in %.1f ms (%.1f tok/s)\n", s.completion_tokens, s.decode_ms,
                 s.decode_tps);
    if (s.drafted() > 0) {
        std::fprintf(stderr,
                     "[engine] Speculative: %d of %d drafted tokens accepted (%.0f%%; prompt lookup %d/%d, draft model "
                     "%d/%d), %.2f tokens per forward, draft model %.1f ms\n",
                     s.accepted(), s.drafted(), 100.0 * s.accepted() / s.drafted(), s.ngram_accepted, s.ngram_drafted,
                     s.model_accepted, s.model_drafted,
                     s.decode_forwards > 0 ? static_cast<double>(s.completion_tokens - 1) / s.decode_forwards : 0.0,
                     s.draft_ms);
    }
    if (s.draft_prefill_ms > 0) {
        std::fprintf(stderr, "[engine] Draft model prompt: %.1f ms (in the TTFT)\n", s.draft_prefill_ms);
    }
    std::fprintf(stderr, "[engine] TTFT: %.1f ms\n", s.ttft_ms);
}

// Engine lines on stderr, each prefixed like the others.
void print_prefixed(const std::string& text) {
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t e = text.find('\n', pos);
        const std::string line = text.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
        std::fprintf(stderr, "[engine] %s\n", line.c_str());
        if (e == std::string::npos) break;
        pos = e + 1;
    }
}

// Device, L4T, power mode, clocks and temperatures (the Jetson HAL; "unknown" off-Jetson).
void print_board(const std::string& root) { print_prefixed(jllm::board_summary(root)); }

// After each interactive turn: tokens, decode rate, resident high-water mark, hottest zone.
void print_turn_line(const jllm::GenerateStats& s) {
    std::string peak = s.peak_memory_bytes >= 0 ? std::to_string(s.peak_memory_bytes / (1024 * 1024)) : "?";
    std::string temp = "? C";
    if (s.peak_temperature_c >= 0) temp = std::to_string(static_cast<int>(s.peak_temperature_c + 0.5f)) + " C";
    std::fprintf(stderr, "[%d tokens, %.1f tok/s, peak %s MB, %s]\n", s.completion_tokens, s.decode_tps, peak.c_str(),
                 temp.c_str());
    if (s.oom_events > 0) std::fprintf(stderr, "[engine] stopped early: memory was running out\n");
}

// Streams one generation to stdout; reasoning is shown between <think> markers.
jllm::GenerateResult stream_generate(jllm::Engine& engine, const jllm::GenerateRequest& req) {
    jllm::Channel shown = jllm::Channel::Content;
    g_generating.store(true);
    jllm::GenerateResult r = engine.generate(req, [&](const jllm::Piece& p) {
        if (p.channel != shown) {
            std::fputs(p.channel == jllm::Channel::Reasoning ? "<think>\n" : "\n</think>\n\n", stdout);
            shown = p.channel;
        }
        std::fwrite(p.text.data(), 1, p.text.size(), stdout);
        std::fflush(stdout);
        return true;
    });
    g_generating.store(false);
    if (shown == jllm::Channel::Reasoning) std::fputs("\n</think>\n", stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    return r;
}

// --grammar / --json-schema / --json as the request's constraint, checked before the model loads.
jllm::OutputConstraint output_constraint(const CliOptions& o) {
    jllm::OutputConstraint c;
    if (!o.grammar_file.empty()) {
        c.kind = jllm::OutputConstraint::Kind::Grammar;
        c.text = read_text_file(o.grammar_file);
    } else if (!o.json_schema_file.empty()) {
        c.kind = jllm::OutputConstraint::Kind::JsonSchema;
        c.text = read_text_file(o.json_schema_file);
    } else if (o.json) {
        c.kind = jllm::OutputConstraint::Kind::JsonObject;
    }
    const jllm::Status st = jllm::check_output_constraint(c);
    if (!st.ok) fail(st.message);
    return c;
}

// --tokenize / --detokenize: the vocabulary alone (a model or a vocab-only GGUF), no weights, no
// load banner.
int run_vocab(const CliOptions& o) {
    jllm::Engine engine;
    const jllm::Status st = engine.load_vocabulary(o.engine.config.model_path);
    if (!st.ok) fail(st.message);
    if (o.tokenize) {
        std::string text = o.file.empty() ? o.prompt : read_text_file(o.file);
        std::vector<int32_t> ids = engine.tokenize(text, o.special, false);
        for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
        std::printf("\n");
        return 0;
    }
    std::istringstream in(o.file.empty() ? o.prompt : read_text_file(o.file));
    std::vector<int32_t> ids;
    std::string tokstr;
    while (in >> tokstr) {
        char* end = nullptr;
        const long v = std::strtol(tokstr.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v >= engine.vocab_size()) fail("invalid token id '" + tokstr + "'");
        ids.push_back(static_cast<int32_t>(v));
    }
    const std::string text = engine.detokenize(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
    return 0;
}

int run_generate(const CliOptions& o) {
    (void)output_constraint(o);  // a grammar that does not compile fails before the load
    jllm::EngineConfig cfg = o.engine.config;
    cfg.sysfs_root = jllm::default_sysfs_root();
    print_board(cfg.sysfs_root);

    jllm::Engine engine;
    jllm::Status st = engine.load(cfg);
    if (!st.ok) fail(st.message);
    const jllm::ModelInfo mi = engine.model_info();
    std::fprintf(stderr, "[engine] Model loaded in %.0f ms (%.0f MB/s)\n", mi.load_ms,
                 mi.load_ms > 0 ? mi.file_bytes / 1e6 / (mi.load_ms / 1000.0) : 0.0);
    std::fprintf(stderr,
                 "[engine] Model: %s (%s), %lld layers, %lld heads, %lld KV heads, dim %lld, ctx %lld, KV %s, %s\n",
                 mi.name.empty() ? "unnamed" : mi.name.c_str(), mi.arch.c_str(), static_cast<long long>(mi.n_layer),
                 static_cast<long long>(mi.n_head), static_cast<long long>(mi.n_head_kv),
                 static_cast<long long>(mi.n_embd), static_cast<long long>(mi.n_ctx), mi.kv_type.c_str(),
                 mi.device.c_str());
    print_prefixed(engine.memory_report().table());
    g_engine.store(&engine);

    const bool use_chat = !o.raw;
    jllm::GenerateRequest base;
    base.constraint = output_constraint(o);
    base.sampling = o.engine.sampling;
    base.stop = o.stop;
    base.max_tokens = o.engine.n_predict;
    base.split_thinking = true;
    base.session_id = o.session;

    std::vector<jllm::ChatMessage> history;
    if (!o.system.empty()) history.push_back(jllm::ChatMessage{"system", o.system, "", {}, "", ""});
    jllm::ChatRenderOptions ropt;
    ropt.enable_thinking = o.think && !o.no_think;

    auto make_request = [&](const std::string& user_text) {
        jllm::GenerateRequest req = base;
        if (use_chat) {
            history.push_back(jllm::ChatMessage{"user", user_text, "", {}, "", ""});
            req.prompt = engine.render_chat(history, ropt);
            req.parse_special = true;
            req.add_bos = false;  // the template places BOS itself where the model wants it
            req.thinking_may_open = ropt.enable_thinking;  // a constraint starts after the reasoning
        } else {
            req.prompt = user_text;
            req.parse_special = o.special;
        }
        return req;
    };

    if (!o.interactive) {
        std::string text = o.file.empty() ? o.prompt : read_text_file(o.file);
        if (text.empty()) fail("no prompt given (use -p TEXT, -f FILE or -i)");
        jllm::GenerateRequest req = make_request(text);
        if (!o.dump_logits.empty()) {
            std::vector<int32_t> ids = engine.tokenize(req.prompt, req.parse_special, req.add_bos);
            std::vector<float> logits;
            jllm::Status s = engine.eval_all_logits(ids, logits);
            if (!s.ok) fail(s.message);
            std::ofstream out(o.dump_logits, std::ios::binary);
            const size_t V = static_cast<size_t>(mi.n_vocab);
            out.write(reinterpret_cast<const char*>(logits.data() + (ids.size() - 1) * V),
                      static_cast<std::streamsize>(V * sizeof(float)));
            if (!out) fail("cannot write '" + o.dump_logits + "'");
            std::fprintf(stderr, "[engine] Wrote %zu logits of the last prompt position to %s\n", V,
                         o.dump_logits.c_str());
            if (o.engine.n_predict == 0) return 0;
        }
        jllm::GenerateResult r = stream_generate(engine, req);
        print_stats(r);
        if (r.finish == jllm::FinishReason::Error) fail(r.error);
        engine.checkpoint();  // with --kv-dir: written before the engine closes
        return 0;
    }

    // Interactive: the whole conversation is kept; each turn prefills only the new tokens.
    std::fprintf(stderr, "[engine] Interactive mode: type a message; 'quit', 'exit' or Ctrl-D leave, "
                         "Ctrl-C stops a reply.\n");
    std::string line;
    for (;;) {
        std::fputs("> ", stdout);
        std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line == "quit" || line == "exit") break;
        if (line.empty()) continue;
        jllm::GenerateRequest req = make_request(line);
        jllm::GenerateResult r = stream_generate(engine, req);
        print_stats(r);
        engine.checkpoint();
        if (r.finish == jllm::FinishReason::Error) {
            std::fprintf(stderr, "jetson-llm: error: %s\n", r.error.c_str());
            history.pop_back();
            continue;
        }
        if (use_chat) {
            jllm::ChatMessage a{"assistant", r.text, r.reasoning, {}, "", ""};
            history.push_back(a);
        }
        print_turn_line(r.stats);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CliOptions o;
    CLI::App app{"jetson-llm — LLM inference for the Jetson Orin Nano (GGUF models)", "jetson-llm"};
    jllm::flags::add_engine_flags(app, o.engine, jllm::flags::ALL);
    app.get_option("--model")->required(false);  // --version and --dump-hal need none
    app.add_option("-p,--prompt", o.prompt, "Prompt text (chat template applied unless --raw)");
    app.add_option("-f,--file", o.file, "Read the prompt from a file");
    app.add_option("--stop", o.stop, "Stop string (repeatable); never printed");
    app.add_flag("-i,--interactive", o.interactive, "Interactive chat; the conversation is kept");
    auto* chat = app.add_flag("--chat", o.chat, "Apply the model's chat template (default)");
    auto* raw = app.add_flag("--raw", o.raw, "Send the prompt as-is (no chat template)");
    chat->excludes(raw);
    app.add_option("--system", o.system, "System message");
    auto* think = app.add_flag("--think", o.think, "Let the model think (Qwen3); reasoning shown in <think>");
    auto* nothink = app.add_flag("--no-think", o.no_think, "No thinking (default)");
    think->excludes(nothink);
    app.add_option("--dump-hal", o.dump_hal, "Copy every file the Jetson HAL reads into DIR (a fixture tree) and exit");
    app.add_flag("--info", o.info, "Print the model's architecture, hyper-parameters, tokenizer and tensors");
    auto* tk = app.add_flag("--tokenize", o.tokenize, "Print the token ids of the prompt");
    auto* dtk = app.add_flag("--detokenize", o.detokenize, "Print the text of the ids given with -p or -f");
    tk->excludes(dtk);
    app.add_flag("--special", o.special, "Parse special tokens (<|...|>) in the prompt text");
    app.add_option("--dump-logits", o.dump_logits, "Write the last prompt position's logits (f32 LE) to PATH");
    auto* gram = app.add_option("--grammar", o.grammar_file, "GBNF grammar file the output must follow (start rule: root)");
    auto* schema = app.add_option("--json-schema", o.json_schema_file, "JSON Schema file the output must follow");
    auto* json = app.add_flag("--json", o.json, "The output is a JSON object");
    gram->excludes(schema)->excludes(json);
    schema->excludes(json);
    app.add_option("--session", o.session,
                   "Session name: its snapshot in --kv-dir is found first, and this run's is stored under it");
    app.add_flag("-v,--verbose", o.verbose, "More output (--info: every metadata key and tensor)");
    app.add_flag("--version", o.version, "Print the version and exit");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const CLI::ExtrasError&) {
        std::fprintf(stderr, "jetson-llm: error: %s (see --help)\n", jllm::flags::leftover_message(app.remaining()).c_str());
        return 2;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "jetson-llm: error: %s (see --help)\n", e.what());
        return 2;
    }

    if (o.version) {
        std::printf("jetson-llm %s (commit %s)\n", JLLM_VERSION, JLLM_GIT_COMMIT);
        return 0;
    }
    if (o.verbose) jllm::set_log_level(jllm::LogLevel::Debug);
    std::signal(SIGINT, on_sigint);
    try {
        if (!o.dump_hal.empty()) {
            const std::string root = jllm::default_sysfs_root();
            const int n = jllm::dump_board_files(root, o.dump_hal);
            std::fprintf(stderr, "[engine] Copied %d files the HAL reads into %s\n", n, o.dump_hal.c_str());
            print_board(root);
            return 0;
        }
        if (o.engine.config.model_path.empty()) {
            std::fprintf(stderr, "jetson-llm: error: no model given (use -m FILE; see --help)\n");
            return 2;
        }
        if (o.info) return run_info(o);
        if (o.tokenize || o.detokenize) return run_vocab(o);
        if (!o.session.empty() && o.engine.config.kv_dir.empty()) {
            std::fprintf(stderr, "jetson-llm: error: --session needs --kv-dir (where the session's snapshot lives)\n");
            return 2;
        }
        return run_generate(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jetson-llm: error: %s\n", e.what());
        return 1;
    }
}
