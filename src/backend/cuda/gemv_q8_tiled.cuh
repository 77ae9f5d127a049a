// backend/cuda/gemv_q8_tiled.cuh — one lane's share of the tiled dp4a GEMV: TileLane<T> (its
// loads from one tile row and its dot product with the 8-bit activations) and the activation
// scales it reads; shared by kernel_gemv_q8_tiled (gemv_q8_tiled.cu, which describes the lanes'
// pieces) and its host twin gemv_q8_tiled_host (tests/support/cuda_host_decoders.cu), which runs
// the same arithmetic over every lane of every row.
#pragma once

#include <cstdint>

#include "backend/cuda/chunk_q8.cuh"
#include "backend/cuda/gemv_q8.cuh"
#include "backend/cuda/weight_tiles.cuh"

namespace jllm {
namespace cuda {

template <GgmlType T>
struct TileLane;  // one lane's part of one tile row, and its dot product with the activations

// The (scale, scaled sum) of the 16 activations a lane of piece p takes from a q8 block: its
// half's (p % 2: the half for both types' pieces, low and high nibbles alike), one 8-byte read.
// Where the type needs no sums (SUM false: Q6_K) the scale alone, picked from the block's float4:
// the 8-byte read raised Q6_K's eight-warp kernel from 80 to 89 registers (two blocks per SM
// instead of three; docs/gpu_speed_notes.md row 120).
template <bool SUM = true>
__host__ __device__ __forceinline__ float2 half_scales(const float4* xs, int64_t block, int p) {
    if constexpr (SUM) {
        return ld_ro<float2>(reinterpret_cast<const uint8_t*>(xs + block) + 8 * (p % 2));
    } else {
        const float4 v = ld_ro<float4>(reinterpret_cast<const uint8_t*>(xs + block));
        return make_float2(p % 2 ? v.z : v.x, 0.0f);
    }
}

template <>
struct TileLane<GgmlType::Q6_K> {
    using F = TileFmt<GgmlType::Q6_K>;
    static constexpr int HI = 64;  // columns from the low to the high nibbles' weights
    static constexpr bool SUMS = false;  // the activations' sums unused (no offsets)
    uint4 ql, qh, sc;
    uint32_t dh;
    __host__ __device__ __forceinline__ void load(const uint8_t* tile, int i, int p) {
        ql = ld16(tile + F::QL + 128 * i + 16 * p);
        qh = ld16(tile + F::QH + 64 * i + 32 * (p / 4) + 16 * (p % 2));
        sc = ld16(tile + F::SC + 16 * i);
        dh = ld_u16(tile + F::D + 2 * i);
    }
    static __host__ __device__ __forceinline__ int col(int p) { return 128 * (p / 4) + 16 * (p % 4); }
    // x_lo/x_hi: the 16 activations of each half; s_lo/s_hi: their halves' (scale, scaled sum).
    __host__ __device__ __forceinline__ float dot(int p, uint4 x_lo, uint4 x_hi, float2 s_lo, float2 s_hi) const {
        const int lsh = (p % 4) < 2 ? 0 : 2;  // qh bits of the low nibbles (of the high: lsh + 4)
        const int sc_lo = 8 * (p / 4) + p % 4;  // scale of the low nibbles' 16 weights (high: + 4)
        const uint32_t wl[4] = {ql.x, ql.y, ql.z, ql.w};
        const uint32_t wh[4] = {qh.x, qh.y, qh.z, qh.w};
        uint32_t q_lo[4], q_hi[4];
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            q_lo[k] = bytes_minus<32>((wl[k] & 0x0F0F0F0Fu) | (((wh[k] >> lsh) & 0x03030303u) << 4));
            q_hi[k] = bytes_minus<32>(((wl[k] >> 4) & 0x0F0F0F0Fu) | (((wh[k] >> (lsh + 4)) & 0x03030303u) << 4));
        }
        const float d = fp16_to_f32(static_cast<uint16_t>(dh));
        const float a_lo = d * static_cast<float>(static_cast<int8_t>(byte_of(sc, sc_lo)));
        const float a_hi = d * static_cast<float>(static_cast<int8_t>(byte_of(sc, sc_lo + 4)));
        return a_lo * static_cast<float>(dot4(q_lo, x_lo, 0)) * s_lo.x +
               a_hi * static_cast<float>(dot4(q_hi, x_hi, 0)) * s_hi.x;
    }
};

template <>
struct TileLane<GgmlType::Q4_K> {
    using F = TileFmt<GgmlType::Q4_K>;
    static constexpr int HI = 32;
    static constexpr bool SUMS = true;
    uint4 qs, hd;
    __host__ __device__ __forceinline__ void load(const uint8_t* tile, int i, int p) {
        qs = ld16(tile + F::QS + 128 * i + 16 * p);
        hd = ld16(tile + F::HDR + 16 * i);
    }
    static __host__ __device__ __forceinline__ int col(int p) { return 64 * (p / 2) + 16 * (p % 2); }
    __host__ __device__ __forceinline__ float dot(int p, uint4 x_lo, uint4 x_hi, float2 s_lo, float2 s_hi) const {
        const uint32_t wq[4] = {qs.x, qs.y, qs.z, qs.w};
        uint32_t q_lo[4], q_hi[4];
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            q_lo[k] = wq[k] & 0x0F0F0F0Fu;
            q_hi[k] = (wq[k] >> 4) & 0x0F0F0F0Fu;
        }
        float sc[2], mn[2];
        scale_min_k4_pair(hd.y, hd.z, hd.w, p / 2, sc, mn);
        const float d = fp16_to_f32(static_cast<uint16_t>(hd.x & 0xFFFFu));
        const float dm = fp16_to_f32(static_cast<uint16_t>(hd.x >> 16));
        // w = d sc q - dmin mn: the offsets meet the sums of the activations' 16.
        return d * (sc[0] * static_cast<float>(dot4(q_lo, x_lo, 0)) * s_lo.x +
                    sc[1] * static_cast<float>(dot4(q_hi, x_hi, 0)) * s_hi.x) -
               dm * (mn[0] * s_lo.y + mn[1] * s_hi.y);
    }
};

}  // namespace cuda
}  // namespace jllm
