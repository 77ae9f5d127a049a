// tests/common/tiny_qwen3.h — a synthetic tiny Qwen3 (Q8_0 unless asked, GQA; jllm-synth's
// tiny-qwen3 preset)
// written to the build folder and bound, for the CPU backend's tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "synth/synth_model.h"
#include "test_paths.h"

namespace jllm::test {

struct TinyQwen3 {
    std::unique_ptr<GgufFile> f;  // outlives the weights bound to it
    ModelConfig c;
    ModelWeights w;
};

// The model written as JLLM_BINARY_DIR/name from `seed` with `recipe`, opened and bound.
inline TinyQwen3 tiny_qwen3(const std::string& name, uint64_t seed, QuantRecipe recipe = QuantRecipe::Q8_0) {
    const std::string path = std::string(JLLM_BINARY_DIR) + "/" + name;
    SynthOptions opt;
    opt.preset = "tiny-qwen3";
    opt.recipe = recipe;
    opt.seed = seed;
    opt.tokenizer_dir = shared_dir() + "/testdata/tokenizers";
    write_synth_model(opt, path, 2);
    TinyQwen3 m;
    m.f = GgufFile::open(path);
    m.c = load_model_config(*m.f);
    m.w = bind_model_weights(*m.f, m.c);
    return m;
}

}  // namespace jllm::test
