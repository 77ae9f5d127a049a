// backend/cuda/swiglu.cu — SwiGLU of two separate products, y = silu(g) * u: for a gate and an
// up projection of different types (the matrix products fuse it otherwise: MatOut::SwiGLU).
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

// g, u, y: [n]
__global__ void kernel_swiglu(const float* g, const float* __restrict__ u, float* y, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

}  // namespace

void launch_swiglu(const float* g, const float* u, float* y, int64_t n, void* stream) {
    JLLM_ASSERT(n >= 1);
    kernel_swiglu<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(g, u, y, n);
    JLLM_CUDA_LAUNCH_CHECK("kernel_swiglu");
}

}  // namespace cuda
}  // namespace jllm
