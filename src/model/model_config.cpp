// model/model_config.cpp — the architecture table and GGUF hyper-parameter parsing.
#include "model/model_config.h"

#include "core/error.h"
#include "gguf/gguf.h"

namespace jllm {

namespace {

const ArchRecipe kRecipes[] = {
    // name     rope style          qkv_bias qk_norm tied
    {"llama", RopeStyle::Normal, false, false, true},
    {"qwen2", RopeStyle::NeoX, true, false, true},
    {"qwen3", RopeStyle::NeoX, false, true, true},
};

int64_t require_int(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
    std::optional<int64_t> v = f.get_int(key);
    if (!v) throw JllmError("model: missing metadata key '" + key + "'");
    if (*v < lo || *v > hi) {
        throw JllmError(strfmt("model: '%s' is %lld, expected a value in [%lld, %lld]", key.c_str(),
                               static_cast<long long>(*v), static_cast<long long>(lo),
                               static_cast<long long>(hi)));
    }
    return *v;
}

int64_t optional_int(const GgufFile& f, const std::string& key, int64_t def, int64_t lo, int64_t hi) {
    if (!f.has(key)) return def;
    return require_int(f, key, lo, hi);
}

}  // namespace

const ArchRecipe* find_arch_recipe(const std::string& arch) {
    for (const ArchRecipe& r : kRecipes) {
        if (arch == r.name) return &r;
    }
    return nullptr;
}

std::string supported_arch_names() {
    std::string s;
    for (const ArchRecipe& r : kRecipes) {
        if (!s.empty()) s += ", ";
        s += r.name;
    }
    return s;
}

const char* rope_scaling_name(RopeScaling s) {
    switch (s) {
        case RopeScaling::None: return "none";
        case RopeScaling::Linear: return "linear";
        case RopeScaling::Llama3: return "llama3";
        case RopeScaling::Yarn: return "yarn";
    }
    return "?";
}

ModelConfig load_model_config(const GgufFile& f) {
    ModelConfig c;
    std::optional<std::string_view> arch = f.get_string("general.architecture");
    if (!arch) throw JllmError("model: missing metadata key 'general.architecture'");
    c.arch = std::string(*arch);
    c.recipe = find_arch_recipe(c.arch);
    if (!c.recipe) {
        throw JllmError("model: architecture '" + c.arch + "' is not supported (supported: " +
                        supported_arch_names() + ")");
    }
    if (auto n = f.get_string("general.name")) c.name = std::string(*n);
    const std::string p = c.arch + ".";
    constexpr int64_t BIG = 1 << 20;
    c.n_layer = require_int(f, p + "block_count", 1, 1024);
    c.n_embd = require_int(f, p + "embedding_length", 1, BIG);
    c.n_ff = require_int(f, p + "feed_forward_length", 1, 4 * BIG);
    c.n_head = require_int(f, p + "attention.head_count", 1, 4096);
    c.n_head_kv = optional_int(f, p + "attention.head_count_kv", c.n_head, 1, c.n_head);
    if (c.n_head % c.n_head_kv != 0) {
        throw JllmError(strfmt("model: head_count %lld is not a multiple of head_count_kv %lld",
                               static_cast<long long>(c.n_head), static_cast<long long>(c.n_head_kv)));
    }
    const int64_t def_head_dim = c.n_embd / c.n_head;
    c.head_dim = optional_int(f, p + "attention.key_length", def_head_dim, 1, 4096);
    const int64_t v_dim = optional_int(f, p + "attention.value_length", c.head_dim, 1, 4096);
    if (v_dim != c.head_dim) {
        throw JllmError(strfmt("model: value_length %lld differs from key_length %lld (not supported)",
                               static_cast<long long>(v_dim), static_cast<long long>(c.head_dim)));
    }
    if (c.head_dim % 2 != 0) throw JllmError("model: head dimension must be even for RoPE");
    c.n_rot = optional_int(f, p + "rope.dimension_count", c.head_dim, 2, c.head_dim);
    if (c.n_rot % 2 != 0) throw JllmError("model: rope.dimension_count must be even");
    c.n_ctx_train = optional_int(f, p + "context_length", 4096, 1, 1 << 24);
    if (auto v = f.get_float(p + "attention.layer_norm_rms_epsilon")) c.rms_eps = static_cast<float>(*v);
    if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f)) throw JllmError("model: layer_norm_rms_epsilon out of range");
    if (auto v = f.get_float(p + "rope.freq_base")) c.rope_freq_base = static_cast<float>(*v);
    if (!(c.rope_freq_base > 1.0f)) throw JllmError("model: rope.freq_base must be > 1");

    if (auto t = f.get_string(p + "rope.scaling.type")) {
        if (*t == "none") c.rope_scaling = RopeScaling::None;
        else if (*t == "linear") c.rope_scaling = RopeScaling::Linear;
        else if (*t == "llama3") c.rope_scaling = RopeScaling::Llama3;
        else if (*t == "yarn") c.rope_scaling = RopeScaling::Yarn;
        else throw JllmError("model: unknown rope.scaling.type '" + std::string(*t) + "'");
    }
    if (auto v = f.get_float(p + "rope.scaling.factor")) c.rope_scaling_factor = static_cast<float>(*v);
    c.rope_scaling_orig_ctx = optional_int(f, p + "rope.scaling.original_context_length", 0, 0, 1 << 24);
    if (c.rope_scaling == RopeScaling::Yarn) {
        throw JllmError("model: rope scaling 'yarn' is not supported");
    }

    // The logits have as many rows as the embedding (Qwen pads it past the tokenizer's size).
    if (const GgufTensorInfo* emb = f.find_tensor("token_embd.weight"); emb && emb->n_dims == 2) {
        c.n_vocab = emb->ne[1];
    } else if (f.has(p + "vocab_size")) {
        c.n_vocab = require_int(f, p + "vocab_size", 1, 1 << 24);
    } else if (const GgufArray* toks = f.get_array("tokenizer.ggml.tokens")) {
        c.n_vocab = static_cast<int64_t>(toks->count);
    } else {
        throw JllmError("model: cannot determine the vocabulary size");
    }
    return c;
}

}  // namespace jllm
