// backend/cuda/gemm_s8.cu — the prefill GEMM on int8 tensor cores (tiled Q4_K; gemm_takes_s8) and
// its input, the act_q8k activations (cuda_ops.h): launch_quantize_q8k, launch_gemm_s8.
//
// The block, the stages and the grid are kernel_gemm_small's (gemm.cuh: 8 warps of one m16 tile,
// 16 weight tiles, one barrier per block column, chunks of up to 64 tokens, split-K); what differs
// is the arithmetic. One mma.sync m16n8k32 s8 takes one 32-value sub-block: A the weights' 4-bit
// codes as bytes (lane (g, c): bytes 4c..4c + 3 and 16 + 4c.. of the sub-block, one AND of a qs
// word, shifted for the odd sub-block), B the activation bytes of the same columns (ldmatrix of the
// staged rows), an exact int32 sum per (row, token). The sub-block's 6-bit scale multiplies it into
// an int32 sum of the super-block (sum_j sc_j * isum_j: < 2^25 in magnitude); the minima's sum
// sum_j m_j * S_j (S_j: the token's sum of q over the sub-block) is one fp16 mma m16n8k16 per
// super-block with A = (64 m_j | m_j) and B = (hi_j | lo_j), S_j = 64 hi_j + lo_j, every product and
// partial sum an integer below 2^24, so exact. Per super-block each (row, token) then adds, in fp32,
//   acc = fma(da, fma(-dmin, msum, d * float(isum)), acc)
// which gemm_s8_ref repeats in the same order: without split-K the two agree bit for bit.
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/act_q8k.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int S8_STAGES = 2;         // block columns in shared memory: one computed, one arriving
constexpr int S8_PASS = 4;           // n8 tiles whose integer sums a warp keeps at once (128 registers)
constexpr int S8_ACT_PITCH = 272;    // bytes per token of a staged block column (256 + 16: ldmatrix rows
                                     // of 8 tokens fall on 8 different bank quartets)

// ---- the quantizer: a warp per 256 values of one token, lane l holding values 8l..8l + 7; from
// the fp16 input xh, or (x not null) from x, rounded as launch_to_f16 rounds it into xh_out first.
constexpr int Q8K_WARPS = 8;
__global__ void __launch_bounds__(Q8K_WARPS * WARP)
    kernel_quantize_q8k(const float* __restrict__ x, const uint16_t* __restrict__ xh, uint16_t* __restrict__ xh_out,
                        int64_t n_blk, int8_t* __restrict__ q, uint8_t* __restrict__ rec) {
    const int lane = threadIdx.x % WARP;
    const int64_t blk = static_cast<int64_t>(blockIdx.x) * Q8K_WARPS + threadIdx.x / WARP;
    if (blk >= n_blk) return;
    const int64_t i0 = blk * 256 + 8 * lane;
    uint4 h;
    if (x != nullptr) {
        h = pack_half8(*reinterpret_cast<const float4*>(x + i0), *reinterpret_cast<const float4*>(x + i0 + 4));
        *reinterpret_cast<uint4*>(xh_out + i0) = h;
    } else {
        h = *reinterpret_cast<const uint4*>(xh + i0);
    }
    quantize_q8k_warp(h, lane, blk, q, rec);
}

// kernel_quantize_q8k over n_tok x cols values into xq (act_q8k).
void run_quantize_q8k(const float* x, const uint16_t* xh, uint16_t* xh_out, int n_tok, int64_t cols, void* xq,
                      void* stream) {
    JLLM_ASSERT(n_tok >= 1 && cols % 256 == 0 && cols >= 256 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(xh) % 16 == 0 && reinterpret_cast<uintptr_t>(xh_out) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(xq) % 16 == 0);
    const int64_t n_blk = static_cast<int64_t>(n_tok) * (cols / 256);
    uint8_t* base = static_cast<uint8_t*>(xq);
    kernel_quantize_q8k<<<static_cast<unsigned>((n_blk + Q8K_WARPS - 1) / Q8K_WARPS), Q8K_WARPS * WARP, 0,
                          as_stream(stream)>>>(x, xh, xh_out, n_blk, reinterpret_cast<int8_t*>(base),
                                               base + act_q8k_records_at(n_tok, cols));
    JLLM_CUDA_LAUNCH_CHECK("kernel_quantize_q8k");
}

template <int N_TOK>
__host__ __device__ constexpr int s8_stage_bytes() {
    return N_TOK * 8 * (S8_ACT_PITCH + Q8K_REC) + REG_TILES * TileFmt<GgmlType::Q4_K>::BYTES;
}

// segs / w2 / split-K as kernel_gemm_small; xq: act_q8k q, rec its records.
template <int N_TOK>
__global__ void __launch_bounds__(REG_THREADS, 2)
    kernel_gemm_s8(GemmSegs segs, const uint8_t* __restrict__ w2, int64_t cols, const int8_t* __restrict__ xq,
                   const uint8_t* __restrict__ rec, int n_tok, int out_mode) {
    using F = TileFmt<GgmlType::Q4_K>;
    constexpr int ACT_BYTES = N_TOK * 8 * S8_ACT_PITCH;
    constexpr int REC_BYTES = N_TOK * 8 * Q8K_REC;
    constexpr int STAGE = s8_stage_bytes<N_TOK>();
    const RegBlock blk(segs, cols, n_tok, out_mode, N_TOK * 8);
    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int g = lane >> 2, c = lane & 3;
    xq += static_cast<int64_t>(blk.tok0) * cols;
    rec += static_cast<int64_t>(blk.tok0) * blk.nb * Q8K_REC;

    // This thread's copies of a block column: activation rows t0, t0 + 16, ... (16 bytes at unit u),
    // one record unit (tid < 3 n_loc: token tid / 3, unit tid % 3, at 16 tid in the stage) and
    // its tile's units (RegTileCopy).
    static_assert(REG_THREADS == 256 && 3 * 8 * N_TOK <= REG_THREADS, "16 tokens a sweep, a record unit a thread");
    const int t0 = tid >> 4, u = tid & 15;
    const int8_t* xa = xq + static_cast<int64_t>(t0) * cols + 16 * u;
    const int n_act = t0 < blk.n_loc ? (blk.n_loc - t0 + 15) >> 4 : 0;
    const bool has_rec = tid < 3 * blk.n_loc;
    const uint8_t* ra = rec + (static_cast<int64_t>(tid / 3) * blk.nb) * Q8K_REC + 16 * (tid % 3);
    const RegTileCopy<GgmlType::Q4_K> tiles(tid, blk.w, w2, blk.swiglu, blk.r0, blk.rows, blk.nb);
    const uint32_t smem0 = smem_addr(smem);
    auto issue = [&](int64_t kb, int st) {
        if (kb < blk.kb_last) {
            const uint32_t sb = smem0 + st * STAGE;
            const int8_t* xs = xa + kb * 256;
            const uint32_t ds = sb + t0 * S8_ACT_PITCH + 16 * u;
#pragma unroll
            for (int k = 0; k < (N_TOK + 1) / 2; ++k) {
                if (k < n_act) cp_async16_at(ds + 16 * k * S8_ACT_PITCH, xs + static_cast<int64_t>(16 * k) * cols);
            }
            if (has_rec) cp_async16_at(sb + ACT_BYTES + 16 * tid, ra + kb * Q8K_REC);
            tiles.issue(sb + ACT_BYTES + REC_BYTES, kb);
        }
        cp_async_commit();
    };

    bool valid[2];
#pragma unroll
    for (int q = 0; q < 2; ++q) valid[q] = reg_slot_row(blk.swiglu, blk.r0, warp, q) < blk.rows;

    float acc[N_TOK][4];
#pragma unroll
    for (int j = 0; j < N_TOK; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[j][k] = 0.0f;

    auto compute = [&](const uint8_t* sb) {
        const uint8_t* act = sb;
        const uint8_t* rc = sb + ACT_BYTES;
        const uint8_t* wt = sb + ACT_BYTES + REC_BYTES + warp * 2 * F::BYTES;
        // Slot q's super-block: d, dmin, the 8 sub-block scales as bytes (sc[q][0]: 0-3, [1]: 4-7)
        // and the minima m_2c, m_2c+1 (this lane's k pair of the minima's mma).
        float dq[2], mq[2];
        uint32_t sc[2][2], am[4];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            dq[q] = mq[q] = 0.0f;  // past the last row: zeros
            sc[q][0] = sc[q][1] = 0u;
            am[q] = am[2 + q] = 0u;
            if (valid[q]) {
                const uint4 h = *reinterpret_cast<const uint4*>(wt + q * F::BYTES + F::HDR + 16 * g);
                dq[q] = fp16_to_f32(static_cast<uint16_t>(h.x & 0xFFFFu));
                mq[q] = fp16_to_f32(static_cast<uint16_t>(h.x >> 16));
                // am[q]: k 2c, 2c + 1 (64 m, rows g | g + 8); am[2 + q]: k 8 + 2c, 9 + 2c (m)
                q4k_header_s8(h, c, sc[q], am[q], am[2 + q]);
            }
        }

        // The token tiles in passes of up to S8_PASS (the integer sums of one pass live across the
        // super-block; the weights' words are read again per pass, one AND each).
        // ldmatrix row of this lane: token (pair member lane / 16) * 8 + lane % 8, half (lane / 8) % 2.
        const int lrow = ((lane >> 4) * 8 + (lane & 7)) * S8_ACT_PITCH + 16 * ((lane >> 3) & 1);
        // This lane's qs word c of row g (tile_unit<true>'s swizzle) in the even and the odd unit of a pair.
        const uint8_t* qs_lo = wt + F::QS + 128 * g + 4 * c + 16 * (g & 1);
        const uint8_t* qs_hi = wt + F::QS + 128 * g + 4 * c + 16 * ((g & 1) ^ 1);
#pragma unroll
        for (int base = 0; base < N_TOK; base += S8_PASS) {
            constexpr int NP = N_TOK < S8_PASS ? N_TOK : S8_PASS;
            int isum[NP][4];
#pragma unroll
            for (int j = 0; j < NP; ++j)
#pragma unroll
                for (int k = 0; k < 4; ++k) isum[j][k] = 0;
#pragma unroll 1
            for (int half = 0; half < 2; ++half) {  // sub-blocks 4 half .. 4 half + 3: scale bytes of sc[q][half]
                const uint32_t sw0 = half ? sc[0][1] : sc[0][0], sw1 = half ? sc[1][1] : sc[1][0];
#pragma unroll
                for (int i2 = 0; i2 < 2; ++i2) {  // qs bytes 32i..32i + 31 (i = 2 half + i2): sub-blocks 2i, 2i + 1
                    const int i = 2 * half + i2;
                    // Units 2i and 2i + 1 of row g, staged at (2i + h) ^ g = 2 (i ^ g / 2) + (h ^ g % 2).
                    const int xi = 32 * (i ^ (g >> 1));
                    uint32_t wl[2], wh[2];
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
                        wl[q] = *reinterpret_cast<const uint32_t*>(qs_lo + q * F::BYTES + xi);
                        wh[q] = *reinterpret_cast<const uint32_t*>(qs_hi + q * F::BYTES + xi);
                    }
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int j = 2 * i + h;
                        const uint32_t a[4] = {(wl[0] >> (4 * h)) & 0x0F0F0F0Fu, (wl[1] >> (4 * h)) & 0x0F0F0F0Fu,
                                               (wh[0] >> (4 * h)) & 0x0F0F0F0Fu, (wh[1] >> (4 * h)) & 0x0F0F0F0Fu};
                        const int s0 = static_cast<int>(__byte_perm(sw0, 0u, 0x4440u + 2 * i2 + h));
                        const int s1 = static_cast<int>(__byte_perm(sw1, 0u, 0x4440u + 2 * i2 + h));
                        auto add = [&](int p, uint32_t b0, uint32_t b1) {
                            int t[4];
                            mma_16832_s8_new(t, a, b0, b1);
                            isum[p][0] += s0 * t[0];
                            isum[p][1] += s0 * t[1];
                            isum[p][2] += s1 * t[2];
                            isum[p][3] += s1 * t[3];
                        };
#pragma unroll
                        for (int p = 0; p < NP; p += 2) {
                            const int nt = base + p;
                            if (nt + 1 < N_TOK && p + 1 < NP) {
                                uint32_t b[4];
                                ldmatrix_x4(b, act + nt * 8 * S8_ACT_PITCH + lrow + 32 * j);
                                add(p, b[0], b[1]);
                                add(p + 1, b[2], b[3]);
                            } else if (nt < N_TOK) {
                                uint32_t b[2];
                                ldmatrix_x2(b, act + nt * 8 * S8_ACT_PITCH + lrow + 32 * j);
                                add(p, b[0], b[1]);
                            }
                        }
                    }
                }
            }
            // The pass's super-block into the fp32 sums: minima by one fp16 mma, then the scales.
#pragma unroll
            for (int p = 0; p < NP; ++p) {
                const int nt = base + p;
                if (nt >= N_TOK) break;
                const uint2 hl = *reinterpret_cast<const uint2*>(rc + (nt * 8 + g) * Q8K_REC + 8 * c);
                float msum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                mma_16816(msum, am, hl.x, hl.y);
                const float da[2] = {*reinterpret_cast<const float*>(rc + (nt * 8 + 2 * c) * Q8K_REC + Q8K_D),
                                     *reinterpret_cast<const float*>(rc + (nt * 8 + 2 * c + 1) * Q8K_REC + Q8K_D)};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int q = e >> 1;
                    const float v = fmaf(-mq[q], msum[e], __fmul_rn(dq[q], static_cast<float>(isum[p][e])));
                    acc[nt][e] = fmaf(da[e & 1], v, acc[nt][e]);
                }
            }
        }
    };

    static_assert(S8_STAGES == 2, "reg_gemm_walk's two stages");
    reg_gemm_walk(blk, smem, STAGE, valid[0], issue, compute);

#pragma unroll
    for (int nt = 0; nt < N_TOK; ++nt) {
        const int64_t r = blk.swiglu ? blk.r0 + warp * 8 + g : blk.r0 + warp * 16 + g;
        store_acc(blk.y, blk.rows, blk.n_loc, blk.ystride, blk.swiglu, blk.partial, out_mode, r, r, nt * 8 + 2 * c, acc[nt]);
    }
}

}  // namespace

size_t act_q8k_records_at(int n_tok, int64_t cols) {
    return (static_cast<size_t>(n_tok) * static_cast<size_t>(cols) + 15) & ~static_cast<size_t>(15);
}

size_t act_q8k_bytes(int n_tok, int64_t cols) {
    return act_q8k_records_at(n_tok, cols) + static_cast<size_t>(n_tok) * static_cast<size_t>(cols / 256) * Q8K_REC;
}

void launch_quantize_q8k(const uint16_t* xh, int n_tok, int64_t cols, void* xq, void* stream) {
    JLLM_ASSERT(xh != nullptr);
    run_quantize_q8k(nullptr, xh, nullptr, n_tok, cols, xq, stream);
}

void launch_to_f16_q8k(const float* x, int n_tok, int64_t cols, uint16_t* xh, void* xq, void* stream) {
    JLLM_ASSERT(x != nullptr && xh != nullptr);
    run_quantize_q8k(x, nullptr, xh, n_tok, cols, xq, stream);
}

bool gemm_takes_s8(WeightFormat fmt) { return fmt.tiled() && fmt.type == GgmlType::Q4_K; }

void launch_gemm_s8(int n_seg, GemmSegs segs, const uint8_t* w2, int64_t cols, const void* xq, int n_tok, MatOut out,
                    void* stream, float* work, size_t work_floats) {
    JLLM_ASSERT(n_tok >= 1 && cols % 256 == 0 && reinterpret_cast<uintptr_t>(xq) % 16 == 0);
    JLLM_ASSERT(out != MatOut::SwiGLU || (n_seg == 1 && w2 != nullptr && reinterpret_cast<uintptr_t>(w2) % 16 == 0));
    for (int s = 0; s < n_seg; ++s) {
        JLLM_ASSERT(segs.rows[s] >= 1 && tiles_fit(GgmlType::Q4_K, segs.rows[s], cols) &&
                    reinterpret_cast<uintptr_t>(segs.w[s]) % 16 == 0);
    }
    const RegChunks ch = reg_chunks(n_tok);
    const int8_t* q = static_cast<const int8_t*>(xq);
    const uint8_t* rec = static_cast<const uint8_t*>(xq) + act_q8k_records_at(n_tok, cols);
    auto run = [&](auto kernel, size_t stage_bytes) {
        const size_t smem = stage_bytes * S8_STAGES;
        allow_dynamic_smem(kernel, smem);
        launch_reg_gemm(reinterpret_cast<const void*>(kernel), smem, n_seg, segs, cols, n_tok, ch.chunks, out, stream, work,
                        work_floats, [&](dim3 grid, const GemmSegs& sg, int mode) {
                            kernel<<<grid, REG_THREADS, smem, as_stream(stream)>>>(sg, w2, cols, q, rec, n_tok, mode);
                            JLLM_CUDA_LAUNCH_CHECK("kernel_gemm_s8");
                        });
    };
    switch (ch.n8) {
        case 1: run(kernel_gemm_s8<1>, s8_stage_bytes<1>()); break;
        case 2: run(kernel_gemm_s8<2>, s8_stage_bytes<2>()); break;
        case 3: run(kernel_gemm_s8<3>, s8_stage_bytes<3>()); break;
        case 4: run(kernel_gemm_s8<4>, s8_stage_bytes<4>()); break;
        case 5: run(kernel_gemm_s8<5>, s8_stage_bytes<5>()); break;
        case 6: run(kernel_gemm_s8<6>, s8_stage_bytes<6>()); break;
        case 7: run(kernel_gemm_s8<7>, s8_stage_bytes<7>()); break;
        default: run(kernel_gemm_s8<8>, s8_stage_bytes<8>()); break;
    }
}

}  // namespace cuda
}  // namespace jllm
