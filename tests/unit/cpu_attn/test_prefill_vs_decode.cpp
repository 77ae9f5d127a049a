// tests/unit/cpu_attn/test_prefill_vs_decode.cpp — the CPU backend's two attention paths agree:
// a batched prefill (tiles of 8 tokens x the KV head's query heads) against the same tokens fed
// one at a time (tiles of one token), on a synthetic Qwen3 shape with GQA,
// INT8 and FP16 KV. Every query is computed in the same order in either case, so the logits are
// bit-identical — what makes temperature-0 output independent of prefix reuse. The last layer
// runs past its attention only for the rows whose logits are asked for (LogitsMode::Last: the
// last; None: none); logits and the cache it leaves are those of the full computation.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "synth/synth_model.h"
#include "test_paths.h"
#include "tiny_qwen3.h"

using namespace jllm;
using jllm::test::tiny_qwen3;
using jllm::test::TinyQwen3;

namespace {

void expect_prefill_equals_decode(const TinyQwen3& m) {
    const ModelConfig& c = m.c;
    const ModelWeights& w = m.w;
    const int n = 45;  // several tiles and a partial one
    std::vector<int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = (i * 7919 + 13) % 150000;
    const size_t V = static_cast<size_t>(c.n_vocab);
    for (KvType kv : {KvType::Int8, KvType::Fp16}) {
        auto a = create_cpu_backend(c, CpuOptions{2});
        a->bind_weights(w, WeightPlacement::Auto);
        a->allocate(64, 64, kv);
        std::vector<float> batched(n * V);
        // two batches so the second sees a non-zero pos0
        a->forward(ids.data(), 30, 0, LogitsMode::All, batched.data());
        a->forward(ids.data() + 30, n - 30, 30, LogitsMode::All, batched.data() + 30 * V);
        auto b = create_cpu_backend(c, CpuOptions{2});
        b->bind_weights(w, WeightPlacement::Auto);
        b->allocate(64, 64, kv);
        double se = 0, sr = 0;
        std::vector<float> one(V);
        for (int i = 0; i < n; ++i) {
            b->forward(ids.data() + i, 1, i, LogitsMode::Last, one.data());
            for (size_t v = 0; v < V; ++v) {
                const double d = static_cast<double>(one[v]) - batched[i * V + v];
                se += d * d;
                sr += static_cast<double>(one[v]) * one[v];
            }
        }
        const double rel = std::sqrt(se / sr);
        // Identical arithmetic per query and per row: the logits must agree bit for bit.
        EXPECT_EQ(se, 0.0) << (kv == KvType::Int8 ? "int8" : "fp16") << " relative RMS " << rel;
    }
}

}  // namespace

TEST(CpuAttention, PrefillAndTokenByTokenDecodeAreBitIdentical) {
    expect_prefill_equals_decode(tiny_qwen3("attn_tiny_qwen3_q8_0.gguf", 7));
}

// Q4_0 weights: batches of 8 tokens or more take the matmul's gemm path where the CPU has one
// (AVX-512: panels of rows x packed tokens), decode the vec_dot path; the logits still agree bit
// for bit.
TEST(CpuAttention, PrefillAndDecodeAreBitIdenticalThroughTheGemmPath) {
    const TinyQwen3 m = tiny_qwen3("attn_tiny_qwen3_q4_0.gguf", 7, QuantRecipe::Q4_0);
    ASSERT_EQ(m.w.layers[0].wq.type, GgmlType::Q4_0);
    expect_prefill_equals_decode(m);
}

// Q4_K_M (Q4_K with Q6_K for the value and down projections of some layers and the tied
// output): the K-quant gemm path, including a fused Q4_K / Q6_K projection, against decode.
TEST(CpuAttention, PrefillAndDecodeAreBitIdenticalThroughTheKQuantGemmPath) {
    const TinyQwen3 m = tiny_qwen3("attn_tiny_qwen3_q4_k_m.gguf", 7, QuantRecipe::Q4_K_M);
    ASSERT_EQ(m.w.layers[0].wq.type, GgmlType::Q4_K);
    bool has_q6_k = false;
    for (const LayerWeights& l : m.w.layers) has_q6_k = has_q6_k || l.wv.type == GgmlType::Q6_K || l.w_down.type == GgmlType::Q6_K;
    ASSERT_TRUE(has_q6_k);
    expect_prefill_equals_decode(m);
}

TEST(CpuAttention, LastLayerRowsOnlyForRequestedLogits) {
    const TinyQwen3 m = tiny_qwen3("attn_tiny_qwen3_q8_0_last.gguf", 11);
    const ModelConfig& c = m.c;
    const ModelWeights& w = m.w;
    const int n = 37;
    std::vector<int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = (i * 104729 + 5) % 150000;
    const size_t V = static_cast<size_t>(c.n_vocab);
    auto a = create_cpu_backend(c, CpuOptions{2});
    a->bind_weights(w, WeightPlacement::Auto);
    a->allocate(64, 64, KvType::Int8);
    std::vector<float> all(n * V);
    a->forward(ids.data(), n, 0, LogitsMode::All, all.data());
    // The same tokens as a batch without logits, then one with the last logits only; then a
    // decode step on the cache they left, against the same step after the All pass.
    auto b = create_cpu_backend(c, CpuOptions{2});
    b->bind_weights(w, WeightPlacement::Auto);
    b->allocate(64, 64, KvType::Int8);
    std::vector<float> last(V), next_a(V), next_b(V);
    b->forward(ids.data(), 20, 0, LogitsMode::None, nullptr);
    b->forward(ids.data() + 20, n - 20, 20, LogitsMode::Last, last.data());
    for (size_t v = 0; v < V; ++v) ASSERT_EQ(last[v], all[(n - 1) * V + v]) << "logit " << v;
    const int32_t t = 4242;
    a->forward(&t, 1, n, LogitsMode::Last, next_a.data());
    b->forward(&t, 1, n, LogitsMode::Last, next_b.data());
    for (size_t v = 0; v < V; ++v) ASSERT_EQ(next_b[v], next_a[v]) << "logit " << v;
}
