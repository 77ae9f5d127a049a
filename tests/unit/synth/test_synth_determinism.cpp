// tests/unit/synth/test_synth_determinism.cpp — the random stream: same seed, same bytes (for
// any thread count), different seed, different bytes; our logarithm and normal transform
// against the C library and the moments of N(0, 1); pinned values that any machine must
// reproduce bit for bit (the stream uses only IEEE basic operations and sqrt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "synth/synth_model.h"
#include "synth/synth_rng.h"
#include "synth_test_util.h"

namespace jllm {
namespace {

constexpr uint64_t PINNED_NAME_HASH = 8833103884639040409ull;
constexpr uint32_t PINNED_ROW0[4] = {1026851307u, 1017966197u, 1012767953u, 3153010449u};
constexpr uint32_t PINNED_ROW1[4] = {3130494841u, 3160809641u, 1002795230u, 3171842719u};

std::vector<uint8_t> synth_bytes(const std::string& preset, QuantRecipe r, uint64_t seed, int threads) {
    ThreadPool pool(threads);
    GgufWriter w;
    build_synth_model(test::synth_options(preset, r, seed), w, pool);
    return w.write_to_memory();
}

TEST(SynthDeterminism, SameSeedSameBytesAnyThreadCount) {
    const std::vector<uint8_t> a = synth_bytes("tiny-qwen3", QuantRecipe::Q4_K_M, 7, 1);
    const std::vector<uint8_t> b = synth_bytes("tiny-qwen3", QuantRecipe::Q4_K_M, 7, 2);
    const std::vector<uint8_t> c = synth_bytes("tiny-qwen3", QuantRecipe::Q4_K_M, 7, 3);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(a == b);
    EXPECT_TRUE(a == c);
}

TEST(SynthDeterminism, DifferentSeedDifferentWeights) {
    const std::vector<uint8_t> a = synth_bytes("tiny-llama", QuantRecipe::Q8_0, 1, 2);
    const std::vector<uint8_t> b = synth_bytes("tiny-llama", QuantRecipe::Q8_0, 2, 2);
    ASSERT_EQ(a.size(), b.size());  // only jllm.synth.seed and general.name's digit differ in size: 1 vs 2
    auto fa = GgufFile::from_memory(a.data(), a.size());
    auto fb = GgufFile::from_memory(b.data(), b.size());
    size_t differing = 0, matrices = 0;
    for (const GgufTensorInfo& ta : fa->tensors()) {
        const GgufTensorInfo* tb = fb->find_tensor(ta.name);
        ASSERT_NE(tb, nullptr);
        ASSERT_EQ(ta.nbytes, tb->nbytes);
        if (ta.n_dims < 2) {
            // norms are 1.0 under every seed
            if (ta.name.find("norm") != std::string::npos) {
                EXPECT_EQ(std::memcmp(ta.data, tb->data, ta.nbytes), 0) << ta.name;
            }
            continue;
        }
        matrices++;
        if (std::memcmp(ta.data, tb->data, ta.nbytes) != 0) differing++;
    }
    EXPECT_GT(matrices, 0u);
    EXPECT_EQ(differing, matrices);
}

TEST(SynthRng, LogMatchesTheCLibrary) {
    for (double x : {1e-300, 1e-20, 0.001, 0.3, 0.5, 0.70710678, 0.7071068, 0.9999999, 1.0, 1.5, 2.0, 10.0, 1e10}) {
        EXPECT_NEAR(synth_log(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x)))) << x;
    }
    SynthRng r(123);
    for (int i = 0; i < 100000; ++i) {
        const double x = r.next_unit() + 1e-12;
        ASSERT_NEAR(synth_log(x), std::log(x), 4e-16 * std::max(1.0, std::fabs(std::log(x)))) << x;
    }
}

TEST(SynthRng, NormalMoments) {
    SynthRng r(2024);
    const int n = 400000;
    double s = 0, ss = 0, s4 = 0;
    int beyond3 = 0;
    for (int i = 0; i < n; ++i) {
        const double z = r.next_normal();
        s += z;
        ss += z * z;
        s4 += z * z * z * z;
        if (std::fabs(z) > 3.0) beyond3++;
    }
    const double mean = s / n, var = ss / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 0.01);
    EXPECT_NEAR(var, 1.0, 0.01);
    EXPECT_NEAR(s4 / n, 3.0, 0.06);                      // kurtosis of a normal
    EXPECT_NEAR(beyond3 / double(n), 0.0026998, 0.0004);  // two-sided 3-sigma tail
}

// Pinned values: if these change, every synthetic file in CI changes with them. A failure on a
// new machine or compiler means the stream is not as portable as it must be.
TEST(SynthRng, PinnedStream) {
    EXPECT_EQ(synth_name_hash("token_embd.weight"), PINNED_NAME_HASH);
    float row[4];
    synth_normal_row(42, "token_embd.weight", 0, row, 4);
    uint32_t bits[4];
    std::memcpy(bits, row, sizeof(bits));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(bits[i], PINNED_ROW0[i]) << i << ": " << row[i];
    synth_normal_row(42, "blk.3.ffn_down.weight", 12345, row, 4);
    std::memcpy(bits, row, sizeof(bits));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(bits[i], PINNED_ROW1[i]) << i << ": " << row[i];
}

}  // namespace
}  // namespace jllm
