// tests/cuda/model/test_cuda_speculative.cpp — speculative decoding on the CUDA backend (tiny
// synthetic Qwen3): a verification forward's logits rows against the same tokens decoded one at a
// time (explicit bound), and greedy output with --spec off, ngram and draft (the model itself as
// its draft: every draft accepted where the two paths agree; another model: mostly rejected)
// identical, with the KV left behind equal to the plain decode's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "speculative_engines.h"
#include "jllm_engine.h"
#include "synth/synth_model.h"
#include "test_paths.h"
#include "tiny_qwen3.h"
#include "verification_rows.h"

namespace jllm {
namespace {

std::string model_a() { return test::spec_model(); }
std::string model_b() { return test::spec_other_model(); }

std::unique_ptr<Engine> load(SpecMode spec, const std::string& draft, int draft_max = 8, int draft_vocab = -1,
                             float draft_p_min = 0.0f) {
    return test::spec_engine(DeviceKind::Cuda, spec, draft, draft_max, draft_vocab, draft_p_min);
}

TEST(CudaSpeculative, VerificationRowsMatchOneTokenSteps) {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    const test::TinyQwen3 m = test::tiny_qwen3("cuda_spec_rows_tiny_qwen3.gguf", 7);
    const size_t V = static_cast<size_t>(m.c.n_vocab);
    std::vector<int32_t> prefix(37);
    for (size_t i = 0; i < prefix.size(); ++i) prefix[i] = static_cast<int32_t>((i * 104729 + 7) % 150000);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        auto b = create_cuda_backend(m.c);
        b->bind_weights(m.w, WeightPlacement::Auto);
        b->allocate(128, 64, kv);
        EXPECT_EQ(b->exact_rows(), 4);  // the dp4a path's batches
        for (int n : {2, 4, 5, 9}) {  // the q8 GEMV path (<= 4 tokens) and the GEMM path
            std::vector<int32_t> batch(static_cast<size_t>(n));
            for (int i = 0; i < n; ++i) batch[static_cast<size_t>(i)] = (i * 7919 + 101) % 150000;
            std::vector<float> rows, steps;
            test::verification_rows_and_steps(*b, prefix, batch, V, rows, steps);
            for (int i = 0; i < n; ++i) {
                const float* x = rows.data() + i * V;
                const float* y = steps.data() + i * V;
                double max_abs = 0, max_ref = 0;
                size_t ax = 0, ay = 0;
                for (size_t t = 0; t < V; ++t) {
                    max_abs = std::max(max_abs, static_cast<double>(std::fabs(x[t] - y[t])));
                    max_ref = std::max(max_ref, static_cast<double>(std::fabs(y[t])));
                    if (x[t] > x[ax]) ax = t;
                    if (y[t] > y[ay]) ay = t;
                }
                // Up to 4 tokens: the step's GEMV (its 4-token instance, with the one-token launch's
                // warps per group and 8-bit copy) and its decode attention per query, bit for bit;
                // more: the fp16 tensor-core GEMM and the prefill attention.
                const double bound = n <= b->exact_rows() ? 0.0 : 3e-2;
                std::printf("[rows] %s %d tokens row %d: max |diff| %.3g of max |logit| %.3g (%.2e)\n", kv_type_name(kv), n,
                            i, max_abs, max_ref, max_abs / max_ref);
                EXPECT_LE(max_abs, bound * max_ref) << n << " tokens, row " << i << ", " << kv_type_name(kv);
                if (ax != ay) {  // only a near tie may flip
                    EXPECT_LE(std::fabs(y[ax] - y[ay]), 2 * max_abs) << n << " tokens, row " << i;
                }
            }
        }
    }
}

// The int8 GEMV on a Q4_K_M model's gate / up (CudaOptions::gemv_int8): a verification's rows are
// still the steps' bits; its logits are not the dp4a path's (the option takes effect) but within
// INT8_GEMV_REL of them (gate / up inputs quantized per 256 values instead of per 32).
TEST(CudaSpeculative, VerificationRowsMatchStepsOnTheInt8Gemv) {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    constexpr double INT8_GEMV_REL = 3e-2;
    const test::TinyQwen3 m = test::tiny_qwen3("cuda_spec_rows_q4km_tiny_qwen3.gguf", 7, QuantRecipe::Q4_K_M);
    const size_t V = static_cast<size_t>(m.c.n_vocab);
    std::vector<int32_t> prefix(29);
    for (size_t i = 0; i < prefix.size(); ++i) prefix[i] = static_cast<int32_t>((i * 7919 + 13) % 150000);
    const int n = 4;
    std::vector<int32_t> batch(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) batch[static_cast<size_t>(i)] = (i * 104729 + 5) % 150000;
    std::vector<float> steps[2];
    for (bool int8 : {false, true}) {
        SCOPED_TRACE(int8 ? "int8 GEMV" : "dp4a GEMV");
        CudaOptions o;
        o.gemv_int8 = int8;
        auto b = create_cuda_backend(m.c, o);
        b->bind_weights(m.w, WeightPlacement::Copy);  // the tiled layout
        b->allocate(128, 64, KvType::Int8);
        ASSERT_EQ(b->exact_rows(), n);
        std::vector<float> rows;
        test::verification_rows_and_steps(*b, prefix, batch, V, rows, steps[int8]);
        ASSERT_EQ(std::memcmp(rows.data(), steps[int8].data(), rows.size() * sizeof(float)), 0);
    }
    double max_abs = 0, max_ref = 0;
    for (size_t i = 0; i < steps[0].size(); ++i) {
        max_abs = std::max(max_abs, static_cast<double>(std::fabs(steps[1][i] - steps[0][i])));
        max_ref = std::max(max_ref, static_cast<double>(std::fabs(steps[0][i])));
    }
    std::printf("[int8 gemv] max |diff| %.3g of max |logit| %.3g\n", max_abs, max_ref);
    EXPECT_GT(max_abs, 0.0) << "the option changed nothing";
    EXPECT_LE(max_abs, INT8_GEMV_REL * max_ref);
}

struct Out {
    std::vector<int32_t> tokens;
    GenerateStats st;
};

Out greedy(Engine& e, const std::string& prompt) {
    GenerateRequest r;
    r.prompt = prompt;
    r.sampling.temperature = 0;
    r.sampling.repeat_penalty = 1.0f;
    r.max_tokens = 48;
    const GenerateResult res = e.generate(r, nullptr);
    EXPECT_NE(res.finish, FinishReason::Error) << res.error;
    return Out{e.resident_tokens(), res.stats};
}

TEST(CudaSpeculative, GreedyOutputIdenticalInEveryMode) {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    auto off = load(SpecMode::Off, "");
    auto ngram = load(SpecMode::Ngram, "");
    auto self = load(SpecMode::Draft, model_a(), 8, 0);  // every token: its drafts are the model's argmax
    auto other = load(SpecMode::Draft, model_b());
    // Its drafts ended by a confidence floor (the device's top-k selection gives the draft's
    // DRAFT_CONF_K best logits; the tiny model's confidences are 0.07-0.17).
    auto sure = load(SpecMode::Draft, model_a(), 8, 0, 0.14f);
    // --draft-max 8 (the default) lowered to the drafts whose verification is bit for bit (4 rows).
    for (Engine* e : {ngram.get(), self.get(), other.get(), sure.get()}) {
        EXPECT_EQ(e->model_info().draft_max, 3);
    }
    const std::vector<std::string> prompts = {
        "light.kitchen is on, light.hall is off, light.porch is on. light.kitchen is",
        "def add(a, b):\n    return a + b\n\ndef add(a, b):\n",
        "one two three four one two three four one two",
        "The weather today is",
    };
    int self_drafted = 0, self_accepted = 0, ngram_drafted = 0, sure_drafted = 0;
    for (const std::string& p : prompts) {
        const Out a = greedy(*off, p);
        for (Engine* e : {ngram.get(), self.get(), other.get(), sure.get()}) {
            const Out b = greedy(*e, p);
            EXPECT_EQ(a.tokens, b.tokens) << p;
            if (e == self.get()) {
                self_drafted += b.st.model_drafted;
                self_accepted += b.st.model_accepted;
            }
            if (e == ngram.get()) ngram_drafted += b.st.ngram_drafted;
            if (e == sure.get()) sure_drafted += b.st.model_drafted;
        }
    }
    std::printf("[cuda spec] the model as its own draft: %d of %d drafts accepted; prompt lookup drafted %d\n",
                self_accepted, self_drafted, ngram_drafted);
    EXPECT_GT(self_drafted, 0);
    EXPECT_GE(self_accepted, self_drafted * 9 / 10);
    EXPECT_GT(ngram_drafted, 0);
    EXPECT_GT(sure_drafted, 0);
    EXPECT_LT(sure_drafted, self_drafted) << "a confidence floor ends some drafts early";
}

}  // namespace
}  // namespace jllm
