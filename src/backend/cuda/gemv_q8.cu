// backend/cuda/gemv_q8.cu — the decode GEMV on 8-bit activations (dp4a) over the file's rows
// (every type of dispatch_q8_type), and launch_gemv_q8 / launch_gemv_q8_multi, which hand the
// tiled layout to gemv_q8_tiled.cu.
//
// A block of GEMV_Q8_WARPS warps serves GEMV_Q8_WARPS / k_split rows (rows of up to
// GEMV_Q8_MAX_SEG matrices laid end to end); the k_split warps of a row split its chunks
// (more than one for long rows, so short matrices still fill the GPU), lane l of part k taking
// chunks k * 32 + l, + 32 k_split, ... Per chunk the weight is decoded to 32 integers
// (ChunkQ8) and dotted with each token's 32 activation bytes by eight dp4a, then scaled:
//   acc += (a0 * dot(q[0..15]) + a1 * dot(q[16..31])) * d + b0 * s0 + b1 * s1.
// U chunks per lane are decoded before any is used, so their loads are in flight together
// (bandwidth needs bytes in flight; a lane's chunks are independent). Out-of-range chunks load a
// valid chunk and are weighted by zero.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/chunk_q8.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv_q8.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

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
    int k_split;  // warps per row: 1, 2 or 4
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

__device__ __forceinline__ int dot8(const uint32_t* q, uint4 x0, uint4 x1) { return dot4(q + 4, x1, dot4(q, x0, 0)); }

// Units c, c + step, ... (U of them) of R rows (the same unit indices in each) into acc[R][N_TOK].
// `live` (warp-uniform) bounds the slots: a slot past the rows' units for the whole warp is
// skipped; within a live slot, lanes past the end read a valid unit and weigh it by zero. With
// R = 2 each activation load serves both rows (the loads of activations otherwise outnumber the
// weight bytes two to one on the L1 path).
template <GgmlType T, int N_TOK, int U, int R>
__device__ __forceinline__ void gemv_q8_batch(const uint8_t* const* wr, int64_t c, int64_t step, int64_t n_units,
                                              int live, const GemvQ8Args& a, float (*acc)[N_TOK]) {
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
            for (int t = 0; t < N_TOK; ++t) {
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
            for (int t = 0; t < N_TOK; ++t) {
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

// LANES_PER_ROW: 32 for long rows (a warp per row, or k_split warps per row; R rows per
// warp: 2 when a lane walks more than one batch, so one activation load serves both rows; 1 for
// shorter rows, where more warps matter more, and for SwiGLU, which already reads two matrices).
// 16 or 8 for short rows: a warp serves 32 / LANES_PER_ROW rows at once, so a decode-sized matrix
// (a few MB) runs as one wave of warps that each have all their loads in flight, instead of
// waves of warps that each load one or two units per lane. U units per lane per batch.
template <GgmlType T, int N_TOK, int R, int LANES_PER_ROW, int U, bool SWIGLU>
__global__ void __launch_bounds__(GEMV_Q8_WARPS * WARP) kernel_gemv_q8(GemvQ8Args a) {
    static_assert(LANES_PER_ROW == WARP || R == 1, "several rows per lane only with a warp per row");
    static_assert(!SWIGLU || (R == 1 && LANES_PER_ROW < WARP), "fused SwiGLU batches: short rows only");
    constexpr int RPW = WARP / LANES_PER_ROW;  // row groups per warp
    __shared__ float part[2][GEMV_Q8_WARPS][R][N_TOK];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int sub = lane % LANES_PER_ROW;  // lane within the row group
    const int k_split = LANES_PER_ROW == WARP ? a.k_split : 1;
    const int64_t r0 =
        ((static_cast<int64_t>(blockIdx.x) * (GEMV_Q8_WARPS / k_split) + warp / k_split) * RPW + lane / LANES_PER_ROW) *
        R;
    const int kp = warp % k_split;
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
    float acc[R][N_TOK], acc2[1][N_TOK];
#pragma unroll
    for (int t = 0; t < N_TOK; ++t) {
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
        const int64_t step = static_cast<int64_t>(LANES_PER_ROW) * k_split;
        // Slots of a batch that hold a unit for at least the group's first lane (the same for
        // every group of the warp).
        auto live_slots = [&](int64_t c0) {
            const int64_t left = n_units - c0;
            return static_cast<int>(left <= 0 ? 0 : std::min<int64_t>(U, (left + step - 1) / step));
        };
        const int64_t first = static_cast<int64_t>(kp) * LANES_PER_ROW;  // the group's first lane's first unit
        if (!swiglu) {
            for (int64_t c0 = first; c0 < n_units; c0 += U * step) {
                gemv_q8_batch<T, N_TOK, U, R>(wr, c0 + sub, step, n_units, live_slots(c0), a, acc);
            }
        } else if constexpr (!SWIGLU && R == 1) {
            // gate, then up
            const uint8_t* wr2[1] = {a.w2 + lr[0] * a.row_bytes};
            for (int64_t c0 = first; c0 < n_units; c0 += U * step) {
                const int live = live_slots(c0);
                gemv_q8_batch<T, N_TOK, U, 1>(wr, c0 + sub, step, n_units, live, a, acc);
                gemv_q8_batch<T, N_TOK, U, 1>(wr2, c0 + sub, step, n_units, live, a, acc2);
            }
        } else if constexpr (SWIGLU) {
            // The gate and up rows as the two rows of one batch: one activation load serves both
            // and both matrices' loads are in flight together.
            const uint8_t* wgu[2] = {wr[0], a.w2 + lr[0] * a.row_bytes};
            float gu[2][N_TOK];
#pragma unroll
            for (int t = 0; t < N_TOK; ++t) gu[0][t] = gu[1][t] = 0.0f;
            for (int64_t c0 = first; c0 < n_units; c0 += U * step) {
                gemv_q8_batch<T, N_TOK, U, 2>(wgu, c0 + sub, step, n_units, live_slots(c0), a, gu);
            }
#pragma unroll
            for (int t = 0; t < N_TOK; ++t) {
                acc[0][t] = gu[0][t];
                acc2[0][t] = gu[1][t];
            }
        }
    }
#pragma unroll
    for (int t = 0; t < N_TOK; ++t) {
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i][t] = group_sum<LANES_PER_ROW>(acc[i][t]);
        if (swiglu) acc2[0][t] = group_sum<LANES_PER_ROW>(acc2[0][t]);
    }
    if (LANES_PER_ROW == WARP && k_split > 1) {
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < R; ++i) {
#pragma unroll
                for (int t = 0; t < N_TOK; ++t) {
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
                for (int t = 0; t < N_TOK; ++t) {
                    for (int k = 1; k < k_split; ++k) {
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
        for (int t = 0; t < N_TOK; ++t) {
            float* out = y + t * seg_rows[i] + lr[i];
            if (a.out_mode == static_cast<int>(MatOut::Store)) *out = acc[i][t];
            else if (a.out_mode == static_cast<int>(MatOut::Add)) *out += acc[i][t];
            else *out = silu_mul(acc[i][t], acc2[0][t]);
        }
    }
}

// Units per lane per batch of the short-row variants (LANES_PER_ROW 8 and 16).
constexpr int GEMV_Q8_SHORT_U = 4;

template <GgmlType T>
void launch_gemv_q8_args(GemvQ8Args a, int64_t total_rows, int n_tok, cudaStream_t st) {
    const int64_t n_units = a.cols / 32 / GemvUnit<T>::CHUNKS;
    auto per_lane = [&](int64_t lanes) { return (n_units + lanes - 1) / lanes; };
    // Short rows: the fewest lanes per row that still fit a row in one batch of units per lane.
    int lanes_per_row = WARP;
    if (per_lane(8) <= GEMV_Q8_SHORT_U) lanes_per_row = 8;
    else if (per_lane(16) <= GEMV_Q8_SHORT_U) lanes_per_row = 16;
    a.k_split = 1;
    bool two_rows = false;
    int64_t rows_per_block = static_cast<int64_t>(GEMV_Q8_WARPS) * (WARP / lanes_per_row);
    if (lanes_per_row == WARP) {
        // Warps per row: more when a lane would otherwise walk more than one batch of 4 units,
        // or when the matrix has too few rows to keep every SM loading, while each lane keeps a
        // unit.
        while (a.k_split < GEMV_Q8_WARPS &&
               (per_lane(WARP * a.k_split) > 4 ||
                (total_rows * a.k_split < 8192 && n_units >= static_cast<int64_t>(WARP) * 2 * a.k_split))) {
            a.k_split *= 2;
        }
        // Two rows per warp for long rows (more than one batch per lane), one otherwise.
        two_rows = per_lane(WARP * a.k_split) > 2 && a.out_mode != static_cast<int>(MatOut::SwiGLU);
        rows_per_block = GEMV_Q8_WARPS / a.k_split * (two_rows ? 2 : 1);
    }
    const dim3 grid(static_cast<unsigned>((total_rows + rows_per_block - 1) / rows_per_block));
    auto go = [&](auto nt) {
        constexpr int N_TOK = decltype(nt)::value;
        // SwiGLU over short rows has its own instantiations (SWIGLU): a batch holds the gate and
        // the up row, which needs more registers than the other products should pay for.
        // Long rows run gate, then up, in the shared instantiation.
        const bool sw = a.out_mode == static_cast<int>(MatOut::SwiGLU);
        constexpr int SHORT_U = GEMV_Q8_SHORT_U;
        const int threads = GEMV_Q8_WARPS * WARP;
        if (lanes_per_row == 8 && sw) kernel_gemv_q8<T, N_TOK, 1, 8, SHORT_U, true><<<grid, threads, 0, st>>>(a);
        else if (lanes_per_row == 8) kernel_gemv_q8<T, N_TOK, 1, 8, SHORT_U, false><<<grid, threads, 0, st>>>(a);
        else if (lanes_per_row == 16 && sw) kernel_gemv_q8<T, N_TOK, 1, 16, SHORT_U, true><<<grid, threads, 0, st>>>(a);
        else if (lanes_per_row == 16) kernel_gemv_q8<T, N_TOK, 1, 16, SHORT_U, false><<<grid, threads, 0, st>>>(a);
        else if (two_rows) kernel_gemv_q8<T, N_TOK, 2, WARP, 2, false><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
        else kernel_gemv_q8<T, N_TOK, 1, WARP, 2, false><<<grid, GEMV_Q8_WARPS * WARP, 0, st>>>(a);
    };
    with_tokens(n_tok, go);
}

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

bool gemv_q8_type_supported(GgmlType type) {
    return dispatch_q8_type(type, [](auto) {});
}

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

}  // namespace cuda
}  // namespace jllm
