// backend/cuda/act_q8k.cuh — the act_q8k quantizer of one 256-value block by one warp (cuda_ops.h
// act_q8k: the int8 GEMM's input), shared by the quantizer kernel (gemm_s8.cu) and the kernels
// that write the GEMM's fp16 input and can write its act_q8k copy in the same pass (the prefill
// RMSNorm, the fp16 conversion): the same bytes whichever writes them; and the int8 kernels' reading
// of a Q4_K row header.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/cuda_common.cuh"

namespace jllm {
namespace cuda {

constexpr int Q8K_REC = 48;  // bytes of a record
constexpr int Q8K_D = 32;    // the record's fp32 scale

// Block blk (token-major: token * cols / 256 + column block) of act_q8k from its 256 fp16 values,
// lane l holding values 8l..8l + 7 as four half2 words in raw; q: the int8 values' base, rec: the
// records' (act_q8k_records_at).
__device__ __forceinline__ void quantize_q8k_warp(uint4 raw, int lane, int64_t blk, int8_t* __restrict__ q,
                                                  uint8_t* __restrict__ rec) {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    float v[8];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
        v[2 * i] = f.x;
        v[2 * i + 1] = f.y;
        amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
    amax = warp_max(amax);
    const float d = amax / 127.0f;
    const float id = q8_inverse(d);
    uint32_t packed[2] = {0u, 0u};
    int sum = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int qi = q8_code(v[i], id);
        sum += qi;
        packed[i / 4] |= (static_cast<uint32_t>(qi) & 0xFFu) << (8 * (i % 4));
    }
    *reinterpret_cast<uint2*>(q + blk * 256 + 8 * lane) = make_uint2(packed[0], packed[1]);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);  // lanes 4j..4j + 3: S_j
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
    const int next = __shfl_down_sync(0xFFFFFFFFu, sum, 4);  // lane 8c: S_{2c + 1}
    uint8_t* r = rec + blk * Q8K_REC;
    if ((lane & 7) == 0) {
        const int c = lane >> 3;
        const int hi0 = sum >> 6, hi1 = next >> 6;  // floor division: lo in [0, 64)
        const __half2 hi = __halves2half2(__int2half_rn(hi0), __int2half_rn(hi1));
        const __half2 lo = __halves2half2(__int2half_rn(sum - 64 * hi0), __int2half_rn(next - 64 * hi1));
        *reinterpret_cast<uint2*>(r + 8 * c) =
            make_uint2(*reinterpret_cast<const uint32_t*>(&hi), *reinterpret_cast<const uint32_t*>(&lo));
    }
    if (lane == 0) *reinterpret_cast<float4*>(r + Q8K_D) = make_float4(d, 0.0f, 0.0f, 0.0f);
}

// What the int8 kernels (gemm_s8.cu, gemv_s8.cu) take from a Q4_K row's 16-byte header h (d | dmin,
// then the 12 scale bytes s0..s11) for the lane of mma column c: sc[0] / sc[1] the 6-bit scales of
// sub-blocks 0-3 / 4-7 as bytes; big / small the minima's fp16 mma A words (64 m_j, m_j for
// j = 2c, 2c + 1). Q4_K: sc_j = s_j & 63, m_j = s_{j+4} & 63 (j < 4); sc_j = (s_{j+4} & 15) |
// (s_{j-4} >> 6) << 4, m_j = (s_{j+4} >> 4) | (s_j >> 6) << 4 (j >= 4).
__host__ __device__ __forceinline__ void q4k_header_s8(uint4 h, int c, uint32_t (&sc)[2], uint32_t& big,
                                                      uint32_t& small) {
    sc[0] = h.y & 0x3F3F3F3Fu;
    sc[1] = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
    const uint32_t mlo = h.z & 0x3F3F3F3Fu;
    const uint32_t mhi = ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u);
    const uint32_t mw = c < 2 ? mlo : mhi;
    const int sh = 16 * (c & 1);
    const float m0 = static_cast<float>((mw >> sh) & 0xFFu), m1 = static_cast<float>((mw >> (sh + 8)) & 0xFFu);
    const __half2 b = __floats2half2_rn(64.0f * m0, 64.0f * m1);
    const __half2 m = __floats2half2_rn(m0, m1);
    memcpy(&big, &b, sizeof big);  // the bits (memcpy: no type punning on the host)
    memcpy(&small, &m, sizeof small);
}

}  // namespace cuda
}  // namespace jllm
