// backend/cpu/quant_dot.h — the CPU's quantized dot products: activation quantization
// (f32 row -> 8-bit blocks) and weight-row x activation-row dot products for every weight type,
// with one implementation per SIMD level and a run-time dispatch table keyed by GgmlType.
//
// Activation format per weight type (what `QuantDotKernel::act_type` says):
//   Q8_0 weights               -> Q8_0 activations (BlockQ8_0, 32 per block)
//   Q4_0, Q4_1, Q5_0, Q5_1     -> Q8_1 activations (BlockQ8_1: d and s = d * sum(q), so the
//                                 weight's offset/min term costs one multiply per block)
//   Q2_K .. Q6_K               -> Q8_K activations (BlockQ8_K: f32 d, per-16 sums for the mins)
//   F32, F16, BF16             -> F32 activations (no quantization)
// Activation quantizers round to nearest even and keep q in [-127, 127] (never -128), so the
// signed-int8 SIMD tricks cannot overflow.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "quant/quant_types.h"

namespace jllm {

// Quantizes `n` floats (a multiple of the activation block size) into activation blocks.
using QuantizeActFn = void (*)(const float* x, void* y, int64_t n);

// out[t] = dot(w, a_t) for t in [0, n_act), n_act in 1..VEC_DOT_MAX_ACT.
//   w: one weight row of n elements                   [n] in the weight type
//   a: n_act activation rows, a_stride bytes apart    [n_act][n] in the activation type
//   out: [n_act]
// Several activation rows per call let one decode of the weight row serve several tokens
// (prefill); n_act = 1 is the decode case.
using VecDotFn = void (*)(int64_t n, const void* w, const void* a, size_t a_stride, int n_act,
                          float* out);
constexpr int VEC_DOT_MAX_ACT = 4;

struct QuantDotKernel {
    GgmlType w_type = GgmlType::F32;
    GgmlType act_type = GgmlType::F32;  // F32, Q8_0, Q8_1 or Q8_K
    int64_t act_block = 1;              // elements per activation block (n must be a multiple
                                        // of both this and the weight block size)
    size_t act_block_bytes = 4;
    QuantizeActFn quantize_act = nullptr;  // nullptr when act_type is F32
    VecDotFn vec_dot = nullptr;
};

// The kernel for `w_type` at `level`; nullptr when the level is not supported by this CPU or
// the type has no dot product.
const QuantDotKernel* quant_dot_kernel(GgmlType w_type, SimdLevel level);

// Bytes of one activation row of n elements for weights of `w_type`.
size_t act_row_size(GgmlType w_type, int64_t n);

// ---- scalar reference implementations (the oracle of every SIMD path) ----
void quantize_act_q8_0_ref(const float* x, void* y, int64_t n);  // -> BlockQ8_0[n / 32]
void quantize_act_q8_1_ref(const float* x, void* y, int64_t n);  // -> BlockQ8_1[n / 32]
void quantize_act_q8_k_ref(const float* x, void* y, int64_t n);  // -> BlockQ8_K[n / 256]

}  // namespace jllm
