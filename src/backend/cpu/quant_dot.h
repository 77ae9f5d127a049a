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

// The many-token path of a weight type at a SIMD level (prefill), where the level has one: a
// tile of weight rows is unpacked once into a panel, every token's activation row is packed once
// per call, and the products of rows x tokens come from registers (one weight load serves
// several tokens, one activation load several rows). Per (row, token) the result is bit-identical
// with vec_dot's at the same level: the same exact integer sums per block, the same float
// operations in the same order, so prefill and decode agree.
struct QuantGemm {
    int64_t min_tokens = 0;  // matmul takes this path from this many tokens on
    int rows_per_panel = 0;  // rows packed together: pack_rows / run take 1..rows_per_panel
    // Bytes of one token's packed activations / one weight row's panel, n elements.
    size_t (*act_bytes)(int64_t n) = nullptr;
    size_t (*row_bytes)(int64_t n) = nullptr;
    // One quantized activation row (the kernel's act_type) -> packed (64-byte aligned).
    void (*pack_act)(int64_t n, const void* act_row, void* packed) = nullptr;
    // n_rows weight rows, w_row_bytes apart -> panel [n_rows][row_bytes(n)] (64-byte aligned).
    void (*pack_rows)(int64_t n, const void* w, size_t w_row_bytes, int n_rows, void* panel) = nullptr;
    // y[t * y_stride + r] = dot(row r, token t), r < n_rows, t < n_tokens; packed: n_tokens
    // rows of act_bytes(n).
    void (*run)(int64_t n, const void* panel, int n_rows, const void* packed, int64_t n_tokens, float* y,
                int64_t y_stride) = nullptr;
};

// The few-token path of a weight type at a SIMD level, where the level has one: the same dot
// products as vec_dot, bit for bit, over activation rows repacked once per matmul call instead
// of the quantized rows as stored. Where a level's vec_dot would assemble each block's scales
// from the quantized rows for every weight row it reads (gathers at the block stride), the
// packed rows hold them ready.
struct QuantDotPacked {
    size_t (*act_bytes)(int64_t n) = nullptr;  // one token's packed row (a multiple of 64 bytes)
    // One quantized activation row (the kernel's act_type) -> packed (64-byte aligned).
    void (*pack_act)(int64_t n, const void* act_row, void* packed) = nullptr;
    VecDotFn vec_dot = nullptr;  // as QuantDotKernel::vec_dot; a: packed rows, a_stride apart
};

struct QuantDotKernel {
    GgmlType w_type = GgmlType::F32;
    GgmlType act_type = GgmlType::F32;  // F32, Q8_0, Q8_1 or Q8_K
    int64_t act_block = 1;              // elements per activation block (n must be a multiple
                                        // of both this and the weight block size)
    size_t act_block_bytes = 4;
    QuantizeActFn quantize_act = nullptr;  // nullptr when act_type is F32
    VecDotFn vec_dot = nullptr;
    const QuantGemm* gemm = nullptr;  // nullptr: every batch goes through vec_dot
    const QuantDotPacked* packed = nullptr;  // nullptr: vec_dot reads the quantized rows
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
