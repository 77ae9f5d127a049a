// backend/cpu/attn_dot.h — the inner loops of CPU attention over the KV cache: Q.K dot products
// and P.V accumulations against INT8 (scaled by the caller) or FP16 rows, f32 accumulation.
// A scalar version and an AVX2/FMA/F16C version (NEON on aarch64), chosen once at run time.
#pragma once

#include <cstdint>

#include "core/fp16.h"

namespace jllm {

struct AttnDotKernels {
    float (*dot_i8)(const float* q, const int8_t* k, int64_t n);        // sum q[i] * k[i]
    float (*dot_f16)(const float* q, const Half* k, int64_t n);
    void (*axpy_i8)(float a, const int8_t* v, float* out, int64_t n);   // out[i] += a * v[i]
    void (*axpy_f16)(float a, const Half* v, float* out, int64_t n);
    // Four queries against one f32 row (prefill tiles: the row is loaded once for all four):
    //   out[i] = sum_d q[i][d] * k[d]            (dot4)
    //   o[i][d] += a[i] * v[d]                   (axpy4)
    void (*dot4_f32)(const float* const* q, const float* k, int64_t n, float* out);
    void (*axpy4_f32)(const float* a, const float* v, float* const* o, int64_t n);
    // Row conversions: out[d] = scale * v[d] (INT8), out[d] = v[d] (FP16).
    void (*row_i8)(const int8_t* v, float scale, float* out, int64_t n);
    void (*row_f16)(const Half* v, float* out, int64_t n);
};

// The kernels for the active SIMD level (simd_level_active()); `scalar` forces the reference.
const AttnDotKernels& attn_dot_kernels(bool scalar = false);

}  // namespace jllm
