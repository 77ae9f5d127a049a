// tests/unit/cpu_kernels/test_quant_dot.cpp — the CPU dot products on every SIMD level this
// machine runs, against (1) the float reference (quant_ref dequantization, double dot with the
// unquantized activations) within the activation-quantization error bound, and (2) the scalar
// kernel on the same quantized activations, tightly. Plus the activation quantizers.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/quant_dot_internal.h"
#include "kernel_test_util.h"

namespace jllm {
namespace {

using test::abs_dot;
using test::dequantize;
using test::dot_f64;
using test::quant_error_bound;
using test::random_activations;
using test::random_weight_row;

const GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                           GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16,  GgmlType::BF16,
                           GgmlType::F32};
const SimdLevel kLevels[] = {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512, SimdLevel::Neon};

// f(level, type, kernel) for every kernel this CPU runs.
template <class F>
void for_each_kernel(F f) {
    for (SimdLevel level : kLevels) {
        if (!simd_level_supported(level)) continue;
        for (GgmlType type : kTypes) {
            const QuantDotKernel* k = quant_dot_kernel(type, level);
            if (k != nullptr) f(level, type, *k);
        }
    }
}

struct Case {
    GgmlType type;
    SimdLevel level;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
    return std::string(type_name(info.param.type)) + "_" + simd_level_name(info.param.level);
}

std::vector<Case> all_cases() {
    std::vector<Case> v;
    for (SimdLevel l : kLevels)
        for (GgmlType t : kTypes) v.push_back({t, l});
    return v;
}

class QuantDot : public testing::TestWithParam<Case> {};

// Odd block counts: 1, 3, 7, 13 super-blocks (x 8 for the 32-blocks), so no SIMD unroll can
// hide a remainder bug.
const int64_t kSuperBlocks[] = {1, 3, 7, 13};

TEST_P(QuantDot, MatchesFloatReferenceAndScalar) {
    const Case c = GetParam();
    if (!simd_level_supported(c.level)) GTEST_SKIP() << simd_level_name(c.level) << " not supported here";
    const QuantDotKernel* k = quant_dot_kernel(c.type, c.level);
    const QuantDotKernel* ks = quant_dot_kernel(c.type, SimdLevel::Scalar);
    ASSERT_NE(k, nullptr);
    ASSERT_NE(ks, nullptr);
    ASSERT_EQ(k->act_type, ks->act_type);
    std::mt19937 rng(1234 + static_cast<int>(c.type));
    for (int64_t sb : kSuperBlocks) {
        for (int64_t variant = 0; variant < 2; variant++) {
            const int64_t n = sb * 256 + (variant && type_traits(c.type).block_size == 32 ? 32 * 3 : 0);
            const std::vector<uint8_t> wq = random_weight_row(c.type, n, rng);
            const std::vector<float> w = dequantize(c.type, wq.data(), n);
            // [VEC_DOT_MAX_ACT][n] activations, quantized per row with the scalar quantizer.
            std::vector<std::vector<float>> xs;
            for (int t = 0; t < VEC_DOT_MAX_ACT; t++) xs.push_back(random_activations(n, rng));
            const size_t arow = act_row_size(c.type, n);
            std::vector<uint8_t> act(arow * VEC_DOT_MAX_ACT);
            for (int t = 0; t < VEC_DOT_MAX_ACT; t++) {
                if (ks->quantize_act) {
                    ks->quantize_act(xs[t].data(), act.data() + t * arow, n);
                } else {
                    std::memcpy(act.data() + t * arow, xs[t].data(), arow);
                }
            }
            float got_s[VEC_DOT_MAX_ACT], got[VEC_DOT_MAX_ACT];
            ks->vec_dot(n, wq.data(), act.data(), arow, VEC_DOT_MAX_ACT, got_s);
            for (int n_act = 1; n_act <= VEC_DOT_MAX_ACT; n_act++) {
                k->vec_dot(n, wq.data(), act.data(), arow, n_act, got);
                for (int t = 0; t < n_act; t++) {
                    const double ref = dot_f64(w, xs[t].data());
                    const double bound = quant_error_bound(*k, w, xs[t].data());
                    EXPECT_NEAR(got[t], ref, bound)
                        << type_name(c.type) << " n=" << n << " n_act=" << n_act << " t=" << t;
                    // Same quantized inputs, same integer sums: only float summation order differs.
                    const double tight = 2e-6 * abs_dot(w, xs[t].data()) + 1e-7;
                    EXPECT_NEAR(got[t], got_s[t], tight)
                        << "vs scalar: " << type_name(c.type) << " n=" << n << " n_act=" << n_act << " t=" << t;
                }
            }
            // A token's result does not depend on the batch it is in: slot t of every n_act is the
            // one-token call on that row, bit for bit (what keeps prefill and decode identical).
            float one[VEC_DOT_MAX_ACT];
            for (int t = 0; t < VEC_DOT_MAX_ACT; t++) k->vec_dot(n, wq.data(), act.data() + t * arow, arow, 1, &one[t]);
            for (int n_act = 2; n_act <= VEC_DOT_MAX_ACT; n_act++) {
                k->vec_dot(n, wq.data(), act.data(), arow, n_act, got);
                for (int t = 0; t < n_act; t++) {
                    EXPECT_EQ(got[t], one[t]) << "batch-invariance: " << type_name(c.type) << " n=" << n
                                              << " n_act=" << n_act << " t=" << t;
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantDot, testing::ValuesIn(all_cases()), case_name);

// Both NEON builds of the kernels (with the Armv8.2-A dot product and without), whichever the
// CPU picks at run time: the same integer sums, so bit-identical to each other, and within float
// summation order of the scalar kernel. The level test above runs only the variant picked.
TEST(QuantDotNeon, BothVariantsMatchScalar) {
    if (!simd_level_supported(SimdLevel::Neon)) GTEST_SKIP() << "not an aarch64 CPU";
    if (!cpu_detail::neon_has_sdot()) GTEST_SKIP() << "the CPU has no dot-product instructions";
    std::mt19937 rng(99);
    for (GgmlType type : kTypes) {
        const QuantDotKernel* ks = quant_dot_kernel(type, SimdLevel::Scalar);
        const VecDotFn base = cpu_detail::vec_dot_neon_variant(type, false);
        const VecDotFn sdot = cpu_detail::vec_dot_neon_variant(type, true);
        ASSERT_NE(base, nullptr) << type_name(type);
        ASSERT_NE(sdot, nullptr) << type_name(type);
        for (int64_t sb : kSuperBlocks) {
            const int64_t n = sb * 256;
            const std::vector<uint8_t> wq = random_weight_row(type, n, rng);
            const std::vector<float> w = dequantize(type, wq.data(), n);
            const size_t arow = act_row_size(type, n);
            std::vector<uint8_t> act(arow * VEC_DOT_MAX_ACT);
            std::vector<std::vector<float>> xs;
            for (int t = 0; t < VEC_DOT_MAX_ACT; t++) {
                xs.push_back(random_activations(n, rng));
                if (ks->quantize_act) {
                    ks->quantize_act(xs[t].data(), act.data() + t * arow, n);
                } else {
                    std::memcpy(act.data() + t * arow, xs[t].data(), arow);
                }
            }
            float got_s[VEC_DOT_MAX_ACT], got_b[VEC_DOT_MAX_ACT], got_d[VEC_DOT_MAX_ACT];
            ks->vec_dot(n, wq.data(), act.data(), arow, VEC_DOT_MAX_ACT, got_s);
            base(n, wq.data(), act.data(), arow, VEC_DOT_MAX_ACT, got_b);
            sdot(n, wq.data(), act.data(), arow, VEC_DOT_MAX_ACT, got_d);
            for (int t = 0; t < VEC_DOT_MAX_ACT; t++) {
                EXPECT_EQ(got_b[t], got_d[t]) << type_name(type) << " n=" << n << " t=" << t;
                const double tight = 2e-6 * abs_dot(w, xs[t].data()) + 1e-7;
                EXPECT_NEAR(got_b[t], got_s[t], tight) << type_name(type) << " n=" << n << " t=" << t;
            }
        }
    }
}

// The many-token path (QuantGemm) against the level's vec_dot on the same quantized inputs: bit
// for bit, for every row count of a panel, token counts around the register tile, and block
// counts that fill the 16-block chunk, leave a tail of odd length, or are a single block. The
// panel and the packed rows are built in misaligned-then-aligned buffers as matmul builds them.
TEST(QuantGemm, BitIdenticalWithVecDot) {
    int checked = 0;
    std::mt19937 rng(4242);
    for_each_kernel([&](SimdLevel level, GgmlType type, const QuantDotKernel& k) {
        if (k.gemm == nullptr) return;
        const QuantGemm& g = *k.gemm;
        ASSERT_GE(g.rows_per_panel, 1);
        ASSERT_GE(g.min_tokens, 1);
        const int64_t B = type_traits(type).block_size;
        for (int64_t nb : {1, 2, 15, 16, 17, 28, 45, 152}) {
            const int64_t n = nb * B;
            const size_t wrow = row_size(type, n), arow = act_row_size(type, n);
            const int n_rows_max = g.rows_per_panel + 1;
            std::vector<uint8_t> wq;
            for (int r = 0; r < n_rows_max; r++) {
                const std::vector<uint8_t> row = random_weight_row(type, n, rng);
                wq.insert(wq.end(), row.begin(), row.end());
            }
            const int n_tok = 7;
            std::vector<uint8_t> act(arow * n_tok);
            for (int t = 0; t < n_tok; t++) {
                const std::vector<float> x = random_activations(n, rng);
                k.quantize_act(x.data(), act.data() + t * arow, n);
            }
            const size_t pb = g.act_bytes(n), rb = g.row_bytes(n);
            ASSERT_EQ(pb % 64, 0u);
            ASSERT_EQ(rb % 64, 0u);
            std::vector<uint8_t> packed_buf(pb * n_tok + 64), panel_buf(rb * g.rows_per_panel + 64);
            uint8_t* packed = align64(packed_buf.data());
            uint8_t* panel = align64(panel_buf.data());
            for (int t = 0; t < n_tok; t++) g.pack_act(n, act.data() + t * arow, packed + t * pb);
            for (int n_rows = 1; n_rows <= g.rows_per_panel; n_rows++) {
                const int r0 = n_rows_max - n_rows;  // the last rows: a panel need not start at row 0
                g.pack_rows(n, wq.data() + r0 * wrow, wrow, n_rows, panel);
                for (int nt = 1; nt <= n_tok; nt++) {
                    const int64_t ys = n_rows + 3;  // y rows wider than the panel, as in matmul
                    std::vector<float> y(static_cast<size_t>(nt * ys), -7.0f);
                    g.run(n, panel, n_rows, packed, nt, y.data(), ys);
                    for (int t = 0; t < nt; t++) {
                        for (int r = 0; r < n_rows; r++) {
                            float one = 0.0f;
                            k.vec_dot(n, wq.data() + (r0 + r) * wrow, act.data() + t * arow, arow, 1, &one);
                            ASSERT_EQ(y[static_cast<size_t>(t * ys + r)], one)
                                << type_name(type) << " " << simd_level_name(level) << " n=" << n
                                << " n_rows=" << n_rows << " tokens=" << nt << " t=" << t << " r=" << r;
                            checked++;
                        }
                        for (int64_t r = n_rows; r < ys; r++) ASSERT_EQ(y[static_cast<size_t>(t * ys + r)], -7.0f);
                    }
                }
            }
        }
    });
    if (checked == 0) GTEST_SKIP() << "no SIMD level of this CPU has a gemm path";
}

// The packed dot product (QuantDotPacked) against the level's vec_dot on the same quantized
// inputs: bit for bit, for 1..4 tokens in one call (each token's result its one-token call's),
// block counts that fill the 16-block chunk, leave a tail of odd length, or are a single block,
// and packed rows at a stride wider than one row, as matmul lays them out.
TEST(QuantDotPacked, BitIdenticalWithVecDot) {
    int checked = 0;
    std::mt19937 rng(2424);
    for_each_kernel([&](SimdLevel level, GgmlType type, const QuantDotKernel& k) {
        if (k.packed == nullptr) return;
        const QuantDotPacked& p = *k.packed;
        const int64_t B = type_traits(type).block_size;
        for (int64_t nb : {1, 2, 15, 16, 17, 28, 45, 152}) {
            const int64_t n = nb * B;
            const size_t arow = act_row_size(type, n);
            const std::vector<uint8_t> w = random_weight_row(type, n, rng);
            constexpr int kTok = VEC_DOT_MAX_ACT;
            std::vector<uint8_t> act(arow * kTok);
            for (int t = 0; t < kTok; t++) {
                const std::vector<float> x = random_activations(n, rng);
                k.quantize_act(x.data(), act.data() + t * arow, n);
            }
            const size_t pb = p.act_bytes(n);
            ASSERT_EQ(pb % 64, 0u);
            const size_t stride = pb + 64;
            std::vector<uint8_t> packed_buf(stride * kTok + 64, 0xA5);
            uint8_t* packed = align64(packed_buf.data());
            for (int t = 0; t < kTok; t++) p.pack_act(n, act.data() + t * arow, packed + t * stride);
            for (int n_act = 1; n_act <= kTok; n_act++) {
                for (int t0 = 0; t0 + n_act <= kTok; t0++) {
                    float out[VEC_DOT_MAX_ACT];
                    p.vec_dot(n, w.data(), packed + t0 * stride, stride, n_act, out);
                    for (int t = 0; t < n_act; t++) {
                        float one = 0.0f;
                        k.vec_dot(n, w.data(), act.data() + (t0 + t) * arow, arow, 1, &one);
                        ASSERT_EQ(out[t], one) << type_name(type) << " " << simd_level_name(level) << " n=" << n
                                               << " n_act=" << n_act << " t=" << t0 + t;
                        checked++;
                    }
                }
            }
        }
    });
    if (checked == 0) GTEST_SKIP() << "no SIMD level of this CPU has a packed dot product";
}

// A hand-checked case: Q8_0 weights of all ones with d = 1 against activations 0..31.
TEST(QuantDotExact, Q8_0OnesTimesRamp) {
    BlockQ8_0 w;
    w.d = to_half(1.0f);
    for (int i = 0; i < 32; i++) w.qs[i] = 1;
    std::vector<float> x(32);
    for (int i = 0; i < 32; i++) x[i] = static_cast<float>(i) * 127.0f / 31.0f;  // d_a = 1, q = round(i*127/31)
    for (SimdLevel l : kLevels) {
        if (!simd_level_supported(l)) continue;
        const QuantDotKernel* k = quant_dot_kernel(GgmlType::Q8_0, l);
        BlockQ8_0 a;
        k->quantize_act(x.data(), &a, 32);
        int expect = 0;
        for (int i = 0; i < 32; i++) expect += static_cast<int>(std::nearbyint(i * 127.0 / 31.0));
        float out = 0.0f;
        k->vec_dot(32, &w, &a, sizeof(a), 1, &out);
        EXPECT_FLOAT_EQ(out, static_cast<float>(expect)) << simd_level_name(l);
    }
}

// ---- activation quantizers ----

class ActQuant : public testing::TestWithParam<SimdLevel> {};

TEST_P(ActQuant, BitExactWithScalarAndWithinHalfStep) {
    const SimdLevel level = GetParam();
    if (!simd_level_supported(level)) GTEST_SKIP();
    std::mt19937 rng(77);
    const GgmlType weights_for[] = {GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q4_K};  // Q8_0, Q8_1, Q8_K
    for (GgmlType wt : weights_for) {
        const QuantDotKernel* k = quant_dot_kernel(wt, level);
        const QuantDotKernel* ks = quant_dot_kernel(wt, SimdLevel::Scalar);
        for (int64_t n : {256, 768, 3328}) {
            std::vector<float> x = random_activations(n, rng);
            x[5] = 0.0f;
            if (n == 768) std::fill(x.begin(), x.begin() + 256, 0.0f);  // all-zero blocks: d = 0
            const size_t bytes = act_row_size(wt, n);
            std::vector<uint8_t> a(bytes), as(bytes);
            k->quantize_act(x.data(), a.data(), n);
            ks->quantize_act(x.data(), as.data(), n);
            EXPECT_EQ(0, std::memcmp(a.data(), as.data(), bytes))
                << type_name(k->act_type) << " " << simd_level_name(level) << " n=" << n;
            // Dequantized activations are within half a step of the input, plus the fp16
            // rounding of d (relative 2^-11, times |q| <= 127) for Q8_0 / Q8_1.
            std::vector<float> y(static_cast<size_t>(n));
            type_traits(k->act_type).to_float(as.data(), y.data(), n);
            const int64_t B = k->act_block;
            for (int64_t b0 = 0; b0 < n; b0 += B) {
                float amax = 0.0f;
                for (int64_t i = b0; i < b0 + B; i++) amax = std::max(amax, std::fabs(x[i]));
                const float d = amax / 127.0f;
                const float tol = k->act_type == GgmlType::Q8_K ? 0.5f * d * 1.0001f : d * (0.5f + 127.0f / 2048.0f);
                for (int64_t i = b0; i < b0 + B; i++) {
                    ASSERT_NEAR(y[i], x[i], tol + 1e-30f) << type_name(k->act_type) << " i=" << i;
                }
            }
            // The side sums agree with the quants.
            if (k->act_type == GgmlType::Q8_K) {
                const BlockQ8_K* q = reinterpret_cast<const BlockQ8_K*>(as.data());
                for (int64_t b = 0; b < n / QK_K; b++)
                    for (int j = 0; j < 16; j++) {
                        int s = 0;
                        for (int i = 0; i < 16; i++) s += q[b].qs[16 * j + i];
                        ASSERT_EQ(s, q[b].bsums[j]);
                    }
            } else if (k->act_type == GgmlType::Q8_1) {
                const BlockQ8_1* q = reinterpret_cast<const BlockQ8_1*>(as.data());
                for (int64_t b = 0; b < n / QK8_1; b++) {
                    int s = 0;
                    for (int i = 0; i < 32; i++) s += q[b].qs[i];
                    ASSERT_NEAR(to_f32(q[b].s), to_f32(q[b].d) * s, std::fabs(to_f32(q[b].d) * s) * 1e-3 + 1e-6);
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Levels, ActQuant, testing::ValuesIn(kLevels),
                         [](const testing::TestParamInfo<SimdLevel>& i) { return simd_level_name(i.param); });

TEST(CpuFeatures, ActiveLevelIsSupported) {
    EXPECT_TRUE(simd_level_supported(simd_level_best()));
    EXPECT_TRUE(simd_level_supported(SimdLevel::Scalar));
    std::printf("active SIMD level: %s\n", simd_level_name(simd_level_best()));
}

TEST(CpuFeatures, EnvOverride) {
    EXPECT_EQ(simd_level_from_env("scalar"), SimdLevel::Scalar);
    EXPECT_EQ(simd_level_from_env(nullptr), simd_level_from_env(""));
    const SimdLevel best = simd_level_from_env(nullptr);
    EXPECT_TRUE(simd_level_supported(best));
    EXPECT_EQ(simd_level_from_env("no-such-level"), best);
    if (simd_level_supported(SimdLevel::Avx2)) {
        EXPECT_EQ(simd_level_from_env("avx2"), SimdLevel::Avx2);
    }
    const SimdLevel a512 = simd_level_from_env("avx512");
    EXPECT_TRUE(simd_level_supported(a512));
    if (simd_level_supported(SimdLevel::Avx512)) {
        EXPECT_EQ(a512, SimdLevel::Avx512);
    } else {
        EXPECT_NE(a512, SimdLevel::Avx512);
    }
}

}  // namespace
}  // namespace jllm
