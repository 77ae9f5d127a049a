// synth/synth_presets.cpp — the preset table. Values from each model's config.json on Hugging
// Face (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim, vocab_size, max_position_embeddings, rope_theta, rms_norm_eps,
// tie_word_embeddings, rope_scaling).
#include "synth/synth_presets.h"

#include <cmath>

namespace jllm {

namespace {

// clang-format off
const std::vector<SynthPreset> kPresets = {
    // name           arch     hf                            tok      L   embd  n_ff   H  KV  hd  vocab    ctx     theta     eps   tied   llama3 rope: factor low high orig
    {"qwen3-0.6b",    "qwen3", "Qwen/Qwen3-0.6B",           "qwen3", 28, 1024,  3072, 16, 8, 128, 151936, 40960,  1000000.f, 1e-6f, true,  false, 0, 0, 0, 0},
    {"qwen3-1.7b",    "qwen3", "Qwen/Qwen3-1.7B",           "qwen3", 28, 2048,  6144, 16, 8, 128, 151936, 40960,  1000000.f, 1e-6f, true,  false, 0, 0, 0, 0},
    {"qwen3-4b",      "qwen3", "Qwen/Qwen3-4B",             "qwen3", 36, 2560,  9728, 32, 8, 128, 151936, 40960,  1000000.f, 1e-6f, true,  false, 0, 0, 0, 0},
    {"qwen3-8b",      "qwen3", "Qwen/Qwen3-8B",             "qwen3", 36, 4096, 12288, 32, 8, 128, 151936, 40960,  1000000.f, 1e-6f, false, false, 0, 0, 0, 0},
    {"qwen2.5-0.5b",  "qwen2", "Qwen/Qwen2.5-0.5B",         "qwen3", 24,  896,  4864, 14, 2,  64, 151936, 32768,  1000000.f, 1e-6f, true,  false, 0, 0, 0, 0},
    {"llama3.2-1b",   "llama", "meta-llama/Llama-3.2-1B",   "llama3", 16, 2048, 8192, 32, 8,  64, 128256, 131072, 500000.f,  1e-5f, true,  true, 32.f, 1.f, 4.f, 8192},
    {"llama3.2-3b",   "llama", "meta-llama/Llama-3.2-3B",   "llama3", 28, 3072, 8192, 24, 8, 128, 128256, 131072, 500000.f,  1e-5f, true,  true, 32.f, 1.f, 4.f, 8192},
    // Tiny shapes for tests: every architecture; tiny-qwen2 has rows that are not a multiple of
    // 256 (like Qwen2.5-0.5B's 896), so the k-quant recipes take their fallbacks.
    {"tiny-qwen3",    "qwen3", "",                          "qwen3",  2,  256,   512,  4, 2,  64, 151936, 4096,   1000000.f, 1e-6f, true,  false, 0, 0, 0, 0},
    {"tiny-qwen2",    "qwen2", "",                          "qwen3",  3,  128,   384,  2, 1,  64, 151936, 4096,   1000000.f, 1e-6f, true,  false, 0, 0, 0, 0},
    {"tiny-llama",    "llama", "",                          "llama3", 4,  256,   768,  4, 2,  64, 128256, 8192,   500000.f,  1e-5f, true,  true, 32.f, 1.f, 4.f, 8192},
    {"tiny-qwen3-untied", "qwen3", "",                      "qwen3",  2,  256,   512,  4, 2,  64, 151936, 4096,   1000000.f, 1e-6f, false, false, 0, 0, 0, 0},
};
// clang-format on

}  // namespace

const std::vector<SynthPreset>& synth_presets() { return kPresets; }

const SynthPreset* find_synth_preset(const std::string& name) {
    for (const SynthPreset& p : kPresets) {
        if (name == p.name) return &p;
    }
    return nullptr;
}

std::string synth_preset_names() {
    std::string s;
    for (const SynthPreset& p : kPresets) {
        if (!s.empty()) s += ", ";
        s += p.name;
    }
    return s;
}

std::vector<float> llama3_rope_freq_divisors(const SynthPreset& p) {
    const int64_t n = p.head_dim / 2;
    std::vector<float> out(static_cast<size_t>(n), 1.0f);
    const double pi = 3.14159265358979323846;
    const double low_wavelen = static_cast<double>(p.rope_orig_ctx) / p.rope_low_freq;
    const double high_wavelen = static_cast<double>(p.rope_orig_ctx) / p.rope_high_freq;
    for (int64_t i = 0; i < n; ++i) {
        const double freq = 1.0 / std::pow(static_cast<double>(p.rope_freq_base), (2.0 * i) / p.head_dim);
        const double wavelen = 2.0 * pi / freq;
        double div = 1.0;
        if (wavelen < high_wavelen) {
            div = 1.0;
        } else if (wavelen > low_wavelen) {
            div = p.rope_factor;
        } else {
            const double smooth = (p.rope_orig_ctx / wavelen - p.rope_low_freq) / (p.rope_high_freq - p.rope_low_freq);
            div = 1.0 / ((1.0 - smooth) / p.rope_factor + smooth);
        }
        out[static_cast<size_t>(i)] = static_cast<float>(div);
    }
    return out;
}

}  // namespace jllm
