// tests/common/speculative_engines.h — the tiny synthetic Qwen3 pair of the speculative-decoding
// tests (the CPU's in tests/unit/speculative/, the GPU's in tests/cuda/model/): the model, a second
// one of the same vocabulary and other weights (a draft the model mostly rejects), and engines.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "constrained_generation.h"
#include "jllm_engine.h"

namespace jllm::test {

inline std::string spec_model() { return constrained_model_path("spec_tiny_qwen3.gguf"); }
inline std::string spec_other_model() { return constrained_model_path("spec_tiny_qwen3_other.gguf", 8); }

// spec_model() loaded on `device` (512 positions, no session cache) with `spec` and `draft`.
// draft_vocab: EngineConfig::draft_vocab (-1: the device's default); draft_p_min: its
// draft_p_min (0 by default here: the tiny random models are seldom sure of a token, and the
// tests want their drafts).
inline std::unique_ptr<Engine> spec_engine(DeviceKind device, SpecMode spec, const std::string& draft, int draft_max,
                                           int draft_vocab = -1, float draft_p_min = 0.0f) {
    EngineConfig c;
    c.draft_vocab = draft_vocab;
    c.draft_p_min = draft_p_min;
    c.model_path = spec_model();
    c.device = device;
    c.n_ctx = 512;
    c.n_threads = 2;
    c.cache_ram_mb = 0;
    c.spec = spec;
    c.draft_model_path = draft;
    c.draft_max = draft_max;
    auto e = std::make_unique<Engine>();
    const Status s = e->load(c);
    EXPECT_TRUE(s.ok) << s.message;
    return e;
}

}  // namespace jllm::test
