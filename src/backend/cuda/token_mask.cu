// backend/cuda/token_mask.cu — a grammar's token mask applied to the logits on the device: every
// token whose bit is clear gets -inf, so the argmax and top-k kernels after it select among the
// allowed tokens only and constrained decode keeps its graph (the mask is copied in by the
// graph's own node).
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int MASK_THREADS = 256;

// One thread per logit: a warp's 32 threads share one mask word (one broadcast load).
__global__ void __launch_bounds__(MASK_THREADS)
    kernel_apply_token_mask(float* __restrict__ x, int64_t n, const uint32_t* __restrict__ mask) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * MASK_THREADS + threadIdx.x;
    if (i >= n) return;
    if (((mask[i >> 5] >> (i & 31)) & 1u) == 0) x[i] = -INFINITY;
}

}  // namespace

void launch_apply_token_mask(float* x, int64_t n, const uint32_t* mask, void* stream) {
    JLLM_ASSERT(n >= 1 && n < 0xFFFFFFFFll);
    const unsigned blocks = static_cast<unsigned>((n + MASK_THREADS - 1) / MASK_THREADS);
    kernel_apply_token_mask<<<blocks, MASK_THREADS, 0, as_stream(stream)>>>(x, n, mask);
    JLLM_CUDA_LAUNCH_CHECK("kernel_apply_token_mask");
}

}  // namespace cuda
}  // namespace jllm
