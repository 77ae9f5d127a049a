// backend/cpu/quant_dot_avx512.cpp — AVX-512 (F/BW/VL) + AVX512-VNNI activation quantizers
// and dot products. All 256-bit kernels of quant_dot_x86_kernels.inc are compiled here again
// with vpdpbusd / vpdpwssd; the hot weight types of Q4_K_M / Q8_0 / Q4_x models (Q4_K, Q6_K,
// Q5_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) also get full 512-bit kernels.
//
// 512-bit layout tricks:
//  - Q4_K: one 32-byte group of nibbles is broadcast to both halves of a zmm and the upper half
//    shifted right by 4 (vpsrlvq), so the register holds 64 consecutive elements and matches a
//    single 64-byte activation load; sub-block scales are spread by vpermw.
//  - Q6_K: the 64 low-nibble bytes of a half super-block are one load; the matching 2-bit high
//    parts come from one broadcast 32-byte qh load with per-half shift counts.
//  - Q8_0 / Q4_x: two 32-element blocks per zmm, one scale per 256-bit half.
#include <cstring>

#include "backend/cpu/quant_dot_internal.h"
#include "quant/quant_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace jllm::cpu_detail {
namespace {
// vpermw indices: int16 lane L of the Q4_K scale vector for nibble group g is scale 2g + L/16;
// of the Q6_K scale vector for 64-element part q (= 2 * half + hi) it is scale 4q + L/8.
alignas(64) const int16_t kQ4KScaleIdx[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}};
alignas(64) const int16_t kQ6KScaleIdx[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};
}  // namespace
}  // namespace jllm::cpu_detail

// Every function below carries target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"): GCC through its target pragma, clang
// through an attribute push (clang ignores the GCC pragma).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif
// GCC 12's avx512fintrin.h initialises its "undefined" operands from themselves, which
// -Wall reports at every inlined use (GCC bug 105593, fixed in GCC 13).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace jllm::cpu_detail {

namespace {

#define JLLM_X86_VNNI 1
#include "backend/cpu/quant_dot_x86_kernels.inc"
#undef JLLM_X86_VNNI

inline __m512i loadu512(const void* p) { return _mm512_loadu_si512(p); }

// Two 256-bit halves -> one zmm.
inline __m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Sums of four registers of 16 int32 lanes, folded to 4 lanes each: lanes 4t..4t+3 of the
// result hold a[t] (exact: integer adds). Two rounds of 128-bit quarter shuffles.
inline __m512i fold4_epi32(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
    const __m512i x = _mm512_add_epi32(_mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512i y = _mm512_add_epi32(_mm512_shuffle_i64x2(a2, a3, _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_i64x2(a2, a3, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lanes 4t..4t+3: token t's activation scale of super-block i (zeros past NA).
template <int NA>
inline __m512 token_scales_x4(const BlockQ8_K* const* a, int64_t i) {
    const __m512i ad_idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m128 ad4 = _mm_setr_ps(a[0][i].d, NA > 1 ? a[NA > 1 ? 1 : 0][i].d : 0.0f,
                                   NA > 2 ? a[NA > 2 ? 2 : 0][i].d : 0.0f, NA > 3 ? a[NA > 3 ? 3 : 0][i].d : 0.0f);
    return _mm512_permutexvar_ps(ad_idx, _mm512_castps128_ps512(ad4));
}

// out[t] = (l0 + l1) + (l2 + l3) of token t's four lanes: acc1 for NA == 1, else lanes 4t..4t+3
// of acc.
template <int NA>
inline void store_token_sums(__m128 acc1, __m512 acc, float* out) {
    if constexpr (NA == 1) {
        const __m128 s1 = _mm_add_ps(acc1, _mm_permute_ps(acc1, _MM_SHUFFLE(2, 3, 0, 1)));
        const __m128 s2 = _mm_add_ps(s1, _mm_permute_ps(s1, _MM_SHUFFLE(1, 0, 3, 2)));
        out[0] = _mm_cvtss_f32(s2);
    } else {
        const __m512 s1 = _mm512_add_ps(acc, _mm512_permute_ps(acc, _MM_SHUFFLE(2, 3, 0, 1)));
        const __m512 s2 = _mm512_add_ps(s1, _mm512_permute_ps(s1, _MM_SHUFFLE(1, 0, 3, 2)));
        alignas(64) float r[16];
        _mm512_store_ps(r, s2);
        for (int t = 0; t < NA; t++) out[t] = r[4 * t];
    }
}

// Q4_K: all four tokens share one float accumulator. Per super-block each token's 16-lane
// integer sum (scales applied) and its 8-lane mins sum are folded to 4 lanes (exact), then
// one cvt + FMA per term serves the four tokens: the per-token float work that dominated the
// 4-token kernel (two cvt/FMA pairs and two scalar products per token per super-block, plus
// two horizontal sums per token at the end) is shared. Missing tokens (NA < 4) are zeros, so
// a token's lanes see the same operations in every slot and for every NA: its result does
// not depend on the batch it is in.
template <int NA>
void dot_q4_k_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ4_K* w = static_cast<const BlockQ4_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m512 acc = _mm512_setzero_ps();  // lanes 4t..4t+3: token t
    __m128 acc1 = _mm_setzero_ps();    // NA == 1: token 0's four lanes
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i nib_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sm128 = scales_mins_k4(w[i].scales);                         // scales[8], mins[8]
        const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm128));  // int16 lanes 0..7: scales
        const __m256i mins = mins_dup16(sm128);
        __m512i sumi[4];
        for (int t = 0; t < 4; t++) sumi[t] = _mm512_setzero_si512();
        for (int g = 0; g < 4; g++) {
            const __m512i q = _mm512_broadcast_i64x4(loadu(w[i].qs + 32 * g));
            const __m512i v = _mm512_and_si512(_mm512_srlv_epi64(q, nib_shift), m4);  // elements 64g .. 64g+63
            const __m512i s = _mm512_permutexvar_epi16(loadu512(kQ4KScaleIdx[g]), sc);
            for (int t = 0; t < NA; t++) {
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(v, loadu512(a[t][i].qs + 64 * g)), s);
            }
        }
        const float dw = h2f(w[i].d), ndm = -h2f(w[i].dmin);
        if constexpr (NA == 1) {
            // the same lane arithmetic in 128 bits: one token's folded sums, same factors
            const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi[0]), _mm512_extracti64x4_epi64(sumi[0], 1));
            const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
            const __m256i m8 = _mm256_madd_epi16(mins, loadu(a[0][i].bsums));
            const __m128i m4v = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
            const float ad = a[0][i].d;
            acc1 = _mm_fmadd_ps(_mm_cvtepi32_ps(s4), _mm_set1_ps(ad * dw), acc1);
            acc1 = _mm_fmadd_ps(_mm_cvtepi32_ps(m4v), _mm_set1_ps(ad * ndm), acc1);
        } else {
            __m256i mm[4];  // m_j * (bsum_2j + bsum_2j+1), 8 lanes per token
            for (int t = 0; t < 4; t++) mm[t] = _mm256_setzero_si256();
            for (int t = 0; t < NA; t++) mm[t] = _mm256_madd_epi16(mins, loadu(a[t][i].bsums));
            const __m512i si = fold4_epi32(sumi[0], sumi[1], sumi[2], sumi[3]);
            const __m512i m01 = _mm512_inserti64x4(_mm512_castsi256_si512(mm[0]), mm[1], 1);
            const __m512i m23 = _mm512_inserti64x4(_mm512_castsi256_si512(mm[2]), mm[3], 1);
            const __m512i mi = _mm512_add_epi32(_mm512_shuffle_i64x2(m01, m23, _MM_SHUFFLE(2, 0, 2, 0)),
                                                _mm512_shuffle_i64x2(m01, m23, _MM_SHUFFLE(3, 1, 3, 1)));
            const __m512 ad = token_scales_x4<NA>(a, i);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_mul_ps(ad, _mm512_set1_ps(dw)), acc);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mi), _mm512_mul_ps(ad, _mm512_set1_ps(ndm)), acc);
        }
    }
    store_token_sums<NA>(acc1, acc, out);
}

// Q5_K: as Q4_K, plus the fifth bit: qh is broadcast to both halves once per super-block and
// bit 2g (lower half) / 2g + 1 (upper half) of each byte tested into a byte mask.
template <int NA>
void dot_q5_k_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ5_K* w = static_cast<const BlockQ5_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m512 acc[NA];
    __m256 accm[NA];
    for (int t = 0; t < NA; t++) {
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm256_setzero_ps();
    }
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i b4 = _mm512_set1_epi8(0x10);
    const __m512i nib_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sm128 = scales_mins_k4(w[i].scales);                         // scales[8], mins[8]
        const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm128));  // int16 lanes 0..7: scales
        const __m256i mins = mins_dup16(sm128);
        const __m512i qh = _mm512_broadcast_i64x4(loadu(w[i].qh));
        __m512i sumi[NA];
        for (int t = 0; t < NA; t++) sumi[t] = _mm512_setzero_si512();
        for (int g = 0; g < 4; g++) {
            const __m512i q = _mm512_broadcast_i64x4(loadu(w[i].qs + 32 * g));
            const __m512i bits = join256(_mm256_set1_epi8(static_cast<char>(1 << (2 * g))),
                                         _mm256_set1_epi8(static_cast<char>(1 << (2 * g + 1))));
            const __mmask64 hb = _mm512_test_epi8_mask(qh, bits);
            const __m512i lo4 = _mm512_and_si512(_mm512_srlv_epi64(q, nib_shift), m4);
            const __m512i v = _mm512_mask_add_epi8(lo4, hb, lo4, b4);  // elements 64g .. 64g+63, 0..31
            const __m512i s = _mm512_permutexvar_epi16(loadu512(kQ4KScaleIdx[g]), sc);
            for (int t = 0; t < NA; t++) {
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(v, loadu512(a[t][i].qs + 64 * g)), s);
            }
        }
        const float dw = h2f(w[i].d), dmw = h2f(w[i].dmin);
        for (int t = 0; t < NA; t++) {
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_set1_ps(dw * a[t][i].d), acc[t]);
            const __m256i mm = _mm256_madd_epi16(mins, loadu(a[t][i].bsums));
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm), _mm256_set1_ps(dmw * a[t][i].d), accm[t]);
        }
    }
    for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(acc[t]) - hsum_ps(accm[t]);
}

// Q6_K: the four tokens share one float accumulator as in Q4_K. The +32 offset of the stored
// quants (32 * sum_j sc_j * bsum_j, 8 lanes) is subtracted from the 16-lane integer sum, which
// is then folded to 4 lanes per token (exact), so one cvt + FMA per super-block serves all four.
template <int NA>
void dot_q6_k_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ6_K* w = static_cast<const BlockQ6_K*>(wv);
    const BlockQ8_K* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const char*>(av) + t * as);
    __m512 acc = _mm512_setzero_ps();  // lanes 4t..4t+3: token t
    __m128 acc1 = _mm_setzero_ps();    // NA == 1: token 0's four lanes
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i shl = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);  // qh bits 0-1 / 2-3 -> 4-5
    const __m512i shr = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);  // qh bits 4-5 / 6-7 -> 4-5
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m256i sc256 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[i].scales)));
        const __m512i sc = _mm512_castsi256_si512(sc256);
        __m512i sumi[4];
        for (int t = 0; t < 4; t++) sumi[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m512i ql = loadu512(w[i].ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(loadu(w[i].qh + 32 * h));
            // elements 128h + [0, 64) and 128h + [64, 128), unsigned 0..63
            const __m512i va = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi64(qh, shl), m30));
            const __m512i vb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                               _mm512_and_si512(_mm512_srlv_epi64(qh, shr), m30));
            const __m512i sa = _mm512_permutexvar_epi16(loadu512(kQ6KScaleIdx[2 * h]), sc);
            const __m512i sb = _mm512_permutexvar_epi16(loadu512(kQ6KScaleIdx[2 * h + 1]), sc);
            for (int t = 0; t < NA; t++) {
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(va, loadu512(a[t][i].qs + 128 * h)), sa);
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], _mm512_maddubs_epi16(vb, loadu512(a[t][i].qs + 128 * h + 64)), sb);
            }
        }
        const float dw = h2f(w[i].d);
        // q was stored +32: subtract 32 * sum_j sc_j * bsum_j (8 lanes) from the low half
        for (int t = 0; t < NA; t++) {
            const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc256, loadu(a[t][i].bsums)), 5);
            sumi[t] = _mm512_sub_epi32(sumi[t], _mm512_inserti64x4(_mm512_setzero_si512(), off, 0));
        }
        if constexpr (NA == 1) {
            // the same lane arithmetic in 128 bits
            const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi[0]), _mm512_extracti64x4_epi64(sumi[0], 1));
            const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
            acc1 = _mm_fmadd_ps(_mm_cvtepi32_ps(s4), _mm_set1_ps(a[0][i].d * dw), acc1);
        } else {
            const __m512i si = fold4_epi32(sumi[0], sumi[1], sumi[2], sumi[3]);
            const __m512 ad = token_scales_x4<NA>(a, i);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_mul_ps(ad, _mm512_set1_ps(dw)), acc);
        }
    }
    store_token_sums<NA>(acc1, acc, out);
}

// zmm whose lanes 0..7 are lane 0 of v and lanes 8..15 lane 2 of v.
inline __m512 spread02(__m128 v) {
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

template <int NA>
void dot_q8_0_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(wv);
    const BlockQ8_0* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_0*>(static_cast<const char*>(av) + t * as);
    __m512 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm512_setzero_ps();
    const int64_t nb = n / QK8_0;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i wq = join256(loadu(w[i].qs), loadu(w[i + 1].qs));
        const __m512i wabs = _mm512_abs_epi8(wq);
        const __mmask64 neg = _mm512_movepi8_mask(wq);
        const __m128 dw = head2_ps(&w[i], &w[i + 1]);  // lanes 1, 3: quant bytes, unused
        for (int t = 0; t < NA; t++) {
            __m512i aq = join256(loadu(a[t][i].qs), loadu(a[t][i + 1].qs));
            aq = _mm512_mask_sub_epi8(aq, neg, _mm512_setzero_si512(), aq);  // a * sign(w)
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wabs, aq);
            const __m128 d = _mm_mul_ps(dw, head2_ps(&a[t][i], &a[t][i + 1]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), spread02(d), acc[t]);
        }
    }
    float tail[NA];
    for (int t = 0; t < NA; t++) tail[t] = 0.0f;
    if (i < nb) dot_q8_0<NA>(QK8_0, w + i, a[0] + i, as, tail);
    for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(acc[t]) + tail[t];
}

template <class F, int NA>
void dot_q_x_q8_1_512(int64_t n, const void* wv, const void* av, size_t as, float* out) {
    using Block = typename F::Block;
    const Block* w = static_cast<const Block*>(wv);
    const BlockQ8_1* a[NA];
    for (int t = 0; t < NA; t++) a[t] = reinterpret_cast<const BlockQ8_1*>(static_cast<const char*>(av) + t * as);
    __m512 acc[NA];
    __m128 off[NA];  // lanes 1 and 3 accumulate c * s; lanes 0 and 2 are ignored
    for (int t = 0; t < NA; t++) {
        acc[t] = _mm512_setzero_ps();
        off[t] = _mm_setzero_ps();
    }
    const int64_t nb = n / 32;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = join256(F::unpack(w[i]), F::unpack(w[i + 1]));
        const __m128 ws = wscale2<F>(w[i], w[i + 1]);  // [d0, c0, d1, c1]
        for (int t = 0; t < NA; t++) {
            const __m512i aq = join256(loadu(a[t][i].qs), loadu(a[t][i + 1].qs));
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, aq);
            const __m128 ds = _mm_mul_ps(ws, head2_ps(&a[t][i], &a[t][i + 1]));  // [d0 da0, c0 s0, d1 da1, c1 s1]
            off[t] = _mm_add_ps(off[t], ds);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), spread02(ds), acc[t]);
        }
    }
    float tail[NA];
    for (int t = 0; t < NA; t++) tail[t] = 0.0f;
    if (i < nb) dot_q_x_q8_1<F, NA>(32, w + i, a[0] + i, as, tail);
    for (int t = 0; t < NA; t++) out[t] = _mm512_reduce_add_ps(acc[t]) + sum_lanes13(off[t]) + tail[t];
}

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
JLLM_K1(KQ4_K_512, dot_q4_k_512)
JLLM_K1(KQ5_K_512, dot_q5_k_512)
JLLM_K1(KQ6_K_512, dot_q6_k_512)
JLLM_K1(KQ8_0_512, dot_q8_0_512)
JLLM_K2(KQ4_0_512, dot_q_x_q8_1_512, FmtQ4_0)
JLLM_K2(KQ4_1_512, dot_q_x_q8_1_512, FmtQ4_1)
JLLM_K2(KQ5_0_512, dot_q_x_q8_1_512, FmtQ5_0)
JLLM_K2(KQ5_1_512, dot_q_x_q8_1_512, FmtQ5_1)
#undef JLLM_K1
#undef JLLM_K2

}  // namespace

}  // namespace jllm::cpu_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace jllm::cpu_detail {

VecDotFn vec_dot_avx512(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &by_n_act<KQ4_0_512>;
        case GgmlType::Q4_1: return &by_n_act<KQ4_1_512>;
        case GgmlType::Q5_0: return &by_n_act<KQ5_0_512>;
        case GgmlType::Q5_1: return &by_n_act<KQ5_1_512>;
        case GgmlType::Q8_0: return &by_n_act<KQ8_0_512>;
        case GgmlType::Q2_K: return &by_n_act<KQ2_K>;
        case GgmlType::Q3_K: return &by_n_act<KQ3_K>;
        case GgmlType::Q4_K: return &by_n_act<KQ4_K_512>;
        case GgmlType::Q5_K: return &by_n_act<KQ5_K_512>;
        case GgmlType::Q6_K: return &by_n_act<KQ6_K_512>;
        case GgmlType::F32: return &by_n_act<KF32>;
        case GgmlType::F16: return &by_n_act<KF16>;
        case GgmlType::BF16: return &by_n_act<KBF16>;
        default: return nullptr;
    }
}

QuantizeActFn quantize_act_avx512(GgmlType act_type) {
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
VecDotFn vec_dot_avx512(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_avx512(GgmlType) { return nullptr; }
}  // namespace jllm::cpu_detail

#endif  // __x86_64__
