// synth/model_cut.h — a real GGUF model cut to its first K blocks: same embeddings, norms, output
// and vocabulary, every metadata entry copied except <arch>.block_count. Small real-weight files
// for test machines.
#pragma once

#include <cstdint>
#include <string>

namespace jllm {

struct CutSummary {
    int64_t n_layer_in = 0;
    int64_t n_layer_out = 0;
    size_t tensors_in = 0;
    size_t tensors_out = 0;
    uint64_t file_bytes = 0;
};

// Writes `out_path`. Throws JllmError if the input is unreadable, has no block count, or
// `n_layer` is not in [1, the input's block count].
CutSummary cut_model_layers(const std::string& in_path, int64_t n_layer, const std::string& out_path);

}  // namespace jllm
