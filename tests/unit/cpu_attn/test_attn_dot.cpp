// tests/unit/cpu_attn/test_attn_dot.cpp — the SIMD attention inner loops against the scalar
// reference on random rows of odd lengths (tails), INT8 and FP16.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/attn_dot.h"

using namespace jllm;

TEST(AttnDot, SimdMatchesScalar) {
    const AttnDotKernels& ref = attn_dot_kernels(true);
    const AttnDotKernels& k = attn_dot_kernels(false);
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> qd(-127, 127);
    for (int64_t n : {1, 7, 8, 15, 16, 17, 64, 100, 128, 129}) {
        std::vector<float> q(n), out_a(n), out_b(n);
        std::vector<int8_t> ki(n);
        std::vector<Half> kh(n);
        double mag = 0;
        for (int64_t i = 0; i < n; ++i) {
            q[i] = nd(rng);
            ki[i] = static_cast<int8_t>(qd(rng));
            kh[i] = to_half(nd(rng));
            out_a[i] = out_b[i] = nd(rng);
            mag += std::fabs(q[i]) * 127.0;
        }
        // f32 accumulation in a different order: bound by n * eps * sum|terms|
        const double tol = 1e-6 * mag + 1e-6;
        EXPECT_NEAR(k.dot_i8(q.data(), ki.data(), n), ref.dot_i8(q.data(), ki.data(), n), tol) << n;
        EXPECT_NEAR(k.dot_f16(q.data(), kh.data(), n), ref.dot_f16(q.data(), kh.data(), n), 1e-5 * n) << n;
        k.axpy_i8(0.37f, ki.data(), out_a.data(), n);
        ref.axpy_i8(0.37f, ki.data(), out_b.data(), n);
        for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out_a[i], out_b[i], 1e-4f) << n << " " << i;
        k.axpy_f16(-1.5f, kh.data(), out_a.data(), n);
        ref.axpy_f16(-1.5f, kh.data(), out_b.data(), n);
        for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out_a[i], out_b[i], 1e-4f) << n << " " << i;
    }
}

TEST(AttnDot, ScalarIsExactOnSmallIntegers) {
    const AttnDotKernels& ref = attn_dot_kernels(true);
    std::vector<float> q = {1, 2, 3};
    std::vector<int8_t> k = {-1, 0, 5};
    EXPECT_EQ(ref.dot_i8(q.data(), k.data(), 3), 14.0f);
    std::vector<Half> kh = {to_half(0.5f), to_half(-2.0f), to_half(1.0f)};
    EXPECT_EQ(ref.dot_f16(q.data(), kh.data(), 3), 0.5f - 4.0f + 3.0f);
}

TEST(AttnDot, MultiQueryKernelsMatchScalar) {
    const AttnDotKernels& ref = attn_dot_kernels(true);
    const AttnDotKernels& k = attn_dot_kernels(false);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t n : {1, 7, 8, 64, 100, 128, 131}) {
        std::vector<std::vector<float>> q(4, std::vector<float>(n)), oa(4, std::vector<float>(n)),
            ob(4, std::vector<float>(n));
        std::vector<float> row(n), conv_a(n), conv_b(n);
        std::vector<int8_t> i8(n);
        std::vector<Half> h16(n);
        for (int64_t d = 0; d < n; ++d) {
            row[d] = nd(rng);
            i8[d] = static_cast<int8_t>(static_cast<int>(nd(rng) * 40.0f) % 127);
            h16[d] = to_half(nd(rng));
            for (int i = 0; i < 4; ++i) {
                q[i][d] = nd(rng);
                oa[i][d] = ob[i][d] = nd(rng);
            }
        }
        const float* qp[4] = {q[0].data(), q[1].data(), q[2].data(), q[3].data()};
        float ra[4], rb[4];
        k.dot4_f32(qp, row.data(), n, ra);
        ref.dot4_f32(qp, row.data(), n, rb);
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(ra[i], rb[i], 1e-4f * n) << n;
        const float a[4] = {0.5f, -1.25f, 2.0f, 0.0f};
        float* pa[4] = {oa[0].data(), oa[1].data(), oa[2].data(), oa[3].data()};
        float* pb[4] = {ob[0].data(), ob[1].data(), ob[2].data(), ob[3].data()};
        k.axpy4_f32(a, row.data(), pa, n);
        ref.axpy4_f32(a, row.data(), pb, n);
        for (int i = 0; i < 4; ++i) {
            for (int64_t d = 0; d < n; ++d) EXPECT_NEAR(oa[i][d], ob[i][d], 1e-5f);
        }
        k.row_i8(i8.data(), 0.03f, conv_a.data(), n);
        ref.row_i8(i8.data(), 0.03f, conv_b.data(), n);
        EXPECT_EQ(conv_a, conv_b);  // one multiply each: exact
        k.row_f16(h16.data(), conv_a.data(), n);
        ref.row_f16(h16.data(), conv_b.data(), n);
        EXPECT_EQ(conv_a, conv_b);  // fp16 -> f32 is exact
    }
}
