// apps/synth/main.cpp — jllm-synth: writes a GGUF with seeded random weights and the real
// hyper-parameters, vocabulary and chat template of a preset, quantized by a recipe; or cuts a
// real model to its first K layers. Examples:
//   jllm-synth --preset qwen3-4b --quant q4_k_m -o /tmp/qwen3-4b-q4_k_m.gguf --seed 1
//   jllm-synth --from models/SmolLM2-135M-Instruct.Q4_1.gguf --layers 4 -o /tmp/smol-4l.gguf
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "gguf/gguf.h"
#include "jllm_version.h"
#include "synth/model_cut.h"
#include "synth/quant_recipe.h"
#include "synth/synth_model.h"
#include "synth/synth_presets.h"

namespace {

void list_presets() {
    std::printf("%-18s %-6s %6s %6s %6s %5s %5s %5s %7s %7s %s\n", "preset", "arch", "layers", "n_embd", "n_ff",
                "heads", "kv", "hdim", "vocab", "ctx", "shape of");
    for (const jllm::SynthPreset& p : jllm::synth_presets()) {
        std::printf("%-18s %-6s %6" PRId64 " %6" PRId64 " %6" PRId64 " %5" PRId64 " %5" PRId64 " %5" PRId64
                    " %7" PRId64 " %7" PRId64 " %s%s\n",
                    p.name, p.arch, p.n_layer, p.n_embd, p.n_ff, p.n_head, p.n_head_kv, p.head_dim, p.n_vocab,
                    p.n_ctx_train, p.hf_name[0] ? p.hf_name : "(test shape)", p.tied_output ? "" : " (untied output)");
    }
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"jllm-synth: synthetic GGUF models of real shapes (seeded random weights), or layer cuts of real models"};
    std::string preset, quant = "q4_k_m", out, from, tokenizer_dir;
    uint64_t seed = 42;
    int64_t layers = 0;
    int threads = 0;
    bool list = false, zeros = false, quiet = false, exact = false;
    app.add_option("--preset", preset, "model shape (see --list)");
    app.add_option("--quant", quant, "recipe: f16, q8_0, q4_0, q4_k_m, q6_k (types chosen as llama.cpp's ftype of that name)")
        ->capture_default_str();
    app.add_option("-o,--output", out, "output .gguf");
    app.add_option("--seed", seed, "random seed; the same seed gives the same bytes on every machine")->capture_default_str();
    app.add_option("--layers", layers, "number of blocks (default: the preset's; with --from: required)");
    app.add_option("--from", from, "cut this real GGUF to its first --layers blocks instead of synthesizing");
    app.add_option("-t,--threads", threads, "quantization threads (default: all cores)");
    app.add_option("--tokenizer-dir", tokenizer_dir,
                   "folder with the Hugging Face tokenizer folders qwen3/ and llama3/ (default: $JLLM_TOKENIZER_DIR or the repo's shared/testdata/tokenizers)")
        ->envname("JLLM_TOKENIZER_DIR");
    app.add_flag("--zeros", zeros, "all weights zero: layout only (fast; for type-table and loader tests)");
    app.add_flag("--exact-quant", exact, "k-quants with the reference quantizers' full scale search (much slower: 44 s vs 3.1 s for tiny-qwen3 q4_k_m on 2 cores)");
    app.add_flag("--list", list, "list the presets and exit");
    app.add_flag("-q,--quiet", quiet, "print nothing on success");
    app.set_version_flag("--version", std::string(JLLM_VERSION) + " (" + JLLM_GIT_COMMIT + ")");
    CLI11_PARSE(app, argc, argv);

    if (list) {
        list_presets();
        return 0;
    }
    try {
        if (out.empty()) throw jllm::JllmError("-o/--output is required");
        const auto t0 = std::chrono::steady_clock::now();
        auto seconds = [&] {
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        };
        if (!from.empty()) {
            if (!preset.empty()) throw jllm::JllmError("--from and --preset are exclusive");
            if (layers <= 0) throw jllm::JllmError("--from needs --layers K (K >= 1)");
            const jllm::CutSummary s = jllm::cut_model_layers(from, layers, out);
            if (!quiet) {
                std::printf("%s: %" PRId64 " of %" PRId64 " layers, %zu of %zu tensors, %" PRIu64 " bytes, %.1f s\n",
                            out.c_str(), s.n_layer_out, s.n_layer_in, s.tensors_out, s.tensors_in, s.file_bytes,
                            seconds());
            }
            return 0;
        }
        if (preset.empty()) throw jllm::JllmError("give --preset NAME (see --list) or --from FILE");
        jllm::SynthOptions opt;
        opt.preset = preset;
        opt.recipe = jllm::parse_quant_recipe(quant);
        opt.seed = seed;
        opt.n_layer = layers;
        opt.zeros = zeros;
        opt.exact_quant = exact;
        opt.tokenizer_dir = tokenizer_dir.empty() ? std::string(JLLM_DEFAULT_TOKENIZER_DIR) : tokenizer_dir;
        const uint64_t bytes = jllm::write_synth_model(opt, out, threads);
        if (!quiet) {
            std::printf("%s: preset %s, recipe %s, seed %" PRIu64 ", %" PRIu64 " bytes, %.1f s\n", out.c_str(),
                        preset.c_str(), quant.c_str(), seed, bytes, seconds());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jllm-synth: %s\n", e.what());
        return 1;
    }
    return 0;
}
