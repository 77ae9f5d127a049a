// backend/cpu/quant_dot_neon.cpp — aarch64 Advanced SIMD dot products (the Jetson's
// Cortex-A78AE). Compiled only on aarch64; elsewhere the getters return nullptr.
//
// Deliberately plain, since no aarch64 machine runs the tests here: every kernel unpacks a
// block into int8 values exactly as the scalar reference reads them, takes 16-lane int8 dot
// products (vdotq_s32 when the compiler targets dotprod, else vmull_s8 + pairwise adds — both
// exact in int32), and then applies the same per-block float math as quant_dot_scalar.cpp.
// Activation quantization uses the scalar reference (getter returns nullptr).
#include "backend/cpu/quant_dot_internal.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "quant/quant_blocks.h"

namespace jllm::cpu_detail {

namespace {

// sum(q[i] * a[i]) over 16 int8 lanes, exact.
inline int32x4_t dot16_acc(int32x4_t acc, int8x16_t q, int8x16_t a) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, q, a);
#else
    const int16x8_t lo = vmull_s8(vget_low_s8(q), vget_low_s8(a));
    const int16x8_t hi = vmull_high_s8(q, a);
    return vpadalq_s16(vpadalq_s16(acc, lo), hi);
#endif
}
inline int dot16(int8x16_t q, int8x16_t a) { return vaddvq_s32(dot16_acc(vdupq_n_s32(0), q, a)); }
inline int dot32(int8x16_t q0, int8x16_t q1, const int8_t* a) {
    return vaddvq_s32(dot16_acc(dot16_acc(vdupq_n_s32(0), q0, vld1q_s8(a)), q1, vld1q_s8(a + 16)));
}

inline float h2f(Half h) { return fp16_to_f32(h.bits); }

// Q4 nibbles -> unsigned values 0..15 (elements 0..15 low nibbles, 16..31 high nibbles).
inline void nibbles(const uint8_t* qs, int8x16_t* lo, int8x16_t* hi) {
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F)));
    *hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
}

// Q5 high bits: bit j of qh (little-endian u32) -> 0x10 in byte j.
inline void high_bits(const uint8_t* qh4, int8x16_t* lo, int8x16_t* hi) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    uint8_t b[32];
    for (int j = 0; j < 32; j++) b[j] = static_cast<uint8_t>(((qh >> j) & 1u) << 4);
    *lo = vreinterpretq_s8_u8(vld1q_u8(b));
    *hi = vreinterpretq_s8_u8(vld1q_u8(b + 16));
}

float dot_q8_0(int64_t n, const void* wv, const void* av) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(wv);
    const BlockQ8_0* a = static_cast<const BlockQ8_0*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const int s = dot32(vld1q_s8(w[i].qs), vld1q_s8(w[i].qs + 16), a[i].qs);
        sum += h2f(w[i].d) * h2f(a[i].d) * static_cast<float>(s);
    }
    return sum;
}

float dot_q4_0(int64_t n, const void* wv, const void* av) {
    const BlockQ4_0* w = static_cast<const BlockQ4_0*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int8x16_t lo, hi;
        nibbles(w[i].qs, &lo, &hi);
        const int s = dot32(lo, hi, a[i].qs);
        const float dw = h2f(w[i].d);
        sum += dw * h2f(a[i].d) * static_cast<float>(s) - 8.0f * dw * h2f(a[i].s);
    }
    return sum;
}

float dot_q4_1(int64_t n, const void* wv, const void* av) {
    const BlockQ4_1* w = static_cast<const BlockQ4_1*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int8x16_t lo, hi;
        nibbles(w[i].qs, &lo, &hi);
        const int s = dot32(lo, hi, a[i].qs);
        sum += h2f(w[i].d) * h2f(a[i].d) * static_cast<float>(s) + h2f(w[i].m) * h2f(a[i].s);
    }
    return sum;
}

float dot_q5_0(int64_t n, const void* wv, const void* av) {
    const BlockQ5_0* w = static_cast<const BlockQ5_0*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        int8x16_t lo, hi, hlo, hhi;
        nibbles(w[i].qs, &lo, &hi);
        high_bits(w[i].qh, &hlo, &hhi);
        const int s = dot32(vorrq_s8(lo, hlo), vorrq_s8(hi, hhi), a[i].qs);
        const float dw = h2f(w[i].d);
        sum += dw * h2f(a[i].d) * static_cast<float>(s) - 16.0f * dw * h2f(a[i].s);
    }
    return sum;
}

float dot_q5_1(int64_t n, const void* wv, const void* av) {
    const BlockQ5_1* w = static_cast<const BlockQ5_1*>(wv);
    const BlockQ8_1* a = static_cast<const BlockQ8_1*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        int8x16_t lo, hi, hlo, hhi;
        nibbles(w[i].qs, &lo, &hi);
        high_bits(w[i].qh, &hlo, &hhi);
        const int s = dot32(vorrq_s8(lo, hlo), vorrq_s8(hi, hhi), a[i].qs);
        sum += h2f(w[i].d) * h2f(a[i].d) * static_cast<float>(s) + h2f(w[i].m) * h2f(a[i].s);
    }
    return sum;
}

// k-quants: s16[j] = sum over sub-block j (16 elements) of q * a, q unsigned as stored.

float dot_q2_k(int64_t n, const void* wv, const void* av) {
    const BlockQ2_K* w = static_cast<const BlockQ2_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0, summ = 0;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            for (int j = 0; j < 4; j++) {
                const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * j));
                const int8x16_t v0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, sh), vdupq_n_u8(3)));
                const int8x16_t v1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, sh), vdupq_n_u8(3)));
                const int8_t* ab = a[i].qs + 128 * h + 32 * j;
                const int k = 8 * h + 2 * j;
                sumi += (w[i].scales[k] & 0xF) * dot16(v0, vld1q_s8(ab));
                sumi += (w[i].scales[k + 1] & 0xF) * dot16(v1, vld1q_s8(ab + 16));
            }
        }
        for (int j = 0; j < 16; j++) summ += (w[i].scales[j] >> 4) * a[i].bsums[j];
        sum += a[i].d * (h2f(w[i].d) * static_cast<float>(sumi) - h2f(w[i].dmin) * static_cast<float>(summ));
    }
    return sum;
}

float dot_q3_k(int64_t n, const void* wv, const void* av) {
    const BlockQ3_K* w = static_cast<const BlockQ3_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        unpack_scales_q3_k(w[i].scales, sc);
        const uint8x16_t hm0 = vld1q_u8(w[i].hmask), hm1 = vld1q_u8(w[i].hmask + 16);
        int sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * h), q1 = vld1q_u8(w[i].qs + 32 * h + 16);
            for (int j = 0; j < 4; j++) {
                const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * j));
                const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << (4 * h + j)));
                // q = low 2 bits | hmask bit << 2, 0..7 (the -4 comes from the bsums below)
                const uint8x16_t h0 = vandq_u8(vtstq_u8(hm0, bit), vdupq_n_u8(4));
                const uint8x16_t h1 = vandq_u8(vtstq_u8(hm1, bit), vdupq_n_u8(4));
                const int8x16_t v0 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(q0, sh), vdupq_n_u8(3)), h0));
                const int8x16_t v1 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(q1, sh), vdupq_n_u8(3)), h1));
                const int8_t* ab = a[i].qs + 128 * h + 32 * j;
                const int k = 8 * h + 2 * j;
                sumi += sc[k] * (dot16(v0, vld1q_s8(ab)) - 4 * a[i].bsums[k]);
                sumi += sc[k + 1] * (dot16(v1, vld1q_s8(ab + 16)) - 4 * a[i].bsums[k + 1]);
            }
        }
        sum += a[i].d * h2f(w[i].d) * static_cast<float>(sumi);
    }
    return sum;
}

template <bool FIVE, class Block>
float dot_q45_k(int64_t n, const void* wv, const void* av) {
    const Block* w = static_cast<const Block*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sm[16];  // scales[8], mins[8]
        unpack_scales_mins_k4(w[i].scales, sm);
        int sumi = 0, summ = 0;
        for (int g = 0; g < 4; g++) {
            const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * g), q1 = vld1q_u8(w[i].qs + 32 * g + 16);
            uint8x16_t lo0 = vandq_u8(q0, vdupq_n_u8(0x0F)), lo1 = vandq_u8(q1, vdupq_n_u8(0x0F));
            uint8x16_t hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
            if (FIVE) {
                const uint8_t* qh = reinterpret_cast<const BlockQ5_K*>(&w[i])->qh;
                const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
                const uint8x16_t bl = vdupq_n_u8(static_cast<uint8_t>(1u << (2 * g)));
                const uint8x16_t bh = vdupq_n_u8(static_cast<uint8_t>(1u << (2 * g + 1)));
                const uint8x16_t b4 = vdupq_n_u8(0x10);
                lo0 = vorrq_u8(lo0, vandq_u8(vtstq_u8(h0, bl), b4));
                lo1 = vorrq_u8(lo1, vandq_u8(vtstq_u8(h1, bl), b4));
                hi0 = vorrq_u8(hi0, vandq_u8(vtstq_u8(h0, bh), b4));
                hi1 = vorrq_u8(hi1, vandq_u8(vtstq_u8(h1, bh), b4));
            }
            const int8_t* ab = a[i].qs + 64 * g;
            sumi += sm[2 * g] * dot32(vreinterpretq_s8_u8(lo0), vreinterpretq_s8_u8(lo1), ab);
            sumi += sm[2 * g + 1] * dot32(vreinterpretq_s8_u8(hi0), vreinterpretq_s8_u8(hi1), ab + 32);
        }
        for (int j = 0; j < 8; j++) summ += sm[8 + j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        sum += a[i].d * (h2f(w[i].d) * static_cast<float>(sumi) - h2f(w[i].dmin) * static_cast<float>(summ));
    }
    return sum;
}

float dot_q6_k(int64_t n, const void* wv, const void* av) {
    const BlockQ6_K* w = static_cast<const BlockQ6_K*>(wv);
    const BlockQ8_K* a = static_cast<const BlockQ8_K*>(av);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t* ql = w[i].ql + 64 * h;
            const uint8_t* qh = w[i].qh + 32 * h;
            for (int half = 0; half < 2; half++) {  // l in [16 * half, 16 * half + 16)
                const uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
                const uint8x16_t hb = vld1q_u8(qh + 16 * half);
                const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
                uint8x16_t v[4];
                v[0] = vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4));
                v[1] = vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4));
                v[2] = vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4));
                v[3] = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4));
                for (int c = 0; c < 4; c++) {
                    const int e0 = 128 * h + 32 * c + 16 * half;  // first element of this sub-block
                    const int k = e0 / 16;
                    const int s = dot16(vreinterpretq_s8_u8(v[c]), vld1q_s8(a[i].qs + e0));
                    sumi += w[i].scales[k] * (s - 32 * a[i].bsums[k]);
                }
            }
        }
        sum += a[i].d * h2f(w[i].d) * static_cast<float>(sumi);
    }
    return sum;
}

float dot_f32(int64_t n, const void* wv, const void* av) {
    const float* w = static_cast<const float*>(wv);
    const float* a = static_cast<const float*>(av);
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) acc = vfmaq_f32(acc, vld1q_f32(w + i), vld1q_f32(a + i));
    float s = vaddvq_f32(acc);
    for (; i < n; i++) s += w[i] * a[i];
    return s;
}

float dot_f16(int64_t n, const void* wv, const void* av) {
    const Half* w = static_cast<const Half*>(wv);
    const float* a = static_cast<const float*>(av);
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t wf = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(&w[i].bits)));
        acc = vfmaq_f32(acc, wf, vld1q_f32(a + i));
    }
    float s = vaddvq_f32(acc);
    for (; i < n; i++) s += h2f(w[i]) * a[i];
    return s;
}

float dot_bf16(int64_t n, const void* wv, const void* av) {
    const BFloat16* w = static_cast<const BFloat16*>(wv);
    const float* a = static_cast<const float*>(av);
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t wf = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(&w[i].bits), 16));
        acc = vfmaq_f32(acc, wf, vld1q_f32(a + i));
    }
    float s = vaddvq_f32(acc);
    for (; i < n; i++) s += bf16_to_f32(w[i].bits) * a[i];
    return s;
}

template <float (*Dot)(int64_t, const void*, const void*)>
void vec_dot_rows(int64_t n, const void* w, const void* a, size_t a_stride, int n_act, float* out) {
    for (int t = 0; t < n_act; t++) out[t] = Dot(n, w, static_cast<const char*>(a) + t * a_stride);
}

}  // namespace

VecDotFn vec_dot_neon(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &vec_dot_rows<dot_q4_0>;
        case GgmlType::Q4_1: return &vec_dot_rows<dot_q4_1>;
        case GgmlType::Q5_0: return &vec_dot_rows<dot_q5_0>;
        case GgmlType::Q5_1: return &vec_dot_rows<dot_q5_1>;
        case GgmlType::Q8_0: return &vec_dot_rows<dot_q8_0>;
        case GgmlType::Q2_K: return &vec_dot_rows<dot_q2_k>;
        case GgmlType::Q3_K: return &vec_dot_rows<dot_q3_k>;
        case GgmlType::Q4_K: return &vec_dot_rows<dot_q45_k<false, BlockQ4_K>>;
        case GgmlType::Q5_K: return &vec_dot_rows<dot_q45_k<true, BlockQ5_K>>;
        case GgmlType::Q6_K: return &vec_dot_rows<dot_q6_k>;
        case GgmlType::F32: return &vec_dot_rows<dot_f32>;
        case GgmlType::F16: return &vec_dot_rows<dot_f16>;
        case GgmlType::BF16: return &vec_dot_rows<dot_bf16>;
        default: return nullptr;
    }
}

QuantizeActFn quantize_act_neon(GgmlType) { return nullptr; }

}  // namespace jllm::cpu_detail

#else  // !__aarch64__

namespace jllm::cpu_detail {
VecDotFn vec_dot_neon(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_neon(GgmlType) { return nullptr; }
}  // namespace jllm::cpu_detail

#endif  // __aarch64__
