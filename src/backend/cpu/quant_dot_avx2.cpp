// backend/cpu/quant_dot_avx2.cpp — AVX2 + FMA + F16C activation quantizers and dot products.
// Everything here is compiled for that target by the pragma below (no global -march) and
// reached only through the dispatch table after run-time detection.
//
// Technique: weights are unpacked to unsigned bytes (nibbles, 5/6-bit values) and multiplied
// with the signed int8 activations by vpmaddubsw (pairs summed to int16; the largest pair,
// 2 * 63 * 127, cannot saturate), then vpmaddwd widens to int32 while applying the k-quant
// sub-block scale. Signed x signed (Q8_0) uses |w| x sign(a, w). Offsets (Q4_0's -8, mins)
// come from the activation sums (Q8_1's s, Q8_K's bsums), never from a second pass.
#include <cstring>

#include "backend/cpu/quant_dot_internal.h"
#include "quant/quant_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace jllm::cpu_detail {

namespace {

inline float h2f(Half h) { return _cvtsh_ss(h.bits); }

inline float hsum_ps(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

inline float hsum_ps128(__m128 x) {
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

inline int hsum_epi32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
    return _mm_cvtsi128_si32(x);
}

inline float hmax_ps(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// int32 x 8: sums of u8 x s8 products, 4 adjacent bytes per lane.
inline __m256i dot_us8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// int32 x 8 of u8 x s8 products, each int16 pair weighted by `scale16`.
inline __m256i dot_us8_scaled(__m256i u, __m256i s, __m256i scale16) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

// 32 bits -> 32 bytes, byte j = 0xFF where bit j is set.
inline __m256i bits_to_bytes(const uint8_t* p4) {
    uint32_t x;
    std::memcpy(&x, p4, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2,
                                          2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

// Q4 nibbles of a 32-block: low nibbles are elements 0..15, high nibbles 16..31.
inline __m256i unpack_nibbles_32(const uint8_t* qs16) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs16));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

// ---- activation quantizers (bit-exact with the scalar reference) ----

// Rounds x * id to int32 lanes (round half to even, as nearbyint in the default mode).
inline __m256i round_i32(__m256 x, __m256 id) {
    return _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(x, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Packs 4 x 8 int32 (|v| <= 127) into 32 int8 in element order.
inline __m256i pack_i32x32_to_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline float absmax32(const float* x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8)));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 16)));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 24)));
    return hmax_ps(m);
}

// 32 floats -> 32 int8 at q; *s_lo / *s_hi: int32 lanes summing to the sums of elements
// 0..15 / 16..31.
inline void quantize32(const float* x, float id_s, int8_t* q, __m256i* s_lo, __m256i* s_hi) {
    const __m256 id = _mm256_set1_ps(id_s);
    const __m256i i0 = round_i32(_mm256_loadu_ps(x), id);
    const __m256i i1 = round_i32(_mm256_loadu_ps(x + 8), id);
    const __m256i i2 = round_i32(_mm256_loadu_ps(x + 16), id);
    const __m256i i3 = round_i32(_mm256_loadu_ps(x + 24), id);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), pack_i32x32_to_i8(i0, i1, i2, i3));
    *s_lo = _mm256_add_epi32(i0, i1);
    *s_hi = _mm256_add_epi32(i2, i3);
}

void quantize_q8_0(const float* x, void* y, int64_t n) {
    BlockQ8_0* b = static_cast<BlockQ8_0*>(y);  // [n / 32]
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float d = absmax32(x + i * 32) / 127.0f;
        __m256i s_lo, s_hi;
        quantize32(x + i * 32, d != 0.0f ? 1.0f / d : 0.0f, b[i].qs, &s_lo, &s_hi);
        b[i].d = to_half(d);
    }
}

void quantize_q8_1(const float* x, void* y, int64_t n) {
    BlockQ8_1* b = static_cast<BlockQ8_1*>(y);  // [n / 32]
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const float d = absmax32(x + i * 32) / 127.0f;
        __m256i s_lo, s_hi;
        quantize32(x + i * 32, d != 0.0f ? 1.0f / d : 0.0f, b[i].qs, &s_lo, &s_hi);
        const int sum = hsum_epi32(_mm256_add_epi32(s_lo, s_hi));
        b[i].d = to_half(d);
        b[i].s = to_half(d * static_cast<float>(sum));
    }
}

void quantize_q8_k(const float* x, void* y, int64_t n) {
    BlockQ8_K* b = static_cast<BlockQ8_K*>(y);  // [n / 256]
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float* xb = x + i * QK_K;
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j += 32) {
            const float m = absmax32(xb + j);
            amax = m > amax ? m : amax;  // no std:: templates inside the target region
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK_K; j += 32) {
            __m256i s_lo, s_hi;
            quantize32(xb + j, id, b[i].qs + j, &s_lo, &s_hi);
            b[i].bsums[j / 16] = static_cast<int16_t>(hsum_epi32(s_lo));
            b[i].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_epi32(s_hi));
        }
        b[i].d = d;
    }
}

// ---- 32-element block formats ----

template <int NA>
void dot_q8_0(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(wv);
    const BlockQ8_0* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const char*>(av) + t * as);
    __m256 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    const int64_t nb = n / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i wq = loadu(w[i].qs);
        const __m256i wabs = _mm256_sign_epi8(wq, wq);
        const float dw = h2f(w[i].d);
        for (int t = 0; t < NA; t++) {
            const __m256i p = dot_us8(wabs, _mm256_sign_epi8(loadu(a[t][i].qs), wq));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(a[t][i].d)), acc[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = hsum_ps(acc[t]);
}

// Unsigned-quant 32-block formats against Q8_1: sum = dw*da*sum(q*a) + coef*s_a.
struct FmtQ4_0 {
    using Block = BlockQ4_0;
    static __m256i unpack(const Block& b) { return unpack_nibbles_32(b.qs); }
    static float coef(const Block&, float dw) { return -8.0f * dw; }
};
struct FmtQ4_1 {
    using Block = BlockQ4_1;
    static __m256i unpack(const Block& b) { return unpack_nibbles_32(b.qs); }
    static float coef(const Block& b, float) { return h2f(b.m); }
};
struct FmtQ5_0 {
    using Block = BlockQ5_0;
    static __m256i unpack(const Block& b) {
        return _mm256_or_si256(unpack_nibbles_32(b.qs), _mm256_and_si256(bits_to_bytes(b.qh), _mm256_set1_epi8(0x10)));
    }
    static float coef(const Block&, float dw) { return -16.0f * dw; }
};
struct FmtQ5_1 {
    using Block = BlockQ5_1;
    static __m256i unpack(const Block& b) {
        return _mm256_or_si256(unpack_nibbles_32(b.qs), _mm256_and_si256(bits_to_bytes(b.qh), _mm256_set1_epi8(0x10)));
    }
    static float coef(const Block& b, float) { return h2f(b.m); }
};

template <class F, int NA>
void dot_q_x_q8_1(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    using Block = typename F::Block;
    const Block* w = static_cast<const Block*>(wv);
    const BlockQ8_1* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_1*>(static_cast<const char*>(av) + t * as);
    __m256 acc[NA];
    float off[NA];
    for (int t = 0; t < NA; t++) {
        acc[t] = _mm256_setzero_ps();
        off[t] = 0.0f;
    }
    const int64_t nb = n / 32;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = F::unpack(w[i]);
        const float dw = h2f(w[i].d);
        const float c = F::coef(w[i], dw);
        for (int t = 0; t < NA; t++) {
            const __m256i p = dot_us8(q, loadu(a[t][i].qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(a[t][i].d)), acc[t]);
            off[t] += c * h2f(a[t][i].s);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = hsum_ps(acc[t]) + off[t];
}

// ---- k-quants against Q8_K ----

// (lo 128 bits: s_lo, hi 128 bits: s_hi) as int16.
inline __m256i scale_pair(int16_t s_lo, int16_t s_hi) {
    return _mm256_set_m128i(_mm_set1_epi16(s_hi), _mm_set1_epi16(s_lo));
}

template <int NA>
void dot_q4_k(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ4_K* w = static_cast<const BlockQ4_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m256 acc[NA];
    __m128 accm[NA];
    for (int t = 0; t < NA; t++) {
        acc[t] = _mm256_setzero_ps();
        accm[t] = _mm_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sm[16];  // scales[8], mins[8]
        unpack_scales_mins_k4(w[i].scales, sm);
        const __m128i mins16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
        __m256i sumi[NA];
        for (int t = 0; t < NA; t++) sumi[t] = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            const __m256i q = loadu(w[i].qs + 32 * g);
            const __m256i lo = _mm256_and_si256(q, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i s_lo = _mm256_set1_epi16(sm[2 * g]);
            const __m256i s_hi = _mm256_set1_epi16(sm[2 * g + 1]);
            for (int t = 0; t < NA; t++) {
                const __m256i p_lo = dot_us8_scaled(lo, loadu(a[t][i].qs + 64 * g), s_lo);
                const __m256i p_hi = dot_us8_scaled(hi, loadu(a[t][i].qs + 64 * g + 32), s_hi);
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p_lo, p_hi));
            }
        }
        const float dw = h2f(w[i].d), dmw = h2f(w[i].dmin);
        for (int t = 0; t < NA; t++) {
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(dw * a[t][i].d), acc[t]);
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[t][i].bsums)),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[t][i].bsums + 8)));
            accm[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins16, bs)), _mm_set1_ps(dmw * a[t][i].d), accm[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = hsum_ps(acc[t]) - hsum_ps128(accm[t]);
}

template <int NA>
void dot_q5_k(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ5_K* w = static_cast<const BlockQ5_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m256 acc[NA];
    __m128 accm[NA];
    for (int t = 0; t < NA; t++) {
        acc[t] = _mm256_setzero_ps();
        accm[t] = _mm_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i b4 = _mm256_set1_epi8(0x10);
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sm[16];
        unpack_scales_mins_k4(w[i].scales, sm);
        const __m128i mins16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
        const __m256i hb = loadu(w[i].qh);
        __m256i sumi[NA];
        for (int t = 0; t < NA; t++) sumi[t] = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            const __m256i q = loadu(w[i].qs + 32 * g);
            const __m256i bl = _mm256_set1_epi8(static_cast<char>(1 << (2 * g)));
            const __m256i bh = _mm256_set1_epi8(static_cast<char>(1 << (2 * g + 1)));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4),
                                               _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bl), bl), b4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bh), bh), b4));
            const __m256i s_lo = _mm256_set1_epi16(sm[2 * g]);
            const __m256i s_hi = _mm256_set1_epi16(sm[2 * g + 1]);
            for (int t = 0; t < NA; t++) {
                const __m256i p_lo = dot_us8_scaled(lo, loadu(a[t][i].qs + 64 * g), s_lo);
                const __m256i p_hi = dot_us8_scaled(hi, loadu(a[t][i].qs + 64 * g + 32), s_hi);
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p_lo, p_hi));
            }
        }
        const float dw = h2f(w[i].d), dmw = h2f(w[i].dmin);
        for (int t = 0; t < NA; t++) {
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(dw * a[t][i].d), acc[t]);
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[t][i].bsums)),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[t][i].bsums + 8)));
            accm[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins16, bs)), _mm_set1_ps(dmw * a[t][i].d), accm[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = hsum_ps(acc[t]) - hsum_ps128(accm[t]);
}

template <int NA>
void dot_q6_k(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ6_K* w = static_cast<const BlockQ6_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m256 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2h = _mm256_set1_epi8(0x30);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t* sc = w[i].scales;
        __m256i sumi[NA];
        for (int t = 0; t < NA; t++) sumi[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = loadu(w[i].ql + 64 * h);
            const __m256i ql1 = loadu(w[i].ql + 64 * h + 32);
            const __m256i qh = loadu(w[i].qh + 32 * h);
            __m256i v[4];
            v[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2h));
            v[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2h));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2h));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2h));
            for (int c = 0; c < 4; c++) {
                const __m256i s = scale_pair(sc[8 * h + 2 * c], sc[8 * h + 2 * c + 1]);
                for (int t = 0; t < NA; t++) {
                    sumi[t] = _mm256_add_epi32(sumi[t], dot_us8_scaled(v[c], loadu(a[t][i].qs + 128 * h + 32 * c), s));
                }
            }
        }
        // q was stored +32: subtract 32 * sum_j sc_j * bsum_j.
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
        const float dw = h2f(w[i].d);
        for (int t = 0; t < NA; t++) {
            const __m256i off = _mm256_madd_epi16(sc16, loadu(a[t][i].bsums));
            const __m256i s = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(off, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t][i].d), acc[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = hsum_ps(acc[t]);
}

template <int NA>
void dot_q3_k(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ3_K* w = static_cast<const BlockQ3_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m256 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i b2 = _mm256_set1_epi8(4);
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t sc[16];
        unpack_scales_q3_k(w[i].scales, sc);
        const __m256i hm = loadu(w[i].hmask);
        __m256i sumi[NA];
        for (int t = 0; t < NA; t++) sumi[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = loadu(w[i].qs + 32 * h);
            for (int j = 0; j < 4; j++) {
                const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + j)));
                const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), m3);
                const __m256i v = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), b2));
                const __m256i s = scale_pair(sc[8 * h + 2 * j], sc[8 * h + 2 * j + 1]);
                for (int t = 0; t < NA; t++) {
                    sumi[t] = _mm256_add_epi32(sumi[t], dot_us8_scaled(v, loadu(a[t][i].qs + 128 * h + 32 * j), s));
                }
            }
        }
        // q was stored +4: subtract 4 * sum_j sc_j * bsum_j.
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
        const float dw = h2f(w[i].d);
        for (int t = 0; t < NA; t++) {
            const __m256i off = _mm256_madd_epi16(sc16, loadu(a[t][i].bsums));
            const __m256i s = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(off, 2));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t][i].d), acc[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = hsum_ps(acc[t]);
}

template <int NA>
void dot_q2_k(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ2_K* w = static_cast<const BlockQ2_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m256 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales));
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
        alignas(16) uint8_t sc[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm_and_si128(sb, _mm_set1_epi8(0x0F)));
        __m256i sumi[NA];
        for (int t = 0; t < NA; t++) sumi[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = loadu(w[i].qs + 32 * h);
            for (int j = 0; j < 4; j++) {
                const __m256i v = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), m3);
                const __m256i s = scale_pair(sc[8 * h + 2 * j], sc[8 * h + 2 * j + 1]);
                for (int t = 0; t < NA; t++) {
                    sumi[t] = _mm256_add_epi32(sumi[t], dot_us8_scaled(v, loadu(a[t][i].qs + 128 * h + 32 * j), s));
                }
            }
        }
        const float dw = h2f(w[i].d), dmw = h2f(w[i].dmin);
        for (int t = 0; t < NA; t++) {
            const __m256i mm = _mm256_madd_epi16(mins16, loadu(a[t][i].bsums));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(dw * a[t][i].d), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mm), _mm256_set1_ps(dmw * a[t][i].d), acc[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = hsum_ps(acc[t]);
}

// ---- float weights against f32 activations ----

struct LoadF32 {
    using T = float;
    static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
    static float one(float v) { return v; }
};
struct LoadF16 {
    using T = Half;
    static __m256 load8(const Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
    static float one(Half v) { return h2f(v); }
};
struct LoadBF16 {
    using T = BFloat16;
    static __m256 load8(const BFloat16* p) {
        const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    }
    static float one(BFloat16 v) { return bf16_to_f32(v.bits); }
};

template <class L, int NA>
void dot_float(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    using T = typename L::T;
    const T* w = static_cast<const T*>(wv);
    const float* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const float*>(static_cast<const char*>(av) + t * as);
    __m256 acc0[NA], acc1[NA];
    for (int t = 0; t < NA; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 = L::load8(w + i), w1 = L::load8(w + i + 8);
        for (int t = 0; t < NA; t++) {
            acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a[t] + i), acc0[t]);
            acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a[t] + i + 8), acc1[t]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 w0 = L::load8(w + i);
        for (int t = 0; t < NA; t++) acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a[t] + i), acc0[t]);
    }
    for (int t = 0; t < NA; t++) {
        float s = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));
        for (int64_t j = i; j < n; j++) s += L::one(w[j]) * a[t][j];
        out[t] = s;
    }
}

// Run-time n_act -> compile-time NA.
template <class K>
void by_n_act(int64_t n, const void* w, const void* a, size_t as, int n_act, float* out) {
    switch (n_act) {
        case 1: K::template run<1>(n, w, a, as, out); break;
        case 2: K::template run<2>(n, w, a, as, out); break;
        case 3: K::template run<3>(n, w, a, as, out); break;
        default: K::template run<4>(n, w, a, as, out); break;
    }
}

// Adapters: K::run<NA> for by_n_act.
#define JLLM_K1(NAME, FN)                                                               \
    struct NAME {                                                                       \
        template <int NA>                                                               \
        static void run(int64_t n, const void* w, const void* a, size_t as, float* o) { \
            FN<NA>(n, w, a, as, o);                                                     \
        }                                                                               \
    };
#define JLLM_K2(NAME, FN, ARG)                                                          \
    struct NAME {                                                                       \
        template <int NA>                                                               \
        static void run(int64_t n, const void* w, const void* a, size_t as, float* o) { \
            FN<ARG, NA>(n, w, a, as, o);                                                \
        }                                                                               \
    };
JLLM_K1(KQ8_0, dot_q8_0)
JLLM_K2(KQ4_0, dot_q_x_q8_1, FmtQ4_0)
JLLM_K2(KQ4_1, dot_q_x_q8_1, FmtQ4_1)
JLLM_K2(KQ5_0, dot_q_x_q8_1, FmtQ5_0)
JLLM_K2(KQ5_1, dot_q_x_q8_1, FmtQ5_1)
JLLM_K1(KQ2_K, dot_q2_k)
JLLM_K1(KQ3_K, dot_q3_k)
JLLM_K1(KQ4_K, dot_q4_k)
JLLM_K1(KQ5_K, dot_q5_k)
JLLM_K1(KQ6_K, dot_q6_k)
JLLM_K2(KF32, dot_float, LoadF32)
JLLM_K2(KF16, dot_float, LoadF16)
JLLM_K2(KBF16, dot_float, LoadBF16)
#undef JLLM_K1
#undef JLLM_K2

}  // namespace

}  // namespace jllm::cpu_detail

#pragma GCC pop_options

namespace jllm::cpu_detail {

VecDotFn vec_dot_avx2(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &by_n_act<KQ4_0>;
        case GgmlType::Q4_1: return &by_n_act<KQ4_1>;
        case GgmlType::Q5_0: return &by_n_act<KQ5_0>;
        case GgmlType::Q5_1: return &by_n_act<KQ5_1>;
        case GgmlType::Q8_0: return &by_n_act<KQ8_0>;
        case GgmlType::Q2_K: return &by_n_act<KQ2_K>;
        case GgmlType::Q3_K: return &by_n_act<KQ3_K>;
        case GgmlType::Q4_K: return &by_n_act<KQ4_K>;
        case GgmlType::Q5_K: return &by_n_act<KQ5_K>;
        case GgmlType::Q6_K: return &by_n_act<KQ6_K>;
        case GgmlType::F32: return &by_n_act<KF32>;
        case GgmlType::F16: return &by_n_act<KF16>;
        case GgmlType::BF16: return &by_n_act<KBF16>;
        default: return nullptr;
    }
}

QuantizeActFn quantize_act_avx2(GgmlType act_type) {
    switch (act_type) {
        case GgmlType::Q8_0: return &quantize_q8_0;
        case GgmlType::Q8_1: return &quantize_q8_1;
        case GgmlType::Q8_K: return &quantize_q8_k;
        default: return nullptr;
    }
}

}  // namespace jllm::cpu_detail

#else  // !__x86_64__

namespace jllm::cpu_detail {
VecDotFn vec_dot_avx2(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_avx2(GgmlType) { return nullptr; }
}  // namespace jllm::cpu_detail

#endif  // __x86_64__
