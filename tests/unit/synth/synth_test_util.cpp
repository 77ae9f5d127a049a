// tests/unit/synth/synth_test_util.cpp — see synth_test_util.h.
#include "synth_test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <unistd.h>

#include "jllm_engine.h"
#include "test_paths.h"

namespace jllm::test {

std::string synth_tokenizer_dir() { return shared_dir() + "/testdata/tokenizers"; }

std::string synth_temp_path(const std::string& tag) {
    static std::atomic<int> counter{0};
    const char* t = std::getenv("TMPDIR");
    const std::string dir = (t && *t) ? t : "/tmp";
    return dir + "/jllm-synth-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + tag +
           ".gguf";
}

SynthOptions synth_options(const std::string& preset, QuantRecipe recipe, uint64_t seed) {
    SynthOptions o;
    o.preset = preset;
    o.recipe = recipe;
    o.seed = seed;
    o.tokenizer_dir = synth_tokenizer_dir();
    return o;
}

std::vector<float> synth_eval(const std::string& path, const std::vector<int32_t>& tokens, int64_t* n_vocab) {
    Engine engine;
    EngineConfig cfg;
    cfg.model_path = path;
    cfg.device = DeviceKind::Cpu;
    cfg.n_threads = 2;
    cfg.n_ctx = 64;
    const Status st = engine.load(cfg);
    EXPECT_TRUE(st.ok) << st.message;
    std::vector<float> logits;
    if (!st.ok) return logits;
    *n_vocab = engine.model_info().n_vocab;
    const Status ev = engine.eval_all_logits(tokens, logits);
    EXPECT_TRUE(ev.ok) << ev.message;
    return logits;
}

}  // namespace jllm::test
