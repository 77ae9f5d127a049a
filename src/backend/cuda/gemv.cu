// backend/cuda/gemv.cu — decode matrix-vector products with the dequantization fused in, and
// the embedding lookup (same per-chunk dequantizers).
//
// GEMV layout: one warp per weight row, GEMV_ROWS rows (warps) per block. Lane l handles
// chunks l, l+32, ... of the row, so a warp's 32 lanes read 32 consecutive chunks — a
// contiguous stretch of the row (k-quant chunks are read as aligned 16-byte loads) — and each
// weight byte is read once for all n_tok (<= GEMV_MAX_TOKENS) tokens. Accumulation in fp32,
// one warp reduction per token at the end; the epilogue stores, adds (residual) or applies
// SwiGLU with a second weight matrix read in the same pass.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int GEMV_ROWS = 4;

__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// w, w2: [rows][row_bytes] or tiled (TILED); x: [n_tok][cols]; y: [n_tok][rows].
template <GgmlType T, bool TILED>
__global__ void __launch_bounds__(GEMV_ROWS * WARP)
    kernel_gemv(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, int64_t rows, int64_t cols,
                size_t row_bytes, const float* __restrict__ x, int n_tok, float* __restrict__ y, int out_mode) {
    const int lane = threadIdx.x % WARP;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * GEMV_ROWS + threadIdx.x / WARP;
    if (r >= rows) return;
    const bool swiglu = out_mode == static_cast<int>(MatOut::SwiGLU);
    const int64_t n_chunks = cols / 32, nb = cols / 256;
    float acc[GEMV_MAX_TOKENS] = {};
    float acc2[GEMV_MAX_TOKENS] = {};
    for (int64_t c = lane; c < n_chunks; c += WARP) {
        float wv[32];
        chunk_of<T, TILED>(w, row_bytes, nb, r, c, wv);
#pragma unroll
        for (int t = 0; t < GEMV_MAX_TOKENS; ++t) {
            if (t < n_tok) {
                const float4* xp = reinterpret_cast<const float4*>(x + t * cols + c * 32);
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const float4 xv = xp[i];
                    acc[t] += wv[4 * i] * xv.x + wv[4 * i + 1] * xv.y + wv[4 * i + 2] * xv.z + wv[4 * i + 3] * xv.w;
                }
            }
        }
        if (swiglu) {
            chunk_of<T, TILED>(w2, row_bytes, nb, r, c, wv);
#pragma unroll
            for (int t = 0; t < GEMV_MAX_TOKENS; ++t) {
                if (t < n_tok) {
                    const float4* xp = reinterpret_cast<const float4*>(x + t * cols + c * 32);
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        const float4 xv = xp[i];
                        acc2[t] +=
                            wv[4 * i] * xv.x + wv[4 * i + 1] * xv.y + wv[4 * i + 2] * xv.z + wv[4 * i + 3] * xv.w;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_TOKENS; ++t) {
        if (t >= n_tok) break;
        const float s = warp_sum(acc[t]);
        const float s2 = swiglu ? warp_sum(acc2[t]) : 0.0f;
        if (lane == 0) {
            float* out = y + t * rows + r;
            if (out_mode == static_cast<int>(MatOut::Store)) *out = s;
            else if (out_mode == static_cast<int>(MatOut::Add)) *out += s;
            else *out = silu_mul(s, s2);
        }
    }
}

// table: [n_vocab][row_bytes] or tiled (TILED); out: [n_tok][n_embd]; one block per token.
template <GgmlType T, bool TILED>
__global__ void kernel_embed(const uint8_t* __restrict__ table, int64_t n_vocab, int64_t n_embd, size_t row_bytes,
                             const int32_t* __restrict__ tokens, float* __restrict__ out) {
    const int t = blockIdx.x;
    const int32_t id = tokens[t];
    float* o = out + static_cast<int64_t>(t) * n_embd;
    const int64_t n_chunks = n_embd / 32;
    for (int64_t c = threadIdx.x; c < n_chunks; c += blockDim.x) {
        float v[32];
        if (id >= 0 && id < n_vocab) {
            chunk_of<T, TILED>(table, row_bytes, n_embd / 256, id, c, v);
        } else {
#pragma unroll
            for (int i = 0; i < 32; ++i) v[i] = __int_as_float(0x7fc00000);
        }
        float4* op = reinterpret_cast<float4*>(o + c * 32);
#pragma unroll
        for (int i = 0; i < 8; ++i) op[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
}


// ---------------------------------------------------------------- 8-bit activations

// x: [n_rows][cols] -> xq (act_q8 layout). One warp per 32-value block.
constexpr int QUANT_WARPS = 8;
__global__ void __launch_bounds__(QUANT_WARPS * WARP)
    kernel_quantize_act(const float* __restrict__ x, int64_t n_blocks, int8_t* __restrict__ q, float4* __restrict__ s) {
    const int lane = threadIdx.x % WARP;
    const int64_t blk = static_cast<int64_t>(blockIdx.x) * QUANT_WARPS + threadIdx.x / WARP;
    if (blk >= n_blocks) return;
    quantize_block_warp(x[blk * 32 + lane], lane, q + blk * 32, s + blk);
}

// ---------------------------------------------------------------- dp4a GEMV
// A block of GEMV_Q8_WARPS warps serves GEMV_Q8_WARPS / ks rows (rows of up to GEMV_Q8_MAX_SEG
// matrices laid end to end); the ks warps of a row split its chunks (ks > 1 for long rows, so
// short matrices still fill the GPU), lane l of part k taking chunks k * 32 + l, + 32 ks, ...
// Per chunk the weight is decoded to 32 integers (ChunkQ8) and dotted with each token's 32
// activation bytes by eight dp4a, then scaled:
//   acc += (a0 * dot(q[0..15]) + a1 * dot(q[16..31])) * d + b0 * s0 + b1 * s1.
// U chunks per lane are decoded before any is used, so their loads are in flight together
// (bandwidth needs bytes in flight; a lane's chunks are independent). Out-of-range chunks load
// a valid chunk and are weighted by zero.
constexpr int GEMV_Q8_WARPS = 4;

struct GemvQ8Args {
    const uint8_t* w[GEMV_Q8_MAX_SEG];
    float* y[GEMV_Q8_MAX_SEG];
    int64_t row_end[GEMV_Q8_MAX_SEG];  // cumulative
    const uint8_t* w2;                 // SwiGLU up projection (one segment)
    int64_t cols;
    size_t row_bytes;
    const int8_t* xq;
    const float4* xs;
    int out_mode;
    int ks;  // warps per row: 1, 2 or 4
};

// The unit of work of one lane: one 32-element chunk, or for Q4_K the two chunks that share
// a 32-byte run of quants (low and high nibbles) and the block header — one 48-byte read for 64
// weights instead of two.
template <GgmlType T>
struct GemvUnit {
    static constexpr int CHUNKS = 1;
};
template <>
struct GemvUnit<GgmlType::Q4_K> {
    static constexpr int CHUNKS = 2;
};

// acc + the dot product of 16 int8 weights (4 words at q) and 16 activation bytes.
__host__ __device__ __forceinline__ int dot4(const uint32_t* q, uint4 x, int acc) {
    return dp4a_i8(q[3], x.w, dp4a_i8(q[2], x.z, dp4a_i8(q[1], x.y, dp4a_i8(q[0], x.x, acc))));
}
__device__ __forceinline__ int dot8(const uint32_t* q, uint4 x0, uint4 x1) { return dot4(q + 4, x1, dot4(q, x0, 0)); }

// Units c, c + step, ... (U of them) of R rows (the same unit indices in each) into acc[R][NT].
// `live` (warp-uniform) bounds the slots: a slot past the rows' units for the whole warp is
// skipped; within a live slot, lanes past the end read a valid unit and weigh it by zero. With
// R = 2 each activation load serves both rows (the loads of activations otherwise outnumber the
// weight bytes two to one on the L1 path).
template <GgmlType T, int NT, int U, int R>
__device__ __forceinline__ void gemv_q8_batch(const uint8_t* const* wr, int64_t c, int64_t step, int64_t n_units,
                                              int live, const GemvQ8Args& a, float (*acc)[NT]) {
    const int64_t n_chunks = a.cols / 32;
    if constexpr (GemvUnit<T>::CHUNKS == 2) {
        // Q4_K pair p of a 256-block: chunks 2p, 2p + 1 = low / high nibbles of qs[32p..32p+31].
        // 32-bit unit indices (a row has far fewer than 2^31 units).
        uint4 hdr[R][U], v0[R][U], v1[R][U];
        int cc[U];
        const int nu = static_cast<int>(n_units);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (u < live) {
                const int cu = static_cast<int>(c + u * step);
                cc[u] = cu < nu ? cu : nu - 1;
                const uint32_t blk = static_cast<uint32_t>(cc[u] >> 2) * static_cast<uint32_t>(sizeof(BlockQ4_K));
                const uint32_t qs = blk + 16u + 32u * static_cast<uint32_t>(cc[u] & 3);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    hdr[r][u] = ld16(wr[r] + blk);
                    v0[r][u] = ld16(wr[r] + qs);
                    v1[r][u] = ld16(wr[r] + qs + 16);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (u >= live) continue;
            const int p = cc[u] & 3;
            const bool past = c + u * step >= n_units;
            float a0[R], a1[R], b0[R], b1[R];
            uint32_t lo[R][8], hi[R][8];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float sc[2], mn[2];
                scale_min_k4_pair(hdr[r][u].y, hdr[r][u].z, hdr[r][u].w, p, sc, mn);
                float d = fp16_to_f32(static_cast<uint16_t>(hdr[r][u].x & 0xFFFFu));
                float dmin = fp16_to_f32(static_cast<uint16_t>(hdr[r][u].x >> 16));
                if (past) d = dmin = 0.0f;
                a0[r] = d * sc[0];
                a1[r] = d * sc[1];
                b0[r] = -(dmin * mn[0]);
                b1[r] = -(dmin * mn[1]);
                const uint32_t w[8] = {v0[r][u].x, v0[r][u].y, v0[r][u].z, v0[r][u].w,
                                       v1[r][u].x, v1[r][u].y, v1[r][u].z, v1[r][u].w};
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    lo[r][k] = w[k] & 0x0F0F0F0Fu;
                    hi[r][k] = (w[k] >> 4) & 0x0F0F0F0Fu;
                }
            }
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const uint8_t* xp = reinterpret_cast<const uint8_t*>(a.xq) + t * a.cols + cc[u] * 64;
                const float4* sp = a.xs + t * n_chunks + 2 * cc[u];
                const float4 s0 = __ldg(sp), s1 = __ldg(sp + 1);
                const uint4 x0 = ld16(xp), x1 = ld16(xp + 16), x2 = ld16(xp + 32), x3 = ld16(xp + 48);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int d0 = dot8(lo[r], x0, x1);
                    const int d1 = dot8(hi[r], x2, x3);
                    acc[r][t] += (a0[r] * static_cast<float>(d0)) * s0.x + b0[r] * (s0.y + s0.w) +
                                 (a1[r] * static_cast<float>(d1)) * s1.x + b1[r] * (s1.y + s1.w);
                }
            }
        }
    } else {
        uint32_t q[R][U][8];
        float sa[R][U][2], sb[R][U][2];
        int64_t cc[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (u < live) {
                const int64_t cu = c + u * step;
                cc[u] = cu < n_units ? cu : n_units - 1;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    ChunkQ8<T>::run(wr[r], cc[u], q[r][u], sa[r][u], sb[r][u]);
                    if (cu >= n_units) sa[r][u][0] = sa[r][u][1] = sb[r][u][0] = sb[r][u][1] = 0.0f;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (u >= live) continue;
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const uint8_t* xp = reinterpret_cast<const uint8_t*>(a.xq + t * a.cols + cc[u] * 32);
                const uint4 x0 = ld16(xp), x1 = ld16(xp + 16);
                const float4 s = __ldg(a.xs + t * n_chunks + cc[u]);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int d0 = dot4(q[r][u], x0, 0), d1 = dot4(q[r][u] + 4, x1, 0);
                    acc[r][t] += (sa[r][u][0] * static_cast<float>(d0) + sa[r][u][1] * static_cast<float>(d1)) * s.x +
                                 sb[r][u][0] * s.y + sb[r][u][1] * s.w;
                }
            }
        }
    }
}

// LPR: lanes per row. 32 for long rows (a warp per row, or ks warps per row; R rows per warp:
// 2 when a lane walks more than one batch, so one activation load serves both rows; 1 for
// shorter rows, where more warps matter more, and for SwiGLU, which already reads two
// matrices). 16 or 8 for short rows: a warp serves 32 / LPR rows at once, so a decode-sized
// matrix (a few MB) runs as one wave of warps that each have all their loads in flight, instead
// of waves of warps that each load one or two units per lane. U units per lane per batch.
template <GgmlType T, int NT, int R, int LPR, int U, bool SW>
__global__ void __launch_bounds__(GEMV_Q8_WARPS * WARP) kernel_gemv_q8(GemvQ8Args a) {
    static_assert(LPR == WARP || R == 1, "several rows per lane only with a warp per row");
    static_assert(!SW || (R == 1 && LPR < WARP), "fused SwiGLU batches: short rows only");
    constexpr int RPW = WARP / LPR;  // row groups per warp
    __shared__ float part[2][GEMV_Q8_WARPS][R][NT];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int sub = lane % LPR;  // lane within the row group
    const int ks = LPR == WARP ? a.ks : 1;
    const int64_t r0 =
        ((static_cast<int64_t>(blockIdx.x) * (GEMV_Q8_WARPS / ks) + warp / ks) * RPW + lane / LPR) * R;
    const int kp = warp % ks;
    // Segment by selects, not by indexing the parameter arrays (which would copy them to
    // local memory).
    int seg[R];
    int64_t seg_rows[R], lr[R];
    bool valid[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int64_t r = r0 + i;
        seg[i] = r < a.row_end[0] ? 0 : (r < a.row_end[1] ? 1 : 2);
        const int64_t begin = seg[i] == 0 ? 0 : (seg[i] == 1 ? a.row_end[0] : a.row_end[1]);
        const int64_t end = seg[i] == 0 ? a.row_end[0] : (seg[i] == 1 ? a.row_end[1] : a.row_end[2]);
        valid[i] = r < end;  // no early return: the group sums and the block barrier need every lane
        seg_rows[i] = end - begin;
        lr[i] = r - begin;
    }
    const bool swiglu = a.out_mode == static_cast<int>(MatOut::SwiGLU);
    const int64_t n_chunks = a.cols / 32;
    float acc[R][NT], acc2[1][NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        acc2[0][t] = 0.0f;
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i][t] = 0.0f;
    }
    if (valid[0]) {  // rows ascend: an invalid first row means no valid row
        const uint8_t* wr[R];
#pragma unroll
        for (int i = 0; i < R; ++i) {
            // an invalid later row reads the first row's bytes; its sums are never stored (selects,
            // not an index computed at run time, keep seg and lr in registers)
            const int sg = valid[i] ? seg[i] : seg[0];
            const int64_t rr = valid[i] ? lr[i] : lr[0];
            wr[i] = (sg == 0 ? a.w[0] : (sg == 1 ? a.w[1] : a.w[2])) + rr * a.row_bytes;
        }
        const int64_t n_units = n_chunks / GemvUnit<T>::CHUNKS;
        const int64_t step = static_cast<int64_t>(LPR) * ks;
        // Slots of a batch that hold a unit for at least the group's first lane (the same for
        // every group of the warp).
        auto live_slots = [&](int64_t c0) {
            const int64_t left = n_units - c0;
            return static_cast<int>(left <= 0 ? 0 : std::min<int64_t>(U, (left + step - 1) / step));
        };
        const int64_t first = static_cast<int64_t>(kp) * LPR;  // the group's first lane's first unit
        if (!swiglu) {
            for (int64_t c0 = first; c0 < n_units; c0 += U * step) {
                gemv_q8_batch<T, NT, U, R>(wr, c0 + sub, step, n_units, live_slots(c0), a, acc);
            }
        } else if constexpr (!SW && R == 1) {
            // gate, then up
            const uint8_t* wr2[1] = {a.w2 + lr[0] * a.row_bytes};
            for (int64_t c0 = first; c0 < n_units; c0 += U * step) {
                const int live = live_slots(c0);
                gemv_q8_batch<T, NT, U, 1>(wr, c0 + sub, step, n_units, live, a, acc);
                gemv_q8_batch<T, NT, U, 1>(wr2, c0 + sub, step, n_units, live, a, acc2);
            }
        } else if constexpr (SW) {
            // The gate and up rows as the two rows of one batch: one activation load serves both
            // and both matrices' loads are in flight together.
            const uint8_t* wgu[2] = {wr[0], a.w2 + lr[0] * a.row_bytes};
            float gu[2][NT];
#pragma unroll
            for (int t = 0; t < NT; ++t) gu[0][t] = gu[1][t] = 0.0f;
            for (int64_t c0 = first; c0 < n_units; c0 += U * step) {
                gemv_q8_batch<T, NT, U, 2>(wgu, c0 + sub, step, n_units, live_slots(c0), a, gu);
            }
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                acc[0][t] = gu[0][t];
                acc2[0][t] = gu[1][t];
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i][t] = group_sum<LPR>(acc[i][t]);
        if (swiglu) acc2[0][t] = group_sum<LPR>(acc2[0][t]);
    }
    if (LPR == WARP && ks > 1) {
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < R; ++i) {
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    part[0][warp][i][t] = acc[i][t];
                    part[1][warp][i][t] = acc2[0][t];
                }
            }
        }
        __syncthreads();
        if (kp == 0 && lane == 0) {
#pragma unroll
            for (int i = 0; i < R; ++i) {
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    for (int k = 1; k < ks; ++k) {
                        acc[i][t] += part[0][warp + k][i][t];
                        if (i == 0) acc2[0][t] += part[1][warp + k][0][t];
                    }
                }
            }
        }
    }
    if (kp != 0 || sub != 0) return;
#pragma unroll
    for (int i = 0; i < R; ++i) {
        if (!valid[i]) continue;
        float* y = seg[i] == 0 ? a.y[0] : (seg[i] == 1 ? a.y[1] : a.y[2]);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            float* out = y + t * seg_rows[i] + lr[i];
            if (a.out_mode == static_cast<int>(MatOut::Store)) *out = acc[i][t];
            else if (a.out_mode == static_cast<int>(MatOut::Add)) *out += acc[i][t];
            else *out = silu_mul(acc[i][t], acc2[0][t]);
        }
    }
}

// Units per lane per batch of the short-row variants (LPR 8 and 16).
constexpr int GEMV_Q8_SHORT_U = 4;

template <GgmlType T>
void launch_gemv_q8_args(GemvQ8Args a, int64_t total_rows, int n_tok, cudaStream_t st) {
    const int64_t n_units = a.cols / 32 / GemvUnit<T>::CHUNKS;
    auto per_lane = [&](int64_t lanes) { return (n_units + lanes - 1) / lanes; };
    // Short rows: the fewest lanes per row that still fit a row in one batch of units per lane.
    int lpr = WARP;
    if (per_lane(8) <= GEMV_Q8_SHORT_U) lpr = 8;
    else if (per_lane(16) <= GEMV_Q8_SHORT_U) lpr = 16;
    a.ks = 1;
    bool two_rows = false;
    int64_t rows_per_block = static_cast<int64_t>(GEMV_Q8_WARPS) * (WARP / lpr);
    if (lpr == WARP) {
        // Warps per row: more when a lane would otherwise walk more than one batch of 4 units,
        // or when the matrix has too few rows to keep every SM loading, while each lane keeps a
        // unit.
        while (a.ks < GEMV_Q8_WARPS &&
               (per_lane(WARP * a.ks) > 4 ||
                (total_rows * a.ks < 8192 && n_units >= static_cast<int64_t>(WARP) * 2 * a.ks))) {
            a.ks *= 2;
        }
        // Two rows per warp for long rows (more than one batch per lane), one otherwise.
        two_rows = per_lane(WARP * a.ks) > 2 && a.out_mode != static_cast<int>(MatOut::SwiGLU);
        rows_per_block = GEMV_Q8_WARPS / a.ks * (two_rows ? 2 : 1);
    }
    const dim3 grid(static_cast<unsigned>((total_rows + rows_per_block - 1) / rows_per_block));
    auto go = [&](auto nt) {
        constexpr int NT = decltype(nt)::value;
        // SwiGLU over short rows has its own instantiations (SW): a batch holds the gate and
        // the up row, which needs more registers than the other products should pay for.
        // Long rows run gate, then up, in the shared instantiation.
        const bool sw = a.out_mode == static_cast<int>(MatOut::SwiGLU);
        constexpr int SU = GEMV_Q8_SHORT_U;
        if (lpr == 8 && sw) kernel_gemv_q8<T, NT, 1, 8, SU, true><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
        else if (lpr == 8) kernel_gemv_q8<T, NT, 1, 8, SU, false><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
        else if (lpr == 16 && sw) kernel_gemv_q8<T, NT, 1, 16, SU, true><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
        else if (lpr == 16) kernel_gemv_q8<T, NT, 1, 16, SU, false><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
        else if (two_rows) kernel_gemv_q8<T, NT, 2, WARP, 2, false><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
        else kernel_gemv_q8<T, NT, 1, WARP, 2, false><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
    };
    switch (n_tok) {
        case 1: go(std::integral_constant<int, 1>{}); break;
        case 2: go(std::integral_constant<int, 2>{}); break;
        case 3: go(std::integral_constant<int, 3>{}); break;
        default: go(std::integral_constant<int, 4>{}); break;
    }
}

// ---------------------------------------------------------------- tiled GEMV
// On the tiled layout (cuda_common.cuh). A warp takes one 8-row group and every ks-th block
// column; lane l serves rows l / 8 and l / 8 + 4 with piece p = l % 8 of each (the same columns),
// so one activation load serves both rows, and a warp's loads of one part of a tile are
// contiguous (Q6_K ql: 512 bytes per load instruction; Q4_K qs: 512). Tiles go in batches of U
// (tiled_batch): loaded before any is used, or, for one token and one matrix (PF), the next batch
// loaded before this batch's arithmetic in the source (ptxas places those loads after it: one
// batch per warp in flight; holding two was slower, docs/gpu_speed_notes.md rows 97 and 99). Per
// tile and row:
//   Q6_K: ql piece p (16 bytes: 32 weights, low nibbles at column 128 (p / 4) + 16 (p % 4), high
//         nibbles 64 further), its qh piece, the row's scales and d;
//   Q4_K: qs piece p (16 weights of sub-block 2 (p / 2) in its low nibbles at column
//         64 (p / 2) + 16 (p % 2), 16 of sub-block 2 (p / 2) + 1 in its high nibbles 32 further)
//         and the row's 16-byte header.
// Up to GEMV_Q8_MAX_SEG matrices of one width laid end to end by groups (Q, K, V); SW: the gate
// (w[0]) and up (w2) tiles of the same place side by side, y = silu(gate) * up.
struct TiledArgs {
    const uint8_t* w[GEMV_Q8_MAX_SEG];
    const uint8_t* w2;
    float* y[GEMV_Q8_MAX_SEG];
    int64_t g_end[GEMV_Q8_MAX_SEG];  // cumulative 8-row groups
    int64_t nb;                      // blocks per row
    const int8_t* xq;
    const float4* xs;
    int8_t* yq;  // QO: y quantized to 8 bits (act_q8 layout, one segment)
    float4* ys;
    int out_mode, ks;
};

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

static_assert(GEMV_Q8_MAX_SEG == 3, "kernel_gemv_q8_tiled picks among three segments");

// U tiles of group g of every matrix read (w; SwiGLU: w2 too), block columns b0, b0 + ks, ..
// (a slot past the last column loads b0's tile, unused); lane (i0, p) takes rows i0 and i0 + 4.
// The kernel's arguments by reference: read where used (kernel parameter space), not copied into
// registers.
template <GgmlType T, int U, int M>
__device__ __forceinline__ void tiled_load(TileLane<T> (&lt)[U][M][2], const uint8_t* w, const TiledArgs& a, int64_t g,
                                           int64_t b0, int ks, int i0, int p) {
    const int64_t nb = a.nb;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int64_t b = b0 + static_cast<int64_t>(u) * ks;
        const int64_t tb = (g * nb + (b < nb ? b : b0)) * TileFmt<T>::BYTES;
#pragma unroll
        for (int m = 0; m < M; ++m) {
#pragma unroll
            for (int r = 0; r < 2; ++r) lt[u][m][r].load((m == 0 ? w : a.w2) + tb, i0 + 4 * r, p);
        }
    }
}

// Group g's block columns kp, kp + ks, .. of w (SwiGLU: and a.w2) into acc (one lane's rows i0,
// i0 + 4 and piece p), U tiles per batch, PF as above.
template <GgmlType T, int NT, int U, int M, bool PF>
__device__ __forceinline__ void tiled_walk(float (&acc)[M][2][NT], const uint8_t* w, const TiledArgs& a, int64_t g,
                                           int64_t nb, int kp, int ks, int i0, int p) {
    using L = TileLane<T>;
    const int64_t cols = nb * 256, n_chunks = cols / 32;
    // PF: the next batch's loads (into nxt) before this batch's arithmetic, in the source (the
    // SASS has them after it; see the comment above tiled_batch's batches).
    L nxt[PF ? U : 1][M][2];
    if constexpr (PF) tiled_load<T, U, M>(nxt, w, a, g, kp, ks, i0, p);
    for (int64_t b0 = kp; b0 < nb; b0 += static_cast<int64_t>(U) * ks) {
        L lt[U][M][2];
        if constexpr (PF) {
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int m = 0; m < M; ++m) lt[u][m][0] = nxt[u][m][0], lt[u][m][1] = nxt[u][m][1];
            if (b0 + static_cast<int64_t>(U) * ks < nb) tiled_load<T, U, M>(nxt, w, a, g, b0 + U * ks, ks, i0, p);
        } else {
            tiled_load<T, U, M>(lt, w, a, g, b0, ks, i0, p);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t b = b0 + static_cast<int64_t>(u) * ks;
            if (b >= nb) continue;
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const int64_t c = b * 256 + L::col(p);
                const uint8_t* xp = reinterpret_cast<const uint8_t*>(a.xq) + t * cols + c;
                const uint4 x_lo = ld16(xp), x_hi = ld16(xp + L::HI);
                const float2 s_lo = half_scales<L::SUMS>(a.xs, t * n_chunks + c / 32, p);
                const float2 s_hi = half_scales<L::SUMS>(a.xs, t * n_chunks + (c + L::HI) / 32, p);
#pragma unroll
                for (int m = 0; m < M; ++m) {
#pragma unroll
                    for (int r = 0; r < 2; ++r) acc[m][r][t] += lt[u][m][r].dot(p, x_lo, x_hi, s_lo, s_hi);
                }
            }
        }
    }
}

// W warps per block: GEMV_Q8_WARPS, or TILED_WIDE_WARPS for one group per block, or (QO 1)
// GEMV_Q8_WARPS x ks for four groups per block (gemv_q8_tiled). QO (SwiGLU): y also quantized to
// 8 bits, per token: 1, the block's 32 rows as one block (as kernel_quantize_act: the same bits);
// 2, the block's 16 rows (two groups: W = 2 ks) as one half of a block, on its own scale.
template <GgmlType T, int NT, int U, bool SW, bool PF, int W = GEMV_Q8_WARPS, int QO = 0, GgmlType T2 = T,
          int U2 = U, bool PF2 = PF>
__global__ void __launch_bounds__(W * WARP) kernel_gemv_q8_tiled(TiledArgs a) {
    constexpr int M = SW ? 2 : 1;  // matrices read
    __shared__ float part[W][M][TILE_ROWS][NT];
    const int ks = a.ks;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t gg = static_cast<int64_t>(blockIdx.x) * (W / ks) + warp / ks;
    // The segment by selects, not by indexing the parameter arrays (which would copy them to
    // local memory in every thread).
    const int64_t e0 = a.g_end[0], e1 = a.g_end[1], groups = a.g_end[2];
    const int seg = gg < e0 ? 0 : (gg < e1 ? 1 : 2);
    const int64_t g_first = seg == 0 ? 0 : (seg == 1 ? e0 : e1), g_last = seg == 0 ? e0 : (seg == 1 ? e1 : groups);
    const int64_t g = gg - g_first;  // the group within its matrix
    const uint8_t* w = seg == 0 ? a.w[0] : (seg == 1 ? a.w[1] : a.w[2]);
    const int kp = warp % ks;
    const int i0 = lane / 8, p = lane % 8;
    const int64_t nb = a.nb;
    float acc[M][2][NT];
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[m][0][t] = acc[m][1][t] = 0.0f;
    if (gg < groups) {
        if constexpr (T2 != T) {  // the last segment is of type T2 (warp-uniform)
            if (gg >= (e1 < groups ? e1 : e0)) tiled_walk<T2, NT, U2, M, PF2>(acc, w, a, g, nb, kp, ks, i0, p);
            else tiled_walk<T, NT, U, M, PF>(acc, w, a, g, nb, kp, ks, i0, p);
        } else {
            tiled_walk<T, NT, U, M, PF>(acc, w, a, g, nb, kp, ks, i0, p);
        }
    }
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            acc[m][0][t] = group_sum<8>(acc[m][0][t]);
            acc[m][1][t] = group_sum<8>(acc[m][1][t]);
        }
    if (ks > 1) {
        if (p == 0) {
#pragma unroll
            for (int m = 0; m < M; ++m)
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    part[warp][m][i0][t] = acc[m][0][t];
                    part[warp][m][i0 + 4][t] = acc[m][1][t];
                }
        }
        __syncthreads();
        if (kp == 0 && p == 0) {
            for (int k = 1; k < ks; ++k) {
#pragma unroll
                for (int m = 0; m < M; ++m)
#pragma unroll
                    for (int t = 0; t < NT; ++t) {
                        acc[m][0][t] += part[warp + k][m][i0][t];
                        acc[m][1][t] += part[warp + k][m][i0 + 4][t];
                    }
            }
        }
    }
    static_assert(!QO || SW, "the 8-bit copy is the SwiGLU product's");
    constexpr int QROWS = (QO == 2 ? 2 : 4) * TILE_ROWS;  // QO: a block's rows, one 8-bit block or half
    __shared__ float yv[QO ? NT : 1][QO ? QROWS : 1];
    const bool writes = kp == 0 && p == 0 && gg < groups;
    if constexpr (!QO) {
        if (!writes) return;
    }
    const int64_t rows = (g_last - g_first) * TILE_ROWS;
    if (writes) {
        float* y = seg == 0 ? a.y[0] : (seg == 1 ? a.y[1] : a.y[2]);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int64_t row = g * TILE_ROWS + i0 + 4 * r;
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                float* out = y + t * rows + row;
                if constexpr (SW) {
                    const float v = silu_mul(acc[0][r][t], acc[M - 1][r][t]);
                    *out = v;
                    if constexpr (QO) yv[t][(warp / ks) * TILE_ROWS + i0 + 4 * r] = v;
                } else if (a.out_mode == static_cast<int>(MatOut::Add)) {
                    *out += acc[0][r][t];
                } else {
                    *out = acc[0][r][t];
                }
            }
        }
    }
    if constexpr (QO == 1) {
        __syncthreads();
        if (warp < NT) {  // every group of the block exists (rows % 32 == 0)
            const int64_t blk = static_cast<int64_t>(warp) * (rows / QROWS) + blockIdx.x;
            quantize_block_warp(yv[warp][lane], lane, a.yq + blk * QROWS, a.ys + blk);
        }
    } else if constexpr (QO == 2) {
        __syncthreads();
        if (warp < NT) {  // token `warp`, rows 16 b .. 16 b + 15 of block b (rows % 32 == 0)
            const int64_t half = static_cast<int64_t>(warp) * (rows / QROWS) + blockIdx.x;
            quantize_half_warp(lane < QROWS ? yv[warp][lane % QROWS] : 0.0f, lane, static_cast<int>(half % 2),
                               a.yq + half * QROWS, a.ys + half / 2);
        }
    }
}

static_assert(GEMV_MAX_TOKENS == 4, "kernel_gemv_q8 is instantiated for 1..4 tokens");

}  // namespace

bool matmul_type_supported(GgmlType type) {
    return dispatch_type(type, [](auto) {});
}

bool embed_type_supported(GgmlType type) { return matmul_type_supported(type); }

void dequant_chunk_host(GgmlType type, const void* row, int64_t c, float* out) {
    const bool ok = dispatch_type(type, [&](auto tag) {
        ChunkDequant<decltype(tag)::value>::run(static_cast<const uint8_t*>(row), c, out);
    });
    if (!ok) throw JllmError(std::string("cuda: no chunk dequantizer for type ") + type_name(type));
}

size_t act_q8_scale_offset(int n_tok, int64_t cols) { return act_q8_scales_at(n_tok, cols); }

size_t act_q8_bytes(int n_tok, int64_t cols) {
    return act_q8_scales_at(n_tok, cols) + static_cast<size_t>(n_tok) * static_cast<size_t>(cols / 32) * 16;
}

void launch_quantize_act(const float* x, int n_tok, int64_t cols, void* xq, void* stream) {
    JLLM_ASSERT(n_tok >= 1 && cols % 32 == 0 && cols >= 32);
    const int64_t n_blocks = static_cast<int64_t>(n_tok) * (cols / 32);
    int8_t* q = static_cast<int8_t*>(xq);
    float4* sc = reinterpret_cast<float4*>(static_cast<uint8_t*>(xq) + act_q8_scales_at(n_tok, cols));
    kernel_quantize_act<<<static_cast<unsigned>((n_blocks + QUANT_WARPS - 1) / QUANT_WARPS), QUANT_WARPS * WARP, 0,
                          as_stream(stream)>>>(x, n_blocks, q, sc);
    JLLM_CUDA_LAUNCH_CHECK("kernel_quantize_act");
}

bool gemv_q8_type_supported(GgmlType type) {
    return dispatch_q8_type(type, [](auto) {});
}

namespace {

// f(tag) for a type with a tiled layout; an error naming the type otherwise.
template <typename F>
void with_tiled_type(GgmlType type, F&& f) {
    if (!dispatch_tiled_type(type, f)) throw JllmError(std::string("cuda: no tiled layout for type ") + type_name(type));
}

// Copies the parts of every block between the file's layout (rows of blocks) and the tiled one;
// to_tiles: file -> tiles, else tiles -> file.
void tiles_copy(GgmlType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, bool to_tiles) {
    JLLM_ASSERT(tiles_fit(type, rows, cols) && src != dst);
    struct Part {
        size_t in_block;
        int in_tile, size;
    };
    using F6 = TileFmt<GgmlType::Q6_K>;
    using F4 = TileFmt<GgmlType::Q4_K>;
    const Part q6[4] = {{offsetof(BlockQ6_K, ql), F6::QL, 128},
                        {offsetof(BlockQ6_K, qh), F6::QH, 64},
                        {offsetof(BlockQ6_K, scales), F6::SC, 16},
                        {offsetof(BlockQ6_K, d), F6::D, 2}};
    const Part q4[2] = {{0, F4::HDR, 16}, {offsetof(BlockQ4_K, qs), F4::QS, 128}};
    static_assert(offsetof(BlockQ4_K, qs) == 16, "Q4_K header: d, dmin, scales");
    const bool is6 = type == GgmlType::Q6_K;
    const Part* parts = is6 ? q6 : q4;
    const int n_parts = is6 ? 4 : 2;
    const int64_t block = static_cast<int64_t>(type_traits(type).type_size);
    const int64_t tile_bytes = is6 ? F6::BYTES : F4::BYTES;
    const int64_t nb = cols / 256, rb = nb * block;
    for (int64_t g = 0; g < rows / TILE_ROWS; ++g) {
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t tile = (g * nb + b) * tile_bytes;
            for (int i = 0; i < TILE_ROWS; ++i) {
                const int64_t blk = (g * TILE_ROWS + i) * rb + b * block;
                for (int k = 0; k < n_parts; ++k) {
                    const Part& p = parts[k];
                    const int64_t t = tile + p.in_tile + static_cast<int64_t>(i) * p.size;
                    const int64_t f = blk + static_cast<int64_t>(p.in_block);
                    std::memcpy(dst + (to_tiles ? t : f), src + (to_tiles ? f : t), static_cast<size_t>(p.size));
                }
            }
        }
    }
}

}  // namespace

bool tiles_fit(GgmlType type, int64_t rows, int64_t cols) {
    return has_tiles(type) && rows >= TILE_ROWS && rows % TILE_ROWS == 0 && cols >= 256 && cols % 256 == 0;
}

void to_tiles(GgmlType type, const void* src, void* dst, int64_t rows, int64_t cols) {
    tiles_copy(type, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), rows, cols, true);
}

void from_tiles(GgmlType type, const void* src, void* dst, int64_t rows, int64_t cols) {
    tiles_copy(type, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), rows, cols, false);
}

void dequant_chunk_tiled_host(GgmlType type, const void* base, int64_t cols, int64_t r, int64_t c, float* out) {
    JLLM_ASSERT(cols % 256 == 0 && r >= 0 && c >= 0 && c < cols / 32);
    with_tiled_type(type, [&](auto tag) {
        chunk_of<decltype(tag)::value, true>(static_cast<const uint8_t*>(base), 0, cols / 256, r, c, out);
    });
}

void stage_tile_host(GgmlType type, const void* tile, void* staged) {
    with_tiled_type(type, [&](auto tag) {
        using F = TileFmt<decltype(tag)::value>;
        for (int o = 0; o < F::BYTES / 16; ++o) {
            std::memcpy(static_cast<uint8_t*>(staged) + 16 * F::staged_unit(o), static_cast<const uint8_t*>(tile) + 16 * o,
                        16);
        }
    });
}

void dequant_chunk_staged_host(GgmlType type, const void* staged, int i, int j, float* out) {
    JLLM_ASSERT(i >= 0 && i < TILE_ROWS && j >= 0 && j < 8);
    with_tiled_type(type, [&](auto tag) {
        tile_chunk<decltype(tag)::value, true>(static_cast<const uint8_t*>(staged), i, j, out);
    });
}

void gemv_q8_tiled_host(GgmlType type, const void* tiles, int64_t rows, int64_t cols, const void* xq, int n_tok,
                        float* y) {
    JLLM_ASSERT(tiles_fit(type, rows, cols) && n_tok >= 1 && n_tok <= GEMV_MAX_TOKENS);
    with_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        using L = TileLane<T>;
        const int64_t nb = cols / 256, n_chunks = cols / 32;
        const uint8_t* w = static_cast<const uint8_t*>(tiles);
        const uint8_t* q = static_cast<const uint8_t*>(xq);
        const float4* xs = reinterpret_cast<const float4*>(q + act_q8_scales_at(n_tok, cols));
        for (int t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; ++b) {
                    const uint8_t* tile = tile_of<T>(w, nb, r, b * 8);
                    for (int p = 0; p < 8; ++p) {  // the lanes of the row
                        L lane;
                        lane.load(tile, static_cast<int>(r % TILE_ROWS), p);
                        const int64_t c = b * 256 + L::col(p);
                        const uint4 x_lo = ld16(q + t * cols + c), x_hi = ld16(q + t * cols + c + L::HI);
                        acc += lane.dot(p, x_lo, x_hi, half_scales<L::SUMS>(xs, t * n_chunks + c / 32, p),
                                        half_scales<L::SUMS>(xs, t * n_chunks + (c + L::HI) / 32, p));
                    }
                }
                y[t * rows + r] = acc;
            }
        }
    });
}

void chunk_q8_host(GgmlType type, const void* row, int64_t c, int8_t* q, float* a, float* b) {
    uint32_t packed[8] = {};
    const bool ok = dispatch_q8_type(type, [&](auto tag) {
        ChunkQ8<decltype(tag)::value>::run(static_cast<const uint8_t*>(row), c, packed, a, b);
    });
    if (!ok) throw JllmError(std::string("cuda: no int8 chunk decoder for type ") + type_name(type));
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(packed[i / 4] >> (8 * (i % 4)));
}

namespace {

void gemv_q8_dispatch(GgmlType type, const GemvQ8Args& a, int64_t total_rows, int n_tok, void* stream) {
    const bool ok = dispatch_q8_type(type, [&](auto tag) {
        launch_gemv_q8_args<decltype(tag)::value>(a, total_rows, n_tok, as_stream(stream));
    });
    if (!ok) throw JllmError(std::string("cuda: no dp4a GEMV for weight type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemv_q8");
}

GemvQ8Args gemv_q8_args(GgmlType type, int64_t cols, const void* xq, int n_tok, MatOut out) {
    GemvQ8Args a{};
    a.cols = cols;
    a.row_bytes = row_size(type, cols);
    a.xq = static_cast<const int8_t*>(xq);
    a.xs = reinterpret_cast<const float4*>(static_cast<const uint8_t*>(xq) + act_q8_scales_at(n_tok, cols));
    a.out_mode = static_cast<int>(out);
    return a;
}

}  // namespace

namespace {

// Tiles per batch of the tiled GEMV (U) and whether the next batch's loads go out before this
// batch's arithmetic (PF), as measured on the H200 (docs/gpu_speed_notes.md). One token, one
// matrix at a time: PF with one tile (65536 x 8192 Q4_K 78.8% -> 91.5% of copy, Q6_K 87.4% ->
// 90.3%; qwen3-4b tg128 +2.5%; two tiles where four warps share a group's columns, or PF for the
// Q4_K SwiGLU product, lost 1-4% in the engine). Otherwise U tiles are loaded before any is used:
// four for Q4_K; for Q6_K four when four warps share a group's columns and two when one or two
// do; fewer when gate and up are read side by side.
// SHARED: four warps share a group's columns (ks = 4).
struct TiledBatch {
    int u;
    bool pf;
};
template <GgmlType T, int NT, bool SW, bool SHARED>
constexpr TiledBatch tiled_batch() {
    if (NT == 1 && !SW) return {1, true};
    if (SW) return {T == GgmlType::Q4_K ? 2 : 1, false};
    return {T == GgmlType::Q4_K || SHARED ? 4 : 2, false};
}

// Warp tasks (8-row groups x warps per group) the tiled GEMV aims for before it stops adding warps
// per group (unless a warp would walk more than TILED_MAX_WALK block columns).
constexpr int64_t TILED_TASKS = 2048;
constexpr int64_t TILED_MAX_WALK = 16;
// One token, one matrix, few groups and long rows (qwen3-4b attn_output and ffn_down: 320 groups
// of 16 and 38 block columns): blocks of TILED_WIDE_WARPS warps on one group, each warp walking
// half as far, while a warp keeps at least TILED_WIDE_MIN_WALK block columns.
constexpr int TILED_WIDE_WARPS = 8;
constexpr int64_t TILED_WIDE_MIN_WALK = 2;

// Warps per 8-row group of the tiled GEMV (ks) for `groups` groups of nb block columns: more
// while the matrices have few groups or a warp would walk more than TILED_MAX_WALK block columns
// (65536 x 8192 Q6_K: 85.6% -> 90.3% of copy), while a warp keeps 2; TILED_WIDE_WARPS (one group
// per block) where `may_widen` (one token, one matrix, no SwiGLU) and the groups are few.
int tiled_ks(int64_t groups, int64_t nb, bool may_widen) {
    int ks = 1;
    while (ks < GEMV_Q8_WARPS && nb >= 2 * ks && (groups * ks < TILED_TASKS || nb > TILED_MAX_WALK * ks)) ks *= 2;
    const bool wide = may_widen && ks == GEMV_Q8_WARPS && groups * ks < TILED_TASKS &&
                      nb >= TILED_WIDE_MIN_WALK * TILED_WIDE_WARPS;
    return wide ? TILED_WIDE_WARPS : ks;
}

// The one-token SwiGLU product with y's 8-bit copy by the product's blocks of four groups
// (GEMV_Q8_WARPS x ks warps; QO 1).
template <GgmlType T>
auto tiled_qo1_kernel(int ks) {
    constexpr TiledBatch TB = tiled_batch<T, 1, true, false>();
    static_assert(TB.u == tiled_batch<T, 1, true, true>().u && !TB.pf, "one SwiGLU batch for every ks");
    constexpr int Q = GEMV_Q8_WARPS;
    return ks == 1 ? kernel_gemv_q8_tiled<T, 1, TB.u, true, false, Q, 1>
                   : (ks == 2 ? kernel_gemv_q8_tiled<T, 1, TB.u, true, false, 2 * Q, 1>
                              : kernel_gemv_q8_tiled<T, 1, TB.u, true, false, 4 * Q, 1>);
}

// How the one-token SwiGLU product on tiles (`groups` 8-row groups of nb block columns) makes y's
// 8-bit copy: 1, by blocks of four groups (each block's 32 rows one q8 block), where that grid is
// one wave of resident blocks (the larger blocks must not add a wave: qwen3-4b's 304 blocks of
// eight warps at two per SM lost 5% to the separate quantization on the H200); else 2, by halves
// in the usual blocks of two groups (ks 2) where the reader takes halves; else 0, by
// kernel_quantize_act after the product.
int tiled_yq_mode(GgmlType type, int64_t groups, int64_t nb, bool halves_ok) {
    if (groups % 4 != 0) return 0;
    const int ks = tiled_ks(groups, nb, false);
    int mode = 0;
    with_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        const void* k = reinterpret_cast<const void*>(tiled_qo1_kernel<T>(ks));
        if (groups / 4 <= resident_blocks(k, GEMV_Q8_WARPS * ks * WARP)) mode = 1;
        else if (halves_ok && ks == 2) mode = 2;
    });
    return mode;
}

// Segment types a launch of the tiled GEMV takes: one type, or Q4_K segments and a last one of
// Q6_K (Q4_K_M's Q, K and V where V has more bits).
bool tiled_types_mix(const GgmlType* types, int n_seg) {
    int i = 1;
    while (i < n_seg && types[i] == types[0]) ++i;
    return i == n_seg || (i == n_seg - 1 && types[0] == GgmlType::Q4_K && types[i] == GgmlType::Q6_K);
}

// n_seg matrices (Store; types: tiled_types_mix), or one (Store, Add, SwiGLU with w2), on the
// tiled layout. yq (one matrix): y also quantized to 8 bits there — by the product's blocks for
// one token's SwiGLU (tiled_yq_mode; by halves only where yq_halves), else by kernel_quantize_act
// after it.
void gemv_q8_tiled(const GgmlType* types, int n_seg, const void* const* w, const void* w2, const int64_t* rows,
                   int64_t cols, const void* xq, int n_tok, float* const* y, MatOut out, void* yq, bool yq_halves,
                   void* stream) {
    JLLM_ASSERT(n_seg == 1 || out == MatOut::Store);
    JLLM_ASSERT(tiled_types_mix(types, n_seg));
    const GgmlType type = types[0];
    const bool mixed = types[n_seg - 1] != type;  // the last segment Q6_K, the others Q4_K
    TiledArgs a{};
    int64_t groups = 0;
    for (int i = 0; i < GEMV_Q8_MAX_SEG; ++i) {
        if (i < n_seg) {
            JLLM_ASSERT(tiles_fit(types[i], rows[i], cols));
            groups += rows[i] / TILE_ROWS;
            a.w[i] = static_cast<const uint8_t*>(w[i]);
            a.y[i] = y[i];
        }
        a.g_end[i] = groups;
    }
    a.w2 = static_cast<const uint8_t*>(w2);
    a.nb = cols / 256;
    a.xq = static_cast<const int8_t*>(xq);
    a.xs = reinterpret_cast<const float4*>(static_cast<const uint8_t*>(xq) + act_q8_scales_at(n_tok, cols));
    a.out_mode = static_cast<int>(out);
    const bool sw = out == MatOut::SwiGLU;
    a.ks = tiled_ks(groups, a.nb, n_seg == 1 && n_tok == 1 && !sw);
    const bool wide = a.ks == TILED_WIDE_WARPS;
    const int qmode = yq != nullptr && n_seg == 1 && n_tok == 1 && sw ? tiled_yq_mode(type, groups, a.nb, yq_halves) : 0;
    if (yq != nullptr) {
        JLLM_ASSERT(n_seg == 1);
        a.yq = static_cast<int8_t*>(yq);
        a.ys = reinterpret_cast<float4*>(static_cast<uint8_t*>(yq) + act_q8_scales_at(n_tok, rows[0]));
    }
    auto launch = [&](auto kernel, int block_warps) {
        const int64_t per_block = block_warps / a.ks;
        const dim3 grid(static_cast<unsigned>((groups + per_block - 1) / per_block));
        kernel<<<grid, block_warps * WARP, 0, as_stream(stream)>>>(a);
    };
    with_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        if (wide) {
            constexpr TiledBatch TB = tiled_batch<T, 1, false, true>();
            launch(kernel_gemv_q8_tiled<T, 1, TB.u, false, TB.pf, TILED_WIDE_WARPS>, TILED_WIDE_WARPS);
            return;
        }
        if (qmode == 1) {
            launch(tiled_qo1_kernel<T>(a.ks), GEMV_Q8_WARPS * a.ks);
            return;
        }
        if (qmode == 2) {  // blocks of two groups (ks 2), as without the copy
            constexpr TiledBatch TB = tiled_batch<T, 1, true, false>();
            launch(kernel_gemv_q8_tiled<T, 1, TB.u, true, false, GEMV_Q8_WARPS, 2>, GEMV_Q8_WARPS);
            return;
        }
        auto by_tokens = [&](auto sw_tag, auto shared_tag) {
            constexpr bool SW = decltype(sw_tag)::value;
            constexpr bool SHARED = decltype(shared_tag)::value;
            auto go = [&](auto nt) {
                constexpr int NT = decltype(nt)::value;
                constexpr TiledBatch TB = tiled_batch<T, NT, SW, SHARED>();
                if constexpr (T == GgmlType::Q4_K && !SW) {
                    if (mixed) {
                        constexpr TiledBatch TB2 = tiled_batch<GgmlType::Q6_K, NT, SW, SHARED>();
                        launch(kernel_gemv_q8_tiled<T, NT, TB.u, SW, TB.pf, GEMV_Q8_WARPS, 0, GgmlType::Q6_K,
                                                    TB2.u, TB2.pf>,
                               GEMV_Q8_WARPS);
                        return;
                    }
                }
                launch(kernel_gemv_q8_tiled<T, NT, TB.u, SW, TB.pf>, GEMV_Q8_WARPS);
            };
            switch (n_tok) {
                case 1: go(std::integral_constant<int, 1>{}); break;
                case 2: go(std::integral_constant<int, 2>{}); break;
                case 3: go(std::integral_constant<int, 3>{}); break;
                default: go(std::integral_constant<int, 4>{}); break;
            }
        };
        const bool shared = a.ks >= GEMV_Q8_WARPS;
        if (sw) shared ? by_tokens(std::true_type{}, std::true_type{}) : by_tokens(std::true_type{}, std::false_type{});
        else shared ? by_tokens(std::false_type{}, std::true_type{}) : by_tokens(std::false_type{}, std::false_type{});
    });
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemv_q8_tiled");
    if (yq != nullptr && qmode == 0) launch_quantize_act(y[0], n_tok, rows[0], yq, stream);
}

}  // namespace

void launch_gemv_q8(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const void* xq,
                    int n_tok, float* y, MatOut out, void* stream, void* yq, bool yq_halves) {
    JLLM_ASSERT(n_tok >= 1 && n_tok <= GEMV_MAX_TOKENS && cols % 32 == 0 && rows >= 1);
    JLLM_ASSERT(out != MatOut::SwiGLU || w2 != nullptr);
    JLLM_ASSERT(yq == nullptr || (rows % 32 == 0 && yq != xq));
    if (fmt.tiled()) {
        gemv_q8_tiled(&fmt.type, 1, &w, w2, &rows, cols, xq, n_tok, &y, out, yq, yq_halves, stream);
        return;
    }
    const GgmlType type = fmt.type;
    GemvQ8Args a = gemv_q8_args(type, cols, xq, n_tok, out);
    a.w[0] = static_cast<const uint8_t*>(w);
    a.y[0] = y;
    a.row_end[0] = a.row_end[1] = a.row_end[2] = rows;
    a.w2 = static_cast<const uint8_t*>(w2);
    gemv_q8_dispatch(type, a, rows, n_tok, stream);
    if (yq != nullptr) launch_quantize_act(y, n_tok, rows, yq, stream);
}

bool gemv_q8_yq_by_halves(WeightFormat fmt, int64_t rows, int64_t cols) {
    return fmt.tiled() && rows % 32 == 0 && cols % 256 == 0 && tiles_fit(fmt.type, rows, cols) &&
           device_count() > 0 && tiled_yq_mode(fmt.type, rows / TILE_ROWS, cols / 256, true) == 2;
}

int64_t gemv_q8_split_rows(WeightFormat fmt, int64_t rows, int64_t cols, int64_t want) {
    // The same kernel and warps per group for both parts as for the whole: each row's sum the same.
    if (!fmt.tiled() || want <= 0 || want >= rows || !tiles_fit(fmt.type, rows, cols)) return 0;
    const int64_t head = want / 256 * 256, nb = cols / 256, groups = rows / TILE_ROWS;
    if (head == 0 || head == rows) return 0;
    const int ks = tiled_ks(groups, nb, true);
    if (tiled_ks(head / TILE_ROWS, nb, true) != ks || tiled_ks(groups - head / TILE_ROWS, nb, true) != ks) return 0;
    return head;
}

bool gemv_q8_multi_takes(const WeightFormat* fmt, int n_seg) {
    if (n_seg < 1 || n_seg > GEMV_Q8_MAX_SEG) return false;
    GgmlType types[GEMV_Q8_MAX_SEG];
    for (int i = 0; i < n_seg; ++i) {
        if (fmt[i].layout != fmt[0].layout) return false;
        types[i] = fmt[i].type;
    }
    if (fmt[0].tiled()) return tiled_types_mix(types, n_seg);
    for (int i = 1; i < n_seg; ++i) {
        if (types[i] != types[0]) return false;
    }
    return true;
}

void launch_gemv_q8_multi(const WeightFormat* fmt, int n_seg, const void* const* w, const int64_t* rows,
                          float* const* y, int64_t cols, const void* xq, int n_tok, void* stream) {
    JLLM_ASSERT(gemv_q8_multi_takes(fmt, n_seg));
    JLLM_ASSERT(n_tok >= 1 && n_tok <= GEMV_MAX_TOKENS && cols % 32 == 0);
    if (fmt[0].tiled()) {
        GgmlType types[GEMV_Q8_MAX_SEG];
        for (int i = 0; i < n_seg; ++i) types[i] = fmt[i].type;
        gemv_q8_tiled(types, n_seg, w, nullptr, rows, cols, xq, n_tok, y, MatOut::Store, nullptr, false, stream);
        return;
    }
    const GgmlType type = fmt[0].type;
    GemvQ8Args a = gemv_q8_args(type, cols, xq, n_tok, MatOut::Store);
    int64_t end = 0;
    for (int i = 0; i < GEMV_Q8_MAX_SEG; ++i) {
        if (i < n_seg) {
            JLLM_ASSERT(rows[i] >= 1);
            end += rows[i];
            a.w[i] = static_cast<const uint8_t*>(w[i]);
            a.y[i] = y[i];
        }
        a.row_end[i] = end;
    }
    gemv_q8_dispatch(type, a, end, n_tok, stream);
}

void launch_gemv(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                 int n_tok, float* y, MatOut out, void* stream) {
    JLLM_ASSERT(n_tok >= 1 && n_tok <= GEMV_MAX_TOKENS && cols % 32 == 0 && rows >= 1);
    JLLM_ASSERT(out != MatOut::SwiGLU || w2 != nullptr);
    JLLM_ASSERT(!fmt.tiled() || tiles_fit(fmt.type, rows, cols));
    const GgmlType type = fmt.type;
    const size_t rb = row_size(type, cols);
    const dim3 grid(static_cast<unsigned>((rows + GEMV_ROWS - 1) / GEMV_ROWS));
    auto launch = [&](auto kernel) {
        kernel<<<grid, GEMV_ROWS * WARP, 0, as_stream(stream)>>>(static_cast<const uint8_t*>(w),
                                                                 static_cast<const uint8_t*>(w2), rows, cols, rb, x,
                                                                 n_tok, y, static_cast<int>(out));
    };
    const bool ok = dispatch_format(type, fmt.tiled(), [&](auto tag, auto tiled) {
        launch(kernel_gemv<decltype(tag)::value, decltype(tiled)::value>);
    });
    if (!ok) throw JllmError(std::string("cuda: no GEMV kernel for weight type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemv");
}

void launch_embed(WeightFormat fmt, const void* table, int64_t n_vocab, int64_t n_embd, const int32_t* tokens,
                  int n_tok, float* out, void* stream) {
    JLLM_ASSERT(n_tok >= 1 && n_embd % 32 == 0);
    JLLM_ASSERT(!fmt.tiled() || tiles_fit(fmt.type, n_vocab, n_embd));
    const GgmlType type = fmt.type;
    const size_t rb = row_size(type, n_embd);
    auto launch = [&](auto kernel) {
        kernel<<<n_tok, 128, 0, as_stream(stream)>>>(static_cast<const uint8_t*>(table), n_vocab, n_embd, rb, tokens,
                                                     out);
    };
    const bool ok = dispatch_format(type, fmt.tiled(), [&](auto tag, auto tiled) {
        launch(kernel_embed<decltype(tag)::value, decltype(tiled)::value>);
    });
    if (!ok) throw JllmError(std::string("cuda: no embedding kernel for type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_embed");
}

}  // namespace cuda
}  // namespace jllm
