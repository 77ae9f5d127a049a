// synth/synth_model.h — synthetic GGUF models: the tensor list of a preset, seeded random
// weights (N(0, 0.02); norm weights 1.0) generated lazily row by row and quantized on a thread
// pool while the file is written (memory stays at one tensor), real tokenizer metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/quant_types.h"
#include "synth/quant_recipe.h"
#include "synth/synth_presets.h"

namespace jllm {

class GgufWriter;
class ThreadPool;

struct SynthOptions {
    std::string preset;             // a name from synth_presets()
    QuantRecipe recipe = QuantRecipe::Q4_K_M;
    uint64_t seed = 42;
    int64_t n_layer = 0;            // 0: the preset's
    std::string tokenizer_dir;      // folder holding the presets' HF tokenizer folders (qwen3/, llama3/)
    bool zeros = false;             // every weight zero (layout only: type-table and loader tests)
    bool exact_quant = false;       // reference k-quant fits instead of the fast ones (slow)
};

// How the values of one tensor are made.
enum class SynthFill { Normal, Ones, RopeFreqs };

struct SynthTensor {
    std::string name;
    std::vector<int64_t> ne;  // ne[0] contiguous
    GgmlType type = GgmlType::F32;
    SynthFill fill = SynthFill::Normal;
};

constexpr float SYNTH_STD = 0.02f;

// The tensors of `p` with `n_layer` blocks, each typed by `recipe`, in file order.
std::vector<SynthTensor> plan_synth_tensors(const SynthPreset& p, int64_t n_layer, QuantRecipe recipe);

// Fills `w` with the metadata and lazily generated tensors of the model. The lazy fills use
// `pool` and read `opt`/the preset, so `pool` must outlive writing `w`. Throws JllmError.
void build_synth_model(const SynthOptions& opt, GgufWriter& w, ThreadPool& pool);

// One row of values of tensor `name` (before quantization): exactly what the file holds
// dequantized-from (tests and debugging).
void synth_normal_row(uint64_t seed, const std::string& name, int64_t row, float* out, int64_t n);

// Builds and writes `path`. Returns the file size in bytes.
uint64_t write_synth_model(const SynthOptions& opt, const std::string& path, int n_threads = 0);

}  // namespace jllm
