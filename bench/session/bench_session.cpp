// bench/session/bench_session.cpp — jllm-bench-session: what sessions buy a home assistant.
// Two conversations (a system prompt of about --system-tokens tokens listing exposed devices, as
// Home Assistant writes it, then --turns user turns each) run interleaved (A1 B1 A2 B2 ...) on
// an engine with its session cache; every turn's prompt also runs on a second engine without a
// cache (cold: the whole prompt prefilled). Per turn: TTFT cold and warm, the tokens reused and
// from where, the restore time, and the time to prefill the turn's new tokens alone (the same
// forward at the same depth, rerun after the turn): a warm turn should cost that plus the
// restore. Then a --system-tokens session through a file: restore (read, checks, copy into the
// KV cache; the file in the page cache) against prefilling it, median of --reps. With
// --cache-reuse N, the timestamp scenario: the same conversation's next turn after the clock line
// near the prompt's top changed, TTFT exact (the prefix ends at the clock) against --cache-reuse
// (the rest moved), and what reuse costs in quality: KL(exact || reuse) and top-1 agreement over
// the next 64 tokens of the exact greedy continuation, teacher-forced on both.
//   jllm-bench-session -m FILE [--device auto|cpu|cuda] [--system-tokens 1500] [--turns 4] [-r 3] [-t N]
//                      [--cache-reuse N]
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "jllm_engine.h"
#include "persistence/kv_file.h"

#include <xxhash.h>

using namespace jllm;

namespace {

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

const char* const AREAS[] = {"Kitchen", "Living Room", "Bedroom", "Office", "Hallway", "Garage", "Garden", "Bathroom"};
const char* const KINDS[][3] = {
    {"light", "Ceiling Light", "on"},  {"light", "Lamp", "off"},          {"switch", "Coffee Maker", "off"},
    {"sensor", "Temperature", "21.5"}, {"binary_sensor", "Motion", "off"}, {"cover", "Blinds", "open"},
    {"climate", "Thermostat", "heat"}, {"lock", "Door Lock", "locked"},    {"fan", "Fan", "off"},
    {"media_player", "Speaker", "idle"}, {"sensor", "Humidity", "48"},
};

// Home Assistant's prompt shape: instructions, the time, then one YAML-ish entry per exposed
// entity, until the prompt has `tokens` tokens.
std::string system_prompt(const Engine& e, int tokens, const std::string& home, const std::string& time = "14:03:22") {
    std::string s = "You are a voice assistant for Home Assistant.\nAnswer questions about the world truthfully.\n"
                    "Answer in plain text. Keep it simple and to the point.\n"
                    "When controlling Home Assistant always call the intent tools. Use HassTurnOn to lock and "
                    "HassTurnOff to unlock a lock. When controlling a device, prefer passing just name and domain.\n"
                    "The current time is " + time + ". Today's date is 2026-12-01.\n"
                    "Static Context: An overview of the areas and the devices in the home " + home + ":\n";
    for (int i = 0; static_cast<int>(e.tokenize(s, false).size()) < tokens; ++i) {
        const auto& k = KINDS[i % 11];
        const char* area = AREAS[(i / 11) % 8];
        s += std::string("- names: ") + area + " " + k[1] + (i >= 88 ? " " + std::to_string(i / 88 + 1) : "") +
             "\n  domain: " + k[0] + "\n  state: '" + k[2] + "'\n  areas: " + area + "\n";
    }
    return s;
}

const char* const USER[] = {
    "Turn on the kitchen ceiling light.", "What is the temperature in the living room?",
    "Close the blinds in the bedroom.",   "Is the garage door lock locked?",
    "Turn off every lamp.",               "Set the office thermostat to heat.",
};

struct Turn {
    std::string session;
    int index = 0;
    int prompt = 0, reused = 0, restored = 0;
    const char* source = "";
    double cold_ttft = 0, warm_ttft = 0, restore_ms = 0, alone_ms = 0;
};

GenerateRequest request(const std::vector<int32_t>& tokens, const std::string& session, int max_tokens) {
    GenerateRequest r;
    r.prompt_tokens = tokens;
    r.sampling.temperature = 0;
    r.sampling.repeat_penalty = 1;
    r.max_tokens = max_tokens;
    r.session_id = session;
    return r;
}

// log-softmax of a row, in double.
std::vector<double> log_softmax(const std::vector<float>& x) {
    double mx = -INFINITY;
    for (float v : x) mx = std::max(mx, static_cast<double>(v));
    double sum = 0;
    for (float v : x) sum += std::exp(static_cast<double>(v) - mx);
    const double lse = mx + std::log(sum);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) - lse;
    return out;
}

// The clock line near the top changes between two turns of one conversation.
int timestamp_scenario(const EngineConfig& base, int reuse, int system_tokens, int answer_tokens) {
    EngineConfig exact_cfg = base, reuse_cfg = base;
    reuse_cfg.cache_reuse = reuse;
    Engine exact, reused;
    for (auto [e, c] : {std::pair<Engine*, EngineConfig*>{&exact, &exact_cfg}, {&reused, &reuse_cfg}}) {
        const Status st = e->load(*c);
        if (!st.ok) {
            std::fprintf(stderr, "jllm-bench-session: %s\n", st.message.c_str());
            return 1;
        }
    }
    std::vector<ChatMessage> h = {ChatMessage{"system", system_prompt(exact, system_tokens, "Maple Street"), "", {}, "", ""},
                                  ChatMessage{"user", USER[0], "", {}, "", ""}};
    const std::vector<int32_t> t1 = exact.tokenize(exact.render_chat(h, ChatRenderOptions{}), true, false);
    const GenerateResult a1 = exact.generate(request(t1, "A", answer_tokens), nullptr);
    exact.checkpoint();
    (void)reused.generate(request(t1, "A", answer_tokens), nullptr);
    reused.checkpoint();
    h[0].content = system_prompt(exact, system_tokens, "Maple Street", "14:04:10");
    h.push_back(ChatMessage{"assistant", a1.text, "", {}, "", ""});
    h.push_back(ChatMessage{"user", USER[1], "", {}, "", ""});
    const std::vector<int32_t> t2 = exact.tokenize(exact.render_chat(h, ChatRenderOptions{}), true, false);
    const GenerateResult e2 = exact.generate(request(t2, "A", 1), nullptr);
    const GenerateResult r2 = reused.generate(request(t2, "A", 1), nullptr);
    // Quality: the exact greedy continuation, then both engines teacher-forced along it.
    const GenerateResult cont = exact.generate(request(t2, "", 64), nullptr);
    std::vector<int32_t> g = exact.tokenize(cont.text, false);
    if (g.size() > 64) g.resize(64);
    double kl_sum = 0, kl_max = 0;
    int agree = 0;
    std::vector<int32_t> p = t2;
    for (size_t k = 0; k <= g.size(); ++k) {
        if (k > 0) p.push_back(g[k - 1]);
        (void)exact.generate(request(p, "", 0), nullptr);
        (void)reused.generate(request(p, "", 0), nullptr);
        const std::vector<double> le = log_softmax(exact.last_logits()), lr = log_softmax(reused.last_logits());
        double kl = 0;
        for (size_t i = 0; i < le.size(); ++i) kl += std::exp(le[i]) * (le[i] - lr[i]);
        kl_sum += kl;
        kl_max = std::max(kl_max, kl);
        agree += std::max_element(le.begin(), le.end()) - le.begin() == std::max_element(lr.begin(), lr.end()) - lr.begin();
    }
    const double n = static_cast<double>(g.size() + 1);
    std::printf("\ntimestamp scenario (the clock line changed, the same conversation's next turn, %d prompt tokens):\n"
                "| | reused | of them moved | prefilled | TTFT ms |\n|---|---:|---:|---:|---:|\n"
                "| exact (prefix only) | %d | 0 | %d | %.1f |\n| --cache-reuse %d | %d | %d | %d | %.1f |\n"
                "quality over the next %zu positions (the exact greedy continuation, teacher-forced): KL(exact || reuse) "
                "mean %.5f, max %.5f nats; top-1 agreement %.1f%%\n",
                e2.stats.prompt_tokens, e2.stats.reused_tokens, e2.stats.prompt_tokens - e2.stats.reused_tokens,
                e2.stats.ttft_ms, reuse, r2.stats.reused_tokens, r2.stats.shifted_tokens,
                r2.stats.prompt_tokens - r2.stats.reused_tokens, r2.stats.ttft_ms, g.size() + 1, kl_sum / n, kl_max,
                100.0 * agree / n);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-bench-session: TTFT of a home assistant's turns, cold and with sessions"};
    std::string model, device = "auto";
    int system_tokens = 1500, turns = 4, reps = 3, threads = 0, answer_tokens = 24, cache_reuse = 0;
    std::string file_dir = "/tmp";
    app.add_option("-m,--model", model, "GGUF file")->required();
    app.add_option("--device", device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str();
    app.add_option("--system-tokens", system_tokens, "system prompt size")->check(CLI::Range(64, 8000))->capture_default_str();
    app.add_option("--turns", turns, "turns per conversation")->check(CLI::Range(1, 6))->capture_default_str();
    app.add_option("--answer-tokens", answer_tokens, "tokens per answer at most")->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("-r,--reps", reps, "repetitions of the file restore")->check(CLI::Range(1, 50))->capture_default_str();
    app.add_option("-t,--threads", threads, "CPU threads (0: all cores)")->capture_default_str();
    app.add_option("--dir", file_dir, "where the session file is written")->capture_default_str();
    app.add_option("--cache-reuse", cache_reuse, "also run the timestamp scenario with this --cache-reuse (0: skip)")
        ->check(CLI::Range(0, 4096))->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    EngineConfig cfg;
    cfg.model_path = model;
    cfg.device = device == "cpu" ? DeviceKind::Cpu : device == "cuda" ? DeviceKind::Cuda : DeviceKind::Auto;
    cfg.n_threads = threads;
    cfg.n_ctx = std::min(8192, system_tokens + turns * (answer_tokens + 64) + 256);
    Engine warm, cold;
    EngineConfig cold_cfg = cfg;
    cold_cfg.cache_ram_mb = 0;
    for (auto [e, c] : {std::pair<Engine*, EngineConfig*>{&warm, &cfg}, {&cold, &cold_cfg}}) {
        const Status st = e->load(*c);
        if (!st.ok) {
            std::fprintf(stderr, "jllm-bench-session: %s\n", st.message.c_str());
            return 1;
        }
    }
    const ModelInfo mi = warm.model_info();
    std::printf("jllm-bench-session: %s (%s), backend %s, %s, KV %s, ctx %lld, session cache %.0f MB\n\n",
                mi.name.c_str(), mi.arch.c_str(), mi.backend.c_str(), mi.device.c_str(), mi.kv_type.c_str(),
                static_cast<long long>(mi.n_ctx), warm.session_stats().ram_budget / 1048576.0);

    const char* const ids[] = {"A", "B"};
    std::vector<std::vector<ChatMessage>> history(2);
    for (int s = 0; s < 2; ++s) {
        history[s].push_back(ChatMessage{"system", system_prompt(warm, system_tokens, ids[s] == std::string("A") ? "Maple Street" : "Oak Lane"), "", {}, "", ""});
    }
    std::vector<Turn> rows;
    for (int t = 0; t < turns; ++t) {
        for (int s = 0; s < 2; ++s) {
            history[s].push_back(ChatMessage{"user", USER[(t * 2 + s) % 6], "", {}, "", ""});
            const std::vector<int32_t> tokens = warm.tokenize(warm.render_chat(history[s], ChatRenderOptions{}), true, false);
            Turn row;
            row.session = ids[s];
            row.index = t + 1;
            const GenerateResult w = warm.generate(request(tokens, ids[s], answer_tokens), nullptr);
            warm.checkpoint();
            if (w.finish == FinishReason::Error) {
                std::fprintf(stderr, "jllm-bench-session: %s\n", w.error.c_str());
                return 1;
            }
            row.prompt = w.stats.prompt_tokens;
            row.reused = w.stats.reused_tokens;
            row.restored = w.stats.restored_tokens;
            row.source = cache_source_name(w.stats.cache_source);
            row.warm_ttft = w.stats.ttft_ms;
            row.restore_ms = w.stats.restore_ms;
            // The new tokens alone at the same depth (the warm engine's sequence is stored already).
            if (row.reused > 0) {
                const std::vector<int32_t> fresh(tokens.begin() + row.reused, tokens.end());
                const double t0 = now_ms();
                (void)warm.forward_tokens(fresh, row.reused);
                row.alone_ms = now_ms() - t0;
            }
            cold.clear_cache();
            const GenerateResult c = cold.generate(request(tokens, "", 1), nullptr);
            row.cold_ttft = c.stats.ttft_ms;
            rows.push_back(row);
            history[s].push_back(ChatMessage{"assistant", w.text, "", {}, "", ""});
        }
    }
    std::printf("| turn | prompt | reused (source) | restored | TTFT cold ms | TTFT warm ms | new tokens alone ms "
                "| restore ms | warm / (alone + restore) |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
    double worst = 0;
    for (const Turn& r : rows) {
        const double bound = r.alone_ms + r.restore_ms;
        const double ratio = r.reused > 0 && bound > 0 ? r.warm_ttft / bound : 0;
        if (r.index > 1) worst = std::max(worst, ratio);
        std::printf("| %s%d | %d | %d (%s) | %d | %.1f | %.1f | %.1f | %.2f | %s |\n", r.session.c_str(), r.index,
                    r.prompt, r.reused, r.source, r.restored, r.cold_ttft, r.warm_ttft, r.alone_ms, r.restore_ms,
                    ratio > 0 ? std::to_string(ratio).substr(0, 4).c_str() : "—");
    }
    std::printf("\nwarm turns (after the first of each session): TTFT at most %.2f x (new tokens alone + restore) "
                "(gate <= 1.20)\n\n", worst);

    // A system-prompt-sized session through a file: restore against prefill.
    std::string tmpl = file_dir + "/jllm-bench-session-XXXXXX";
    const char* dir = ::mkdtemp(tmpl.data());
    if (!dir) {
        std::perror("mkdtemp");
        return 1;
    }
    const std::string path = std::string(dir) + "/session.jkv";
    const std::vector<int32_t> sys = warm.tokenize(
        warm.render_chat({history[0].front(), ChatMessage{"user", USER[0], "", {}, "", ""}}, ChatRenderOptions{}), true, false);
    std::vector<double> prefill, restore, read_only, hash_only;
    int n = 0;
    int64_t bytes = 0;
    for (int r = 0; r < reps; ++r) {
        double t0 = now_ms();
        (void)warm.forward_tokens(sys, 0);
        prefill.push_back(now_ms() - t0);
        if (!warm.save_sequence(path, &n, &bytes).ok) return 1;
        {  // the file alone: read out of the page cache and checked, no copy into the KV cache
            KvSnapshot s;
            KvFileHeader h;
            std::string why;
            if (read_kv_header(path, KvShape{}, h, why) != KvFileError::Foreign) return 1;
            t0 = now_ms();
            (void)read_kv_file(path, h.shape, s, why);
            read_only.push_back(now_ms() - t0);
            t0 = now_ms();
            volatile uint64_t sink = XXH3_64bits(s.kv.bytes.data(), s.kv.bytes.size());
            (void)sink;
            hash_only.push_back(now_ms() - t0);
        }
        warm.clear_cache();
        t0 = now_ms();
        const Status st = warm.restore_sequence(path, &n, &bytes);
        restore.push_back(now_ms() - t0);
        if (!st.ok) {
            std::fprintf(stderr, "jllm-bench-session: %s\n", st.message.c_str());
            return 1;
        }
    }
    ::unlink(path.c_str());
    ::rmdir(dir);
    const double p = median(prefill), q = median(restore);
    std::printf("session of %d tokens (%.1f MB of KV): prefill %.1f ms, restore from a file in the page cache %.1f ms "
                "(%.2f%% of the prefill; gate <= 25%%; of it the file read and checked %.1f ms, its checksum alone %.1f ms), "
                "median of %d, file in %s\n",
                n, bytes / 1048576.0, p, q, p > 0 ? 100.0 * q / p : 0.0, median(read_only), median(hash_only), reps,
                file_dir.c_str());
    if (cache_reuse > 0) {
        if (int rc = timestamp_scenario(cfg, cache_reuse, system_tokens, answer_tokens)) return rc;
    }
    return 0;
}
