// backend/cuda/mma.cuh — the tensor-core building blocks shared by the prefill GEMM and the
// prefill attention: ldmatrix fragment loads, mma.sync m16n8k16 (fp16 inputs, fp32 sums) and
// m16n8k32 (int8 inputs, int32 sums).
// sm_80-class instructions only, so the same code runs on SM 8.7 (Orin) and 9.0.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace jllm {
namespace cuda {


// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// Two 8x8 b16 matrices; lanes 0..15 give the row addresses (8i..8i+7: matrix i).
__device__ __forceinline__ void ldmatrix_x2(uint32_t* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(p)));
}

// The same, each matrix transposed (a row-major k x n tile read as the "col" B operand).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// c (16x8, fp32) += a (16x16, fp16, row) * b (16x8, fp16, col).
__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c (16x8, s32) += a (16x32, s8, row) * b (32x8, s8, col).
__device__ __forceinline__ void mma_16832_s8(int* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d (16x8, s32) = a (16x32, s8, row) * b (32x8, s8, col): a fresh product, no accumulator read.
__device__ __forceinline__ void mma_16832_s8_new(int* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %10, %10, %10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// d (16x8, s32) = a (16x32, u8, row) * b (32x8, s8, col): unsigned weights (4-bit codes, or codes
// times 16 in the high nibbles) against signed activations.
__device__ __forceinline__ void mma_16832_u8s8_new(int* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %10, %10, %10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

__device__ __forceinline__ float clamp_f16_range(float v) { return fminf(fmaxf(v, -65504.0f), 65504.0f); }

// Two floats as a half2 (round to nearest), saturated to +-65504 so an outlier cannot become inf
// (one conversion instruction for the pair).
__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
    const __half2 h = __floats2half2_rn(clamp_f16_range(a), clamp_f16_range(b));
    return *reinterpret_cast<const uint32_t*>(&h);
}

// Eight consecutive floats (a then b) as four half2 words, each rounded as pack_half2 rounds it.
__device__ __forceinline__ uint4 pack_half8(float4 a, float4 b) {
    return make_uint4(pack_half2(a.x, a.y), pack_half2(a.z, a.w), pack_half2(b.x, b.y), pack_half2(b.z, b.w));
}
// One float as pack_half2 rounds it.
__device__ __forceinline__ __half half_sat(float v) { return __float2half_rn(clamp_f16_range(v)); }

}  // namespace cuda
}  // namespace jllm
