// backend/cuda/gemv_q8.cuh — what the two dp4a decode GEMVs share: the block size, the int8 dot
// of 16 weights with 16 activation bytes, the dispatch on the token count, and the tiled GEMV's
// entry points (gemv_q8_tiled.cu),
// which launch_gemv_q8 and launch_gemv_q8_multi (gemv_q8.cu) dispatch to.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cuda/chunk_q8.cuh"
#include "backend/cuda/cuda_ops.h"

namespace jllm {
namespace cuda {

// Warps per block of the row-wise dp4a GEMV, and the tiled one's usual block (four 8-row groups).
constexpr int GEMV_Q8_WARPS = 4;

// acc + the dot product of 16 int8 weights (4 words at q) and 16 activation bytes.
__host__ __device__ __forceinline__ int dot4(const uint32_t* q, uint4 x, int acc) {
    return dp4a_i8(q[3], x.w, dp4a_i8(q[2], x.z, dp4a_i8(q[1], x.y, dp4a_i8(q[0], x.x, acc))));
}

// f(std::integral_constant<int, N>) for n_tok = N in 1..GEMV_MAX_TOKENS (4): the kernels'
// token count as a template argument.
template <class F>
void with_tokens(int n_tok, F&& f) {
    static_assert(GEMV_MAX_TOKENS == 4, "with_tokens dispatches 1..4 tokens");
    switch (n_tok) {
        case 1: f(std::integral_constant<int, 1>{}); break;
        case 2: f(std::integral_constant<int, 2>{}); break;
        case 3: f(std::integral_constant<int, 3>{}); break;
        default: f(std::integral_constant<int, 4>{}); break;
    }
}

// Segment types a launch of the tiled GEMV takes: one type, or Q4_K segments and a last one of
// Q6_K (Q4_K_M's Q, K and V where V has more bits).
bool tiled_types_mix(const GgmlType* types, int n_seg);

// n_seg matrices (Store; types: tiled_types_mix), or one (Store, Add, SwiGLU with w2), on the
// tiled layout. yq (one matrix): y also quantized to 8 bits there — by the product's blocks for
// a SwiGLU (tiled_yq_mode; by halves only where yq_halves), else by kernel_quantize_act after it.
void gemv_q8_tiled(const GgmlType* types, int n_seg, const void* const* w, const void* w2, const int64_t* rows,
                   int64_t cols, const void* xq, int n_tok, float* const* y, MatOut out, void* yq, bool yq_halves,
                   void* stream);

}  // namespace cuda
}  // namespace jllm
