// backend/cuda/argmax.cu — greedy sampling: the index of the first maximum of x in one launch
// (each block reduces its values and folds its best into one 64-bit key by atomicMax; the last
// block to finish writes the index and leaves the work buffer zero).
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int ARGMAX_THREADS = 256;

__device__ __forceinline__ bool better(float v, int64_t i, float bv, int64_t bi) {
    return v > bv || (v == bv && i < bi);
}

// Block-wide best (value, index) of `v` over the block; ties to the lower index, NaN never wins.
__device__ void block_best(float& bv, int64_t& bi, float* sv, int64_t* si) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP;
    if (lane == 0) {
        sv[wid] = bv;
        si[wid] = bi;
    }
    __syncthreads();
    if (wid == 0) {
        const int nw = blockDim.x / WARP;
        bv = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : INT64_MAX;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            sv[0] = bv;
            si[0] = bi;
        }
    }
    __syncthreads();
    bv = sv[0];
    bi = si[0];
    __syncthreads();
}

// Order-preserving 64-bit key of (value, index): larger value first, then the lower index; NaN
// below everything (never wins while any number is present).
__device__ __forceinline__ unsigned long long best_key(float v, int64_t i) {
    const uint32_t u = __float_as_uint(v);
    const uint32_t ord = v != v ? 0u : ((u & 0x80000000u) ? ~u : (u | 0x80000000u));
    return (static_cast<unsigned long long>(ord) << 32) | (0xFFFFFFFFull - static_cast<unsigned long long>(i));
}

// x: [n]; out: [1]; work: {best key, blocks done}, zero on entry and left zero. Each block
// takes ARGMAX_PER_BLOCK values (all its loads in flight at once), reduces them, and folds its
// best into work[0] with atomicMax; the last block to finish writes the index and resets work.
constexpr int ARGMAX_PER_THREAD = 16;
constexpr int ARGMAX_PER_BLOCK = ARGMAX_THREADS * ARGMAX_PER_THREAD;
__global__ void __launch_bounds__(ARGMAX_THREADS)
    kernel_argmax(const float* __restrict__ x, int64_t n, unsigned long long* work, int32_t* out) {
    __shared__ float sv[ARGMAX_THREADS / WARP];
    __shared__ int64_t si[ARGMAX_THREADS / WARP];
    const int64_t first = static_cast<int64_t>(blockIdx.x) * ARGMAX_PER_BLOCK + threadIdx.x;
    float v[ARGMAX_PER_THREAD];
#pragma unroll
    for (int j = 0; j < ARGMAX_PER_THREAD; ++j) {
        const int64_t i = first + static_cast<int64_t>(j) * ARGMAX_THREADS;
        v[j] = i < n ? x[i] : -INFINITY;
    }
    float bv = -INFINITY;
    int64_t bi = INT64_MAX;
#pragma unroll
    for (int j = 0; j < ARGMAX_PER_THREAD; ++j) {
        const int64_t i = first + static_cast<int64_t>(j) * ARGMAX_THREADS;
        if (i < n && better(v[j], i, bv, bi)) {
            bv = v[j];
            bi = i;
        }
    }
    block_best(bv, bi, sv, si);
    if (threadIdx.x != 0) return;
    if (bi != INT64_MAX) atomicMax(&work[0], best_key(bv, bi));
    __threadfence();
    const unsigned long long done = atomicAdd(&work[1], 1ull);
    if (done == gridDim.x - 1) {
        const unsigned long long key = atomicExch(&work[0], 0ull);
        atomicExch(&work[1], 0ull);
        *out = key == 0 ? 0 : static_cast<int32_t>(0xFFFFFFFFull - (key & 0xFFFFFFFFull));  // 0: all NaN
    }
}

}  // namespace

size_t argmax_work_bytes() { return 2 * sizeof(unsigned long long); }

void launch_argmax(const float* x, int64_t n, void* work, int32_t* out, void* stream) {
    JLLM_ASSERT(n >= 1 && n < 0xFFFFFFFFll);
    const unsigned blocks = static_cast<unsigned>((n + ARGMAX_PER_BLOCK - 1) / ARGMAX_PER_BLOCK);
    kernel_argmax<<<blocks, ARGMAX_THREADS, 0, as_stream(stream)>>>(x, n, static_cast<unsigned long long*>(work), out);
    JLLM_CUDA_LAUNCH_CHECK("kernel_argmax");
}

}  // namespace cuda
}  // namespace jllm
