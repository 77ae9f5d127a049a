// backend/cuda/norm.cu — RMSNorm over rows: the fp32 output (and its fp16 copy, the GEMM's input,
// with that copy's act_q8k for the int8 GEMM) or, for the dp4a GEMV, the 8-bit activations
// (launch_rmsnorm_q8, spread over several blocks per row), with or instead of them the act_q8k
// input of the int8 GEMV.
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/act_q8k.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int NORM_THREADS = 256;

// x, y: [n_rows][n]; w: [n]. One block per row. q8 (with yh; n a multiple of 256): the act_q8k
// copy of yh too (q8: its int8 values, rec8: its records), a warp per 256 values.
__global__ void __launch_bounds__(NORM_THREADS)
    kernel_rmsnorm(const float* x, const float* __restrict__ w, float* y, __half* yh, int8_t* __restrict__ q8,
                   uint8_t* __restrict__ rec8, int64_t n, float eps) {
    __shared__ float red[WARP];
    const float* xr = x + blockIdx.x * n;
    float* yr = y + blockIdx.x * n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_reduce<false>(ss, red);
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
    if (q8 == nullptr) {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float v = xr[i] * scale * w[i];
            yr[i] = v;
            if (yh != nullptr) yh[blockIdx.x * n + i] = half_sat(v);
        }
        return;
    }
    // The same values by blocks of 256: lane l of a warp takes values 8l..8l + 7 of its block.
    const int lane = threadIdx.x % WARP;
    const int64_t nb = n / 256;
    for (int64_t b = threadIdx.x / WARP; b < nb; b += NORM_THREADS / WARP) {
        const int64_t i0 = b * 256 + 8 * lane;
        const float4 x0 = *reinterpret_cast<const float4*>(xr + i0), x1 = *reinterpret_cast<const float4*>(xr + i0 + 4);
        const float4 w0 = *reinterpret_cast<const float4*>(w + i0), w1 = *reinterpret_cast<const float4*>(w + i0 + 4);
        const float4 v0 = make_float4(x0.x * scale * w0.x, x0.y * scale * w0.y, x0.z * scale * w0.z, x0.w * scale * w0.w);
        const float4 v1 = make_float4(x1.x * scale * w1.x, x1.y * scale * w1.y, x1.z * scale * w1.z, x1.w * scale * w1.w);
        *reinterpret_cast<float4*>(yr + i0) = v0;
        *reinterpret_cast<float4*>(yr + i0 + 4) = v1;
        const uint4 h = pack_half8(v0, v1);
        *reinterpret_cast<uint4*>(yh + blockIdx.x * n + i0) = h;
        quantize_q8k_warp(h, lane, blockIdx.x * nb + b, q8, rec8);
    }
}

// The same normalization, then each warp quantizes one 32-value block into xq (act_q8 layout of
// n_rows x n); y (fp32) is written too when not null. Grid (ceil(n / 32 / NORM_Q8_WARPS),
// n_rows): every block sums the squares of its whole row (one round of 16-byte loads; the row is
// a few KB and cached) and quantizes its own blocks, so one token's norm spreads over several SMs
// instead of walking the row in one block.
constexpr int NORM_Q8_WARPS = 8;
constexpr int NORM_Q8_REG = 4;  // float4 loads per thread held in registers (rows up to 4,096 values)
__global__ void __launch_bounds__(NORM_Q8_WARPS * WARP)
    kernel_rmsnorm_q8(const float* x, const float* __restrict__ w, float* y, int8_t* __restrict__ q,
                      float4* __restrict__ s, int8_t* __restrict__ q8k, uint8_t* __restrict__ rec8, int64_t n,
                      float eps) {
    __shared__ float red[WARP];
    const int64_t row = blockIdx.y;
    const float* xr = x + row * n;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t nb = n / 32;
    const int64_t b = static_cast<int64_t>(blockIdx.x) * NORM_Q8_WARPS + warp;
    // This warp's block, loaded before the reduction so both loads are in flight together.
    const bool mine = b < nb;
    const float xv = mine ? xr[b * 32 + lane] : 0.0f;
    const float wv = mine ? w[b * 32 + lane] : 0.0f;
    // The row's first NORM_Q8_REG x 1,024 values in registers, every load issued before any is
    // summed (a loop of two or three rounds per thread waited for each load in turn: one round
    // trip each); a longer row's rest by the loop. The same sums in the same order.
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    const int64_t n4 = n / 4;
    constexpr int STRIDE = NORM_Q8_WARPS * WARP;
    float4 vr[NORM_Q8_REG];
#pragma unroll
    for (int k = 0; k < NORM_Q8_REG; ++k) {
        const int64_t i = threadIdx.x + static_cast<int64_t>(k) * STRIDE;
        vr[k] = i < n4 ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_Q8_REG; ++k) {
        const float4 v = vr[k];
        if (threadIdx.x + static_cast<int64_t>(k) * STRIDE < n4) ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int64_t i = threadIdx.x + static_cast<int64_t>(NORM_Q8_REG) * STRIDE; i < n4; i += STRIDE) {
        const float4 v = x4[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = block_reduce<false>(ss, red);
    if (!mine) return;
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
    const float v = xv * scale * wv;
    if (y) y[row * n + b * 32 + lane] = v;
    if (q != nullptr) quantize_block_warp(v, lane, q + row * n + b * 32, s + row * nb + b);
    if (q8k == nullptr) return;
    // act_q8k: the block's 256 values (n % 256 == 0: every warp is here) rounded to fp16, then
    // quantize_q8k_warp's arithmetic with warp w's 32 values as sub-block w.
    __shared__ float amax_w[NORM_Q8_WARPS];
    const float vh = __half2float(half_sat(v));
    const float wm = warp_max(fabsf(vh));
    if (lane == 0) amax_w[warp] = wm;
    __syncthreads();
    float amax = amax_w[0];
#pragma unroll
    for (int k = 1; k < NORM_Q8_WARPS; ++k) amax = fmaxf(amax, amax_w[k]);
    const float d = amax / 127.0f;
    const int qi = q8_code(vh, q8_inverse(d));
    q8k[row * n + b * 32 + lane] = static_cast<int8_t>(qi);
    int sum = qi;
#pragma unroll
    for (int o = WARP / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
    if (lane != 0) return;
    uint8_t* r = rec8 + (row * (n / 256) + blockIdx.x) * Q8K_REC;
    const int hi = sum >> 6;  // floor division: lo in [0, 64)
    __half* quartet = reinterpret_cast<__half*>(r + 8 * (warp >> 1));  // (hi_2c, hi_2c+1, lo_2c, lo_2c+1)
    quartet[warp & 1] = __int2half_rn(hi);
    quartet[2 + (warp & 1)] = __int2half_rn(sum - 64 * hi);
    if (warp == 0) *reinterpret_cast<float4*>(r + Q8K_D) = make_float4(d, 0.0f, 0.0f, 0.0f);
}

}  // namespace

void launch_rmsnorm_q8(const float* x, const float* w, float* y, void* xq, int n_rows, int64_t n, float eps,
                       void* stream, void* xq8k) {
    JLLM_ASSERT(n_rows >= 1 && n >= 32 && n % 32 == 0 && (xq != nullptr || xq8k != nullptr));
    static_assert(NORM_Q8_WARPS * WARP == 256, "a block of the norm is one act_q8k block");
    JLLM_ASSERT(xq8k == nullptr || (n % 256 == 0 && reinterpret_cast<uintptr_t>(xq8k) % 16 == 0));
    int8_t* q = static_cast<int8_t*>(xq);
    float4* sc = xq ? reinterpret_cast<float4*>(static_cast<uint8_t*>(xq) + act_q8_scales_at(n_rows, n)) : nullptr;
    int8_t* q8k = static_cast<int8_t*>(xq8k);
    uint8_t* rec8 = xq8k ? static_cast<uint8_t*>(xq8k) + act_q8k_records_at(n_rows, n) : nullptr;
    const dim3 grid(static_cast<unsigned>((n / 32 + NORM_Q8_WARPS - 1) / NORM_Q8_WARPS), static_cast<unsigned>(n_rows));
    kernel_rmsnorm_q8<<<grid, NORM_Q8_WARPS * WARP, 0, as_stream(stream)>>>(x, w, y, q, sc, q8k, rec8, n, eps);
    JLLM_CUDA_LAUNCH_CHECK("kernel_rmsnorm_q8");
}

void launch_rmsnorm(const float* x, const float* w, float* y, uint16_t* yh, int n_rows, int64_t n, float eps,
                    void* stream, void* xq8) {
    JLLM_ASSERT(n_rows >= 1 && n >= 1);
    int8_t* q8 = static_cast<int8_t*>(xq8);
    uint8_t* rec8 = nullptr;
    if (xq8 != nullptr) {
        JLLM_ASSERT(yh != nullptr && n % 256 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(y) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(yh) % 16 == 0 && reinterpret_cast<uintptr_t>(xq8) % 16 == 0);
        rec8 = static_cast<uint8_t*>(xq8) + act_q8k_records_at(n_rows, n);
    }
    kernel_rmsnorm<<<n_rows, NORM_THREADS, 0, as_stream(stream)>>>(x, w, y, reinterpret_cast<__half*>(yh), q8, rec8,
                                                                    n, eps);
    JLLM_CUDA_LAUNCH_CHECK("kernel_rmsnorm");
}

}  // namespace cuda
}  // namespace jllm
