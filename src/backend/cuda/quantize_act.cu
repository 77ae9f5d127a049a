// backend/cuda/quantize_act.cu — 8-bit activations (cuda_ops.h act_q8), the input of the dp4a
// GEMVs: the layout's size and scale offset, and launch_quantize_act (a warp per 32-value block,
// with act_q8.cuh's quantizer, which the kernels that write the layout themselves share).
#include <cstddef>
#include <cstdint>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

// x: [n_rows][cols] -> xq (act_q8 layout). One warp per 32-value block.
constexpr int QUANT_WARPS = 8;
__global__ void __launch_bounds__(QUANT_WARPS * WARP)
    kernel_quantize_act(const float* __restrict__ x, int64_t n_blocks, int8_t* __restrict__ q, float4* __restrict__ s) {
    const int lane = threadIdx.x % WARP;
    const int64_t blk = static_cast<int64_t>(blockIdx.x) * QUANT_WARPS + threadIdx.x / WARP;
    if (blk >= n_blocks) return;
    quantize_block_warp(x[blk * 32 + lane], lane, q + blk * 32, s + blk);
}

}  // namespace

size_t act_q8_scale_offset(int n_tok, int64_t cols) { return act_q8_scales_at(n_tok, cols); }

size_t act_q8_bytes(int n_tok, int64_t cols) {
    return act_q8_scales_at(n_tok, cols) + static_cast<size_t>(n_tok) * static_cast<size_t>(cols / 32) * 16;
}

void launch_quantize_act(const float* x, int n_tok, int64_t cols, void* xq, void* stream) {
    JLLM_ASSERT(n_tok >= 1 && cols % 32 == 0 && cols >= 32);
    const int64_t n_blocks = static_cast<int64_t>(n_tok) * (cols / 32);
    int8_t* q = static_cast<int8_t*>(xq);
    float4* sc = reinterpret_cast<float4*>(static_cast<uint8_t*>(xq) + act_q8_scales_at(n_tok, cols));
    kernel_quantize_act<<<static_cast<unsigned>((n_blocks + QUANT_WARPS - 1) / QUANT_WARPS), QUANT_WARPS * WARP, 0,
                          as_stream(stream)>>>(x, n_blocks, q, sc);
    JLLM_CUDA_LAUNCH_CHECK("kernel_quantize_act");
}

}  // namespace cuda
}  // namespace jllm
