// backend/cpu/attn_dot.h — the inner loops of CPU attention over the KV cache: K/V rows (INT8
// with their scale, or FP16) converted to f32, then Q.K dot products and P.V accumulations of up
// to four queries per pass, f32 accumulation.
// A scalar version, an AVX2/FMA/F16C and an AVX-512 version (NEON on aarch64), chosen once at
// run time.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "core/fp16.h"

namespace jllm {

struct AttnDotKernels {
    // Query(s) against one f32 row (a K or V row converted once per position). Each query's sum
    // runs in the same order whether it goes through the 4-query or the 1-query kernel, so a
    // query's result never depends on the batch or tile it was computed in (greedy output is
    // the same for a prompt prefilled at once or reused from the cache):
    //   out[i] = sum_d q[i][d] * k[d]            (dot4, dot1)
    //   o[i][d] += a[i] * v[d]                   (axpy4, axpy1)
    void (*dot4_f32)(const float* const* q, const float* k, int64_t n, float* out);
    float (*dot1_f32)(const float* q, const float* k, int64_t n);
    void (*axpy4_f32)(const float* a, const float* v, float* const* o, int64_t n);
    void (*axpy1_f32)(float a, const float* v, float* o, int64_t n);
    // o[d] += p[j * p_stride] * v[j][d] for j = 0 .. n_keys-1 in order (v: [n_keys][n]); the
    // same per-element FMA sequence as n_keys axpy1 calls, with o held in registers.
    void (*pv_f32)(const float* p, int64_t p_stride, const float* v, int64_t n_keys, float* o, int64_t n);
    // Softmax steps over one key's scores of n queries (element-wise; every element takes the
    // same path wherever it sits, tails included, so a query's probabilities never depend on
    // how many queries share the call):
    //   m[i] = max(m[i], s[i])                                  (max)
    //   s[i] = exp(s[i] - m[i]); sum[i] += s[i]                 (exp_sum)
    //   s[i] *= r[i]                                            (mul)
    // The SIMD exp is a polynomial within 2 ulp of std::exp (tests: AttnDot.Softmax*); results
    // below e^-87.3 are flushed to 0.
    void (*max_f32)(const float* s, float* m, int64_t n);
    void (*exp_sum_f32)(float* s, const float* m, float* sum, int64_t n);
    void (*mul_f32)(float* s, const float* r, int64_t n);
    // Row conversions: out[d] = scale * v[d] (INT8), out[d] = v[d] (FP16).
    void (*row_i8)(const int8_t* v, float scale, float* out, int64_t n);
    void (*row_f16)(const Half* v, float* out, int64_t n);
};

// The kernels of `level` (Scalar: the reference); a level this build has no kernels for gives
// the reference.
const AttnDotKernels& attn_dot_kernels(SimdLevel level);

}  // namespace jllm
