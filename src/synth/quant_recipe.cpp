// synth/quant_recipe.cpp — per-tensor type choice for each recipe.
#include "synth/quant_recipe.h"

#include <cstdlib>

#include "core/error.h"

namespace jllm {

QuantRecipe parse_quant_recipe(const std::string& name) {
    if (name == "f16") return QuantRecipe::F16;
    if (name == "q8_0") return QuantRecipe::Q8_0;
    if (name == "q4_0") return QuantRecipe::Q4_0;
    if (name == "q4_k_m") return QuantRecipe::Q4_K_M;
    if (name == "q6_k") return QuantRecipe::Q6_K;
    throw JllmError("unknown quantization recipe '" + name + "' (expected f16, q8_0, q4_0, q4_k_m or q6_k)");
}

const char* quant_recipe_name(QuantRecipe r) {
    switch (r) {
        case QuantRecipe::F16: return "f16";
        case QuantRecipe::Q8_0: return "q8_0";
        case QuantRecipe::Q4_0: return "q4_0";
        case QuantRecipe::Q4_K_M: return "q4_k_m";
        case QuantRecipe::Q6_K: return "q6_k";
    }
    return "?";
}

uint32_t quant_recipe_file_type(QuantRecipe r) {
    // llama_ftype values: MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_Q4_K_M 15, MOSTLY_Q6_K 18.
    switch (r) {
        case QuantRecipe::F16: return 1;
        case QuantRecipe::Q8_0: return 7;
        case QuantRecipe::Q4_0: return 2;
        case QuantRecipe::Q4_K_M: return 15;
        case QuantRecipe::Q6_K: return 18;
    }
    return 0;
}

int64_t tensor_layer_index(const std::string& name) {
    if (name.compare(0, 4, "blk.") != 0) return -1;
    const char* s = name.c_str() + 4;
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (end == s || *end != '.') return -1;
    return v;
}

namespace {

bool ends_with(const std::string& s, const char* suffix) {
    const std::string t(suffix);
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// The layers that get more bits: the first and last eighth, and every third layer in between.
bool use_more_bits(int64_t il, int64_t n_layer) {
    return il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
}

// A type whose block does not divide the row is replaced by the nearest legacy type.
GgmlType fit_row(GgmlType t, int64_t row) {
    const int64_t bs = type_traits(t).block_size;
    if (row % bs == 0) return t;
    GgmlType alt = GgmlType::F16;
    switch (t) {
        case GgmlType::Q4_K: alt = GgmlType::Q5_0; break;
        case GgmlType::Q5_K: alt = GgmlType::Q5_1; break;
        case GgmlType::Q6_K: alt = GgmlType::Q8_0; break;
        default: alt = GgmlType::F16; break;
    }
    if (row % type_traits(alt).block_size != 0) alt = GgmlType::F16;
    return alt;
}

}  // namespace

GgmlType choose_tensor_type(QuantRecipe r, const std::string& name, const std::vector<int64_t>& ne,
                            const QuantContext& ctx) {
    if (ne.size() < 2) return GgmlType::F32;  // norms, biases, rope_freqs
    const int64_t row = ne[0];
    const bool is_output = name == "output.weight" || (!ctx.has_output && name == "token_embd.weight");

    GgmlType t = GgmlType::F16;
    switch (r) {
        case QuantRecipe::F16: return fit_row(GgmlType::F16, row);
        case QuantRecipe::Q8_0: t = GgmlType::Q8_0; break;
        case QuantRecipe::Q6_K: t = GgmlType::Q6_K; break;
        case QuantRecipe::Q4_0: t = GgmlType::Q4_0; break;
        case QuantRecipe::Q4_K_M: {
            t = GgmlType::Q4_K;
            const int64_t il = tensor_layer_index(name);
            if ((ends_with(name, "attn_v.weight") || ends_with(name, "ffn_down.weight")) && il >= 0 &&
                use_more_bits(il, ctx.n_layer)) {
                t = GgmlType::Q6_K;
            }
            break;
        }
    }
    if (is_output && t != GgmlType::Q8_0) {
        // The output matrix gets Q6_K under every recipe below 8 bits; a row that Q6_K cannot
        // hold goes straight to Q8_0.
        return row % 256 == 0 ? GgmlType::Q6_K : GgmlType::Q8_0;
    }
    return fit_row(t, row);
}

}  // namespace jllm
