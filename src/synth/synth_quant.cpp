// synth/synth_quant.cpp — the fast k-quant fits (see synth_quant.h). Block layouts are those of
// quant/quant_blocks.h: Q4_K element e of a 256-block sits in qs[(e/64)*32 + e%32], nibble
// (e%64)/32; Q6_K low nibble in ql[(e/128)*64 + e%64] at (e%128)/64, high 2 bits in
// qh[(e/128)*32 + e%32] at 2*((e%128)/32).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include "synth/synth_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quant_blocks.h"

namespace jllm {

namespace {

int nearest(float v, int lo, int hi) {
    const float r = std::round(v);
    if (!(r >= static_cast<float>(lo))) return lo;
    if (r > static_cast<float>(hi)) return hi;
    return static_cast<int>(r);
}

float half_round(float v) { return fp16_to_f32(f32_to_fp16(v)); }

// x ~ s*q - m over 32 elements, q in [0, 15]: the covering grid [min(x,0), max(x)], then one
// least-squares (s, m) for the levels it assigns (kept only if it lowers the error, m >= 0).
void fit_asym32(const float* x, float* s_out, float* m_out) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < 32; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (!(hi > lo)) {
        *s_out = 0.0f;
        *m_out = -lo;
        return;
    }
    float s = (hi - lo) / 15.0f;
    float b = lo;
    int q[32];
    float err0 = 0.0f;
    float sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int i = 0; i < 32; ++i) {
        q[i] = nearest((x[i] - b) / s, 0, 15);
        const float d = s * static_cast<float>(q[i]) + b - x[i];
        err0 += d * d;
        const float fq = static_cast<float>(q[i]);
        sq += fq;
        sqq += fq * fq;
        sx += x[i];
        sxq += x[i] * fq;
    }
    const float det = 32.0f * sqq - sq * sq;
    if (det > 0.0f) {
        float s2 = (32.0f * sxq - sq * sx) / det;
        float b2 = (sqq * sx - sq * sxq) / det;
        if (b2 > 0.0f) {
            b2 = 0.0f;
            s2 = sxq / sqq;
        }
        if (s2 > 0.0f) {
            float err1 = 0.0f;
            for (int i = 0; i < 32; ++i) {
                const int qi = nearest((x[i] - b2) / s2, 0, 15);
                const float d = s2 * static_cast<float>(qi) + b2 - x[i];
                err1 += d * d;
            }
            if (err1 < err0) {
                s = s2;
                b = b2;
            }
        }
    }
    *s_out = s;
    *m_out = -b;
}

// x ~ s*q over 16 elements, q in [-32, 31]: the max-magnitude element on level -32, then one
// least-squares scale for the assigned levels (kept if it lowers the error).
float fit_sym16(const float* x) {
    float xm = 0.0f;
    for (int i = 0; i < 16; ++i) {
        if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
    }
    if (xm == 0.0f) return 0.0f;
    float s = -xm / 32.0f;
    float err0 = 0.0f, sxq = 0.0f, sqq = 0.0f;
    for (int i = 0; i < 16; ++i) {
        const int q = nearest(x[i] / s, -32, 31);
        const float d = s * static_cast<float>(q) - x[i];
        err0 += d * d;
        sxq += x[i] * static_cast<float>(q);
        sqq += static_cast<float>(q) * static_cast<float>(q);
    }
    if (sqq > 0.0f) {
        const float s2 = sxq / sqq;
        float err1 = 0.0f;
        for (int i = 0; i < 16; ++i) {
            const int q = nearest(x[i] / s2, -32, 31);
            const float d = s2 * static_cast<float>(q) - x[i];
            err1 += d * d;
        }
        if (err1 < err0) s = s2;
    }
    return s;
}

}  // namespace

void quantize_row_q4_k_fast(const float* x, void* vy, int64_t k) {
    JLLM_ASSERT(k % QK_K == 0);
    BlockQ4_K* y = static_cast<BlockQ4_K*>(vy);
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        BlockQ4_K& blk = y[b];
        float s[8], m[8], max_s = 0.0f, max_m = 0.0f;
        for (int j = 0; j < 8; ++j) {
            fit_asym32(x + 32 * j, &s[j], &m[j]);
            max_s = std::max(max_s, s[j]);
            max_m = std::max(max_m, m[j]);
        }
        const float d = half_round(max_s / 63.0f);
        const float dmin = half_round(max_m / 63.0f);
        blk.d = to_half(d);
        blk.dmin = to_half(dmin);
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) {
            sc[j] = static_cast<uint8_t>(d != 0.0f ? nearest(s[j] / d, 0, 63) : 0);
            mn[j] = static_cast<uint8_t>(dmin != 0.0f ? nearest(m[j] / dmin, 0, 63) : 0);
        }
        // 6-bit scales and mins packed in 12 bytes (the inverse of get_scale_min_k4).
        for (int j = 0; j < 4; ++j) {
            blk.scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            blk.scales[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
            blk.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
        }
        std::memset(blk.qs, 0, sizeof(blk.qs));
        for (int e = 0; e < QK_K; ++e) {
            const float dl = d * static_cast<float>(sc[e / 32]);
            const float ml = dmin * static_cast<float>(mn[e / 32]);
            const int q = dl != 0.0f ? nearest((x[e] + ml) / dl, 0, 15) : 0;
            blk.qs[(e / 64) * 32 + e % 32] |= static_cast<uint8_t>(q << (4 * ((e % 64) / 32)));
        }
    }
}

void quantize_row_q6_k_fast(const float* x, void* vy, int64_t k) {
    JLLM_ASSERT(k % QK_K == 0);
    BlockQ6_K* y = static_cast<BlockQ6_K*>(vy);
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        BlockQ6_K& blk = y[b];
        float s[16], max_s = 0.0f;
        for (int j = 0; j < 16; ++j) {
            s[j] = fit_sym16(x + 16 * j);
            max_s = std::max(max_s, std::fabs(s[j]));
        }
        const float d = half_round(max_s / 127.0f);
        blk.d = to_half(d);
        for (int j = 0; j < 16; ++j) blk.scales[j] = static_cast<int8_t>(d != 0.0f ? nearest(s[j] / d, -127, 127) : 0);
        std::memset(blk.ql, 0, sizeof(blk.ql));
        std::memset(blk.qh, 0, sizeof(blk.qh));
        for (int e = 0; e < QK_K; ++e) {
            const float dl = d * static_cast<float>(blk.scales[e / 16]);
            const int u = (dl != 0.0f ? nearest(x[e] / dl, -32, 31) : 0) + 32;
            blk.ql[(e / 128) * 64 + e % 64] |= static_cast<uint8_t>((u & 0xF) << (4 * ((e % 128) / 64)));
            blk.qh[(e / 128) * 32 + e % 32] |= static_cast<uint8_t>((u >> 4) << (2 * ((e % 128) / 32)));
        }
    }
}

FromFloatFn synth_from_float(GgmlType type, bool exact) {
    if (!exact && type == GgmlType::Q4_K) return &quantize_row_q4_k_fast;
    if (!exact && type == GgmlType::Q6_K) return &quantize_row_q6_k_fast;
    return type_traits(type).from_float;
}

}  // namespace jllm
