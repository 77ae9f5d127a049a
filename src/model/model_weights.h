// model/model_weights.h — binds GGUF tensors to the roles the forward pass reads, validating
// presence, type and shape (errors name the tensor, the expected and the actual shape/type).
// Weights stay where they are (views into the mapped file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "quant/quant_types.h"

namespace jllm {

class MmapFile;

class GgufFile;

// A 2-D (or 1-D) weight view: `rows` rows of `cols` elements each, rows contiguous.
// GGUF stores a matrix used as y = W x as ne = [cols (n_in), rows (n_out)].
struct WeightTensor {
    std::string name;
    GgmlType type = GgmlType::F32;
    int64_t cols = 0;          // ne[0]: elements per row (n_in)
    int64_t rows = 0;          // ne[1]: rows (n_out); 1 for vectors
    size_t row_bytes = 0;
    const uint8_t* data = nullptr;
    uint64_t nbytes = 0;
    bool present() const { return data != nullptr; }
};

struct LayerWeights {
    WeightTensor attn_norm;   // [n_embd] F32
    WeightTensor wq;          // [n_embd] -> [n_head * head_dim]
    WeightTensor wk;          // [n_embd] -> [n_head_kv * head_dim]
    WeightTensor wv;          // [n_embd] -> [n_head_kv * head_dim]
    WeightTensor bq, bk, bv;  // QKV biases (qwen2) F32
    WeightTensor q_norm;      // [head_dim] F32 (qwen3)
    WeightTensor k_norm;      // [head_dim] F32 (qwen3)
    WeightTensor wo;          // [n_head * head_dim] -> [n_embd]
    WeightTensor ffn_norm;    // [n_embd] F32
    WeightTensor w_gate;      // [n_embd] -> [n_ff]
    WeightTensor w_up;        // [n_embd] -> [n_ff]
    WeightTensor w_down;      // [n_ff] -> [n_embd]
};

struct ModelWeights {
    WeightTensor token_embd;   // [n_vocab rows of n_embd]
    WeightTensor output_norm;  // [n_embd] F32
    WeightTensor output;       // [n_embd] -> [n_vocab]; equals token_embd when tied
    bool tied_output = false;
    WeightTensor rope_freqs;   // [n_rot / 2] F32 frequency divisors (Llama 3.1 scaling), optional
    std::vector<LayerWeights> layers;
    uint64_t total_bytes = 0;  // bytes of all bound tensors (tied output counted once)
    // The file mapping the tensors point into (GgufFile::mapping), or nullptr when they are in a
    // caller's buffer: a backend that copies the weights drops the mapping's pages with it.
    const MmapFile* mapping = nullptr;
};

// True if a matrix of this type can be multiplied by the backends.
bool is_matmul_type(GgmlType t);

// Throws JllmError naming the tensor and expected vs actual on any mismatch.
ModelWeights bind_model_weights(const GgufFile& f, const ModelConfig& c);

}  // namespace jllm
