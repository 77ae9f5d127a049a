// backend/cuda/chunk_q8.cuh — the int8 chunk decoders of the dp4a GEMV (ChunkQ8<T>), the loads
// and byte arithmetic they are built from, and the switch over the types that have one
// (dispatch_q8_type). Host-callable too (chunk_q8_host, tests/support/cuda_host_decoders.cu).
#pragma once

#include <cstdint>

#include "backend/cuda/chunk_dequant.cuh"

namespace jllm {
namespace cuda {

// For the dp4a GEMV (activations quantized to 8 bits, q8 blocks of 32): chunk c of a row as 32
// small integers q (packed four per int32, element 4k + i in byte i of q[k]) and, per half
// h (elements 16h..16h+15), a scale a[h] and an offset b[h] with  w = a[h] * q + b[h]  equal to
// ChunkDequant's value. Every quantized type's integers fit int8.

__host__ __device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) { return ld_ro<unsigned short>(p); }
__host__ __device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) { return ld_ro<unsigned int>(p); }
// Four bytes from a 2-byte aligned address.
__host__ __device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) { return ld_u16(p) | (ld_u16(p + 2) << 16); }

// Per-byte v - k for bytes v <= 127 and v + (128 - k) <= 255 (no carry between bytes).
template <int K>
__host__ __device__ __forceinline__ uint32_t bytes_minus(uint32_t v) {
    return (v + static_cast<uint32_t>(128 - K) * 0x01010101u) ^ 0x80808080u;
}

// Bits 0..3 of `nib` to bit 4 of bytes 0..3.
__host__ __device__ __forceinline__ uint32_t spread4_bit4(uint32_t nib) {
    return ((nib & 1u) | ((nib & 2u) << 7) | ((nib & 4u) << 14) | ((nib & 8u) << 21)) << 4;
}

__host__ __device__ __forceinline__ int dp4a_i8(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
    for (int i = 0; i < 4; ++i) {
        c += static_cast<int>(static_cast<int8_t>(a >> (8 * i))) * static_cast<int>(static_cast<int8_t>(b >> (8 * i)));
    }
    return c;
#endif
}

// Eight 4-byte words from a 2-byte aligned address: nine aligned loads and a funnel shift when
// the address is not 4-byte aligned. Reads up to 4 bytes past the 32 (callers guarantee they
// are inside the same block).
__host__ __device__ __forceinline__ void ld_words_a2(const uint8_t* p, uint32_t* out) {
    const uintptr_t mis = reinterpret_cast<uintptr_t>(p) & 2u;
    const uint8_t* base = p - mis;
    uint32_t w[9];
    JLLM_UNROLL
    for (int i = 0; i < 9; ++i) w[i] = ld_u32(base + 4 * i);
    const int sh = static_cast<int>(8 * mis);
    JLLM_UNROLL
    for (int k = 0; k < 8; ++k) {
#ifdef __CUDA_ARCH__
        out[k] = __funnelshift_r(w[k], w[k + 1], sh);  // one instruction: (w[k+1]:w[k]) >> sh
#else
        out[k] = static_cast<uint32_t>(((static_cast<uint64_t>(w[k + 1]) << 32) | w[k]) >> sh);
#endif
    }
}

// The scales and mins of sub-blocks 2p and 2p + 1 (p = 0..3) of a Q4_K/Q5_K block, without
// branches: the four 6-bit values of each kind for sub-blocks 0..3 (or 4..7) are assembled in one
// word, one byte each, and the pair is picked by shifts.
__host__ __device__ __forceinline__ void scale_min_k4_pair(uint32_t s0, uint32_t s1, uint32_t s2, int p, float* sc,
                                                           float* mn) {
    const bool lo = p < 2;
    // sub-blocks 0..3: low 6 bits of bytes 0..3 (scales) and 4..7 (mins); 4..7: the nibbles of
    // bytes 8..11 below the top 2 bits of bytes 0..3 (scales) and 4..7 (mins).
    const uint32_t d = lo ? (s0 & 0x3F3F3F3Fu) : ((s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u));
    const uint32_t m = lo ? (s1 & 0x3F3F3F3Fu) : (((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u));
    const int sh = 16 * (p & 1);
    sc[0] = static_cast<float>((d >> sh) & 0xFFu);
    sc[1] = static_cast<float>((d >> (sh + 8)) & 0xFFu);
    mn[0] = static_cast<float>((m >> sh) & 0xFFu);
    mn[1] = static_cast<float>((m >> (sh + 8)) & 0xFFu);
}

// get_scale_min_k4 (sub-block j = 0..7) on the 12 scale bytes held in three words.
__host__ __device__ __forceinline__ void scale_min_k4_words(uint32_t s0, uint32_t s1, uint32_t s2, int j, float* sc,
                                                            float* mn) {
    float scs[2], mns[2];
    scale_min_k4_pair(s0, s1, s2, j >> 1, scs, mns);
    *sc = (j & 1) ? scs[1] : scs[0];
    *mn = (j & 1) ? mns[1] : mns[0];
}

template <GgmlType T>
struct ChunkQ8;  // defined for the quantized types only

template <>
struct ChunkQ8<GgmlType::Q4_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ4_0);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(ld_u16(blk)));
        b[0] = b[1] = 0.0f;
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32_a2(blk + 2 + 4 * k);
            q[k] = bytes_minus<8>(w & 0x0F0F0F0Fu);
            q[4 + k] = bytes_minus<8>((w >> 4) & 0x0F0F0F0Fu);
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q4_1> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ4_1);
        const uint32_t dm = ld_u32(blk);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(dm & 0xFFFFu));
        b[0] = b[1] = fp16_to_f32(static_cast<uint16_t>(dm >> 16));
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32(blk + 4 + 4 * k);
            q[k] = w & 0x0F0F0F0Fu;
            q[4 + k] = (w >> 4) & 0x0F0F0F0Fu;
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q5_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ5_0);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(ld_u16(blk)));
        b[0] = b[1] = 0.0f;
        const uint32_t qh = ld_u32_a2(blk + 2);
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32_a2(blk + 6 + 4 * k);
            q[k] = bytes_minus<16>((w & 0x0F0F0F0Fu) | spread4_bit4((qh >> (4 * k)) & 0xFu));
            q[4 + k] = bytes_minus<16>(((w >> 4) & 0x0F0F0F0Fu) | spread4_bit4((qh >> (16 + 4 * k)) & 0xFu));
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q5_1> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ5_1);
        const uint32_t dm = ld_u32(blk);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(dm & 0xFFFFu));
        b[0] = b[1] = fp16_to_f32(static_cast<uint16_t>(dm >> 16));
        const uint32_t qh = ld_u32(blk + 4);
        JLLM_UNROLL
        for (int k = 0; k < 4; ++k) {
            const uint32_t w = ld_u32(blk + 8 + 4 * k);
            q[k] = (w & 0x0F0F0F0Fu) | spread4_bit4((qh >> (4 * k)) & 0xFu);
            q[4 + k] = ((w >> 4) & 0x0F0F0F0Fu) | spread4_bit4((qh >> (16 + 4 * k)) & 0xFu);
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q8_0> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const uint8_t* blk = row + c * sizeof(BlockQ8_0);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(ld_u16(blk)));
        b[0] = b[1] = 0.0f;
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) q[k] = ld_u32_a2(blk + 2 + 4 * k);
    }
};

template <>
struct ChunkQ8<GgmlType::Q2_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ2_K* blk = reinterpret_cast<const BlockQ2_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const uint32_t dd = ld_u32(reinterpret_cast<const uint8_t*>(&blk->d));
        const float d = fp16_to_f32(static_cast<uint16_t>(dd & 0xFFFFu)), dmin = fp16_to_f32(static_cast<uint16_t>(dd >> 16));
        const uint8_t* qs = blk->qs + (j / 4) * 32;
        const int shift = 2 * (j % 4);
        JLLM_UNROLL
        for (int h = 0; h < 2; ++h) {
            const int s = blk->scales[2 * j + h];
            a[h] = d * static_cast<float>(s & 0xF);
            b[h] = -(dmin * static_cast<float>(s >> 4));
            JLLM_UNROLL
            for (int i = 0; i < 4; ++i) q[4 * h + i] = (ld_u32(qs + 16 * h + 4 * i) >> shift) & 0x03030303u;
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q3_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ3_K* blk = reinterpret_cast<const BlockQ3_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const float d = fp16_to_f32(static_cast<uint16_t>(ld_u16(reinterpret_cast<const uint8_t*>(&blk->d))));
        const uint8_t* qs = blk->qs + (j / 4) * 32;
        const int shift = 2 * (j % 4);
        JLLM_UNROLL
        for (int h = 0; h < 2; ++h) {
            a[h] = d * static_cast<float>(q3k_scale_dev(blk->scales, 2 * j + h));
            b[h] = 0.0f;
            JLLM_UNROLL
            for (int i = 0; i < 4; ++i) {
                const uint32_t lo = (ld_u32_a2(qs + 16 * h + 4 * i) >> shift) & 0x03030303u;
                const uint32_t hi = (ld_u32_a2(blk->hmask + 16 * h + 4 * i) >> j) & 0x01010101u;
                q[4 * h + i] = bytes_minus<4>(lo | (hi << 2));
            }
        }
    }
};

template <>
struct ChunkQ8<GgmlType::Q4_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ4_K* blk = reinterpret_cast<const BlockQ4_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const uint8_t* p = reinterpret_cast<const uint8_t*>(blk);
        const uint4 hdr = ld16(p);  // d, dmin, scales[12]
        float sc, mn;
        scale_min_k4_words(hdr.y, hdr.z, hdr.w, j, &sc, &mn);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(hdr.x & 0xFFFFu)) * sc;
        b[0] = b[1] = -(fp16_to_f32(static_cast<uint16_t>(hdr.x >> 16)) * mn);
        const uint8_t* qs = blk->qs + (j / 2) * 32;
        const int shift = 4 * (j % 2);
        const uint4 v0 = ld16(qs), v1 = ld16(qs + 16);
        const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) q[k] = (w[k] >> shift) & 0x0F0F0F0Fu;
    }
};

template <>
struct ChunkQ8<GgmlType::Q5_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ5_K* blk = reinterpret_cast<const BlockQ5_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const uint8_t* p = reinterpret_cast<const uint8_t*>(blk);
        const uint4 hdr = ld16(p);  // d, dmin, scales[12]
        float sc, mn;
        scale_min_k4_words(hdr.y, hdr.z, hdr.w, j, &sc, &mn);
        a[0] = a[1] = fp16_to_f32(static_cast<uint16_t>(hdr.x & 0xFFFFu)) * sc;
        b[0] = b[1] = -(fp16_to_f32(static_cast<uint16_t>(hdr.x >> 16)) * mn);
        const uint8_t* qs = blk->qs + (j / 2) * 32;
        const int shift = 4 * (j % 2);
        const uint4 v0 = ld16(qs), v1 = ld16(qs + 16);
        const uint4 h0 = ld16(blk->qh), h1 = ld16(blk->qh + 16);
        const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        const uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) q[k] = ((w[k] >> shift) & 0x0F0F0F0Fu) | (((hw[k] >> j) & 0x01010101u) << 4);
    }
};

template <>
struct ChunkQ8<GgmlType::Q6_K> {
    static __host__ __device__ __forceinline__ void run(const uint8_t* row, int64_t c, uint32_t* q, float* a, float* b) {
        const BlockQ6_K* blk = reinterpret_cast<const BlockQ6_K*>(row) + c / 8;
        const int j = static_cast<int>(c % 8);
        const float d = fp16_to_f32(static_cast<uint16_t>(ld_u16(reinterpret_cast<const uint8_t*>(&blk->d))));
        const uint8_t* ql = blk->ql + (j / 4) * 64 + (j % 2) * 32;
        const int lshift = 4 * ((j % 4) / 2);
        const uint8_t* qh = blk->qh + (j / 4) * 32;
        const int hshift = 2 * (j % 4);
        // The two signed scale bytes in one 2-byte load (the block and the scales start at even offsets).
        const uint32_t sc = ld_u16(reinterpret_cast<const uint8_t*>(blk->scales) + 2 * j);
        a[0] = d * static_cast<float>(static_cast<int8_t>(sc & 0xFFu));
        a[1] = d * static_cast<float>(static_cast<int8_t>(sc >> 8));
        b[0] = b[1] = 0.0f;
        // ql and qh regions end at least 4 bytes before the block's end (scales, d follow).
        uint32_t wl[8], wh[8];
        ld_words_a2(ql, wl);
        ld_words_a2(qh, wh);
        JLLM_UNROLL
        for (int k = 0; k < 8; ++k) {
            const uint32_t lo = (wl[k] >> lshift) & 0x0F0F0F0Fu;
            const uint32_t hi = ((wh[k] >> hshift) & 0x03030303u) << 4;
            q[k] = bytes_minus<32>(lo | hi);
        }
    }
};

// Calls f(tag) for the types with an int8 chunk decoder (every quantized type of dispatch_type,
// not the float ones); returns false for the others.
constexpr bool has_chunk_q8(GgmlType t) { return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16; }

template <typename F>
bool dispatch_q8_type(GgmlType t, F&& f) {
    if (!has_chunk_q8(t)) return false;
    return dispatch_type(t, [&](auto tag) {
        if constexpr (has_chunk_q8(decltype(tag)::value)) f(tag);
    });
}

}  // namespace cuda
}  // namespace jllm
