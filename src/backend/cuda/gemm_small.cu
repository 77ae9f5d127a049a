// backend/cuda/gemm_small.cu — the prefill GEMM on tiled Q4_K/Q6_K (gemm_takes_small: every batch
// but a Q6_K SwiGLU product of more than GEMM_SMALL_CHUNK tokens), which launch_gemm and
// launch_gemm_multi (gemm.cu) hand over to.
//
// Each warp decodes its weights from the stage straight into mma fragments in registers, so a step
// needs no A tile, no ldmatrix and no barrier; one barrier per block column (256 columns) publishes
// the next stage. A block is 8 warps of one m16 tile each (rows g and g + 8: two tiles of 8 rows;
// SwiGLU: 8 gate rows and the same 8 up rows, so c0/c1 are gate and c2/c3 up sums of one row, as
// in kernel_gemm_mma), each with all N_TOK n8 tiles of its chunk's tokens. A batch goes in chunks
// of up to GEMM_SMALL_CHUNK tokens (grid y, as even as whole n8 tiles allow: 65 tokens are
// two chunks of 40 and 25), every chunk decoding the block's weights again. A stage holds one
// block column: the chunk's activations (fp16, 256 columns) and the block's 16 weight tiles,
// copied by cp.async while the other stage is computed.
// The k order inside a step is free as long as A and B agree: lane (g, c) takes the 4 weights a
// 32-bit word of its tile row holds (Q4_K: the 32 bytes of sub-blocks 2c and 2c + 1; Q6_K: the ql
// bytes 32c..32c+31), which are 4 consecutive columns, and reads the same 4 columns of token g as
// one 8-byte word; sg_act_offset places those words so the half-warps' loads do not collide.
// Numerics (gemm_small_ref): half2 arithmetic, 4 codes per byte_perm under fp16 1024, minus 1024
// (exact), then q * fp16(d * sc) - fp16(dmin * m) by one __hfma2 (Q6_K: (q - 32) * fp16(d * sc)
// by __hmul2). A warp whose block column holds a weight that could pass 65504 decodes
// ChunkDequant's fp32 values, saturated as pack_half2 does (gemm_f16_ref), in a loop kept compact:
// no quantizer makes such weights from a real model, and unrolled it crowded the fast path out of
// the instruction cache (docs/gpu_speed_notes.md).
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/chunk_dequant.cuh"
#include "backend/cuda/chunk_q8.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int SMALL_MT = 1;      // m16 tiles per warp
constexpr int SMALL_STAGES = 2;  // block columns in shared memory: one computed, one arriving
constexpr int SMALL_ACT_PITCH = 544;  // bytes per token of a staged block column (512 + 32)

// Byte offset of 8-byte unit u (0..7) of 32-column group G (0..7) of token t in a staged block
// column. The group's units are permuted by a constant per group and the token's parity, which
// with the 544-byte pitch gives the 16 lanes of each half-warp 16 different bank pairs for both
// types' lane-to-group maps (Q4_K: G = 2c + h; Q6_K: G = 4(c / 2) + c % 2 + 2h).
__device__ __forceinline__ int sg_act_offset(int t, int G, int u) {
    const int xs = ((G >> 2) << 1) | ((G ^ (G >> 1)) & 1);
    return t * SMALL_ACT_PITCH + 64 * G + 8 * (u ^ xs ^ (t & 1));
}

__device__ __forceinline__ __half2 u32_as_h2(uint32_t u) { return *reinterpret_cast<const __half2*>(&u); }
__device__ __forceinline__ uint32_t h2_as_u32(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }

// A 4-bit or 6-bit code as an exact float (no integer conversion instruction).
__device__ __forceinline__ float code_f(uint32_t q) { return __int_as_float(0x4B000000u | q) - 8388608.0f; }

template <GgmlType T, int N_TOK>
__host__ __device__ constexpr int small_stage_bytes() {
    return N_TOK * 8 * SMALL_ACT_PITCH + REG_TILES * TileFmt<T>::BYTES;
}

// segs: up to GEMM_MAX_SEG matrices of one width (a plain product is one segment); w2: the up
// matrix of a SwiGLU product (one segment). Split-K (grid z > 1): block z takes block columns
// [z * NB / Z, (z + 1) * NB / Z) and stores partial sums as kernel_gemm_mma does.
template <GgmlType T, int N_TOK>
__global__ void __launch_bounds__(REG_THREADS)
    kernel_gemm_small(GemmSegs segs, const uint8_t* __restrict__ w2, int64_t cols, const uint16_t* __restrict__ x,
                      int n_tok, int out_mode) {
    using F = TileFmt<T>;
    constexpr int MT = SMALL_MT, Q = 2 * MT;  // tile slots per warp
    constexpr int THREADS = REG_THREADS;
    constexpr int ACT_BYTES = N_TOK * 8 * SMALL_ACT_PITCH;
    constexpr int STAGE = small_stage_bytes<T, N_TOK>();
    const RegBlock blk(segs, cols, n_tok, out_mode, N_TOK * 8);
    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int g = lane >> 2, c = lane & 3;
    x += static_cast<int64_t>(blk.tok0) * cols;

    // Tile slot q (0, 1) of warp v: fragment rows g or g + 8 of its m16 tile.
    static_assert(MT == 1, "reg_slot_row: one m16 tile per warp");
    auto slot_row = [&](int v, int q) -> int64_t { return reg_slot_row(blk.swiglu, blk.r0, v, q); };

    // This thread's activation copies of a block column: 8 bytes at unit u = tid % 64 of tokens
    // t0, t0 + 4, ... (t0 = tid / 64; the token's parity, and so sg_act_offset's permutation, is the
    // thread's), and its tile's units (RegTileCopy).
    static_assert(THREADS % 64 == 0 && (THREADS / 64) % 2 == 0, "a thread's tokens keep their parity");
    constexpr int TSTEP = THREADS / 64;
    const int t0 = tid >> 6, ua = tid & 63;
    const uint16_t* xa = x + static_cast<int64_t>(t0) * cols + 4 * ua;
    const int n_act = t0 < blk.n_loc ? (blk.n_loc - t0 + TSTEP - 1) / TSTEP : 0;
    const uint32_t da = static_cast<uint32_t>(sg_act_offset(t0, ua >> 3, ua & 7));
    const uint32_t smem0 = smem_addr(smem);
    const RegTileCopy<T> tiles(tid, blk.w, w2, blk.swiglu, blk.r0, blk.rows, blk.nb);
    auto issue = [&](int64_t kb, int st) {
        if (kb < blk.kb_last) {
            const uint32_t sb = smem0 + st * STAGE;
            const uint16_t* xs = xa + kb * 256;
#pragma unroll
            for (int k = 0; k < (N_TOK * 8 + TSTEP - 1) / TSTEP; ++k) {
                if (k < n_act) {
                    cp_async8_at(sb + da + k * TSTEP * SMALL_ACT_PITCH, xs + static_cast<int64_t>(k * TSTEP) * cols);
                }
            }
            tiles.issue(sb + ACT_BYTES, kb);
        }
        cp_async_commit();
    };

    bool valid[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) valid[q] = slot_row(warp, q) < blk.rows;

    float acc[MT][N_TOK][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < N_TOK; ++j)
#pragma unroll
            for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.0f;

    // One k step: the warp's m16 tiles' fragments from pair(q, p) (slot q's columns 2p, 2p + 1 of the
    // step's 4 as a half2), then the N_TOK token tiles' B words of 32-column group G, unit u.
    auto step = [&](auto pair, int G, int u, const uint8_t* act) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            a[mt][0] = pair(2 * mt, 0);
            a[mt][1] = pair(2 * mt + 1, 0);
            a[mt][2] = pair(2 * mt, 1);
            a[mt][3] = pair(2 * mt + 1, 1);
        }
#pragma unroll
        for (int nt = 0; nt < N_TOK; ++nt) {
            const uint2 b = *reinterpret_cast<const uint2*>(act + sg_act_offset(nt * 8 + g, G, u));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma_16816(acc[mt][nt], a[mt], b.x, b.y);
        }
    };
    // Byte selectors of codes_h2: bytes 0, 1 (p = 0) or 2, 3 (p = 1) of the codes, each under 0x64.
    auto codes_h2 = [](uint32_t codes, int p) { return __byte_perm(codes, 0x6464u, p ? 0x4342u : 0x4140u); };

    auto compute = [&](const uint8_t* sb) {
        const uint8_t* act = sb;
        const uint8_t* wt = sb + ACT_BYTES + warp * Q * F::BYTES;
        if constexpr (T == GgmlType::Q4_K) {
            float dl[Q][2], ml[Q][2];
#pragma unroll
            for (int q = 0; q < Q; ++q) {
                dl[q][0] = dl[q][1] = ml[q][0] = ml[q][1] = 0.0f;  // past the last row: zeros
                if (!valid[q]) continue;
                const uint4 h = *reinterpret_cast<const uint4*>(wt + q * F::BYTES + F::HDR + 16 * g);
                const float d = fp16_to_f32(static_cast<uint16_t>(h.x & 0xFFFFu));
                const float dmin = fp16_to_f32(static_cast<uint16_t>(h.x >> 16));
                float sc[2], mn[2];
                scale_min_k4_pair(h.y, h.z, h.w, c, sc, mn);
                dl[q][0] = d * sc[0], dl[q][1] = d * sc[1];
                ml[q][0] = dmin * mn[0], ml[q][1] = dmin * mn[1];
            }
            // The half2 decoder (q * fp16(dl) - fp16(ml) by one fma) wherever every weight of the
            // warp's tiles is within fp16's range; else ChunkDequant's fp32 values, saturated.
            bool in_range = true;
            uint32_t dl2[Q][2], nml2[Q][2];
#pragma unroll
            for (int q = 0; q < Q; ++q) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    in_range = in_range && 15.0f * fabsf(dl[q][h]) + fabsf(ml[q][h]) <= 65504.0f;
                    dl2[q][h] = h2_as_u32(__float2half2_rn(dl[q][h]));
                    nml2[q][h] = h2_as_u32(__float2half2_rn(-ml[q][h]));
                }
            }
            if (!__all_sync(0xFFFFFFFFu, in_range)) {
                // Compact (not unrolled): it only runs for weights no real model has.
#pragma unroll 1
                for (int ks = 0; ks < 16; ++ks) {
                    const int uh = ks >> 3, wd = (ks >> 1) & 3, h = ks & 1;
                    auto v = [&](int q, int e) {
                        const uint32_t word =
                            *reinterpret_cast<const uint32_t*>(tile_unit<true>(wt + q * F::BYTES, F::QS, 128, g, 2 * c + uh) + 4 * wd);
                        const float dq = h ? dl[q][1] : dl[q][0], mq = h ? ml[q][1] : ml[q][0];
                        return dq * code_f((word >> (8 * e + 4 * h)) & 0xFu) - mq;
                    };
                    step([&](int q, int p) { return pack_half2(v(q, 2 * p), v(q, 2 * p + 1)); }, 2 * c + h, 4 * uh + wd, act);
                }
                return;
            }
#pragma unroll
            for (int uh = 0; uh < 2; ++uh) {
                uint32_t raw[Q][4];
#pragma unroll
                for (int q = 0; q < Q; ++q) {
                    const uint4 r = *reinterpret_cast<const uint4*>(tile_unit<true>(wt + q * F::BYTES, F::QS, 128, g, 2 * c + uh));
                    raw[q][0] = r.x, raw[q][1] = r.y, raw[q][2] = r.z, raw[q][3] = r.w;
                }
#pragma unroll
                for (int wd = 0; wd < 4; ++wd) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        auto pair = [&](int q, int p) {
                            const uint32_t codes = (raw[q][wd] >> (4 * h)) & 0x0F0F0F0Fu;
                            const __half2 qv = __hsub2(u32_as_h2(codes_h2(codes, p)), __float2half2_rn(1024.0f));
                            return h2_as_u32(__hfma2(qv, u32_as_h2(dl2[q][h]), u32_as_h2(nml2[q][h])));
                        };
                        step(pair, 2 * c + h, 4 * uh + wd, act);
                    }
                }
            }
        } else {
            static_assert(T == GgmlType::Q6_K, "small GEMM: tiled Q4_K and Q6_K");
            float dl[Q][2][2];
#pragma unroll
            for (int q = 0; q < Q; ++q) {
                dl[q][0][0] = dl[q][0][1] = dl[q][1][0] = dl[q][1][1] = 0.0f;
                if (!valid[q]) continue;
                const uint8_t* tile = wt + q * F::BYTES;
                const float d = fp16_to_f32(*reinterpret_cast<const uint16_t*>(tile + F::D + 2 * g));
                const uint4 s = *reinterpret_cast<const uint4*>(tile + F::SC + 16 * g);
                // Scales 8(c / 2) + 2(c % 2) + {0, 1} (h = 0) and + 4 (h = 1): word c / 2 * 2 (+1), bytes 2(c % 2).
                const uint32_t s_lo = (c >> 1) ? s.z : s.x, s_hi = (c >> 1) ? s.w : s.y;
                const int sh = 16 * (c & 1);
#pragma unroll
                for (int lh = 0; lh < 2; ++lh) {
                    dl[q][0][lh] = d * static_cast<float>(static_cast<int8_t>(s_lo >> (sh + 8 * lh)));
                    dl[q][1][lh] = d * static_cast<float>(static_cast<int8_t>(s_hi >> (sh + 8 * lh)));
                }
            }
            // The half2 decoder ((q - 32) * fp16(dl)) wherever the warp's weights are within fp16's
            // range; else ChunkDequant's fp32 values, saturated.
            bool in_range = true;
            uint32_t dl2[Q][2][2];
#pragma unroll
            for (int q = 0; q < Q; ++q) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
#pragma unroll
                    for (int lh = 0; lh < 2; ++lh) {
                        in_range = in_range && 32.0f * fabsf(dl[q][h][lh]) <= 65504.0f;
                        dl2[q][h][lh] = h2_as_u32(__float2half2_rn(dl[q][h][lh]));
                    }
                }
            }
            const int hs = 2 * (c & 1);
            if (!__all_sync(0xFFFFFFFFu, in_range)) {
                // Compact (not unrolled): it only runs for weights no real model has.
#pragma unroll 1
                for (int ks = 0; ks < 16; ++ks) {
                    const int uh = ks >> 3, wd = (ks >> 1) & 3, h = ks & 1;
                    auto v = [&](int q, int e) {
                        const uint8_t* tile = wt + q * F::BYTES;
                        const uint32_t l = *reinterpret_cast<const uint32_t*>(tile_unit<true>(tile, F::QL, 128, g, 2 * c + uh) + 4 * wd);
                        const uint32_t m = *reinterpret_cast<const uint32_t*>(tile_unit<true>(tile, F::QH, 64, g, 2 * (c >> 1) + uh) + 4 * wd);
                        const uint32_t lo = (l >> (8 * e + 4 * h)) & 0xFu;
                        const uint32_t hi = (m >> (8 * e + hs + 4 * h)) & 3u;
                        const float dq = h ? (uh ? dl[q][1][1] : dl[q][1][0]) : (uh ? dl[q][0][1] : dl[q][0][0]);
                        return dq * (code_f(lo | (hi << 4)) - 32.0f);
                    };
                    step([&](int q, int p) { return pack_half2(v(q, 2 * p), v(q, 2 * p + 1)); },
                         4 * (c >> 1) + (c & 1) + 2 * h, 4 * uh + wd, act);
                }
                return;
            }
#pragma unroll
            for (int uh = 0; uh < 2; ++uh) {
                uint32_t ql[Q][4], qh[Q][4];
#pragma unroll
                for (int q = 0; q < Q; ++q) {
                    const uint8_t* tile = wt + q * F::BYTES;
                    const uint4 l = *reinterpret_cast<const uint4*>(tile_unit<true>(tile, F::QL, 128, g, 2 * c + uh));
                    const uint4 m = *reinterpret_cast<const uint4*>(tile_unit<true>(tile, F::QH, 64, g, 2 * (c >> 1) + uh));
                    ql[q][0] = l.x, ql[q][1] = l.y, ql[q][2] = l.z, ql[q][3] = l.w;
                    qh[q][0] = m.x, qh[q][1] = m.y, qh[q][2] = m.z, qh[q][3] = m.w;
                }
#pragma unroll
                for (int wd = 0; wd < 4; ++wd) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        auto pair = [&](int q, int p) {
                            // The codes' high crumbs (bits hs + 4h of each qh byte) at bits 4-5.
                            const uint32_t hi = (h ? qh[q][wd] >> hs : qh[q][wd] << (4 - hs)) & 0x30303030u;
                            const uint32_t codes = ((ql[q][wd] >> (4 * h)) & 0x0F0F0F0Fu) | hi;
                            const __half2 qv = __hsub2(u32_as_h2(codes_h2(codes, p)), __float2half2_rn(1056.0f));
                            return h2_as_u32(__hmul2(qv, u32_as_h2(dl2[q][h][uh])));
                        };
                        step(pair, 4 * (c >> 1) + (c & 1) + 2 * h, 4 * uh + wd, act);
                    }
                }
            }
        }
    };

    static_assert(SMALL_STAGES == 2, "reg_gemm_walk's two stages");
    reg_gemm_walk(blk, smem, STAGE, valid[0], issue, compute);

#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < N_TOK; ++nt) {
            const int64_t r = blk.swiglu ? blk.r0 + warp * 8 * MT + 8 * mt + g : blk.r0 + warp * 16 * MT + 16 * mt + g;
            store_acc(blk.y, blk.rows, blk.n_loc, blk.ystride, blk.swiglu, blk.partial, out_mode, r, r, nt * 8 + 2 * c, acc[mt][nt]);
        }
    }
}

}  // namespace

// The register-decoding product of n_seg segments (segs: weights, outputs, rows; block_end unset) or a
// SwiGLU product (one segment, w2 its up matrix): the grid, split parts in work, the reductions.
void launch_gemm_small(GgmlType type, int n_seg, GemmSegs segs, const uint8_t* w2, int64_t cols, const uint16_t* x,
                       int n_tok, MatOut out, void* stream, float* work, size_t work_floats) {
    JLLM_ASSERT(n_tok >= 1 && cols % 256 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
    JLLM_ASSERT(out != MatOut::SwiGLU || (n_seg == 1 && w2 != nullptr));
    for (int s = 0; s < n_seg; ++s) {
        JLLM_ASSERT(segs.rows[s] >= 1 && tiles_fit(type, segs.rows[s], cols) && reinterpret_cast<uintptr_t>(segs.w[s]) % 16 == 0);
    }
    const RegChunks ch = reg_chunks(n_tok);
    const bool ok = dispatch_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        auto run = [&](auto kernel, size_t stage_bytes) {
            const size_t smem = stage_bytes * SMALL_STAGES;
            allow_dynamic_smem(kernel, smem);
            launch_reg_gemm(reinterpret_cast<const void*>(kernel), smem, n_seg, segs, cols, n_tok, ch.chunks, out, stream,
                            work, work_floats, [&](dim3 grid, const GemmSegs& sg, int mode) {
                                kernel<<<grid, REG_THREADS, smem, as_stream(stream)>>>(sg, w2, cols, x, n_tok, mode);
                                JLLM_CUDA_LAUNCH_CHECK("kernel_gemm_small");
                            });
        };
        switch (ch.n8) {
            case 1: run(kernel_gemm_small<T, 1>, small_stage_bytes<T, 1>()); break;
            case 2: run(kernel_gemm_small<T, 2>, small_stage_bytes<T, 2>()); break;
            case 3: run(kernel_gemm_small<T, 3>, small_stage_bytes<T, 3>()); break;
            case 4: run(kernel_gemm_small<T, 4>, small_stage_bytes<T, 4>()); break;
            case 5: run(kernel_gemm_small<T, 5>, small_stage_bytes<T, 5>()); break;
            case 6: run(kernel_gemm_small<T, 6>, small_stage_bytes<T, 6>()); break;
            case 7: run(kernel_gemm_small<T, 7>, small_stage_bytes<T, 7>()); break;
            default: run(kernel_gemm_small<T, 8>, small_stage_bytes<T, 8>()); break;
        }
    });
    if (!ok) throw JllmError(std::string("cuda: no register-decoding GEMM kernel for weight type ") + type_name(type));
}

bool gemm_takes_small(WeightFormat fmt, int n_tok, MatOut out) {
    // Past one chunk, the Q6_K SwiGLU product (two Q6_K tiles decoded side by side: 128 registers
    // with spills at 8 token tiles) stays on kernel_gemm_mma, which measured faster there.
    return fmt.tiled() && (n_tok <= GEMM_SMALL_CHUNK || fmt.type != GgmlType::Q6_K || out != MatOut::SwiGLU);
}

}  // namespace cuda
}  // namespace jllm
