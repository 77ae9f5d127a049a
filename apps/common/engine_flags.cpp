// apps/common/engine_flags.cpp — see engine_flags.h.
#include "engine_flags.h"

#include <map>
#include <string>
#include <vector>

namespace jllm::flags {

namespace {

const std::map<std::string, KvType> KV_TYPES = {{"int8", KvType::Int8}, {"fp16", KvType::Fp16}};
const std::map<std::string, DeviceKind> DEVICES = {
    {"auto", DeviceKind::Auto}, {"cpu", DeviceKind::Cpu}, {"cuda", DeviceKind::Cuda}};
const std::map<std::string, WeightPlacement> PLACEMENTS = {
    {"auto", WeightPlacement::Auto}, {"copy", WeightPlacement::Copy}, {"mapped", WeightPlacement::Mapped}};
const std::map<std::string, SpecMode> SPEC_MODES = {
    {"auto", SpecMode::Auto}, {"ngram", SpecMode::Ngram}, {"draft", SpecMode::Draft}, {"off", SpecMode::Off}};

// "the default for requests" where the sampling flags are a server's defaults.
std::string sampling_help(const char* what, bool defaults) {
    return defaults ? std::string(what) + "; the default of requests that leave it out" : std::string(what);
}

// An enum flag: one of the table's names (help shows them and the default), parsed into *out.
template <typename E>
CLI::Option* add_enum(CLI::App& app, const char* name, E* out, const std::map<std::string, E>& table, const char* dflt,
                      const std::string& help) {
    std::vector<std::string> names;
    for (const auto& [n, v] : table) names.push_back(n);
    return app.add_option_function<std::string>(name, [out, &table](const std::string& v) { *out = table.at(v); }, help)
        ->check(CLI::IsMember(names))
        ->default_str(dflt);
}

}  // namespace

void add_engine_flags(CLI::App& app, EngineFlags& f, unsigned groups, bool sampling_defaults) {
    EngineConfig& c = f.config;
    if (groups & MODEL) app.add_option("-m,--model", c.model_path, "GGUF model file")->required();
    if (groups & CONTEXT) {
        app.add_option("-c,--ctx-size", c.n_ctx, "Context length (0: the largest that fits, capped by the model and 4096)")
            ->capture_default_str()->check(CLI::Range(0, 1 << 20));
    }
    if (groups & RUNTIME) {
        app.add_option("-t,--threads", c.n_threads, "CPU threads (0: all cores)")->capture_default_str()
            ->check(CLI::Range(0, 1024));
        auto* kv = add_enum(app, "--kv-type", &c.kv_type, KV_TYPES, "int8",
                            "KV cache type: int8 (one fp16 scale per position and head) or fp16");
        auto* i8 = app.add_flag_callback("--int8-kv", [&c] { c.kv_type = KvType::Int8; }, "Same as --kv-type int8");
        auto* f16 = app.add_flag_callback("--fp16-kv", [&c] { c.kv_type = KvType::Fp16; }, "Same as --kv-type fp16");
        i8->excludes(f16)->excludes(kv);
        f16->excludes(kv);
        add_enum(app, "--device", &c.device, DEVICES, "auto",
                 "Compute device (auto: CUDA when a device is present, else the CPU)");
        add_enum(app, "--weights", &c.weights, PLACEMENTS, "auto",
                 "GPU weight placement: copy to device memory (Q4_K/Q6_K in the GPU's tiled layout, the faster "
                 "kernels; the file's pages dropped behind the copy) or mapped (read in place from the file); "
                 "auto: copy, on integrated GPUs too. The CPU always reads the mapped file");
        app.add_option("--mem-margin", c.mem_margin_mb, "Memory kept free for the OS and other services (MB)")
            ->capture_default_str()->check(CLI::Range(0, 1 << 20));
        app.add_option("--max-memory", c.max_memory_mb, "Hard cap on what the engine holds (MB, 0: none)")
            ->capture_default_str()->check(CLI::Range(0, 1 << 20));
    }
    if (groups & CHAT) {
        app.add_option("--chat-template", c.chat_template, "Chat template (auto: from the model's metadata)")
            ->check(CLI::IsMember({"auto", "chatml", "qwen3", "llama3"}))->capture_default_str();
    }
    if (groups & SESSIONS) {
        app.add_option("--cache-ram", c.cache_ram_mb,
                       "Session snapshots kept in host RAM (MB; -1: half of what the KV and scratch pools leave, "
                       "at most 1024; 0: off)")
            ->capture_default_str()->check(CLI::Range(-1, 1 << 20));
        app.add_option("--kv-dir", c.kv_dir, "Folder for persistent session snapshots (one file per session; empty: none)");
        app.add_option("--cache-reuse", c.cache_reuse,
                       "After the first difference from the cache, reuse cached chunks of at least N tokens that "
                       "reappear in the prompt, moved to their new positions (not exact; 0: off)")
            ->capture_default_str()->check(CLI::Range(0, 1 << 20));
        app.add_option("--kv-dir-max", c.kv_dir_max_mb, "The --kv-dir files at most (MB; least recently used removed first)")
            ->capture_default_str()->check(CLI::Range(1, 1 << 24));
    }
    if (groups & SPEC) {
        add_enum(app, "--spec", &c.spec, SPEC_MODES, "auto",
                 "Speculative decoding: auto (prompt lookup, and the --draft model when given, each while it pays), "
                 "ngram (prompt lookup whenever it finds a match), draft (the --draft model every step), off. "
                 "The output is the same in every mode (greedy, or sampled with a seed)");
        app.add_option("--draft,--model-draft", c.draft_model_path,
                       "Draft model for speculative decoding: a smaller GGUF with the same vocabulary")
            ->check([](const std::string& v) {
                const bool number = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
                return number ? "--draft takes a GGUF file; a number of tokens is --draft-max N (llama-server's "
                                "--draft N)"
                              : "";
            });
        app.add_option("--draft-max,--draft-n", c.draft_max,
                       "Tokens drafted per forward at most (the length adapts to the acceptance below it)")
            ->capture_default_str()->check(CLI::Range(1, 16));
        app.add_option("--draft-vocab", c.draft_vocab,
                       "The draft model proposes only token ids below N, the special tokens and the request's own "
                       "tokens, and on the CPU computes its output layer for those alone (0: every token; -1: the "
                       "device's default, 32768 on the CPU, every token on CUDA; the output does not change)")
            ->capture_default_str()->check(CLI::Range(-1, 1 << 30));
        app.add_option("--draft-p-min", c.draft_p_min,
                       "The draft model's draft ends before a token (after its first) it gives a probability below P "
                       "among its 16 best (0: it drafts the whole length the tuner picks; the output does not change)")
            ->capture_default_str()->check(CLI::Range(0.0, 1.0));
    }
    if (groups & SAMPLING) {
        const bool d = sampling_defaults;
        SamplingParams& s = f.sampling;
        app.add_option("-n,--n-predict", f.n_predict, sampling_help("Tokens to generate (-1: until the context is full)", d))
            ->capture_default_str()->check(CLI::Range(-1, 1 << 30));
        app.add_option("--temp", s.temperature, sampling_help("Temperature (0: greedy)", d))->capture_default_str()
            ->check(CLI::Range(0.0, 100.0));
        app.add_option("--top-k", s.top_k, sampling_help("Top-k (0: off)", d))->capture_default_str()
            ->check(CLI::Range(0, 1 << 24));
        app.add_option("--top-p", s.top_p, sampling_help("Top-p (1: off)", d))->capture_default_str()
            ->check(CLI::Range(0.0, 1.0));
        app.add_option("--min-p", s.min_p, sampling_help("Min-p (0: off)", d))->capture_default_str()
            ->check(CLI::Range(0.0, 1.0));
        app.add_option("--repeat-penalty", s.repeat_penalty, sampling_help("Repetition penalty (1: off)", d))
            ->capture_default_str()->check(CLI::Range(0.0, 10.0));
        app.add_option("--repeat-last-n", s.repeat_last_n,
                       sampling_help("Penalty window (0: off, -1: the whole context)", d))
            ->capture_default_str()->check(CLI::Range(-1, 1 << 20));
        app.add_option_function<int64_t>(
               "--seed", [&s](int64_t v) { s.seed = v < 0 ? SamplingParams{}.seed : static_cast<uint64_t>(v); },
               sampling_help("Random seed (-1: random)", d))
            ->default_str("-1")->check(CLI::Range(int64_t{-1}, INT64_MAX));
    }
}

std::string leftover_message(const std::vector<std::string>& remaining) {
    std::string unknown, stray;
    for (const std::string& x : remaining) {
        std::string& to = x.size() > 1 && x[0] == '-' ? unknown : stray;
        to += (to.empty() ? "" : ", ") + x;
    }
    return unknown.empty() ? "unexpected argument " + stray : "unknown option " + unknown;
}

}  // namespace jllm::flags
