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
};

// The kernels for the active SIMD level (simd_level_active()); `scalar` forces the reference.
const AttnDotKernels& attn_dot_kernels(bool scalar = false);

}  // namespace jllm
