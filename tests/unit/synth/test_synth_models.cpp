// tests/unit/synth/test_synth_models.cpp — tiny presets of every architecture and recipe:
// written, read back by GgufFile, bound by bind_model_weights, run through the Engine on the
// CPU (finite logits); metadata and vocabulary as the presets say.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "synth/synth_model.h"
#include "synth/synth_presets.h"
#include "synth_test_util.h"

namespace jllm {
namespace {

struct Case {
    const char* preset;
    QuantRecipe recipe;
};

class SynthModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(SynthModelTest, WritesLoadsAndRuns) {
    const Case c = GetParam();
    const std::string path = test::synth_temp_path(std::string(c.preset) + "-" + quant_recipe_name(c.recipe));
    const uint64_t bytes = write_synth_model(test::synth_options(c.preset, c.recipe), path, 2);
    ASSERT_GT(bytes, 0u);
    const SynthPreset& p = *find_synth_preset(c.preset);
    {
        auto f = GgufFile::open(path);
        EXPECT_EQ(f->file_size(), bytes);
        const ModelConfig mc = load_model_config(*f);
        EXPECT_EQ(mc.arch, p.arch);
        EXPECT_EQ(mc.n_layer, p.n_layer);
        EXPECT_EQ(mc.n_embd, p.n_embd);
        EXPECT_EQ(mc.n_ff, p.n_ff);
        EXPECT_EQ(mc.n_head, p.n_head);
        EXPECT_EQ(mc.n_head_kv, p.n_head_kv);
        EXPECT_EQ(mc.head_dim, p.head_dim);
        EXPECT_EQ(mc.n_vocab, p.n_vocab);
        EXPECT_EQ(mc.n_ctx_train, p.n_ctx_train);
        EXPECT_FLOAT_EQ(mc.rope_freq_base, p.rope_freq_base);
        EXPECT_FLOAT_EQ(mc.rms_eps, p.rms_eps);
        const ModelWeights w = bind_model_weights(*f, mc);
        EXPECT_EQ(w.tied_output, p.tied_output);
        EXPECT_EQ(w.rope_freqs.present(), p.llama3_rope);
        // The token list is padded to the embedding rows, so every loader sees one token per logit.
        const GgufArray* toks = f->get_array("tokenizer.ggml.tokens");
        ASSERT_NE(toks, nullptr);
        EXPECT_EQ(static_cast<int64_t>(toks->count), p.n_vocab);
        EXPECT_TRUE(f->has("tokenizer.chat_template"));
        EXPECT_TRUE(f->has("tokenizer.ggml.merges"));
        // Every tensor has the type the recipe plans for it.
        for (const SynthTensor& t : plan_synth_tensors(p, p.n_layer, c.recipe)) {
            const GgufTensorInfo* ti = f->find_tensor(t.name);
            ASSERT_NE(ti, nullptr) << t.name;
            EXPECT_EQ(ti->type, t.type) << t.name;
        }
        EXPECT_EQ(f->tensors().size(), plan_synth_tensors(p, p.n_layer, c.recipe).size());
        // Norm weights are exactly 1; matrices are N(0, 0.02) (checked on an F32/F16 view).
        const GgufTensorInfo* norm = f->find_tensor("output_norm.weight");
        ASSERT_NE(norm, nullptr);
        const float* nv = reinterpret_cast<const float*>(norm->data);
        for (int64_t i = 0; i < norm->ne[0]; ++i) ASSERT_EQ(nv[i], 1.0f);
        const GgufTensorInfo* wq = f->find_tensor("blk.0.attn_q.weight");
        ASSERT_NE(wq, nullptr);
        std::vector<float> deq(static_cast<size_t>(wq->n_elements()));
        type_traits(wq->type).to_float(wq->data, deq.data(), wq->n_elements());
        double s = 0, ss = 0;
        for (float v : deq) {
            s += v;
            ss += double(v) * v;
        }
        const double mean = s / deq.size(), sd = std::sqrt(ss / deq.size() - mean * mean);
        EXPECT_NEAR(mean, 0.0, 0.002);
        EXPECT_NEAR(sd, 0.02, 0.002);
    }
    int64_t n_vocab = 0;
    const std::vector<int32_t> tokens = {1, 100, 2000, 30000, 7};
    const std::vector<float> logits = test::synth_eval(path, tokens, &n_vocab);
    ASSERT_EQ(static_cast<int64_t>(logits.size()), n_vocab * static_cast<int64_t>(tokens.size()));
    size_t bad = 0;
    float amax = 0.0f;
    for (float v : logits) {
        if (!std::isfinite(v)) bad++;
        else amax = std::max(amax, std::fabs(v));
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_GT(amax, 0.0f);  // not all zero: the weights are there
    std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Presets, SynthModelTest,
    ::testing::Values(Case{"tiny-qwen3", QuantRecipe::Q4_K_M}, Case{"tiny-qwen2", QuantRecipe::Q4_K_M},
                      Case{"tiny-llama", QuantRecipe::Q4_K_M}, Case{"tiny-qwen3-untied", QuantRecipe::Q4_K_M},
                      Case{"tiny-qwen3", QuantRecipe::F16}, Case{"tiny-llama", QuantRecipe::Q8_0},
                      Case{"tiny-qwen2", QuantRecipe::Q4_0}, Case{"tiny-qwen3", QuantRecipe::Q6_K}),
    [](const ::testing::TestParamInfo<Case>& info) {
        std::string n = std::string(info.param.preset) + "_" + quant_recipe_name(info.param.recipe);
        for (char& ch : n) {
            if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
        }
        return n;
    });

TEST(SynthPresets, Llama3RopeFreqsMatchTheScalingRule) {
    const SynthPreset& p = *find_synth_preset("llama3.2-1b");
    const std::vector<float> f = llama3_rope_freq_divisors(p);
    ASSERT_EQ(f.size(), 32u);
    // Highest frequencies (short wavelengths) are unscaled, the lowest are divided by the factor,
    // and the divisors never decrease with the dimension index.
    EXPECT_FLOAT_EQ(f.front(), 1.0f);
    EXPECT_FLOAT_EQ(f.back(), 32.0f);
    for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
    bool smooth = false;
    for (float v : f) smooth = smooth || (v > 1.0f && v < 32.0f);
    EXPECT_TRUE(smooth);
}

TEST(SynthPresets, UnknownPresetAndRecipeAreClearErrors) {
    EXPECT_THROW(parse_quant_recipe("q3_k_s"), JllmError);
    SynthOptions o = test::synth_options("qwen9-1t", QuantRecipe::F16);
    EXPECT_THROW(write_synth_model(o, test::synth_temp_path("bad"), 1), JllmError);
}

}  // namespace
}  // namespace jllm
