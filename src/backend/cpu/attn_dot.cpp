// backend/cpu/attn_dot.cpp — scalar and SIMD attention inner loops (see attn_dot.h).
#include "backend/cpu/attn_dot.h"

#include "backend/cpu/cpu_features.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace jllm {

namespace {

void dot4_f32_ref(const float* const* q, const float* k, int64_t n, float* out) {
    for (int i = 0; i < 4; ++i) {
        float s = 0.0f;
        for (int64_t d = 0; d < n; ++d) s = std::fma(q[i][d], k[d], s);
        out[i] = s;
    }
}
float dot1_f32_ref(const float* q, const float* k, int64_t n) {
    float s = 0.0f;
    for (int64_t d = 0; d < n; ++d) s = std::fma(q[d], k[d], s);
    return s;
}
void axpy1_f32_ref(float a, const float* v, float* o, int64_t n) {
    for (int64_t d = 0; d < n; ++d) o[d] = std::fma(a, v[d], o[d]);
}
void axpy4_f32_ref(const float* a, const float* v, float* const* o, int64_t n) {
    for (int i = 0; i < 4; ++i) {
        for (int64_t d = 0; d < n; ++d) o[i][d] = std::fma(a[i], v[d], o[i][d]);
    }
}

// P.V over a chunk of keys as axpy1 calls: the scalar, AVX2 and NEON versions.
template <void (*AXPY1)(float, const float*, float*, int64_t)>
void pv_f32_by_axpy(const float* p, int64_t ps, const float* v, int64_t nk, float* o, int64_t n) {
    for (int64_t j = 0; j < nk; ++j) AXPY1(p[j * ps], v + j * n, o, n);
}

void max_f32_ref(const float* s, float* m, int64_t n) {
    for (int64_t i = 0; i < n; ++i) m[i] = std::max(m[i], s[i]);
}
void exp_sum_f32_ref(float* s, const float* m, float* sum, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        s[i] = std::exp(s[i] - m[i]);
        sum[i] += s[i];
    }
}
void mul_f32_ref(float* s, const float* r, int64_t n) {
    for (int64_t i = 0; i < n; ++i) s[i] *= r[i];
}

// exp(x) for the SIMD levels: x = k ln2 + r with |r| <= ln2/2 (k = nearest integer of x/ln2,
// ln2 in two parts so r is exact to ~2^-35), e^r by its degree-7 Taylor polynomial (truncation
// below 5e-9 relative), times 2^k built in the exponent field. x is clamped to [-87.3, 88.0]
// so 2^k stays a normal float; inputs below -87.3 give 0.
constexpr float kExpLo = -87.3f, kExpHi = 88.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860682030941723e-6f;
constexpr float kExpC[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};

void row_i8_ref(const int8_t* v, float scale, float* out, int64_t n) {
    for (int64_t d = 0; d < n; ++d) out[d] = scale * static_cast<float>(v[d]);
}
void row_f16_ref(const Half* v, float* out, int64_t n) {
    for (int64_t d = 0; d < n; ++d) out[d] = to_f32(v[d]);
}

#if defined(__x86_64__)
#define JLLM_AVX2 __attribute__((target("avx2,fma,f16c")))

JLLM_AVX2 inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}
JLLM_AVX2 inline __m256 load_i8x8(const int8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}
JLLM_AVX2 inline __m256 load_f16x8(const Half* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

JLLM_AVX2 void dot4_f32_avx2(const float* const* q, const float* k, int64_t n, float* out) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 kv = _mm256_loadu_ps(k + d);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q[0] + d), kv, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q[1] + d), kv, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q[2] + d), kv, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q[3] + d), kv, a3);
    }
    float r[4] = {hsum256(a0), hsum256(a1), hsum256(a2), hsum256(a3)};
    for (; d < n; ++d) {
        for (int i = 0; i < 4; ++i) r[i] = std::fma(q[i][d], k[d], r[i]);
    }
    for (int i = 0; i < 4; ++i) out[i] = r[i];
}
// One lane of dot4_f32_avx2, in the same order.
JLLM_AVX2 float dot1_f32_avx2(const float* q, const float* k, int64_t n) {
    __m256 a0 = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a0);
    float r = hsum256(a0);
    for (; d < n; ++d) r = std::fma(q[d], k[d], r);
    return r;
}
// One lane of axpy4_f32_avx2, in the same order.
JLLM_AVX2 void axpy1_f32_avx2(float a, const float* v, float* o, int64_t n) {
    const __m256 s0 = _mm256_set1_ps(a);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(s0, _mm256_loadu_ps(v + d), _mm256_loadu_ps(o + d)));
    }
    for (; d < n; ++d) o[d] = std::fma(a, v[d], o[d]);
}
JLLM_AVX2 void axpy4_f32_avx2(const float* a, const float* v, float* const* o, int64_t n) {
    const __m256 s0 = _mm256_set1_ps(a[0]), s1 = _mm256_set1_ps(a[1]), s2 = _mm256_set1_ps(a[2]),
                 s3 = _mm256_set1_ps(a[3]);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 vv = _mm256_loadu_ps(v + d);
        _mm256_storeu_ps(o[0] + d, _mm256_fmadd_ps(s0, vv, _mm256_loadu_ps(o[0] + d)));
        _mm256_storeu_ps(o[1] + d, _mm256_fmadd_ps(s1, vv, _mm256_loadu_ps(o[1] + d)));
        _mm256_storeu_ps(o[2] + d, _mm256_fmadd_ps(s2, vv, _mm256_loadu_ps(o[2] + d)));
        _mm256_storeu_ps(o[3] + d, _mm256_fmadd_ps(s3, vv, _mm256_loadu_ps(o[3] + d)));
    }
    for (; d < n; ++d) {
        for (int i = 0; i < 4; ++i) o[i][d] = std::fma(a[i], v[d], o[i][d]);
    }
}
JLLM_AVX2 void row_i8_avx2(const int8_t* v, float scale, float* out, int64_t n) {
    const __m256 s = _mm256_set1_ps(scale);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(s, load_i8x8(v + d)));
    for (; d < n; ++d) out[d] = scale * static_cast<float>(v[d]);
}
JLLM_AVX2 void row_f16_avx2(const Half* v, float* out, int64_t n) {
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(out + d, load_f16x8(v + d));
    for (; d < n; ++d) out[d] = to_f32(v[d]);
}

JLLM_AVX2 inline __m256 exp_avx2(__m256 x) {
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), xc);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kExpC[7]);
    for (int c = 6; c >= 0; --c) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC[c]));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_LT_OQ), y);
}
// Lanes [0, n) of a tail (n < 8) for vmaskmov.
JLLM_AVX2 inline __m256i tail_mask8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
JLLM_AVX2 void max_f32_avx2(const float* s, float* m, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(m + i, _mm256_max_ps(_mm256_loadu_ps(s + i), _mm256_loadu_ps(m + i)));
    if (i < n) {
        const __m256i k = tail_mask8(n - i);
        _mm256_maskstore_ps(m + i, k, _mm256_max_ps(_mm256_maskload_ps(s + i, k), _mm256_maskload_ps(m + i, k)));
    }
}
JLLM_AVX2 void exp_sum_f32_avx2(float* s, const float* m, float* sum, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + i), _mm256_loadu_ps(m + i)));
        _mm256_storeu_ps(s + i, e);
        _mm256_storeu_ps(sum + i, _mm256_add_ps(_mm256_loadu_ps(sum + i), e));
    }
    if (i < n) {
        const __m256i k = tail_mask8(n - i);
        const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(s + i, k), _mm256_maskload_ps(m + i, k)));
        _mm256_maskstore_ps(s + i, k, e);
        _mm256_maskstore_ps(sum + i, k, _mm256_add_ps(_mm256_maskload_ps(sum + i, k), e));
    }
}
JLLM_AVX2 void mul_f32_avx2(float* s, const float* r, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), _mm256_loadu_ps(r + i)));
    if (i < n) {
        const __m256i k = tail_mask8(n - i);
        _mm256_maskstore_ps(s + i, k, _mm256_mul_ps(_mm256_maskload_ps(s + i, k), _mm256_maskload_ps(r + i, k)));
    }
}

// AVX-512: the same loops 16 lanes wide. axpy and the row conversions are element-wise, so
// they give the AVX2 results bit for bit; dot1/dot4 sum 16 lanes (dot1 is dot4's lane).
// GCC 12's avx512fintrin.h initialises its "undefined" operands from themselves, which -Wall
// reports at every inlined use (GCC bug 105593, fixed in GCC 13).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define JLLM_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

JLLM_AVX512 void dot4_f32_avx512(const float* const* q, const float* k, int64_t n, float* out) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) {
        const __m512 kv = _mm512_loadu_ps(k + d);
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q[0] + d), kv, a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q[1] + d), kv, a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q[2] + d), kv, a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q[3] + d), kv, a3);
    }
    float r[4] = {_mm512_reduce_add_ps(a0), _mm512_reduce_add_ps(a1), _mm512_reduce_add_ps(a2),
                  _mm512_reduce_add_ps(a3)};
    for (; d < n; ++d) {
        for (int i = 0; i < 4; ++i) r[i] = std::fma(q[i][d], k[d], r[i]);
    }
    for (int i = 0; i < 4; ++i) out[i] = r[i];
}
JLLM_AVX512 float dot1_f32_avx512(const float* q, const float* k, int64_t n) {
    __m512 a0 = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(k + d), a0);
    float r = _mm512_reduce_add_ps(a0);
    for (; d < n; ++d) r = std::fma(q[d], k[d], r);
    return r;
}
JLLM_AVX512 void axpy1_f32_avx512(float a, const float* v, float* o, int64_t n) {
    const __m512 s0 = _mm512_set1_ps(a);
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) {
        _mm512_storeu_ps(o + d, _mm512_fmadd_ps(s0, _mm512_loadu_ps(v + d), _mm512_loadu_ps(o + d)));
    }
    for (; d < n; ++d) o[d] = std::fma(a, v[d], o[d]);
}
JLLM_AVX512 void axpy4_f32_avx512(const float* a, const float* v, float* const* o, int64_t n) {
    const __m512 s0 = _mm512_set1_ps(a[0]), s1 = _mm512_set1_ps(a[1]), s2 = _mm512_set1_ps(a[2]),
                 s3 = _mm512_set1_ps(a[3]);
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) {
        const __m512 vv = _mm512_loadu_ps(v + d);
        _mm512_storeu_ps(o[0] + d, _mm512_fmadd_ps(s0, vv, _mm512_loadu_ps(o[0] + d)));
        _mm512_storeu_ps(o[1] + d, _mm512_fmadd_ps(s1, vv, _mm512_loadu_ps(o[1] + d)));
        _mm512_storeu_ps(o[2] + d, _mm512_fmadd_ps(s2, vv, _mm512_loadu_ps(o[2] + d)));
        _mm512_storeu_ps(o[3] + d, _mm512_fmadd_ps(s3, vv, _mm512_loadu_ps(o[3] + d)));
    }
    for (; d < n; ++d) {
        for (int i = 0; i < 4; ++i) o[i][d] = std::fma(a[i], v[d], o[i][d]);
    }
}
// Eight zmm of o (128 elements) stay in registers across the chunk's keys.
JLLM_AVX512 void pv_f32_avx512(const float* p, int64_t ps, const float* v, int64_t nk, float* o, int64_t n) {
    int64_t d = 0;
    for (; d + 128 <= n; d += 128) {
        __m512 acc[8];
        for (int i = 0; i < 8; ++i) acc[i] = _mm512_loadu_ps(o + d + 16 * i);
        for (int64_t j = 0; j < nk; ++j) {
            const __m512 a = _mm512_set1_ps(p[j * ps]);
            const float* vj = v + j * n + d;
            for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(a, _mm512_loadu_ps(vj + 16 * i), acc[i]);
        }
        for (int i = 0; i < 8; ++i) _mm512_storeu_ps(o + d + 16 * i, acc[i]);
    }
    for (; d + 16 <= n; d += 16) {
        __m512 acc = _mm512_loadu_ps(o + d);
        for (int64_t j = 0; j < nk; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j * ps]), _mm512_loadu_ps(v + j * n + d), acc);
        _mm512_storeu_ps(o + d, acc);
    }
    for (; d < n; ++d) {
        float acc = o[d];
        for (int64_t j = 0; j < nk; ++j) acc = std::fma(p[j * ps], v[j * n + d], acc);
        o[d] = acc;
    }
}
// The same exp as exp_avx2, 16 lanes; tails through masked loads and stores.
JLLM_AVX512 inline __m512 exp_avx512(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), xc);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kExpC[7]);
    for (int c = 6; c >= 0; --c) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC[c]));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    const __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_NLT_UQ), y);
}
JLLM_AVX512 inline __mmask16 tail_mask16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
JLLM_AVX512 void max_f32_avx512(const float* s, float* m, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask16(n - i);
        _mm512_mask_storeu_ps(m + i, k, _mm512_max_ps(_mm512_maskz_loadu_ps(k, s + i), _mm512_maskz_loadu_ps(k, m + i)));
    }
}
JLLM_AVX512 void exp_sum_f32_avx512(float* s, const float* m, float* sum, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask16(n - i);
        const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), _mm512_maskz_loadu_ps(k, m + i)));
        _mm512_mask_storeu_ps(s + i, k, e);
        _mm512_mask_storeu_ps(sum + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, sum + i), e));
    }
}
JLLM_AVX512 void mul_f32_avx512(float* s, const float* r, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask16(n - i);
        _mm512_mask_storeu_ps(s + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + i), _mm512_maskz_loadu_ps(k, r + i)));
    }
}
JLLM_AVX512 void row_i8_avx512(const int8_t* v, float scale, float* out, int64_t n) {
    const __m512 s = _mm512_set1_ps(scale);
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + d));
        _mm512_storeu_ps(out + d, _mm512_mul_ps(s, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b))));
    }
    for (; d < n; ++d) out[d] = scale * static_cast<float>(v[d]);
}
JLLM_AVX512 void row_f16_avx512(const Half* v, float* out, int64_t n) {
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) {
        _mm512_storeu_ps(out + d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + d))));
    }
    for (; d < n; ++d) out[d] = to_f32(v[d]);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#if defined(__aarch64__)
void dot4_f32_neon(const float* const* q, const float* k, int64_t n, float* out) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t d = 0;
    for (; d + 4 <= n; d += 4) {
        const float32x4_t kv = vld1q_f32(k + d);
        a0 = vfmaq_f32(a0, vld1q_f32(q[0] + d), kv);
        a1 = vfmaq_f32(a1, vld1q_f32(q[1] + d), kv);
        a2 = vfmaq_f32(a2, vld1q_f32(q[2] + d), kv);
        a3 = vfmaq_f32(a3, vld1q_f32(q[3] + d), kv);
    }
    float r[4] = {vaddvq_f32(a0), vaddvq_f32(a1), vaddvq_f32(a2), vaddvq_f32(a3)};
    for (; d < n; ++d) {
        for (int i = 0; i < 4; ++i) r[i] = std::fma(q[i][d], k[d], r[i]);
    }
    for (int i = 0; i < 4; ++i) out[i] = r[i];
}
float dot1_f32_neon(const float* q, const float* k, int64_t n) {
    float32x4_t a0 = vdupq_n_f32(0.0f);
    int64_t d = 0;
    for (; d + 4 <= n; d += 4) a0 = vfmaq_f32(a0, vld1q_f32(q + d), vld1q_f32(k + d));
    float r = vaddvq_f32(a0);
    for (; d < n; ++d) r = std::fma(q[d], k[d], r);
    return r;
}
void axpy1_f32_neon(float a, const float* v, float* o, int64_t n) {
    int64_t d = 0;
    for (; d + 4 <= n; d += 4) vst1q_f32(o + d, vfmaq_n_f32(vld1q_f32(o + d), vld1q_f32(v + d), a));
    for (; d < n; ++d) o[d] = std::fma(a, v[d], o[d]);
}
void axpy4_f32_neon(const float* a, const float* v, float* const* o, int64_t n) {
    int64_t d = 0;
    for (; d + 4 <= n; d += 4) {
        const float32x4_t vv = vld1q_f32(v + d);
        for (int i = 0; i < 4; ++i) vst1q_f32(o[i] + d, vfmaq_n_f32(vld1q_f32(o[i] + d), vv, a[i]));
    }
    for (; d < n; ++d) {
        for (int i = 0; i < 4; ++i) o[i][d] = std::fma(a[i], v[d], o[i][d]);
    }
}
void row_i8_neon(const int8_t* v, float scale, float* out, int64_t n) {
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        const int16x8_t v16 = vmovl_s8(vld1_s8(v + d));
        vst1q_f32(out + d, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(v16))), scale));
        vst1q_f32(out + d + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(v16))), scale));
    }
    for (; d < n; ++d) out[d] = scale * static_cast<float>(v[d]);
}
void row_f16_neon(const Half* v, float* out, int64_t n) {
    int64_t d = 0;
    for (; d + 4 <= n; d += 4) {
        vst1q_f32(out + d, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(v + d)))));
    }
    for (; d < n; ++d) out[d] = to_f32(v[d]);
}
#endif

const AttnDotKernels kScalar = {dot4_f32_ref,  dot1_f32_ref, axpy4_f32_ref,
                                axpy1_f32_ref, pv_f32_by_axpy<axpy1_f32_ref>,
                                max_f32_ref,   exp_sum_f32_ref, mul_f32_ref,
                                row_i8_ref,    row_f16_ref};
#if defined(__x86_64__)
const AttnDotKernels kAvx2 = {dot4_f32_avx2,  dot1_f32_avx2, axpy4_f32_avx2,
                              axpy1_f32_avx2, pv_f32_by_axpy<axpy1_f32_avx2>,
                              max_f32_avx2,   exp_sum_f32_avx2, mul_f32_avx2,
                              row_i8_avx2,    row_f16_avx2};
const AttnDotKernels kAvx512 = {dot4_f32_avx512,  dot1_f32_avx512, axpy4_f32_avx512,
                                axpy1_f32_avx512, pv_f32_avx512,   max_f32_avx512,
                                exp_sum_f32_avx512, mul_f32_avx512, row_i8_avx512,
                                row_f16_avx512};
#endif
#if defined(__aarch64__)
const AttnDotKernels kNeon = {dot4_f32_neon,  dot1_f32_neon, axpy4_f32_neon,
                              axpy1_f32_neon, pv_f32_by_axpy<axpy1_f32_neon>,
                              max_f32_ref,    exp_sum_f32_ref, mul_f32_ref,
                              row_i8_neon,    row_f16_neon};
#endif

}  // namespace

const AttnDotKernels& attn_dot_kernels(SimdLevel level) {
#if defined(__x86_64__)
    if (level == SimdLevel::Avx512) return kAvx512;
    if (level == SimdLevel::Avx2) return kAvx2;
#endif
#if defined(__aarch64__)
    if (level == SimdLevel::Neon) return kNeon;
#endif
    (void)level;
    return kScalar;
}

}  // namespace jllm
