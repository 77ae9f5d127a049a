// apps/bench/main.cpp — jllm-bench: prefill (ppN) and decode (tgN) throughput of a GGUF model
// through the Engine API, llama-bench style. Every test runs 1 + r times: the first is reported
// separately as warm-up, the rest give the median and the spread (min..max). Decode rows add
// the effective bandwidth: bytes read per generated token (every weight matrix once, the token
// embedding one row unless it doubles as the output matrix, plus the KV cache up to the current
// position) divided by the time per token, and its share of a given (--bw) or measured
// (--measure-bw: a multi-threaded memcpy of >= 1 GiB, counted read + write) bandwidth.
//   jllm-bench -m model.gguf -p 33,512 -n 128 -r 5 -t 2 --measure-bw
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine_flags.h"
#include "jllm.h"
#include "workload.h"
#include "jllm_version.h"

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int> parse_int_list(const std::string& s, const char* flag) {
    std::vector<int> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        char* end = nullptr;
        const long x = std::strtol(item.c_str(), &end, 10);
        if (*end != '\0' || x < 0) throw std::runtime_error(std::string(flag) + ": '" + item + "' is not a count");
        v.push_back(static_cast<int>(x));
    }
    return v;
}

std::string cpu_model_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
            const size_t c = line.find(':');
            if (c != std::string::npos) return line.substr(c + 2);
        }
    }
    return "unknown CPU";
}

// Copy bandwidth of host memory: `threads` threads each copy their share of a `bytes` buffer;
// best of 5 passes, counted as bytes read + bytes written (as a device-to-device copy is).
double measure_host_copy_gbps(size_t bytes, int threads) {
    std::unique_ptr<char[]> a(new char[bytes]), b(new char[bytes]);
    std::memset(a.get(), 1, bytes);
    std::memset(b.get(), 2, bytes);
    double best = 1e30;
    for (int pass = 0; pass < 5; ++pass) {
        const double t0 = now_s();
        std::vector<std::thread> ts;
        const size_t part = bytes / static_cast<size_t>(threads);
        for (int i = 0; i < threads; ++i) {
            const size_t off = part * static_cast<size_t>(i);
            const size_t n = i == threads - 1 ? bytes - off : part;
            ts.emplace_back([&, off, n] { std::memcpy(b.get() + off, a.get() + off, n); });
        }
        for (std::thread& t : ts) t.join();
        best = std::min(best, now_s() - t0);
    }
    return 2.0 * static_cast<double>(bytes) / best / 1e9;
}


struct Row {
    std::string test;     // pp512, tg128, with "@ dN" for depth
    int n_prompt = 0, n_gen = 0, depth = 0;
    std::vector<double> tps;  // measured reps (warm-up excluded)
    double warmup_tps = 0;
    double median = 0, lo = 0, hi = 0;
    double gbps = 0;       // decode rows: effective GB/s at the median
    double bw_share = -1;  // fraction of the reference bandwidth, < 0 if none
    int n_verify = 0;      // verification rows: tokens per forward (t/s counts those tokens)
};

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            o += buf;
            continue;
        }
        o += c;
    }
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-bench: prefill and decode throughput of a GGUF model (llama-bench style)"};
    jllm::flags::EngineFlags f;
    std::string pp = "512", tg = "128", depth = "0", out = "md", verify;
    int reps = 5;
    double bw = 0;
    bool measure_bw = false;
    uint64_t seed = 1234;
    jllm::flags::add_engine_flags(app, f, jllm::flags::MODEL | jllm::flags::RUNTIME);
    app.add_option("-p,--n-prompt", pp, "prefill tests: comma-separated prompt lengths (0: none)")->capture_default_str();
    app.add_option("-n,--n-gen", tg, "decode tests: comma-separated token counts (0: none)")->capture_default_str();
    app.add_option("--verify", verify,
                   "speculative decoding's verification forwards: comma-separated token counts (1..17), each "
                   "row 32 forwards returning every token's logits; reported with their cost against a one-token "
                   "decode step (the tgN row at the same depth)");
    app.add_option("-d,--n-depth", depth, "tokens already in the context before each test, comma-separated")->capture_default_str();
    app.add_option("-r,--repetitions", reps, "measured repetitions per test (plus one warm-up)")->capture_default_str();
    app.add_option("-o,--output", out, "md or json")->check(CLI::IsMember({"md", "json"}))->capture_default_str();
    app.add_option("--bw", bw, "reference bandwidth in GB/s for the decode rows' share");
    app.add_flag("--measure-bw", measure_bw, "measure the reference bandwidth (host: a >= 1 GiB memcpy on -t threads)");
    app.add_option("--seed", seed, "seed of the random token ids")->capture_default_str();
    jllm::bench::WorkloadOptions wl;
    app.add_option("--workload", wl.file,
                   "speculative decoding on chat prompts instead of the pp/tg tests: a JSON file of [{name, kind, "
                   "messages, tools?}] (tests/data/speculative/prompts.json), every prompt generated greedily by each "
                   "--modes mode in turn, rates per kind against --spec off");
    app.add_option("--draft", wl.draft, "--workload: the draft model of the draft and auto modes");
    app.add_option("--modes", wl.modes,
                   "--workload: --spec modes, comma-separated (off always runs first); draft:N and auto:N give the "
                   "draft model's vocabulary (--draft-vocab) for that mode, draft@P and auto@P its confidence floor "
                   "(--draft-p-min; both: draft:N@P)")
        ->capture_default_str();
    int draft_vocab = -1;
    app.add_option("--draft-vocab", draft_vocab,
                   "--workload: the draft model's vocabulary: token ids below N, the special tokens and the "
                   "request's own (0: every token; -1: the device's default)")
        ->capture_default_str()->check(CLI::Range(-1, 1 << 30));
    float draft_p_min = jllm::EngineConfig{}.draft_p_min;
    app.add_option("--draft-p-min", draft_p_min,
                   "--workload: the draft model's draft ends before a token (after its first) it gives a probability "
                   "below P (0: never)")
        ->capture_default_str()->check(CLI::Range(0.0, 1.0));
    app.add_option("--tokens", wl.tokens, "--workload: tokens generated per prompt")->capture_default_str()
        ->check(CLI::Range(2, 4096));
    app.add_option("--sequences", wl.sequences,
                   "--workload: write each prompt's token ids (the prompt and --spec off's greedy output, first round) "
                   "to FILE as JSON lines, what scripts/spec_replay.py replays drafters on");
    app.add_option("--repeat-penalty", wl.repeat_penalty, "--workload: the requests' repeat penalty")
        ->capture_default_str()->check(CLI::Range(0.0, 10.0));
    app.set_version_flag("--version", std::string(JLLM_VERSION) + " (" + JLLM_GIT_COMMIT + ")");
    CLI11_PARSE(app, argc, argv);
    if (!wl.file.empty()) {
        try {
            wl.config = f.config;
            wl.config.draft_vocab = draft_vocab;
            wl.config.draft_p_min = draft_p_min;
            wl.config.n_threads = f.config.n_threads > 0 ? f.config.n_threads
                                                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
            if (wl.config.n_ctx == 0) wl.config.n_ctx = 2048;
            wl.reps = reps;
            return jllm::bench::run_workload(wl);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "jllm-bench: %s\n", e.what());
            return 1;
        }
    }
    if (!wl.draft.empty() || !wl.sequences.empty()) {
        std::fprintf(stderr, "jllm-bench: %s is for --workload\n", wl.draft.empty() ? "--sequences" : "--draft");
        return 2;
    }

    try {
        const std::vector<int> pps = parse_int_list(pp, "-p");
        const std::vector<int> tgs = parse_int_list(tg, "-n");
        const std::vector<int> depths = parse_int_list(depth, "-d");
        const std::vector<int> verifies = parse_int_list(verify, "--verify");
        int max_verify = 0;
        for (int v : verifies) {
            if (v < 1 || v > 17) throw std::runtime_error("--verify: token counts are 1..17");
            max_verify = std::max(max_verify, v);
        }
        if (reps < 1) throw std::runtime_error("-r must be >= 1");
        const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        const int n_threads = f.config.n_threads > 0 ? f.config.n_threads : hw;
        const std::string& model = f.config.model_path;
        const bool fp16_kv = f.config.kv_type == jllm::KvType::Fp16;

        int need_ctx = 8;
        for (int d : depths) {
            for (int p : pps) need_ctx = std::max(need_ctx, d + p);
            for (int n : tgs) need_ctx = std::max(need_ctx, d + n + 1);
            need_ctx = std::max(need_ctx, d + max_verify);
        }
        jllm::Engine engine;
        jllm::EngineConfig cfg = f.config;
        cfg.n_threads = n_threads;
        cfg.n_ctx = need_ctx;
        if (max_verify > 0) {  // the verification rows' logits
            cfg.spec = jllm::SpecMode::Ngram;
            cfg.draft_max = std::max(1, max_verify - 1);
        }
        const jllm::Status st = engine.load(cfg);
        if (!st.ok) throw std::runtime_error(st.message);
        const jllm::ModelInfo mi = engine.model_info();

        double ref_bw = bw;
        std::string bw_source = bw > 0 ? "given (--bw)" : "";
        if (measure_bw) {
            if (mi.backend != "cpu" && mi.backend != "CPU") {
                std::fprintf(stderr, "jllm-bench: --measure-bw measures host memory; backend is %s\n", mi.backend.c_str());
            }
            ref_bw = measure_host_copy_gbps(size_t(1) << 30, n_threads);
            bw_source = "measured: host memcpy, 1 GiB, " + std::to_string(n_threads) + " threads, read+write";
        }

        // Random token ids (fixed seed): content does not change the work of a dense model.
        uint64_t s = seed;
        auto next_id = [&]() {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            return static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(mi.n_vocab));
        };
        auto ids = [&](int n) {
            std::vector<int32_t> v(static_cast<size_t>(n));
            for (int32_t& x : v) x = next_id();
            return v;
        };
        auto check = [](const jllm::Status& x) {
            if (!x.ok) throw std::runtime_error(x.message);
        };
        // K and V, per layer, per position: int8 values plus one fp16 scale per KV head, or fp16.
        const double kv_pos_bytes = static_cast<double>(mi.n_layer) * 2.0 *
                                    (fp16_kv ? 2.0 * mi.n_head_kv * mi.head_dim
                                                  : 1.0 * mi.n_head_kv * mi.head_dim + 2.0 * mi.n_head_kv);

        std::vector<Row> rows;
        for (int d : depths) {
            auto run_test = [&](int n_prompt, int n_gen) {
                Row r;
                r.n_prompt = n_prompt;
                r.n_gen = n_gen;
                r.depth = d;
                r.test = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
                if (d > 0) r.test += " @ d" + std::to_string(d);
                for (int rep = 0; rep <= reps; ++rep) {
                    engine.clear_cache();
                    if (d > 0) check(engine.forward_tokens(ids(d), 0));
                    double t = 0;
                    if (n_prompt > 0) {
                        const std::vector<int32_t> p = ids(n_prompt);
                        const double t0 = now_s();
                        check(engine.forward_tokens(p, d));
                        t = now_s() - t0;
                    } else {
                        const std::vector<int32_t> g = ids(n_gen);
                        const double t0 = now_s();
                        for (int i = 0; i < n_gen; ++i) check(engine.forward_tokens({g[static_cast<size_t>(i)]}, d + i));
                        t = now_s() - t0;
                    }
                    const double tps = (n_prompt > 0 ? n_prompt : n_gen) / t;
                    if (rep == 0) r.warmup_tps = tps;
                    else r.tps.push_back(tps);
                }
                r.median = median_of(r.tps);
                r.lo = *std::min_element(r.tps.begin(), r.tps.end());
                r.hi = *std::max_element(r.tps.begin(), r.tps.end());
                if (n_gen > 0) {
                    const double avg_ctx = d + (n_gen + 1) / 2.0;
                    const double bytes = static_cast<double>(mi.decode_weight_bytes) + kv_pos_bytes * avg_ctx;
                    r.gbps = bytes * r.median / 1e9;
                    if (ref_bw > 0) r.bw_share = r.gbps / ref_bw;
                }
                rows.push_back(r);
            };
            for (int p : pps) {
                if (p > 0) run_test(p, 0);
            }
            for (int n : tgs) {
                if (n > 0) run_test(0, n);
            }
            constexpr int FORWARDS = 32;
            for (int v : verifies) {
                Row r;
                r.n_verify = v;
                r.depth = d;
                r.test = "verify" + std::to_string(v) + (d > 0 ? " @ d" + std::to_string(d) : "");
                for (int rep = 0; rep <= reps; ++rep) {
                    engine.clear_cache();
                    if (d > 0) check(engine.forward_tokens(ids(d), 0));
                    const std::vector<int32_t> p = ids(v);
                    const double t0 = now_s();
                    for (int i = 0; i < FORWARDS; ++i) check(engine.forward_tokens(p, d, true));
                    const double tps = FORWARDS * v / (now_s() - t0);
                    if (rep == 0) r.warmup_tps = tps;
                    else r.tps.push_back(tps);
                }
                r.median = median_of(r.tps);
                r.lo = *std::min_element(r.tps.begin(), r.tps.end());
                r.hi = *std::max_element(r.tps.begin(), r.tps.end());
                rows.push_back(r);
            }
        }

        const jllm::MemoryReport mem = engine.memory_report();
        char date[64];
        const std::time_t now = std::time(nullptr);
        std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
        std::string name = mi.name.empty() ? model.substr(model.find_last_of('/') + 1) : mi.name;
        const std::string cpu = cpu_model_name();
        if (out == "json") {
            std::printf("{\n  \"model\": \"%s\", \"path\": \"%s\", \"arch\": \"%s\", \"file_bytes\": %" PRIu64
                        ", \"params\": %" PRIu64 ", \"weight_bytes_per_token\": %" PRIu64 ",\n",
                        json_escape(name).c_str(), json_escape(model).c_str(), mi.arch.c_str(), mi.file_bytes, mi.n_params,
                        mi.decode_weight_bytes);
            std::printf("  \"backend\": \"%s\", \"device\": \"%s\", \"cpu\": \"%s\", \"threads\": %d, \"kv_type\": \"%s\",\n",
                        json_escape(mi.backend).c_str(), json_escape(mi.device).c_str(), json_escape(cpu).c_str(),
                        n_threads, jllm::kv_type_name(f.config.kv_type));
            std::printf("  \"commit\": \"%s\", \"version\": \"%s\", \"date\": \"%s\", \"repetitions\": %d,\n",
                        JLLM_GIT_COMMIT, JLLM_VERSION, date, reps);
            std::printf("  \"reference_gbps\": %.3f, \"reference_source\": \"%s\",\n", ref_bw,
                        json_escape(bw_source).c_str());
            std::printf("  \"memory\": {\"weights\": %" PRId64 ", \"kv\": %" PRId64 ", \"scratch\": %" PRId64
                        ", \"n_ctx\": %d, \"device_used\": %" PRId64 ", \"device_total\": %" PRId64 "},\n  \"tests\": [\n",
                        mem.model, mem.kv, mem.scratch, mem.n_ctx, mem.device_used, mem.device_total);
            for (size_t i = 0; i < rows.size(); ++i) {
                const Row& r = rows[i];
                std::printf("    {\"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"tps_median\": %.3f, "
                            "\"tps_min\": %.3f, \"tps_max\": %.3f, \"tps_warmup\": %.3f, \"tps_samples\": [",
                            r.test.c_str(), r.n_prompt, r.n_gen, r.depth, r.median, r.lo, r.hi, r.warmup_tps);
                for (size_t k = 0; k < r.tps.size(); ++k) std::printf("%s%.3f", k ? ", " : "", r.tps[k]);
                std::printf("]");
                if (r.n_verify > 0) std::printf(", \"n_verify\": %d, \"ms_per_forward\": %.4f", r.n_verify, 1000.0 * r.n_verify / r.median);
                if (r.n_gen > 0) {
                    std::printf(", \"effective_gbps\": %.3f", r.gbps);
                    if (r.bw_share >= 0) std::printf(", \"bandwidth_share\": %.4f", r.bw_share);
                }
                std::printf("}%s\n", i + 1 < rows.size() ? "," : "");
            }
            std::printf("  ]\n}\n");
        } else {
            std::printf("jllm-bench %s (commit %s), %s\n", JLLM_VERSION, JLLM_GIT_COMMIT, date);
            std::printf("backend: %s | device: %s | cpu: %s | kv: %s\n", mi.backend.c_str(), mi.device.c_str(),
                        cpu.c_str(), jllm::kv_type_name(f.config.kv_type));
            std::printf("model: %s (%s), %.2f MiB file, %.2f M params, %.2f MiB weights read per token\n", name.c_str(),
                        mi.arch.c_str(), mi.file_bytes / 1048576.0, mi.n_params / 1e6, mi.decode_weight_bytes / 1048576.0);
            if (ref_bw > 0) std::printf("reference bandwidth: %.2f GB/s (%s)\n", ref_bw, bw_source.c_str());
            if (mem.device_used >= 0) {
                // Device bytes beyond the CUDA context, against weights + KV (the issue-8 allowance: +10%).
                const double base = static_cast<double>(mem.model + mem.kv);
                std::printf("device memory: %.1f MiB used beyond the context (weights %.1f + KV %.1f MiB, n_ctx %d): "
                            "%+.1f%% over weights + KV\n",
                            mem.device_used / 1048576.0, mem.model / 1048576.0, mem.kv / 1048576.0, mem.n_ctx,
                            base > 0 ? 100.0 * (static_cast<double>(mem.device_used) - base) / base : 0.0);
            }
            std::printf("\n| test | threads | t/s (median of %d) | min .. max | warm-up t/s | eff. GB/s | %% of bw |\n", reps);
            std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
            for (const Row& r : rows) {
                std::printf("| %s | %d | %.2f | %.2f .. %.2f | %.2f |", r.test.c_str(), n_threads, r.median, r.lo, r.hi,
                            r.warmup_tps);
                if (r.n_gen > 0) {
                    std::printf(" %.2f |", r.gbps);
                    if (r.bw_share >= 0) std::printf(" %.1f%% |\n", 100.0 * r.bw_share);
                    else std::printf(" — |\n");
                } else {
                    std::printf(" — | — |\n");
                }
            }
            bool any_verify = false;
            for (const Row& r : rows) any_verify = any_verify || r.n_verify > 0;
            if (any_verify) {
                std::printf("\n| verification | ms per forward | x one-token decode step (tg row at that depth) |\n");
                std::printf("|---|---:|---:|\n");
                for (const Row& r : rows) {
                    if (r.n_verify == 0) continue;
                    const double ms = 1000.0 * r.n_verify / r.median;
                    double step = 0;
                    for (const Row& g : rows) {
                        if (g.n_gen > 0 && g.depth == r.depth && g.median > 0) step = 1000.0 / g.median;
                    }
                    if (step > 0) std::printf("| %s | %.3f | %.2fx |\n", r.test.c_str(), ms, ms / step);
                    else std::printf("| %s | %.3f | — (no tg row at d%d) |\n", r.test.c_str(), ms, r.depth);
                }
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jllm-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
