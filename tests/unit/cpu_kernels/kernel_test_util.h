// tests/unit/cpu_kernels/kernel_test_util.h — random weight rows of every type, the float
// reference dot product (dequantize with quant_ref, then a double-precision dot) and the
// statistical error bound that activation quantization allows.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "quant/quant_blocks.h"
#include "quant/quant_types.h"

namespace jllm::test {

// Random bytes for every quant field, then the fp16 scales set to sane magnitudes so the
// dequantized values look like real weights (|w| ~ 0.01 .. 0.1). Every bit pattern of the
// packed quants (and of the k-quant sub-block scales) is exercised.
inline std::vector<uint8_t> random_weight_row(GgmlType type, int64_t n, std::mt19937& rng) {
    const TypeTraits& tt = type_traits(type);
    const size_t bytes = row_size(type, n);
    std::vector<uint8_t> buf(bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& b : buf) b = static_cast<uint8_t>(byte(rng));
    std::uniform_real_distribution<float> mag(0.5f, 1.5f);
    std::uniform_int_distribution<int> sign(0, 1);
    auto h = [&](float scale) { return to_half((sign(rng) ? -1.0f : 1.0f) * scale * mag(rng)); };
    auto hp = [&](float scale) { return to_half(scale * mag(rng)); };
    const int64_t nb = n / tt.block_size;
    for (int64_t i = 0; i < nb; i++) {
        void* blk = buf.data() + i * tt.type_size;
        switch (type) {
            case GgmlType::Q4_0: static_cast<BlockQ4_0*>(blk)->d = h(0.01f); break;
            case GgmlType::Q4_1: {
                auto* b = static_cast<BlockQ4_1*>(blk);
                b->d = hp(0.01f);
                b->m = to_half(-0.08f * mag(rng));
                break;
            }
            case GgmlType::Q5_0: static_cast<BlockQ5_0*>(blk)->d = h(0.005f); break;
            case GgmlType::Q5_1: {
                auto* b = static_cast<BlockQ5_1*>(blk);
                b->d = hp(0.005f);
                b->m = to_half(-0.08f * mag(rng));
                break;
            }
            case GgmlType::Q8_0: static_cast<BlockQ8_0*>(blk)->d = h(0.0008f); break;
            case GgmlType::Q2_K: {
                auto* b = static_cast<BlockQ2_K*>(blk);
                b->d = hp(0.003f);
                b->dmin = hp(0.002f);
                break;
            }
            case GgmlType::Q3_K: static_cast<BlockQ3_K*>(blk)->d = h(0.001f); break;
            case GgmlType::Q4_K: {
                auto* b = static_cast<BlockQ4_K*>(blk);
                b->d = hp(0.0002f);
                b->dmin = hp(0.0004f);
                break;
            }
            case GgmlType::Q5_K: {
                auto* b = static_cast<BlockQ5_K*>(blk);
                b->d = hp(0.0001f);
                b->dmin = hp(0.0004f);
                break;
            }
            case GgmlType::Q6_K: static_cast<BlockQ6_K*>(blk)->d = h(0.00002f); break;
            case GgmlType::F16: static_cast<Half*>(blk)->bits = to_half(0.05f * (mag(rng) - 1.0f)).bits; break;
            case GgmlType::BF16:
                static_cast<BFloat16*>(blk)->bits = f32_to_bf16(0.05f * (mag(rng) - 1.0f));
                break;
            case GgmlType::F32: {
                const float v = 0.05f * (mag(rng) - 1.0f);
                std::memcpy(blk, &v, 4);
                break;
            }
            default: break;
        }
    }
    return buf;
}

inline std::vector<float> dequantize(GgmlType type, const void* row, int64_t n) {
    std::vector<float> w(static_cast<size_t>(n));
    type_traits(type).to_float(row, w.data(), n);
    return w;
}

// Activations like a normed hidden state, with a few outliers per row.
inline std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    for (int i = 0; i < 3; i++) x[static_cast<size_t>(pick(rng))] *= 8.0f;
    return x;
}

inline double dot_f64(const std::vector<float>& w, const float* x) {
    double s = 0.0;
    for (size_t i = 0; i < w.size(); i++) s += static_cast<double>(w[i]) * x[i];
    return s;
}

// Error bound of w · quant(x) against w · x, six standard deviations of:
//  - rounding each activation to its block's step d = amax / 127: uniform in +-d/2,
//    variance w_i^2 d^2 / 12 per element;
//  - for the fp16-scaled activation blocks (Q8_0 / Q8_1): d and s rounded to fp16
//    (relative 2^-11), which scales a whole block's contribution at once; `offset`
//    bounds the weight's per-element offset (8 d for Q4_0, |m| for Q4_1, ...), which
//    multiplies s.
// plus float-accumulation slack 1e-5 * sum |w_i x_i|.
inline double quant_error_bound(const QuantDotKernel& k, const std::vector<float>& w, const float* x) {
    const int64_t n = static_cast<int64_t>(w.size());
    if (k.act_type == GgmlType::F32) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) s += std::fabs(static_cast<double>(w[i]) * x[i]);
        return 1e-5 * s + 1e-12;
    }
    const int64_t B = k.act_block == 256 ? 256 : 32;
    const bool half_scale = k.act_type != GgmlType::Q8_K;
    double var = 0.0, abs_sum = 0.0;
    for (int64_t b0 = 0; b0 < n; b0 += B) {
        double amax = 0.0, wx = 0.0, xs = 0.0, wmax = 0.0;
        for (int64_t i = b0; i < b0 + B; i++) amax = std::fmax(amax, std::fabs(x[i]));
        const double d = amax / 127.0;
        for (int64_t i = b0; i < b0 + B; i++) {
            var += static_cast<double>(w[i]) * w[i] * d * d / 12.0;
            wx += std::fabs(static_cast<double>(w[i]) * x[i]);
            xs += std::fabs(x[i]);
            wmax = std::fmax(wmax, std::fabs(w[i]));
        }
        abs_sum += wx;
        if (half_scale) {
            const double e = std::ldexp(1.0, -11) * (wx + wmax * xs);
            var += e * e;
        }
    }
    return 6.0 * std::sqrt(var) + 1e-5 * abs_sum + 1e-12;
}

inline double abs_dot(const std::vector<float>& w, const float* x) {
    double s = 0.0;
    for (size_t i = 0; i < w.size(); i++) s += std::fabs(static_cast<double>(w[i]) * x[i]);
    return s;
}

}  // namespace jllm::test
