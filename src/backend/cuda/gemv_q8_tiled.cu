// backend/cuda/gemv_q8_tiled.cu — the dp4a decode GEMV on the tiled Q4_K/Q6_K layout and its
// launch plan: warps per 8-row group, tiles per batch, and where one token's SwiGLU
// product writes its own 8-bit copy (the entry points: gemv_q8.cuh).
//
// On the tiled layout (weight_tiles.cuh). A warp takes one 8-row group and every k_split-th block
// column; lane l serves rows l / 8 and l / 8 + 4 with piece p = l % 8 of each (the same columns),
// so one activation load serves both rows, and a warp's loads of one part of a tile are
// contiguous (Q6_K ql: 512 bytes per load instruction; Q4_K qs: 512). Tiles go in batches of U
// (tiled_batch): loaded before any is used, or, for one token and one matrix (PREFETCH), the next batch
// loaded before this batch's arithmetic in the source (ptxas places those loads after it: one
// batch per warp in flight; holding two was slower, docs/gpu_speed_notes.md rows 97 and 99). Per
// tile and row:
//   Q6_K: ql piece p (16 bytes: 32 weights, low nibbles at column 128 (p / 4) + 16 (p % 4), high
//         nibbles 64 further), its qh piece, the row's scales and d;
//   Q4_K: qs piece p (16 weights of sub-block 2 (p / 2) in its low nibbles at column
//         64 (p / 2) + 16 (p % 2), 16 of sub-block 2 (p / 2) + 1 in its high nibbles 32 further)
//         and the row's 16-byte header.
// Up to GEMV_Q8_MAX_SEG matrices of one width laid end to end by groups (Q, K, V); SWIGLU: the gate
// (w[0]) and up (w2) tiles of the same place side by side, y = silu(gate) * up.
#include <cstdint>
#include <type_traits>

#include "backend/cuda/act_q8.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv_q8.cuh"
#include "backend/cuda/gemv_q8_tiled.cuh"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

struct TiledArgs {
    const uint8_t* w[GEMV_Q8_MAX_SEG];
    const uint8_t* w2;
    float* y[GEMV_Q8_MAX_SEG];
    int64_t g_end[GEMV_Q8_MAX_SEG];  // cumulative 8-row groups
    int64_t nb;                      // blocks per row
    const int8_t* xq;
    const float4* xs;
    int8_t* yq;  // YQ_MODE: y quantized to 8 bits (act_q8 layout, one segment)
    float4* ys;
    int out_mode, k_split;
};

static_assert(GEMV_Q8_MAX_SEG == 3, "kernel_gemv_q8_tiled picks among three segments");

// U tiles of group g of every matrix read (w; SwiGLU: w2 too), block columns b0, b0 + k_split, ..
// (a slot past the last column loads b0's tile, unused); lane (i0, p) takes rows i0 and i0 + 4.
// The kernel's arguments by reference: read where used (kernel parameter space), not copied into
// registers.
template <GgmlType T, int U, int M>
__device__ __forceinline__ void tiled_load(TileLane<T> (&lt)[U][M][2], const uint8_t* w, const TiledArgs& a, int64_t g,
                                           int64_t b0, int k_split, int i0, int p) {
    const int64_t nb = a.nb;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int64_t b = b0 + static_cast<int64_t>(u) * k_split;
        const int64_t tb = (g * nb + (b < nb ? b : b0)) * TileFmt<T>::BYTES;
#pragma unroll
        for (int m = 0; m < M; ++m) {
#pragma unroll
            for (int r = 0; r < 2; ++r) lt[u][m][r].load((m == 0 ? w : a.w2) + tb, i0 + 4 * r, p);
        }
    }
}

// Group g's block columns kp, kp + k_split, .. of w (SwiGLU: and a.w2) into acc (one lane's rows i0,
// i0 + 4 and piece p), U tiles per batch, PREFETCH as above. VW > 1: the warp stands for VW warps
// of a launch with VW times its warps per group (the virtual warps kp, kp + k_split, ..): the j-th
// column it walks goes to acc[j % VW], so each virtual warp adds its columns in that launch's order.
template <GgmlType T, int N_TOK, int U, int M, bool PREFETCH, int VW>
__device__ __forceinline__ void tiled_walk(float (&acc)[VW][M][2][N_TOK], const uint8_t* w, const TiledArgs& a,
                                           int64_t g, int64_t nb, int kp, int k_split, int i0, int p) {
    static_assert(U % VW == 0, "a batch holds whole rounds of the virtual warps");
    using L = TileLane<T>;
    const int64_t cols = nb * 256, n_chunks = cols / 32;
    // PREFETCH: the next batch's loads (into nxt) before this batch's arithmetic, in the source (the
    // SASS has them after it; see the comment above tiled_batch's batches).
    L nxt[PREFETCH ? U : 1][M][2];
    if constexpr (PREFETCH) tiled_load<T, U, M>(nxt, w, a, g, kp, k_split, i0, p);
    for (int64_t b0 = kp; b0 < nb; b0 += static_cast<int64_t>(U) * k_split) {
        L lt[U][M][2];
        if constexpr (PREFETCH) {
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int m = 0; m < M; ++m) lt[u][m][0] = nxt[u][m][0], lt[u][m][1] = nxt[u][m][1];
            if (b0 + static_cast<int64_t>(U) * k_split < nb) {
                tiled_load<T, U, M>(nxt, w, a, g, b0 + U * k_split, k_split, i0, p);
            }
        } else {
            tiled_load<T, U, M>(lt, w, a, g, b0, k_split, i0, p);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t b = b0 + static_cast<int64_t>(u) * k_split;
            if (b >= nb) continue;
#pragma unroll
            for (int t = 0; t < N_TOK; ++t) {
                const int64_t c = b * 256 + L::col(p);
                const uint8_t* xp = reinterpret_cast<const uint8_t*>(a.xq) + t * cols + c;
                const uint4 x_lo = ld16(xp), x_hi = ld16(xp + L::HI);
                const float2 s_lo = half_scales<L::SUMS>(a.xs, t * n_chunks + c / 32, p);
                const float2 s_hi = half_scales<L::SUMS>(a.xs, t * n_chunks + (c + L::HI) / 32, p);
#pragma unroll
                for (int m = 0; m < M; ++m) {
#pragma unroll
                    for (int r = 0; r < 2; ++r) acc[u % VW][m][r][t] += lt[u][m][r].dot(p, x_lo, x_hi, s_lo, s_hi);
                }
            }
        }
    }
}

// W warps per block: GEMV_Q8_WARPS, or TILED_WIDE_WARPS / VW for one group per block, or (YQ_MODE 1)
// GEMV_Q8_WARPS x k_split for four groups per block (gemv_q8_tiled). YQ_MODE (SwiGLU): y also quantized to
// 8 bits, per token: 1, the block's 32 rows as one block (as kernel_quantize_act: the same bits);
// 2, the block's 16 rows (two groups: W = 2 k_split) as one half of a block, on its own scale.
// VW (tiled_walk): a.k_split / VW warps per group, each adding VW virtual warps' partial sums;
// the group's a.k_split partial sums are then added as a.k_split warps' would be.
template <GgmlType T, int N_TOK, int U, bool SWIGLU, bool PREFETCH, int W = GEMV_Q8_WARPS, int YQ_MODE = 0,
          GgmlType T2 = T, int U2 = U, bool PREFETCH2 = PREFETCH, int VW = 1>
__global__ void __launch_bounds__(W * WARP) kernel_gemv_q8_tiled(TiledArgs a) {
    constexpr int M = SWIGLU ? 2 : 1;  // matrices read
    static_assert(VW == 1 || (!SWIGLU && T2 == T), "virtual warps in the one-matrix, one-type products");
    __shared__ float part[W * VW][M][TILE_ROWS][N_TOK];
    const int k_split = a.k_split / VW;  // this launch's warps per group
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int64_t gg = static_cast<int64_t>(blockIdx.x) * (W / k_split) + warp / k_split;
    // The segment by selects, not by indexing the parameter arrays (which would copy them to
    // local memory in every thread).
    const int64_t e0 = a.g_end[0], e1 = a.g_end[1], groups = a.g_end[2];
    const int seg = gg < e0 ? 0 : (gg < e1 ? 1 : 2);
    const int64_t g_first = seg == 0 ? 0 : (seg == 1 ? e0 : e1), g_last = seg == 0 ? e0 : (seg == 1 ? e1 : groups);
    const int64_t g = gg - g_first;  // the group within its matrix
    const uint8_t* w = seg == 0 ? a.w[0] : (seg == 1 ? a.w[1] : a.w[2]);
    const int kp = warp % k_split;
    const int i0 = lane / 8, p = lane % 8;
    const int64_t nb = a.nb;
    float vacc[VW][M][2][N_TOK];
#pragma unroll
    for (int v = 0; v < VW; ++v)
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
            for (int t = 0; t < N_TOK; ++t) vacc[v][m][0][t] = vacc[v][m][1][t] = 0.0f;
    if (gg < groups) {
        if constexpr (T2 != T) {  // the last segment is of type T2 (warp-uniform)
            if (gg >= (e1 < groups ? e1 : e0)) {
                tiled_walk<T2, N_TOK, U2, M, PREFETCH2>(vacc, w, a, g, nb, kp, k_split, i0, p);
            } else {
                tiled_walk<T, N_TOK, U, M, PREFETCH>(vacc, w, a, g, nb, kp, k_split, i0, p);
            }
        } else {
            tiled_walk<T, N_TOK, U, M, PREFETCH>(vacc, w, a, g, nb, kp, k_split, i0, p);
        }
    }
#pragma unroll
    for (int v = 0; v < VW; ++v)
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
            for (int t = 0; t < N_TOK; ++t) {
                vacc[v][m][0][t] = group_sum<8>(vacc[v][m][0][t]);
                vacc[v][m][1][t] = group_sum<8>(vacc[v][m][1][t]);
            }
    float (&acc)[M][2][N_TOK] = vacc[0];  // virtual warp kp's sums (the group's total at kp 0)
    if (k_split * VW > 1) {
        // Group slots in part: the virtual warps kp + v k_split of the block's group warp / k_split.
        const int base = warp / k_split * k_split * VW;
        if (p == 0) {
#pragma unroll
            for (int v = 0; v < VW; ++v)
#pragma unroll
                for (int m = 0; m < M; ++m)
#pragma unroll
                    for (int t = 0; t < N_TOK; ++t) {
                        part[base + kp + v * k_split][m][i0][t] = vacc[v][m][0][t];
                        part[base + kp + v * k_split][m][i0 + 4][t] = vacc[v][m][1][t];
                    }
        }
        __syncthreads();
        if (kp == 0 && p == 0) {
            for (int k = 1; k < k_split * VW; ++k) {
#pragma unroll
                for (int m = 0; m < M; ++m)
#pragma unroll
                    for (int t = 0; t < N_TOK; ++t) {
                        acc[m][0][t] += part[base + k][m][i0][t];
                        acc[m][1][t] += part[base + k][m][i0 + 4][t];
                    }
            }
        }
    }
    static_assert(!YQ_MODE || SWIGLU, "the 8-bit copy is the SwiGLU product's");
    constexpr int QROWS = (YQ_MODE == 2 ? 2 : 4) * TILE_ROWS;  // YQ_MODE: a block's rows, one 8-bit block or half
    __shared__ float yv[YQ_MODE ? N_TOK : 1][YQ_MODE ? QROWS : 1];
    const bool writes = kp == 0 && p == 0 && gg < groups;
    if constexpr (!YQ_MODE) {
        if (!writes) return;
    }
    const int64_t rows = (g_last - g_first) * TILE_ROWS;
    if (writes) {
        float* y = seg == 0 ? a.y[0] : (seg == 1 ? a.y[1] : a.y[2]);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int64_t row = g * TILE_ROWS + i0 + 4 * r;
#pragma unroll
            for (int t = 0; t < N_TOK; ++t) {
                float* out = y + t * rows + row;
                if constexpr (SWIGLU) {
                    const float v = silu_mul(acc[0][r][t], acc[M - 1][r][t]);
                    *out = v;
                    if constexpr (YQ_MODE) yv[t][(warp / k_split) * TILE_ROWS + i0 + 4 * r] = v;
                } else if (a.out_mode == static_cast<int>(MatOut::Add)) {
                    *out += acc[0][r][t];
                } else {
                    *out = acc[0][r][t];
                }
            }
        }
    }
    if constexpr (YQ_MODE == 1) {
        __syncthreads();
        if (warp < N_TOK) {  // every group of the block exists (rows % 32 == 0)
            const int64_t blk = static_cast<int64_t>(warp) * (rows / QROWS) + blockIdx.x;
            quantize_block_warp(yv[warp][lane], lane, a.yq + blk * QROWS, a.ys + blk);
        }
    } else if constexpr (YQ_MODE == 2) {
        __syncthreads();
        if (warp < N_TOK) {  // token `warp`, rows 16 b .. 16 b + 15 of block b (rows % 32 == 0)
            const int64_t half = static_cast<int64_t>(warp) * (rows / QROWS) + blockIdx.x;
            quantize_half_warp(lane < QROWS ? yv[warp][lane % QROWS] : 0.0f, lane, static_cast<int>(half % 2),
                               a.yq + half * QROWS, a.ys + half / 2);
        }
    }
}

// Tiles per batch of the tiled GEMV (U) and whether the next batch's loads go out before this
// batch's arithmetic (PREFETCH), chosen by measurement (docs/gpu_speed_notes.md). One token, one
// matrix at a time: PREFETCH with one tile, which keeps a warp's loads in flight across batches
// with the fewest registers (more tiles, or PREFETCH for the SwiGLU product, measured slower).
// Otherwise U tiles are loaded before any is used: four for Q4_K; for Q6_K four when four warps
// share a group's columns and two when one or two do; fewer when gate and up are read side by side.
// SHARED: four warps share a group's columns (k_split = 4).
struct TiledBatch {
    int u;
    bool pf;
};
template <GgmlType T, int N_TOK, bool SWIGLU, bool SHARED>
constexpr TiledBatch tiled_batch() {
    if (N_TOK == 1 && !SWIGLU) return {1, true};
    // SwiGLU: gate and up side by side. Q4_K two tiles for one or four tokens; one for two and
    // three (127 -> 95 and 128 -> 96 registers: qwen3-4b verify2 -5%, verify3 -5% on the H100,
    // docs/gpu_speed_notes.md row 132; at four tokens one tile measured equal).
    if (SWIGLU) return {T == GgmlType::Q4_K && (N_TOK == 1 || N_TOK == 4) ? 2 : 1, false};
    // Two tokens: batches of 2 (U = 4 held 96 registers a thread in Q4_K, 31% occupancy and 49% of
    // DRAM bandwidth on 65536 x 8192 in ncu; U = 2: 127.1 -> 98.4 us there, qwen3-4b's Q4_K
    // products -19% to -30%). Three and four tokens keep U = 4 where it was (U = 2 lost up to 23%
    // there at four). docs/gpu_speed_notes.md, session 31.
    if (N_TOK == 2) return {2, false};
    return {T == GgmlType::Q4_K || SHARED ? 4 : 2, false};
}

// Warp tasks (8-row groups x warps per group) the tiled GEMV aims for before it stops adding warps
// per group (unless a warp would walk more than TILED_MAX_WALK block columns).
constexpr int64_t TILED_TASKS = 2048;
constexpr int64_t TILED_MAX_WALK = 16;
// One matrix (any token count), few groups and long rows (qwen3-4b attn_output and ffn_down: 320
// groups of 16 and 38 block columns): blocks of TILED_WIDE_WARPS warps on one group, each warp walking
// half as far, while a warp keeps at least TILED_WIDE_MIN_WALK block columns.
constexpr int TILED_WIDE_WARPS = 8;
constexpr int64_t TILED_WIDE_MIN_WALK = 2;

// Warps per 8-row group of the tiled GEMV (k_split) for `groups` groups of nb block columns: more
// while the matrices have few groups or a warp would walk more than TILED_MAX_WALK block columns
// (long walks leave too few loads in flight per SM), while a warp keeps 2; TILED_WIDE_WARPS (one group
// per block) where `may_widen` (one matrix, no SwiGLU) and the groups are few.
int tiled_k_split(int64_t groups, int64_t nb, bool may_widen) {
    int k_split = 1;
    while (k_split < GEMV_Q8_WARPS && nb >= 2 * k_split &&
           (groups * k_split < TILED_TASKS || nb > TILED_MAX_WALK * k_split)) {
        k_split *= 2;
    }
    const bool wide = may_widen && k_split == GEMV_Q8_WARPS && groups * k_split < TILED_TASKS &&
                      nb >= TILED_WIDE_MIN_WALK * TILED_WIDE_WARPS;
    return wide ? TILED_WIDE_WARPS : k_split;
}

// The SwiGLU product of N_TOK tokens with y's 8-bit copy by the product's blocks of four groups
// (GEMV_Q8_WARPS x k_split warps; YQ_MODE 1).
template <GgmlType T, int N_TOK>
auto tiled_qo1_kernel(int k_split) {
    constexpr TiledBatch TB = tiled_batch<T, N_TOK, true, false>();
    static_assert(TB.u == tiled_batch<T, N_TOK, true, true>().u && !TB.pf, "one SwiGLU batch for every k_split");
    constexpr int Q = GEMV_Q8_WARPS;
    return k_split == 1 ? kernel_gemv_q8_tiled<T, N_TOK, TB.u, true, false, Q, 1>
                   : (k_split == 2 ? kernel_gemv_q8_tiled<T, N_TOK, TB.u, true, false, 2 * Q, 1>
                              : kernel_gemv_q8_tiled<T, N_TOK, TB.u, true, false, 4 * Q, 1>);
}

// How the SwiGLU product on tiles (`groups` 8-row groups of nb block columns) makes y's 8-bit
// copy: 1, by blocks of four groups (each block's 32 rows one q8 block), where the one-token
// grid is one wave of resident blocks (a second wave of the larger blocks costs more than the
// separate quantization saves: docs/gpu_speed_notes.md); else 2, by halves in the usual blocks
// of two groups (k_split 2) where the reader takes halves; else 0, by kernel_quantize_act after
// the product. Decided by the one-token kernel for every token count, so a verification's rows
// quantize as the one-token steps do (by halves or not) and stay their bits.
int tiled_yq_mode(GgmlType type, int64_t groups, int64_t nb, bool halves_ok) {
    if (groups % 4 != 0) return 0;
    const int k_split = tiled_k_split(groups, nb, false);
    int mode = 0;
    with_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        const void* k = reinterpret_cast<const void*>(tiled_qo1_kernel<T, 1>(k_split));
        if (groups / 4 <= resident_blocks(k, GEMV_Q8_WARPS * k_split * WARP)) mode = 1;
        else if (halves_ok && k_split == 2) mode = 2;
    });
    return mode;
}

}  // namespace

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
    // The warps per group and the 8-bit copy's mode are the one-token product's at every token
    // count: each token's sums are then added in the same order and quantized the same way, so the
    // rows of a 2-4-token verification are the bits of one-token steps.
    a.k_split = tiled_k_split(groups, a.nb, n_seg == 1 && !sw);
    const bool wide = a.k_split == TILED_WIDE_WARPS;
    const int qmode = yq != nullptr && n_seg == 1 && sw ? tiled_yq_mode(type, groups, a.nb, yq_halves) : 0;
    if (yq != nullptr) {
        JLLM_ASSERT(n_seg == 1);
        a.yq = static_cast<int8_t*>(yq);
        a.ys = reinterpret_cast<float4*>(static_cast<uint8_t*>(yq) + act_q8_scales_at(n_tok, rows[0]));
    }
    auto launch = [&](auto kernel, int block_warps, int vw = 1) {
        const int64_t per_block = block_warps / (a.k_split / vw);
        const dim3 grid(static_cast<unsigned>((groups + per_block - 1) / per_block));
        kernel<<<grid, block_warps * WARP, 0, as_stream(stream)>>>(a);
    };
    with_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        if (wide) {
            // One token: the one-token batches (a warp walks 2-5 block columns here; larger batches
            // would load past the row's end). Two to four: half the warps, each adding two of the
            // one-token launch's partial sums (VW 2) from batches of four tiles: 8 warps per group at
            // 4 tokens held 125 registers (Q4_K: two blocks per SM, so qwen3-4b's 320 groups took
            // 1.2 waves on 132 SMs), these 128 (Q4_K) and 168 (Q6_K) in blocks of 4 warps, one
            // wave there; verify4 2.527 -> 2.330 ms on the H200 (docs/gpu_speed_notes.md row 132).
            constexpr TiledBatch TB = tiled_batch<T, 1, false, true>();
            constexpr int HALF = TILED_WIDE_WARPS / 2;
            with_tokens(n_tok, [&](auto nt) {
                constexpr int N_TOK = decltype(nt)::value;
                if constexpr (N_TOK == 1) {
                    launch(kernel_gemv_q8_tiled<T, 1, TB.u, false, TB.pf, TILED_WIDE_WARPS>, TILED_WIDE_WARPS);
                } else {
                    launch(kernel_gemv_q8_tiled<T, N_TOK, 4, false, false, HALF, 0, T, 4, false, 2>, HALF, 2);
                }
            });
            return;
        }
        if (qmode == 1) {
            with_tokens(n_tok, [&](auto nt) {
                launch(tiled_qo1_kernel<T, decltype(nt)::value>(a.k_split), GEMV_Q8_WARPS * a.k_split);
            });
            return;
        }
        if (qmode == 2) {  // blocks of two groups (k_split 2), as without the copy
            with_tokens(n_tok, [&](auto nt) {
                constexpr int N_TOK = decltype(nt)::value;
                constexpr TiledBatch TB = tiled_batch<T, N_TOK, true, false>();
                launch(kernel_gemv_q8_tiled<T, N_TOK, TB.u, true, false, GEMV_Q8_WARPS, 2>, GEMV_Q8_WARPS);
            });
            return;
        }
        auto by_tokens = [&](auto sw_tag, auto shared_tag) {
            constexpr bool SWIGLU = decltype(sw_tag)::value;
            constexpr bool SHARED = decltype(shared_tag)::value;
            with_tokens(n_tok, [&](auto nt) {
                constexpr int N_TOK = decltype(nt)::value;
                constexpr TiledBatch TB = tiled_batch<T, N_TOK, SWIGLU, SHARED>();
                if constexpr (T == GgmlType::Q4_K && !SWIGLU) {
                    if (mixed) {
                        constexpr TiledBatch TB2 = tiled_batch<GgmlType::Q6_K, N_TOK, SWIGLU, SHARED>();
                        launch(kernel_gemv_q8_tiled<T, N_TOK, TB.u, SWIGLU, TB.pf, GEMV_Q8_WARPS, 0, GgmlType::Q6_K,
                                                    TB2.u, TB2.pf>,
                               GEMV_Q8_WARPS);
                        return;
                    }
                }
                launch(kernel_gemv_q8_tiled<T, N_TOK, TB.u, SWIGLU, TB.pf>, GEMV_Q8_WARPS);
            });
        };
        const bool shared = a.k_split >= GEMV_Q8_WARPS;
        if (sw) shared ? by_tokens(std::true_type{}, std::true_type{}) : by_tokens(std::true_type{}, std::false_type{});
        else shared ? by_tokens(std::false_type{}, std::true_type{}) : by_tokens(std::false_type{}, std::false_type{});
    });
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemv_q8_tiled");
    if (yq != nullptr && qmode == 0) launch_quantize_act(y[0], n_tok, rows[0], yq, stream);
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
    const int k_split = tiled_k_split(groups, nb, true);
    if (tiled_k_split(head / TILE_ROWS, nb, true) != k_split ||
        tiled_k_split(groups - head / TILE_ROWS, nb, true) != k_split) {
        return 0;
    }
    return head;
}

}  // namespace cuda
}  // namespace jllm
