// synth/synth_presets.h — the model shapes jllm-synth can write: the real hyper-parameters of
// published checkpoints (from their config.json) and tiny test shapes of each architecture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jllm {

struct SynthPreset {
    const char* name;           // "qwen3-4b"
    const char* arch;           // general.architecture: llama | qwen2 | qwen3
    const char* hf_name;        // the checkpoint whose shape this is ("" for tiny presets)
    const char* tokenizer;      // folder under the tokenizer dir: "qwen3" | "llama3"
    int64_t n_layer;
    int64_t n_embd;
    int64_t n_ff;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;
    int64_t n_vocab;            // embedding rows (Qwen pads past the tokenizer's 151,669 tokens)
    int64_t n_ctx_train;        // max_position_embeddings
    float rope_freq_base;       // rope_theta
    float rms_eps;              // rms_norm_eps
    bool tied_output;           // tie_word_embeddings: no output.weight
    // Llama-3 rope scaling (rope_type "llama3"), written as rope_freqs.weight like the converters.
    bool llama3_rope;
    float rope_factor;          // factor
    float rope_low_freq;        // low_freq_factor
    float rope_high_freq;       // high_freq_factor
    int64_t rope_orig_ctx;      // original_max_position_embeddings
};

// nullptr if unknown.
const SynthPreset* find_synth_preset(const std::string& name);
const std::vector<SynthPreset>& synth_presets();
std::string synth_preset_names();  // "qwen3-0.6b, qwen3-1.7b, ..."

// rope_freqs.weight of a llama3-scaled preset: [head_dim / 2] frequency divisors (1 for high
// frequencies, `factor` for low ones, smooth in between), as the GGUF converters compute them.
std::vector<float> llama3_rope_freq_divisors(const SynthPreset& p);

}  // namespace jllm
