// backend/cuda/cuda_common.cuh — the device helpers every kernel file shares: warp and block
// reductions, read-only and 16-byte loads (host-callable too, for the decoders built on them),
// cp.async, the opt-in to large dynamic shared memory, the SwiGLU epilogue's silu(g) * u and the
// stream cast. The weight decoders have their own headers: chunk_dequant.cuh (a 32-element chunk
// as fp32, every type), chunk_q8.cuh (the same as int8 for the dp4a GEMV), weight_tiles.cuh (the
// tiled Q4_K/Q6_K layout); act_q8.cuh holds the 8-bit activations' warp quantizers.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "core/fp16.h"

// `#pragma unroll` for device code only: the chunk dequantizers are also compiled for the host,
// whose compiler does not know the pragma.
#if defined(__CUDA_ARCH__)
#define JLLM_UNROLL _Pragma("unroll")
#else
#define JLLM_UNROLL
#endif

namespace jllm {
namespace cuda {

constexpr int WARP = 32;

// Sum over the LANES lanes of an aligned lane group (LANES a power of two up to WARP); every lane
// of the group gets it.
template <int LANES>
__device__ __forceinline__ float group_sum(float v) {
    JLLM_UNROLL
    for (int o = LANES / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_sum(float v) { return group_sum<WARP>(v); }

__device__ __forceinline__ float warp_max(float v) {
    JLLM_UNROLL
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum (MAX = false) or max (MAX = true) of `v` over the block; red: WARP floats of shared
// memory. Every thread gets the result; the barriers also publish earlier shared-memory writes,
// and red may be reused right after.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* red) {
    v = MAX ? warp_max(v) : warp_sum(v);
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP;
    if (lane == 0) red[wid] = v;
    __syncthreads();
    const int nw = (blockDim.x + WARP - 1) / WARP;
    v = lane < nw ? red[lane] : (MAX ? -INFINITY : 0.0f);
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads();
    return v;
}

__host__ __device__ __forceinline__ float ldh(const Half& h) { return fp16_to_f32(h.bits); }

// A read-only load of a T at p (aligned for T): through the non-coherent cache on the device.
template <typename T>
__host__ __device__ __forceinline__ T ld_ro(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return __ldg(reinterpret_cast<const T*>(p));
#else
    return *reinterpret_cast<const T*>(p);
#endif
}

// The shared-window address of a shared-memory pointer (what cp.async, ldmatrix and friends take).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared without registers (cp.async, sm_80+) at a shared-window address: both
// addresses 16-byte aligned; cp_async_wait_all() waits for this thread's copies (a barrier then
// publishes them).
__device__ __forceinline__ void cp_async16_at(uint32_t smem_dst, const void* gmem_src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_dst), "l"(gmem_src));
}
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) { cp_async16_at(smem_addr(smem_dst), gmem_src); }
// 8 bytes global -> shared (cp.async through L1): both addresses 8-byte aligned.
__device__ __forceinline__ void cp_async8_at(uint32_t smem_dst, const void* gmem_src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(smem_dst), "l"(gmem_src));
}
__device__ __forceinline__ void cp_async8(void* smem_dst, const void* gmem_src) { cp_async8_at(smem_addr(smem_dst), gmem_src); }
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    cp_async_commit();
    cp_async_wait<0>();
}

// Lets `kernel` launch with `smem` bytes of dynamic shared memory: beyond the default 48 KB a
// kernel must opt in (SM 8.7 and 9.0 allow more per block).
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, size_t smem) {
    if (smem > 48 * 1024) {
        JLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    }
}

// Loads 16 bytes that are known to be 16-byte aligned.
__host__ __device__ __forceinline__ uint4 ld16(const uint8_t* p) { return ld_ro<uint4>(p); }
// The same from global or shared memory (a generic load): ChunkDequant reads weight rows in place
// (the GEMV) and staged in shared memory (the GEMM).
__host__ __device__ __forceinline__ uint4 ld16_any(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }

__host__ __device__ __forceinline__ uint8_t byte_of(const uint4& v, int i) {
    const uint32_t w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
    return static_cast<uint8_t>(w >> (8 * (i & 3)));
}

// silu(g) * u: the SwiGLU epilogue of the GEMVs.
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace cuda
}  // namespace jllm
