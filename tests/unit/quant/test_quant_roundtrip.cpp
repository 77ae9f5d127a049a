// tests/unit/quant/test_quant_roundtrip.cpp — quantize -> dequantize round trips of every type
// with a reference quantizer, on seeded random data, against the error bound each format
// implies (per element) and a measured RMS-error ceiling (quality of the scale search).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "quant/quant_ref.h"
#include "quant/quant_types.h"

namespace jllm {
namespace {

constexpr double U16 = 1.0 / 2048.0;  // 2^-11: relative rounding error of an fp16 scale

std::vector<float> normal_data(int64_t n, float sigma, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    return x;
}

// Per-element error bound for element i of x, given the block it sits in: [b0, b0 + bs).
// Each bound is what the format's rule guarantees (see the comment of each case); k-quant
// bounds are relative to the sub-block because scale and min are chosen per sub-block.
struct Stats {
    double amax = 0, lo = 0, hi = 0;
};
Stats stats(const float* x, int n) {
    Stats s;
    s.lo = s.hi = x[0];
    for (int i = 0; i < n; ++i) {
        s.amax = std::max(s.amax, std::fabs(double(x[i])));
        s.lo = std::min(s.lo, double(x[i]));
        s.hi = std::max(s.hi, double(x[i]));
    }
    return s;
}

double element_bound(GgmlType type, const float* x, int64_t i) {
    switch (type) {
    // fp16: round to nearest, half an ulp: 2^-11 relative in the normal range, 2^-25 absolute
    // (half the subnormal spacing 2^-24) below 2^-14. bf16 keeps the f32 exponent: 2^-8.
    case GgmlType::F16: return std::max(std::fabs(x[i]) * U16, std::ldexp(1.0, -25));
    case GgmlType::BF16: return std::fabs(x[i]) / 256.0 + 1e-30;
    // Q8_0/Q8_1: step d = amax/127 rounded to fp16; nearest level is within d/2, and the
    // element at amax can clip by at most 127 * |d - fp16(d)| <= amax * 2^-11.
    case GgmlType::Q8_0:
    case GgmlType::Q8_1: {
        const Stats s = stats(x + i / 32 * 32, 32);
        return s.amax * (0.5 / 127 * (1 + U16) + U16);
    }
    // Q8_K: float d, so only half a step.
    case GgmlType::Q8_K: {
        const Stats s = stats(x + i / 256 * 256, 256);
        return s.amax * (0.5 / 127) * (1 + 1e-6);
    }
    // Q4_0/Q5_0: grid [-2^(b-1), 2^(b-1)-1] * d with the largest-magnitude element at the
    // -2^(b-1) end: an element of opposite sign and equal magnitude clips to the +2^(b-1)-1
    // end, one full step d = amax/2^(b-1) away (plus fp16 rounding of d).
    case GgmlType::Q4_0: return stats(x + i / 32 * 32, 32).amax * (1.0 / 8 + 2 * U16);
    case GgmlType::Q5_0: return stats(x + i / 32 * 32, 32).amax * (1.0 / 16 + 2 * U16);
    // Q4_1/Q5_1: grid [min, max] in 2^b - 1 steps: half a step, plus fp16 rounding of d and
    // of m (2^-11 of |min| and of the range).
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: {
        const Stats s = stats(x + i / 32 * 32, 32);
        const double steps = type == GgmlType::Q4_1 ? 15 : 31;
        return (s.hi - s.lo) / steps * 0.5 * (1 + U16) + 2 * U16 * (s.amax + (s.hi - s.lo));
    }
    default: break;
    }
    return -1;  // k-quants: checked against their stored grids (kquant_check)
}

bool is_kquant(GgmlType t) {
    return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K ||
           t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

// The stored grid of one k-quant sub-block: y = dl * q - ml for integer q in [qlo, qhi].
struct Grid {
    double dl = 0, ml = 0;
    int qlo = 0, qhi = 0;
};

// Unpacks the sub-block grid covering element e of a k-quant super-block. The field layouts
// are those of quant_blocks.h; Q3_K's scale packing is re-derived here from the format.
Grid kquant_grid(GgmlType type, const uint8_t* block, int e) {
    Grid g;
    switch (type) {
    case GgmlType::Q2_K: {
        const auto* b = reinterpret_cast<const BlockQ2_K*>(block);
        const int s = b->scales[e / 16];
        g.dl = double(to_f32(b->d) * float(s & 0xF));
        g.ml = double(to_f32(b->dmin) * float(s >> 4));
        g.qhi = 3;
        break;
    }
    case GgmlType::Q3_K: {
        const auto* b = reinterpret_cast<const BlockQ3_K*>(block);
        const int j = e / 16;
        const int lo = j < 8 ? (b->scales[j] & 0xF) : (b->scales[j - 8] >> 4);
        const int hi = (b->scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        g.dl = double(to_f32(b->d) * float((lo | (hi << 4)) - 32));
        g.qlo = -4, g.qhi = 3;
        break;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
        // Q4_K and Q5_K share the d, dmin, scales prefix.
        const auto* b = reinterpret_cast<const BlockQ4_K*>(block);
        uint8_t sc, mn;
        get_scale_min_k4(e / 32, b->scales, &sc, &mn);
        g.dl = double(to_f32(b->d) * float(sc));
        g.ml = double(to_f32(b->dmin) * float(mn));
        g.qhi = type == GgmlType::Q4_K ? 15 : 31;
        break;
    }
    case GgmlType::Q6_K: {
        const auto* b = reinterpret_cast<const BlockQ6_K*>(block);
        g.dl = double(to_f32(b->d) * float(b->scales[e / 16]));
        g.qlo = -32, g.qhi = 31;
        break;
    }
    default: break;
    }
    return g;
}

// Sub-block size and level count of a k-quant, and whether it has a min.
void kquant_shape(GgmlType t, int* sub, int* levels, bool* with_min) {
    *sub = (t == GgmlType::Q4_K || t == GgmlType::Q5_K) ? 32 : 16;
    *with_min = t == GgmlType::Q2_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K;
    *levels = t == GgmlType::Q2_K ? 4 : t == GgmlType::Q3_K ? 8 : t == GgmlType::Q4_K ? 16
            : t == GgmlType::Q5_K ? 32 : 64;
}

// Step of the sub-block's covering grid: the plain min-max (or symmetric max-abs) grid with
// exact scales. Its uniform-rounding error step^2/12 is the baseline a search must beat.
double covering_step(GgmlType t, const float* xs) {
    int sub, levels;
    bool with_min;
    kquant_shape(t, &sub, &levels, &with_min);
    const Stats s = stats(xs, sub);
    return (with_min ? s.hi - std::min(0.0, s.lo) : 2 * s.amax) / (levels - 1);
}

struct RoundTripCase {
    GgmlType type;
    double max_rel_rmse;  // ceiling on rms(x - y) / rms(x) for N(0, sigma) data
};

class RoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

// How far (in covering-grid steps) a k-quant may clip an element outside its stored grid.
// The scale search keeps a fit only if its squared error beats the covering grid's, which is
// at most n * (step/2)^2 for an n-element sub-block; one element clipped by c steps alone
// costs c^2 * step^2, so c <= sqrt(n) / 2: 2 for sub-blocks of 16, 2.83 for 32. (Scale
// quantization moves the grid afterwards, which this argument does not cover; the neighbour
// search on the integer scales keeps that shift small.) Measured worst over 2M normal values: Q2_K 0.86, Q3_K 1.08,
// Q4_K 1.11, Q5_K 1.14, Q6_K 1.05.
double max_clip_steps(GgmlType t) {
    return (t == GgmlType::Q4_K || t == GgmlType::Q5_K) ? std::sqrt(32.0) / 2 : 2.0;
}

// Per element, for the formats with a closed-form bound: |x - y| <= element_bound. For the
// k-quants the quantizer guarantees that every element sits on the nearest level of its
// sub-block's STORED grid: inside the grid |x - y| <= |dl| / 2 (checked exactly); outside it
// y is the grid's end, at most max_clip_steps covering steps away. The RMS error must beat
// the covering grid's (step^2/12 per element, exact scales), showing the search pays off.
TEST_P(RoundTripTest, NormalDataWithinBounds) {
    const RoundTripCase c = GetParam();
    const TypeTraits& tt = type_traits(c.type);
    uint32_t seed_bump = 0;
    for (float sigma : {1.0f, 0.02f}) {
        const int64_t n = 128 * 1024;
        const std::vector<float> x = normal_data(n, sigma, 1234u + static_cast<uint32_t>(c.type) + seed_bump++);
        std::vector<uint8_t> q(row_size(c.type, n));
        tt.from_float(x.data(), q.data(), n);
        std::vector<float> y(x.size());
        tt.to_float(q.data(), y.data(), n);

        double se = 0, sx = 0, worst = 0, cover_se = 0, worst_clip = 0;
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double xi = x[i], yi = y[i];
            const double err = std::fabs(xi - yi);
            se += err * err;
            sx += xi * xi;
            std::string why;
            if (!is_kquant(c.type)) {
                const double bound = element_bound(c.type, x.data(), i);
                worst = std::max(worst, err / bound);
                if (err > bound) why = "err > bound " + std::to_string(bound);
            } else {
                int sub, levels;
                bool with_min;
                kquant_shape(c.type, &sub, &levels, &with_min);
                const int e = static_cast<int>(i % QK_K);
                const Grid g = kquant_grid(c.type, q.data() + size_t(i / QK_K) * tt.type_size, e);
                const double step = covering_step(c.type, x.data() + i / sub * sub);
                cover_se += step * step / 12;
                const double a = g.dl * g.qlo - g.ml, b = g.dl * g.qhi - g.ml;
                const double glo = std::min(a, b), ghi = std::max(a, b);
                const double slack = 1e-6 * (std::fabs(xi) + std::fabs(g.ml) + std::fabs(g.dl) * levels);
                if (xi >= glo && xi <= ghi) {
                    worst = std::max(worst, err / (std::fabs(g.dl) / 2 + slack));
                    if (err > std::fabs(g.dl) / 2 + slack) why = "not on the nearest level";
                } else {
                    const double end = xi < glo ? glo : ghi;
                    const double clip = std::fabs(xi - end);
                    worst_clip = std::max(worst_clip, clip / step);
                    if (std::fabs(yi - end) > slack) why = "outside the grid but not at its end";
                    if (clip > max_clip_steps(c.type) * step) why = "clipped too far";
                }
            }
            if (!why.empty() && ++bad <= 5) {
                ADD_FAILURE() << tt.name << " sigma " << sigma << " element " << i << ": x " << xi
                              << " y " << yi << ": " << why;
            }
        }
        const double rel_rmse = std::sqrt(se / sx);
        std::printf("  %-5s sigma %-5g rel_rmse %.5f (ceiling %.5f)", tt.name, double(sigma),
                    rel_rmse, c.max_rel_rmse);
        if (is_kquant(c.type)) {
            const double cover = std::sqrt(cover_se / sx);
            std::printf(", covering grid %.5f, worst clip %.3f steps", cover, worst_clip);
            // The search must beat the covering grid with exact (unquantized) scales.
            EXPECT_LT(rel_rmse, cover) << tt.name;
        }
        std::printf(", worst err/bound %.3f\n", worst);
        EXPECT_EQ(bad, 0) << tt.name;
        EXPECT_LE(rel_rmse, c.max_rel_rmse) << tt.name << " sigma " << sigma;
    }
}

// RMS-error ceilings relative to rms(x): measured values (N(0,1) and N(0,0.02), seeded) plus
// about 3%, so a quantizer that gets worse fails. Measured: F16 0.00021, BF16 0.00166,
// Q4_0 0.0865, Q4_1 0.0784, Q5_0 0.0426, Q5_1 0.0380, Q8_0 0.00538, Q8_1 0.00536,
// Q2_K 0.2601, Q3_K 0.1438, Q4_K 0.0697, Q5_K 0.0346, Q6_K 0.0169, Q8_K 0.00699.
const RoundTripCase kCases[] = {
    {GgmlType::F16, 0.00025}, {GgmlType::BF16, 0.0018}, {GgmlType::Q4_0, 0.089},
    {GgmlType::Q4_1, 0.081},  {GgmlType::Q5_0, 0.044},  {GgmlType::Q5_1, 0.039},
    {GgmlType::Q8_0, 0.0056}, {GgmlType::Q8_1, 0.0056}, {GgmlType::Q2_K, 0.268},
    {GgmlType::Q3_K, 0.148},  {GgmlType::Q4_K, 0.0718},  {GgmlType::Q5_K, 0.0357},
    {GgmlType::Q6_K, 0.0174}, {GgmlType::Q8_K, 0.0072},
};

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTripTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RoundTripCase>& p) {
                             return std::string(type_name(p.param.type));
                         });

// Degenerate inputs: all zeros stay exactly zero, and constant, spiky and tiny blocks give
// finite values within a bound proportional to the block's largest magnitude.
TEST(RoundTripEdges, ZerosConstantsSpikesTiny) {
    for (const RoundTripCase& c : kCases) {
        const TypeTraits& tt = type_traits(c.type);
        SCOPED_TRACE(tt.name);
        const int64_t n = 2 * QK_K;
        std::vector<float> x(n, 0.0f);
        std::vector<uint8_t> q(row_size(c.type, n));
        std::vector<float> y(n);
        tt.from_float(x.data(), q.data(), n);
        tt.to_float(q.data(), y.data(), n);
        for (float v : y) ASSERT_EQ(v, 0.0f);

        // Constant block, a block with one spike among small values, a negative constant,
        // and values far below the fp16 range (scales underflow to zero: output 0).
        std::vector<std::vector<float>> cases(4, std::vector<float>(n));
        for (int64_t i = 0; i < n; ++i) {
            cases[0][i] = 0.75f;
            cases[1][i] = (i % 97 == 0) ? 50.0f : 0.01f * float(i % 7) - 0.03f;
            cases[2][i] = -3.0f;
            cases[3][i] = 1e-30f * float(i % 5 + 1);
        }
        for (const std::vector<float>& xc : cases) {
            tt.from_float(xc.data(), q.data(), n);
            tt.to_float(q.data(), y.data(), n);
            double amax = 0;
            for (float v : xc) amax = std::max(amax, std::fabs(double(v)));
            for (int64_t i = 0; i < n; ++i) {
                ASSERT_TRUE(std::isfinite(y[i])) << i;
                // Half the block's largest magnitude: the loosest any format allows here
                // (Q2_K with 4 levels on a spiky sub-block), and far below a wrong sign/order.
                ASSERT_LE(std::fabs(double(xc[i]) - y[i]), 0.5 * amax + 1e-6) << i;
            }
        }
    }
}

// Q8_1's s and Q8_K's bsums are consistent with the stored quants (kernels rely on them).
TEST(RoundTripEdges, Q8SumsMatchQuants) {
    const std::vector<float> x = normal_data(4 * QK_K, 1.0f, 77);
    std::vector<BlockQ8_1> b1(x.size() / QK8_1);
    quantize_row_q8_1_ref(x.data(), b1.data(), static_cast<int64_t>(x.size()));
    for (const BlockQ8_1& b : b1) {
        int sum = 0;
        for (int8_t v : b.qs) sum += v;
        EXPECT_EQ(b.s.bits, to_half(to_f32(b.d) * float(sum)).bits);
    }
    std::vector<BlockQ8_K> bk(x.size() / QK_K);
    quantize_row_q8_k_ref(x.data(), bk.data(), static_cast<int64_t>(x.size()));
    for (const BlockQ8_K& b : bk) {
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += b.qs[16 * j + i];
            EXPECT_EQ(b.bsums[j], sum) << j;
        }
        for (int8_t v : b.qs) EXPECT_GE(v, -127);
    }
}

}  // namespace
}  // namespace jllm
