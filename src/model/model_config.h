// model/model_config.h — architecture recipes and the hyper-parameters read from GGUF metadata.
// One recipe struct describes an architecture; the forward pass reads it (never forked per model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jllm {

class GgufFile;

enum class RopeStyle {
    Normal,  // rotate pairs (2i, 2i+1) — Llama family
    NeoX,    // rotate pairs (i, i + n_rot/2) — Qwen2 / Qwen3
};

enum class RopeScaling { None, Linear, Llama3, Yarn };

struct ArchRecipe {
    const char* name;        // general.architecture value
    RopeStyle rope_style;
    bool qkv_bias;           // attn_{q,k,v}.bias present (Qwen2)
    bool qk_norm;            // per-head RMSNorm of Q and K before RoPE (Qwen3)
    bool output_may_be_tied; // output.weight may be absent (use token_embd)
};

// nullptr if the engine does not support `arch`.
const ArchRecipe* find_arch_recipe(const std::string& arch);
// Names of the supported architectures, for messages.
std::string supported_arch_names();

struct ModelConfig {
    std::string arch;          // general.architecture
    std::string name;          // general.name (may be empty)
    const ArchRecipe* recipe = nullptr;

    int64_t n_layer = 0;       // <arch>.block_count
    int64_t n_embd = 0;        // <arch>.embedding_length
    int64_t n_ff = 0;          // <arch>.feed_forward_length
    int64_t n_head = 0;        // <arch>.attention.head_count
    int64_t n_head_kv = 0;     // <arch>.attention.head_count_kv (default n_head)
    int64_t head_dim = 0;      // <arch>.attention.key_length (default n_embd / n_head)
    int64_t n_rot = 0;         // <arch>.rope.dimension_count (default head_dim)
    int64_t n_vocab = 0;       // <arch>.vocab_size, else tokenizer.ggml.tokens length
    int64_t n_ctx_train = 0;   // <arch>.context_length
    float rms_eps = 1e-6f;     // <arch>.attention.layer_norm_rms_epsilon
    float rope_freq_base = 10000.0f;  // <arch>.rope.freq_base

    RopeScaling rope_scaling = RopeScaling::None;  // <arch>.rope.scaling.type
    float rope_scaling_factor = 1.0f;              // <arch>.rope.scaling.factor
    int64_t rope_scaling_orig_ctx = 0;             // <arch>.rope.scaling.original_context_length

    int64_t q_dim() const { return n_head * head_dim; }
    int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters. Throws JllmError naming the key and the problem
// (missing, wrong type, out of range, inconsistent) or an unsupported architecture.
ModelConfig load_model_config(const GgufFile& f);

// "rope_scaling" name for printing.
const char* rope_scaling_name(RopeScaling s);

}  // namespace jllm
