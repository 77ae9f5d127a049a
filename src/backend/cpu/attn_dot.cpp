// backend/cpu/attn_dot.cpp — scalar and SIMD attention inner loops (see attn_dot.h).
#include "backend/cpu/attn_dot.h"

#include "backend/cpu/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace jllm {

namespace {

float dot_i8_ref(const float* q, const int8_t* k, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += q[i] * static_cast<float>(k[i]);
    return s;
}
float dot_f16_ref(const float* q, const Half* k, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += q[i] * to_f32(k[i]);
    return s;
}
void axpy_i8_ref(float a, const int8_t* v, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] += a * static_cast<float>(v[i]);
}
void axpy_f16_ref(float a, const Half* v, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] += a * to_f32(v[i]);
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

JLLM_AVX2 float dot_i8_avx2(const float* q, const int8_t* k, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_i8x8(k + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load_i8x8(k + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_i8x8(k + i), a0);
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; ++i) s += q[i] * static_cast<float>(k[i]);
    return s;
}
JLLM_AVX2 float dot_f16_avx2(const float* q, const Half* k, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_f16x8(k + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load_f16x8(k + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_f16x8(k + i), a0);
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; ++i) s += q[i] * to_f32(k[i]);
    return s;
}
JLLM_AVX2 void axpy_i8_avx2(float a, const int8_t* v, float* out, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, load_i8x8(v + i), _mm256_loadu_ps(out + i)));
    }
    for (; i < n; ++i) out[i] += a * static_cast<float>(v[i]);
}
JLLM_AVX2 void axpy_f16_avx2(float a, const Half* v, float* out, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, load_f16x8(v + i), _mm256_loadu_ps(out + i)));
    }
    for (; i < n; ++i) out[i] += a * to_f32(v[i]);
}
#endif

#if defined(__aarch64__)
float dot_i8_neon(const float* q, const int8_t* k, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const int16x8_t k16 = vmovl_s8(vld1_s8(k + i));
        acc = vfmaq_f32(acc, vld1q_f32(q + i), vcvtq_f32_s32(vmovl_s16(vget_low_s16(k16))));
        acc = vfmaq_f32(acc, vld1q_f32(q + i + 4), vcvtq_f32_s32(vmovl_s16(vget_high_s16(k16))));
    }
    float s = vaddvq_f32(acc);
    for (; i < n; ++i) s += q[i] * static_cast<float>(k[i]);
    return s;
}
float dot_f16_neon(const float* q, const Half* k, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float16x4_t h = vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(k + i)));
        acc = vfmaq_f32(acc, vld1q_f32(q + i), vcvt_f32_f16(h));
    }
    float s = vaddvq_f32(acc);
    for (; i < n; ++i) s += q[i] * to_f32(k[i]);
    return s;
}
void axpy_i8_neon(float a, const int8_t* v, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const int16x8_t v16 = vmovl_s8(vld1_s8(v + i));
        vst1q_f32(out + i, vfmaq_n_f32(vld1q_f32(out + i), vcvtq_f32_s32(vmovl_s16(vget_low_s16(v16))), a));
        vst1q_f32(out + i + 4, vfmaq_n_f32(vld1q_f32(out + i + 4), vcvtq_f32_s32(vmovl_s16(vget_high_s16(v16))), a));
    }
    for (; i < n; ++i) out[i] += a * static_cast<float>(v[i]);
}
void axpy_f16_neon(float a, const Half* v, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float16x4_t h = vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(v + i)));
        vst1q_f32(out + i, vfmaq_n_f32(vld1q_f32(out + i), vcvt_f32_f16(h), a));
    }
    for (; i < n; ++i) out[i] += a * to_f32(v[i]);
}
#endif

const AttnDotKernels kScalar = {dot_i8_ref, dot_f16_ref, axpy_i8_ref, axpy_f16_ref};
#if defined(__x86_64__)
const AttnDotKernels kAvx2 = {dot_i8_avx2, dot_f16_avx2, axpy_i8_avx2, axpy_f16_avx2};
#endif
#if defined(__aarch64__)
const AttnDotKernels kNeon = {dot_i8_neon, dot_f16_neon, axpy_i8_neon, axpy_f16_neon};
#endif

}  // namespace

const AttnDotKernels& attn_dot_kernels(bool scalar) {
    if (scalar) return kScalar;
    const SimdLevel level = simd_level_active();
#if defined(__x86_64__)
    if (level == SimdLevel::Avx2 || level == SimdLevel::Avx512) return kAvx2;
#endif
#if defined(__aarch64__)
    if (level == SimdLevel::Neon) return kNeon;
#endif
    (void)level;
    return kScalar;
}

}  // namespace jllm
