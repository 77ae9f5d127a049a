// apps/perplexity/main.cpp — jllm-perplexity: a text's perplexity under a GGUF model
// (llama-perplexity's definition: chunks of -c tokens from an empty context, the second half of
// each chunk scored), and the KL divergence of the model's distributions from a saved reference
// (--kl-base: a file of this program's --save-logits, or llama.cpp's through
// scripts/golden/gen_kl_golden.py).
//   jllm-perplexity -m model.gguf -f text.txt [-c 512] [--chunks N] [--kv-type fp16]
//                   [--save-logits FILE | --kl-base FILE] [--json FILE]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine_flags.h"
#include "jllm.h"
#include "jllm_version.h"
#include "perplexity.h"

namespace {

using jllm::ppl::Stats;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw std::runtime_error(path + " holds no text");
    return text;
}

// The progress bar on stderr: redrawn in place on a terminal, one line per chunk otherwise.
void progress(size_t done, size_t total, double elapsed, size_t tokens_done) {
    const bool tty = isatty(STDERR_FILENO) != 0;
    constexpr int WIDTH = 30;
    const int fill = static_cast<int>(WIDTH * done / std::max<size_t>(total, 1));
    const double eta = done == 0 ? 0.0 : elapsed / static_cast<double>(done) * static_cast<double>(total - done);
    std::fprintf(stderr, "%s[%s%s] %zu/%zu chunks, %.0f tokens/s, ETA %.0f s%s", tty ? "\r" : "",
                 std::string(static_cast<size_t>(fill), '=').c_str(),
                 std::string(static_cast<size_t>(WIDTH - fill), ' ').c_str(), done, total,
                 elapsed > 0 ? static_cast<double>(tokens_done) / elapsed : 0.0, eta,
                 tty ? (done == total ? "\n" : "") : "\n");
    std::fflush(stderr);
}

struct Options {
    std::string text_file, save_logits, kl_base, json_file;
    int n_chunks = 0;
    bool ctx_given = false, chunks_given = false;
};

int run(jllm::flags::EngineFlags& f, const Options& o) {
    if (!o.save_logits.empty() && !o.kl_base.empty()) {
        throw std::runtime_error("--save-logits and --kl-base are exclusive (save a reference, or compare with one)");
    }
    const std::string text = read_text(o.text_file);
    std::unique_ptr<jllm::ppl::LogProbFile> base;
    int n_ctx = f.config.n_ctx, n_chunks = o.n_chunks;
    if (!o.kl_base.empty()) {
        base = std::make_unique<jllm::ppl::LogProbFile>(jllm::ppl::read_logprob_file(o.kl_base));
        const jllm::ppl::LogProbHeader& h = base->header;
        if (o.ctx_given && static_cast<uint32_t>(n_ctx) != h.n_ctx) {
            throw std::runtime_error("-c " + std::to_string(n_ctx) + ": " + o.kl_base + " was made with -c " +
                                     std::to_string(h.n_ctx));
        }
        if (o.chunks_given && static_cast<uint32_t>(n_chunks) != h.n_chunks) {
            throw std::runtime_error("--chunks " + std::to_string(n_chunks) + ": " + o.kl_base + " holds " +
                                     std::to_string(h.n_chunks) + " chunks");
        }
        n_ctx = static_cast<int>(h.n_ctx);
        n_chunks = static_cast<int>(h.n_chunks);
    }
    if (n_ctx < 8) throw std::runtime_error("-c must be at least 8 tokens");

    jllm::EngineConfig cfg = f.config;
    cfg.n_ctx = n_ctx;
    cfg.cache_ram_mb = 0;
    cfg.spec = jllm::SpecMode::Off;
    jllm::Engine engine;
    jllm::Status st = engine.load(cfg);
    if (!st.ok) throw std::runtime_error(st.message);
    const jllm::ModelInfo info = engine.model_info();
    const int64_t V = info.n_vocab;
    if (base && base->header.n_vocab != static_cast<uint32_t>(V)) {
        throw std::runtime_error(o.kl_base + " holds distributions over " + std::to_string(base->header.n_vocab) +
                                 " tokens; " + info.path + " has " + std::to_string(V) + " (another model)");
    }
    const std::vector<int32_t> bos_probe = engine.tokenize("", false, true);
    const int32_t bos = bos_probe.empty() ? -1 : bos_probe[0];
    const std::vector<int32_t> tokens = engine.tokenize(text, false, true);
    const std::vector<std::vector<int32_t>> chunks = jllm::ppl::make_chunks(tokens, n_ctx, n_chunks, bos, 2);
    if (base) {
        const std::vector<int32_t>& bt = base->header.tokens;
        for (size_t c = 0; c < chunks.size(); c++) {
            for (size_t j = 0; j < chunks[c].size(); j++) {
                if (chunks[c][j] != bt[c * static_cast<size_t>(n_ctx) + j]) {
                    throw std::runtime_error("token " + std::to_string(c * static_cast<size_t>(n_ctx) + j) + " of " +
                                             o.text_file + " differs from " + o.kl_base +
                                             "'s (another text, or another tokenizer)");
                }
            }
        }
    }
    const size_t first = static_cast<size_t>(n_ctx / 2);
    const size_t per_chunk = static_cast<size_t>(n_ctx) - 1 - first;
    std::fprintf(stderr, "jllm-perplexity: %s (%s, %s, %s KV), %zu tokens, %zu chunks of %d, %zu scored each\n",
                 info.name.c_str(), info.backend.c_str(), info.device.c_str(), info.kv_type.c_str(), tokens.size(),
                 chunks.size(), n_ctx, per_chunk);

    std::unique_ptr<jllm::ppl::LogProbWriter> writer;
    std::vector<int32_t> write_samples;  // the written file's sample ids (none without --save-logits)
    if (!o.save_logits.empty()) {
        jllm::ppl::LogProbHeader h;
        h.n_vocab = static_cast<uint32_t>(V);
        h.n_ctx = static_cast<uint32_t>(n_ctx);
        h.n_chunks = static_cast<uint32_t>(chunks.size());
        h.first = static_cast<uint32_t>(first);
        h.name = info.name + " (jllm " + info.backend + ", " + info.kv_type + " KV)";
        h.n_top = std::min<uint32_t>(jllm::ppl::DEFAULT_TOP, h.n_vocab);
        h.n_sample = std::min<uint32_t>(jllm::ppl::DEFAULT_SAMPLE, h.n_vocab);
        h.sample_ids = jllm::ppl::sample_vocabulary(h.n_vocab, h.n_sample);
        for (const auto& c : chunks) h.tokens.insert(h.tokens.end(), c.begin(), c.end());
        writer = std::make_unique<jllm::ppl::LogProbWriter>(o.save_logits, h);
        write_samples = h.sample_ids;
    }

    Stats stats;
    std::vector<float> logits;
    std::vector<double> logsm;
    const double t0 = now_s();
    double eval_s = 0;
    progress(0, chunks.size(), 0, 0);
    for (size_t c = 0; c < chunks.size(); c++) {
        const double te = now_s();
        st = engine.eval_all_logits(chunks[c], logits);
        if (!st.ok) throw std::runtime_error(st.message);
        eval_s += now_s() - te;
        Stats chunk_stats;
        for (size_t j = first; j + 1 < chunks[c].size(); j++) {
            const jllm::ppl::Row row =
                jllm::ppl::make_row(logits.data() + j * static_cast<size_t>(V), V, chunks[c][j + 1],
                                    writer ? jllm::ppl::DEFAULT_TOP : 1, write_samples, logsm);
            stats.add_nll(-row.logp_next);
            chunk_stats.add_nll(-row.logp_next);
            if (writer) writer->add(row);
            if (base) {
                const jllm::ppl::Row& b = base->rows[c * per_chunk + (j - first)];
                const jllm::ppl::Divergence d = jllm::ppl::divergence(b, base->header.sample_ids, logsm, row.argmax);
                stats.add_pair(-b.logp_next, d);
                chunk_stats.add_pair(-b.logp_next, d);
            }
        }
        std::printf("[%zu/%zu] PPL %.4f (chunk %.4f)", c + 1, chunks.size(), stats.ppl(), chunk_stats.ppl());
        if (base) std::printf("  KL %.5f  top-1 %.1f%%", stats.kl_mean(), 100.0 * stats.top1_agreement());
        std::printf("\n");
        std::fflush(stdout);
        progress(c + 1, chunks.size(), now_s() - t0, (c + 1) * static_cast<size_t>(n_ctx));
    }
    if (writer) writer->close();
    const size_t n_eval = chunks.size() * static_cast<size_t>(n_ctx);
    const double tps = eval_s > 0 ? static_cast<double>(n_eval) / eval_s : 0.0;

    std::printf("\nPPL = %.4f +/- %.4f\n", stats.ppl(), stats.ppl_error());
    std::printf("%zu tokens evaluated (%zu chunks of %d), %zu scored; %.1f s, %.1f tokens/s\n", n_eval,
                chunks.size(), n_ctx, stats.n(), eval_s, tps);
    nlohmann::json j = {{"model", info.path},
                        {"name", info.name},
                        {"backend", info.backend},
                        {"device", info.device},
                        {"kv_type", info.kv_type},
                        {"n_ctx", n_ctx},
                        {"n_chunks", chunks.size()},
                        {"n_scored", stats.n()},
                        {"ppl", stats.ppl()},
                        {"ppl_error", stats.ppl_error()},
                        {"eval_seconds", eval_s},
                        {"tokens_per_second", tps}};
    if (base) {
        std::printf("base: %s, PPL = %.4f\n", base->header.name.c_str(), stats.base_ppl());
        std::printf("PPL / PPL(base) = %.5f +/- %.5f\n", stats.ppl_ratio(), stats.ppl_ratio_error());
        std::printf("KL(base || this): mean %.6f +/- %.6f nats, median %.6f, p99 %.6f, max %.6f\n", stats.kl_mean(),
                    stats.kl_mean_error(), stats.kl_quantile(0.5), stats.kl_quantile(0.99), stats.kl_max());
        std::printf("  exact over the base's top %u with the rest as one bucket: %.6f; the rest (mean mass %.3f) "
                    "estimated from %u sampled tokens\n",
                    base->header.n_top, stats.kl_bucket_mean(), stats.tail_mass_mean(), base->header.n_sample);
        std::printf("top-1 agreement: %.2f%% (%zu of %zu differ", 100.0 * stats.top1_agreement(), stats.top1_differ(),
                    stats.n_pairs());
        if (stats.top1_differ() > 0) {
            std::printf("; there the base's probabilities of the two tokens are a median %.4f apart",
                        stats.top1_gap_median());
        }
        std::printf(")\n");
        j["base"] = {{"file", o.kl_base},
                     {"name", base->header.name},
                     {"ppl", stats.base_ppl()},
                     {"ppl_ratio", stats.ppl_ratio()},
                     {"ppl_ratio_error", stats.ppl_ratio_error()},
                     {"kl_mean", stats.kl_mean()},
                     {"kl_mean_error", stats.kl_mean_error()},
                     {"kl_bucket_mean", stats.kl_bucket_mean()},
                     {"tail_mass_mean", stats.tail_mass_mean()},
                     {"n_top", base->header.n_top},
                     {"n_sample", base->header.n_sample},
                     {"kl_median", stats.kl_quantile(0.5)},
                     {"kl_p99", stats.kl_quantile(0.99)},
                     {"kl_max", stats.kl_max()},
                     {"top1_agreement", stats.top1_agreement()},
                     {"top1_differ", stats.top1_differ()},
                     {"top1_gap_median", stats.top1_gap_median()}};
    }
    if (!o.json_file.empty()) {
        std::ofstream out(o.json_file);
        out << j.dump(2) << "\n";
        if (!out) throw std::runtime_error("cannot write " + o.json_file);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-perplexity: perplexity of a text under a GGUF model, and KL divergence from a saved "
                 "reference (llama-perplexity's definitions)"};
    jllm::flags::EngineFlags f;
    f.config.n_ctx = 512;
    Options o;
    jllm::flags::add_engine_flags(app, f, jllm::flags::MODEL | jllm::flags::CONTEXT | jllm::flags::RUNTIME);
    app.get_option("-c")->description("Tokens per chunk (each evaluated from an empty context, its second half scored)");
    app.add_option("-f,--file", o.text_file, "The text (UTF-8)")->required();
    app.add_option("--chunks", o.n_chunks, "Chunks to evaluate (0: every whole chunk of the text)")
        ->capture_default_str()->check(CLI::Range(0, 1 << 20));
    app.add_option("--save-logits", o.save_logits,
                   "Write the scored positions' log-probabilities (the 64 most probable tokens and a fixed sample of "
                   "128 others) as a reference for --kl-base");
    app.add_option("--kl-base", o.kl_base,
                   "Compare with a saved reference: PPL ratio, KL divergence (mean, median, p99, max), top-1 "
                   "agreement. -c and --chunks default to the file's");
    app.add_option("--json", o.json_file, "Also write the figures as JSON");
    app.set_version_flag("--version", std::string(JLLM_VERSION) + " (" + JLLM_GIT_COMMIT + ")");
    CLI11_PARSE(app, argc, argv);
    o.ctx_given = app.count("-c") > 0;
    o.chunks_given = app.count("--chunks") > 0;
    try {
        return run(f, o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jllm-perplexity: %s\n", e.what());
        return 1;
    }
}
