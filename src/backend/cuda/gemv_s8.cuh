// backend/cuda/gemv_s8.cuh — one lane's pieces of the int8 tensor-core GEMV (gemv_s8.cu, which
// describes the layout): its loads of a super-block of two Q4_K tiles and of the activations, the
// mma A words, the scales and the fp32 step. Shared by kernel_gemv_s8 and its host twin of the
// lanes, gemv_s8_lanes_host (tests/support/cuda_host_decoders.cu), which runs every lane's pieces
// around an emulated mma.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/act_q8k.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/weight_tiles.cuh"

namespace jllm {
namespace cuda {

// One lane's share of a super-block of two tiles: qs[q][i] the bytes 8c..8c + 7 of qs group i of
// row g of tile q, hd[q] that row's header.
struct S8Tiles {
    uint2 qs[2][4];
    uint4 hd[2];
};

__host__ __device__ __forceinline__ void load_tiles(S8Tiles& t, const uint8_t* t0, const uint8_t* t1, int g, int c) {
    using F = TileFmt<GgmlType::Q4_K>;
    JLLM_UNROLL
    for (int q = 0; q < 2; ++q) {
        const uint8_t* tile = q ? t1 : t0;
        JLLM_UNROLL
        for (int i = 0; i < 4; ++i) t.qs[q][i] = ld_ro<uint2>(tile + F::QS + 128 * g + 32 * i + 8 * c);
        t.hd[q] = ld16(tile + F::HDR + 16 * g);
    }
}

// One lane's share of a super-block of the activations: x[j] token g's bytes 32j + 8c..+7, hl its
// record's (hi, lo) quartet c, da the scales of tokens 2c and 2c + 1 (zeros for absent tokens).
struct S8Act {
    uint2 x[8];
    uint2 hl;
    float da[2];
};

// xp: token g's bytes 8c.. of this block, hp: its record's quartet c, dp: token 2c's record (the
// next token's one record further: rec_stride bytes); tokens n_tok and up are absent.
__host__ __device__ __forceinline__ void load_act(S8Act& x, int n_tok, const uint8_t* xp, const uint8_t* hp,
                                                  const uint8_t* dp, int64_t rec_stride, int g, int c) {
    if (n_tok == 8 || g < n_tok) {
        JLLM_UNROLL
        for (int j = 0; j < 8; ++j) x.x[j] = ld_ro<uint2>(xp + 32 * j);
        x.hl = ld_ro<uint2>(hp);
    } else {
        JLLM_UNROLL
        for (int j = 0; j < 8; ++j) x.x[j] = make_uint2(0u, 0u);
        x.hl = make_uint2(0u, 0u);
    }
    x.da[0] = 2 * c < n_tok ? ld_ro<float>(dp) : 0.0f;
    x.da[1] = 2 * c + 1 < n_tok ? ld_ro<float>(dp + rec_stride) : 0.0f;
}

// A lane's reading of its two rows' headers: d / 16 and dmin per tile q, the scales as bytes
// (sw[q][0]: sub-blocks 0-3, [1]: 4-7) and the minima's mma A words (am[q]: k 2c, 2c + 1 = 64 m;
// am[2 + q]: k 8 + 2c, 9 + 2c = m; rows g | g + 8).
struct S8Lane {
    float d16[2], dm[2];
    uint32_t sw[2][2], am[4];
};

__host__ __device__ __forceinline__ void s8_lane_prepare(const S8Tiles& t, int c, S8Lane& p) {
    JLLM_UNROLL
    for (int q = 0; q < 2; ++q) {
        const uint4 h = t.hd[q];
        p.d16[q] = fp16_to_f32(static_cast<uint16_t>(h.x & 0xFFFFu)) * 0.0625f;  // exact: a power of two
        p.dm[q] = fp16_to_f32(static_cast<uint16_t>(h.x >> 16));
        q4k_header_s8(h, c, p.sw[q], p.am[q], p.am[2 + q]);
    }
}

// The mma's A words for sub-block 2i + h: rows g (tile 0) and g + 8 (tile 1), k 4c.. and 16 + 4c..;
// the high nibbles masked in place (unsigned bytes: 16 times the code).
__host__ __device__ __forceinline__ void s8_a_words(const S8Tiles& t, int i, int h, uint32_t (&a)[4]) {
    const uint32_t mask = h ? 0xF0F0F0F0u : 0x0F0F0F0Fu;
    a[0] = t.qs[0][i].x & mask;
    a[1] = t.qs[1][i].x & mask;
    a[2] = t.qs[0][i].y & mask;
    a[3] = t.qs[1][i].y & mask;
}

// The 6-bit scale of sub-block j of tile q's row.
__host__ __device__ __forceinline__ int s8_scale(const S8Lane& p, int q, int j) {
#ifdef __CUDA_ARCH__
    return static_cast<int>(__byte_perm(p.sw[q][j >> 2], 0u, 0x4440u + (j & 3)));
#else
    return static_cast<int>((p.sw[q][j >> 2] >> (8 * (j & 3))) & 0xFFu);
#endif
}

// A sub-block's exact sums r (rows g, g, g + 8, g + 8 x tokens 2c, 2c + 1) times their rows' scales
// into s (the even sub-blocks' sums, or the odd ones' at 16 times the codes).
__host__ __device__ __forceinline__ void s8_add(int* s, int s0, int s1, const int (&r)[4]) {
    s[0] += s0 * r[0];
    s[1] += s0 * r[1];
    s[2] += s1 * r[2];
    s[3] += s1 * r[3];
}

// The super-block into acc: fma(da, fma(-dmin, msum, (d / 16) * float(16 lo + hi)), acc).
__host__ __device__ __forceinline__ void s8_finish(const S8Lane& p, const int (&lo)[4], const int (&hi)[4],
                                                   const float (&msum)[4], const S8Act& x, float (&acc)[4]) {
    JLLM_UNROLL
    for (int e = 0; e < 4; ++e) {
        const int q = e >> 1;
#ifdef __CUDA_ARCH__
        const float sd = __fmul_rn(p.d16[q], static_cast<float>(16 * lo[e] + hi[e]));
#else
        const float sd = p.d16[q] * static_cast<float>(16 * lo[e] + hi[e]);
#endif
        acc[e] = fmaf(x.da[e & 1], fmaf(-p.dm[q], msum[e], sd), acc[e]);
    }
}

}  // namespace cuda
}  // namespace jllm
