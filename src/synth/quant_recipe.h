// synth/quant_recipe.h — quantization recipes (f16, q8_0, q4_0, q4_k_m, q6_k) and the choice of
// each tensor's type under a recipe, matching what llama.cpp's quantizer picks for the ftype of
// the same name (checked against its output by tests/unit/synth and tests/data/synth goldens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/quant_types.h"

namespace jllm {

enum class QuantRecipe { F16, Q8_0, Q4_0, Q4_K_M, Q6_K };

// Throws JllmError listing the recipes if `name` is unknown.
QuantRecipe parse_quant_recipe(const std::string& name);
const char* quant_recipe_name(QuantRecipe r);
// general.file_type (llama_ftype) of a file written with this recipe.
uint32_t quant_recipe_file_type(QuantRecipe r);

// What the choice depends on besides the tensor's name and shape.
struct QuantContext {
    int64_t n_layer = 0;      // blocks in the model
    bool has_output = true;   // output.weight exists (false: token_embd doubles as the output)
};

// Type of tensor `name` with shape `ne` (ne[0] = row length). 1-D tensors stay F32.
// Q4_K_M: the output matrix (or the tied embedding) Q6_K; attn_v and ffn_down Q6_K in the
// "more bits" layers (first and last eighth, and every third in between), Q4_K elsewhere.
// Rows whose length is not a multiple of the block fall back: Q4_K -> Q5_0, Q6_K -> Q8_0, and
// to F16 if even that block does not divide the row.
GgmlType choose_tensor_type(QuantRecipe r, const std::string& name, const std::vector<int64_t>& ne,
                            const QuantContext& ctx);

// Layer index of a "blk.N.<...>" name, or -1.
int64_t tensor_layer_index(const std::string& name);

}  // namespace jllm
