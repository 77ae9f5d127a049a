// tests/unit/cpu_attn/test_attn_dot.cpp — the SIMD attention inner loops against the scalar
// reference on random rows of odd lengths (tails), INT8 and FP16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/attn_dot.h"

using namespace jllm;

TEST(AttnDot, OneQueryKernelsEqualAnyLaneOfTheFourQueryKernels) {
    // Bitwise: a query's result must not depend on whether it was computed alone or in a group.
    for (bool scalar : {true, false}) {
        const AttnDotKernels& k = attn_dot_kernels(scalar ? SimdLevel::Scalar : simd_level_best());
        std::mt19937 rng(3);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int64_t n : {5, 64, 128, 131}) {
            std::vector<std::vector<float>> q(4, std::vector<float>(n)), o4(4, std::vector<float>(n)),
                o1(4, std::vector<float>(n));
            std::vector<float> row(n);
            for (int64_t d = 0; d < n; ++d) {
                row[d] = nd(rng);
                for (int i = 0; i < 4; ++i) {
                    q[i][d] = nd(rng);
                    o4[i][d] = o1[i][d] = nd(rng);
                }
            }
            const float* qp[4] = {q[0].data(), q[1].data(), q[2].data(), q[3].data()};
            float r4[4];
            k.dot4_f32(qp, row.data(), n, r4);
            const float a[4] = {0.3f, -2.0f, 1e-3f, 7.5f};
            float* p4[4] = {o4[0].data(), o4[1].data(), o4[2].data(), o4[3].data()};
            k.axpy4_f32(a, row.data(), p4, n);
            for (int i = 0; i < 4; ++i) {
                EXPECT_EQ(k.dot1_f32(q[i].data(), row.data(), n), r4[i]) << "n=" << n << " lane " << i;
                k.axpy1_f32(a[i], row.data(), o1[i].data(), n);
                EXPECT_EQ(o1[i], o4[i]) << "n=" << n << " lane " << i;
            }
        }
    }
}

TEST(AttnDot, MultiQueryKernelsMatchScalar) {
    const AttnDotKernels& ref = attn_dot_kernels(SimdLevel::Scalar);
    const AttnDotKernels& k = attn_dot_kernels(simd_level_best());
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

TEST(AttnDot, ChunkedPvEqualsOneKeyAtATime) {
    // Bitwise, against the scalar reference too: P.V over a chunk of keys is the same FMA
    // sequence per element as axpy1 key after key (element-wise, so no summation order differs).
    const AttnDotKernels& ref = attn_dot_kernels(SimdLevel::Scalar);
    for (bool scalar : {true, false}) {
        const AttnDotKernels& k = attn_dot_kernels(scalar ? SimdLevel::Scalar : simd_level_best());
        std::mt19937 rng(11);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int64_t n : {5, 64, 128, 131, 256}) {
            for (int64_t nk : {0, 1, 7, 16}) {
                const int64_t ps = 3;  // probabilities are strided (one column of the score tile)
                std::vector<float> p(static_cast<size_t>(std::max<int64_t>(1, nk) * ps)), v(static_cast<size_t>(nk * n));
                std::vector<float> o(static_cast<size_t>(n)), o_ref;
                for (float& x : p) x = nd(rng);
                for (float& x : v) x = nd(rng);
                for (float& x : o) x = nd(rng);
                o_ref = o;
                k.pv_f32(p.data(), ps, v.data(), nk, o.data(), n);
                for (int64_t j = 0; j < nk; ++j) ref.axpy1_f32(p[j * ps], v.data() + j * n, o_ref.data(), n);
                EXPECT_EQ(o, o_ref) << "scalar=" << scalar << " n=" << n << " keys=" << nk;
            }
        }
    }
}

// Softmax steps: max and mul are exact (bit-identical to the scalar loops); the SIMD exp is
// within 2 ulp + (the flush below e^-87.3) of std::exp, and every element takes the same path
// whether it sits in a full vector, in a tail or alone.
TEST(AttnDot, SoftmaxStepsMatchScalar) {
    const AttnDotKernels& ref = attn_dot_kernels(SimdLevel::Scalar);
    const AttnDotKernels& k = attn_dot_kernels(simd_level_best());
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 6.0f);
    const float rel = 2.0f * 1.1920929e-7f, abs_floor = 1.2e-38f;  // 2 ulp; e^-87.3 flushed to 0
    for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 64}) {
        std::vector<float> s(n), m_ref(n), m(n), r(n);
        for (int64_t i = 0; i < n; ++i) {
            s[i] = nd(rng);
            m_ref[i] = m[i] = nd(rng);
            r[i] = 1.0f / (1.0f + std::fabs(nd(rng)));
        }
        if (n > 2) s[1] = m[1] - 87.0f, s[2] = m[2] - 120.0f;  // near and past the flush point
        ref.max_f32(s.data(), m_ref.data(), n);
        k.max_f32(s.data(), m.data(), n);
        EXPECT_EQ(m, m_ref) << "n=" << n;
        std::vector<float> e_ref = s, e = s, e1 = s, sum_ref(n, 0.5f), sum(n, 0.5f), sum1(n, 0.5f);
        ref.exp_sum_f32(e_ref.data(), m.data(), sum_ref.data(), n);
        k.exp_sum_f32(e.data(), m.data(), sum.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            k.exp_sum_f32(e1.data() + i, m.data() + i, sum1.data() + i, 1);
            EXPECT_LE(std::fabs(e[i] - e_ref[i]), rel * e_ref[i] + abs_floor) << "n=" << n << " i=" << i << " x=" << s[i] - m[i];
            EXPECT_LE(std::fabs(sum[i] - sum_ref[i]), rel * sum_ref[i]) << "n=" << n << " i=" << i;
        }
        EXPECT_EQ(e1, e) << "n=" << n;
        EXPECT_EQ(sum1, sum) << "n=" << n;
        std::vector<float> p_ref = e, p = e;
        ref.mul_f32(p_ref.data(), r.data(), n);
        k.mul_f32(p.data(), r.data(), n);
        EXPECT_EQ(p, p_ref) << "n=" << n;
    }
}

TEST(AttnDot, SimdExpWithinTwoUlpOverTheSoftmaxRange) {
    const AttnDotKernels& k = attn_dot_kernels(simd_level_best());
    std::vector<float> x, zero;
    for (float v = -87.0f; v <= 0.0f; v += 0.00731f) x.push_back(v);
    x.push_back(0.0f);
    x.push_back(-0.0f);
    zero.assign(x.size(), 0.0f);
    std::vector<float> e = x, sum(x.size(), 0.0f);
    k.exp_sum_f32(e.data(), zero.data(), sum.data(), static_cast<int64_t>(x.size()));
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::exp(static_cast<double>(x[i]));
        worst = std::max(worst, std::fabs(e[i] - want) / want);
        EXPECT_EQ(sum[i], e[i]);
    }
    EXPECT_LE(worst, 2.0 * 1.1920929e-7) << "worst relative error";
    EXPECT_EQ(e[x.size() - 1], 1.0f);
}
