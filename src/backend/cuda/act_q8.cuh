// backend/cuda/act_q8.cuh — 8-bit activations (cuda_ops.h act_q8) in device code: where the
// scales start, and the warp quantizers of one 32-value block or of one 16-value half, shared by
// every kernel that writes the layout (launch_quantize_act, the RMSNorm, the attention output,
// the tiled SwiGLU GEMV), so each writes the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace jllm {
namespace cuda {

// Layout (cuda_ops.h act_q8): int8 q [n_tok][cols], then at the next 16-byte boundary one
// float4 (d0, d0 * sum(q[0..15]), d1, d1 * sum(q[16..31])) per 32-value block.
__host__ __device__ __forceinline__ size_t act_q8_scales_at(int n_tok, int64_t cols) {
    return (static_cast<size_t>(n_tok) * static_cast<size_t>(cols) + 15) & ~static_cast<size_t>(15);
}

#ifdef __CUDACC__
// The activations' 8-bit code (act_q8 and act_q8k alike): for a scale d = amax / 127, the inverse
// the values are multiplied by (0 where amax = 0: every code 0), and q = round-half-even(v * id)
// clamped to +-127.
__device__ __forceinline__ float q8_inverse(float d) { return d > 0.0f ? 1.0f / d : 0.0f; }
__device__ __forceinline__ int q8_code(float v, float id) {
    return static_cast<int>(fmaxf(-127.0f, fminf(127.0f, rintf(v * id))));
}

// The warp quantizes one block: lane l holds value l; writes q[0..31] and the block's float4.
__device__ __forceinline__ void quantize_block_warp(float v, int lane, int8_t* q, float4* s) {
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int qi = q8_code(v, q8_inverse(d));
    q[lane] = static_cast<int8_t>(qi);
    int sh = qi;  // sums within each half-warp
    JLLM_UNROLL
    for (int o = 8; o > 0; o >>= 1) sh += __shfl_xor_sync(0xffffffffu, sh, o);
    const int s_hi = __shfl_sync(0xffffffffu, sh, 16);
    if (lane == 0) *s = make_float4(d, d * static_cast<float>(sh), d, d * static_cast<float>(s_hi));
}

// One half (16 values) of an act_q8 block on its own scale (cuda_ops.h: quantized by halves):
// lanes 0-15 hold the values (lanes 16-31 pass 0 and store nothing); half h (0: values 0-15 of
// the block, 1: 16-31) writes its scale and sum into s = the block's float4.
__device__ __forceinline__ void quantize_half_warp(float v, int lane, int h, int8_t* q, float4* s) {
    float amax = fabsf(v);
    JLLM_UNROLL
    for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f;
    const int qi = q8_code(v, q8_inverse(d));
    int sh = qi;
    JLLM_UNROLL
    for (int o = 8; o > 0; o >>= 1) sh += __shfl_xor_sync(0xffffffffu, sh, o);
    if (lane < 16) q[lane] = static_cast<int8_t>(qi);
    if (lane == 0) reinterpret_cast<float2*>(s)[h] = make_float2(d, d * static_cast<float>(sh));
}
#endif

}  // namespace cuda
}  // namespace jllm
