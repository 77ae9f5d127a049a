// backend/cuda/gemm.cu — prefill matrix products on tensor cores:
//   Y[n_tok][rows] = W[rows][cols] X[n_tok][cols]   (store, += residual, or SwiGLU with W2).
//
// A block computes 128 rows of A x BN tokens (BN = 64 or 128) with 8 warps, each an
// mma.sync.m16n8k16 (fp16 inputs, fp32 accumulation) tile of (128 / WARPS_M) x 32. The raw
// weight bytes arrive a column group ahead by cp.async (see "Weight staging" below); per step of
// 64 columns every thread dequantizes one 32-element chunk of one weight row from there
// (ChunkDequant, the GEMV's decoder) to fp16 in shared memory, and the activations' 64 x BN block,
// already fp16 in global memory (launch_to_f16: saturated to +-65504, so an outlier cannot become
// inf), is copied there; fragments come in by ldmatrix. Only sm_80-class instructions (mma.sync,
// ldmatrix): the same code runs on SM 8.7 (Orin) and 9.0.
// SwiGLU: the A tile interleaves 8 rows of the gate and 8 rows of the up projection per 16, so
// each thread's accumulators c0/c1 (row g) and c2/c3 (row g + 8) are gate and up of the same
// weight row and tokens, and silu(g) * u is formed in registers (64 output rows per block).
// Numerics: weights and activations rounded to fp16, products summed in fp32 (twin:
// gemm_f16_ref).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mma.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int MMA_BM = 128;     // A rows per block
constexpr int MMA_BK = 64;      // columns per step (two chunks)
constexpr int MMA_THREADS = 256;
constexpr int MMA_LDS = MMA_BK + 8;  // shared row stride in halves (144 bytes: ldmatrix without conflicts)

__device__ __forceinline__ float silu_mul_f(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Weight staging: the columns go in groups of GROUP_STEPS steps (256 columns for the quantized
// types, whole blocks of every one; 64 for F32/F16/BF16). While a group's steps run, the raw bytes
// of the next group of the block's 128 rows are copied into the other of two shared stage
// buffers by cp.async (16-byte units from the 16-byte boundary at or below the group's first
// byte, the last unit cut at the group's end, so nothing beyond it is read), and ChunkDequant
// decodes from there: DRAM latency overlaps the previous group's tensor-core work instead of
// stalling every step. A row's slot is `slot` bytes (the group's bytes rounded up to 16, plus 16
// when groups are not 16-byte aligned); the group starts at (address % 16) within it, so the
// decoders see the alignment they would see in global memory. Tiled Q4_K/Q6_K (TILED): a group
// is one block column, so the block's 128 rows are 16 whole tiles of contiguous bytes; 16
// threads copy each, its 16-byte units permuted as TileFmt::staged_unit says (a row's units
// spread over the banks), and tile_chunk<T, true> decodes them (slot = tile bytes / 8).
__host__ __device__ constexpr int group_steps(GgmlType t) {
    return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ? 1 : 4;
}

struct GemmGeom {
    size_t row_bytes;   // bytes of one weight row
    int group_bytes;    // bytes of one full column group of a row
    int slot;           // stage bytes per row
};

struct GemmSegs {
    const uint8_t* w[GEMM_MAX_SEG];
    float* y[GEMM_MAX_SEG];
    int64_t rows[GEMM_MAX_SEG];
    int64_t block_end[GEMM_MAX_SEG];  // row blocks of segments 0..s together
};
static_assert(GEMM_MAX_SEG == 3, "kernel_gemm_mma selects among three segments");

// The staging geometry of `fmt`'s rows of `cols` columns; aligned_starts: every matrix starts on a
// 16-byte boundary.
GemmGeom gemm_geom(WeightFormat fmt, int64_t cols, bool aligned_starts) {
    const int64_t gcols = static_cast<int64_t>(group_steps(fmt.type)) * MMA_BK;
    GemmGeom geo;
    geo.row_bytes = row_size(fmt.type, cols);
    geo.group_bytes = static_cast<int>(row_size(fmt.type, std::min(cols, gcols)));
    // A group's bytes rounded up to 16, plus 16 when rows or groups can start off a 16-byte boundary.
    const bool aligned = geo.row_bytes % 16 == 0 && geo.group_bytes % 16 == 0 && aligned_starts;
    // Tiled: 16 tiles of 8 rows (a row's share of a tile is group_bytes).
    geo.slot = fmt.tiled() ? geo.group_bytes : (geo.group_bytes + 15) / 16 * 16 + (aligned ? 0 : 16);
    return geo;
}

// One mma accumulator's four values into y ([n_tok][rows]; a split part: [n_tok][ystride]): c0, c1
// are tokens n, n + 1 of row r_lo, c2, c3 the same tokens of row r_lo + 8. SwiGLU: c0/c1 the gate
// and c2/c3 the up sums of row r_sw, silu(g) * u stored (a split part keeps both: gate at r_sw, up
// at rows + r_sw). Add: y += the sums. Rows and tokens past the ends are skipped.
__device__ __forceinline__ void store_acc(float* y, int64_t rows, int n_tok, int64_t ystride, bool swiglu,
                                          bool partial, int out_mode, int64_t r_sw, int64_t r_lo, int n,
                                          const float* c) {
    if (swiglu) {
        const int64_t r = r_sw;
        if (r >= rows) return;
        if (partial) {
            if (n < n_tok) {
                y[static_cast<int64_t>(n) * ystride + r] = c[0];
                y[static_cast<int64_t>(n) * ystride + rows + r] = c[2];
            }
            if (n + 1 < n_tok) {
                y[static_cast<int64_t>(n + 1) * ystride + r] = c[1];
                y[static_cast<int64_t>(n + 1) * ystride + rows + r] = c[3];
            }
            return;
        }
        if (n < n_tok) y[static_cast<int64_t>(n) * rows + r] = silu_mul_f(c[0], c[2]);
        if (n + 1 < n_tok) y[static_cast<int64_t>(n + 1) * rows + r] = silu_mul_f(c[1], c[3]);
    } else {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int64_t r = r_lo + 8 * hh;
            if (r >= rows) continue;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                if (n + e >= n_tok) continue;
                float* out = y + static_cast<int64_t>(n + e) * rows + r;
                const float v = c[2 * hh + e];
                if (out_mode == static_cast<int>(MatOut::Add)) *out += v;
                else *out = v;
            }
        }
    }
}

// One warp's share of a step: its WM rows x 32 tokens (the first `tiles` n8 tiles of them, a
// warp-uniform count) over MMA_BK columns from the shared A and B tiles.
template <int MT, int NT>
__device__ __forceinline__ void warp_mma(const __half (*As)[MMA_LDS], const __half (*Bs)[MMA_LDS], int wm0, int wn0,
                                         int lane, float (&acc)[MT][NT][4], int tiles) {
#pragma unroll
    for (int ks = 0; ks < MMA_BK / 16; ++ks) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            ldmatrix_x4(a[mt], &As[wm0 + mt * 16 + (lane & 15)][ks * 16 + (lane >> 4) * 8]);
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            if (2 * np >= tiles) break;
            uint32_t b[4];
            ldmatrix_x4(b, &Bs[wn0 + np * 16 + (lane & 7) + ((lane >> 4) << 3)][ks * 16 + ((lane >> 3) & 1) * 8]);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma_16816(acc[mt][2 * np], a[mt], b[0], b[1]);
                if (2 * np + 1 < tiles) mma_16816(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
            }
        }
    }
}

template <int BN>
__host__ __device__ constexpr size_t gemm_tiles_bytes() {
    return (static_cast<size_t>(MMA_BM) + BN) * MMA_LDS * sizeof(__half);
}

// w, w2: [rows][row_bytes]; x: [n_tok][cols]; y: [n_tok][rows].
// Split-K (grid z > 1): block z covers the column steps [z * S / Z, (z + 1) * S / Z) (S steps of
// MMA_BK columns: every block the same work within one step, whatever the group size; it stages
// the groups its steps touch) and stores its partial sums to y + z * n_tok * rows (a work buffer;
// SwiGLU: gate and up sums, 2 x rows per token); kernel_splitk_reduce(_swiglu) adds them in
// order, so results do not depend on scheduling.
// MULTI: up to GEMM_MAX_SEG matrices of one format and width (Q, K, V) in one grid, Store only:
// segment s's row blocks follow segment s - 1's, and segs gives each its weights, rows and output
// (split: its own [Z][n_tok][rows] region of the work buffer); w, rows and y are then unused.
// Shared memory (dynamic): stage 0 | stage 1 ([MMA_BM][slot] bytes each) | As | Bs.
template <GgmlType T, int BN, bool TILED, bool MULTI = false>
__global__ void __launch_bounds__(MMA_THREADS, 2)
    kernel_gemm_mma(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, int64_t rows, int64_t cols,
                    GemmGeom geo, const uint16_t* __restrict__ x, int n_tok, float* __restrict__ y, int out_mode,
                    GemmSegs segs) {
    constexpr int GS = group_steps(T);
    int64_t bx = blockIdx.x;  // the row block within its matrix
    if constexpr (MULTI) {
        // The segment by selects, not by indexing the parameter arrays (which would copy them to
        // local memory in every thread).
        const int seg = bx < segs.block_end[0] ? 0 : (bx < segs.block_end[1] ? 1 : 2);
        bx -= seg == 0 ? 0 : (seg == 1 ? segs.block_end[0] : segs.block_end[1]);
        w = seg == 0 ? segs.w[0] : (seg == 1 ? segs.w[1] : segs.w[2]);
        y = seg == 0 ? segs.y[0] : (seg == 1 ? segs.y[1] : segs.y[2]);
        rows = seg == 0 ? segs.rows[0] : (seg == 1 ? segs.rows[1] : segs.rows[2]);
    }
    extern __shared__ __align__(16) uint8_t smem[];
    const size_t stage_bytes = static_cast<size_t>(MMA_BM) * geo.slot;
    auto As = reinterpret_cast<__half(*)[MMA_LDS]>(smem + 2 * stage_bytes);
    auto Bs = reinterpret_cast<__half(*)[MMA_LDS]>(reinterpret_cast<uint8_t*>(As) + MMA_BM * MMA_LDS * sizeof(__half));

    // Split-K and partial token tiles are the 64-token kernel's: launch_gemm takes the 128-token
    // one only for grids that need no split, and its code stays the plain loop.
    constexpr bool SMALL = BN == 64;
    const int64_t n_steps = (cols + MMA_BK - 1) / MMA_BK;
    const int64_t s_first = SMALL ? n_steps * blockIdx.z / gridDim.z : 0;
    const int64_t s_last = SMALL ? n_steps * (blockIdx.z + 1) / gridDim.z : n_steps;
    const int64_t g_first = s_first / GS, g_last = (s_last + GS - 1) / GS;  // the groups those steps touch
    const bool swiglu = out_mode == static_cast<int>(MatOut::SwiGLU);
    // Split: this block's partial sums (SwiGLU: gate and up side by side, 2 x rows per token).
    const bool partial = gridDim.z > 1;
    const int64_t ystride = partial && swiglu ? 2 * rows : rows;
    if (partial) y += static_cast<int64_t>(blockIdx.z) * n_tok * ystride;
    constexpr int WARPS_N = BN / 32;
    constexpr int WARPS_M = 8 / WARPS_N;
    constexpr int WM = MMA_BM / WARPS_M;  // A rows per warp
    constexpr int MT = WM / 16;           // m16 tiles per warp
    constexpr int NT = 4;                 // n8 tiles per warp (32 tokens)

    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * 32;
    const int64_t rows_here = swiglu ? MMA_BM / 2 : MMA_BM;  // weight rows per block
    const int64_t r0 = bx * rows_here;
    const int t0 = blockIdx.y * BN;
    const int64_t n_chunks = cols / 32;

    // A row i: from the up matrix or not (SwiGLU: 8 gate rows, then the same 8 rows of up, per
    // 16), and its weight row (nullptr past the last row).
    auto from_up = [&](int i) { return swiglu && ((i >> 3) & 1); };
    auto row_of = [&](int i) -> const uint8_t* {
        const int64_t r = swiglu ? r0 + (i >> 4) * 8 + (i & 7) : r0 + i;
        if (r >= rows) return nullptr;
        return (from_up(i) ? w2 : w) + r * geo.row_bytes;
    };
    // Copies group g of every row into stage st (one commit group per call). Units are whole 16
    // bytes (bytes past the group's end land in the slot's spare room and are never decoded),
    // except a unit that would cross the end of the matrix (its last row's last group, when the
    // matrix does not end on a 16-byte boundary): after the loop, one thread copies its bytes up to
    // that end by ordinary loads, so nothing outside the matrix is read and the loop itself is only
    // cp.async (the compiler unrolls it).
    const int slot_units = geo.slot / 16;
    const uintptr_t w_end = reinterpret_cast<uintptr_t>(w + rows * geo.row_bytes);
    const uintptr_t w2_end = swiglu ? reinterpret_cast<uintptr_t>(w2 + rows * geo.row_bytes) : w_end;
    const bool tail_block = !TILED && r0 + rows_here >= rows && (w_end % 16 != 0 || w2_end % 16 != 0);  // block-uniform
    auto issue = [&](int64_t g, int st) {
        if constexpr (TILED) {
            // A rows 8k..8k+7 are tile k's (SwiGLU: gate rows for even k, up rows for odd k).
            using F = TileFmt<T>;
            constexpr int UNITS = F::BYTES / 16, PER_TILE = MMA_THREADS / (MMA_BM / TILE_ROWS);
            const int k = tid / PER_TILE;
            const int64_t r = swiglu ? r0 + (k >> 1) * TILE_ROWS : r0 + static_cast<int64_t>(k) * TILE_ROWS;
            if (r < rows) {
                const uint8_t* tile = tile_of<T>(swiglu && (k & 1) ? w2 : w, cols / 256, r, g * 8);
                uint8_t* dst = smem + st * stage_bytes + k * F::BYTES;
#pragma unroll 1
                for (int o = tid % PER_TILE; o < UNITS; o += PER_TILE) {
                    cp_async16(dst + 16 * F::staged_unit(o), tile + 16 * o);
                }
            }
            cp_async_commit();
            return;
        }
        const size_t gb0 = static_cast<size_t>(g) * geo.group_bytes;
        const size_t gb1 = std::min(gb0 + geo.group_bytes, geo.row_bytes);
        uint8_t* stage = smem + st * stage_bytes;
        for (int u = tid; u < MMA_BM * slot_units; u += MMA_THREADS) {
            const int i = u / slot_units, k = u % slot_units;
            const uint8_t* row = row_of(i);
            if (row == nullptr) continue;
            const uintptr_t first = reinterpret_cast<uintptr_t>(row + gb0);
            const uintptr_t end = reinterpret_cast<uintptr_t>(row + gb1);
            const uintptr_t src = (first & ~static_cast<uintptr_t>(15)) + 16 * static_cast<uintptr_t>(k);
            const uintptr_t mat_end = from_up(i) ? w2_end : w_end;
            if (src >= end || src + 16 > mat_end) continue;
            cp_async16(stage + static_cast<size_t>(i) * geo.slot + 16 * k, reinterpret_cast<const void*>(src));
        }
        if (tail_block && tid < (swiglu ? 2 : 1) && gb1 == geo.row_bytes) {
            const int64_t last = rows - 1 - r0;  // the last row's place in the block
            const int i = swiglu ? static_cast<int>((last >> 3) * 16 + (last & 7)) + 8 * tid : static_cast<int>(last);
            const uint8_t* row = row_of(i);
            const uintptr_t first_al = reinterpret_cast<uintptr_t>(row + gb0) & ~static_cast<uintptr_t>(15);
            const uintptr_t row_end = reinterpret_cast<uintptr_t>(row + geo.row_bytes);  // = the matrix's end
            const uintptr_t src = row_end & ~static_cast<uintptr_t>(15);
            if (src != row_end && src >= first_al) {
                uint8_t* dst = stage + static_cast<size_t>(i) * geo.slot + (src - first_al);
                for (uintptr_t p = src; p < row_end; ++p) dst[p - src] = *reinterpret_cast<const uint8_t*>(p);
            }
        }
        cp_async_commit();
    };

    // This thread's A row and chunk within each step.
    const int ai = tid >> 1, ah = tid & 1;
    const uint8_t* arow = row_of(ai);
    const size_t amis = arow ? reinterpret_cast<uintptr_t>(arow) & 15 : 0;  // + g * group_bytes, below

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.0f;

    if (g_first < g_last) issue(g_first, 0);
    for (int64_t g = g_first; g < g_last; ++g) {
        const int st = static_cast<int>((g - g_first) & 1);
        if (g + 1 < g_last) {
            issue(g + 1, st ^ 1);  // the other stage was last read before the previous barrier
            cp_async_wait<1>();    // group g has landed (this thread's part)
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // every thread's part of group g is visible
        const uint8_t* arow_s =
            smem + st * stage_bytes + static_cast<size_t>(ai) * geo.slot + ((amis + static_cast<size_t>(g) * geo.group_bytes) & 15);
        // The group's steps that are this block's (block-uniform bounds).
        int s_lo = 0, s_hi = GS;
        if constexpr (SMALL) {
            s_lo = g == g_first ? static_cast<int>(s_first - g * GS) : 0;
            s_hi = static_cast<int>(std::min<int64_t>(GS, s_last - g * GS));
        }
#pragma unroll 1
        for (int s = s_lo; s < s_hi; ++s) {
            const int64_t k0 = g * (GS * MMA_BK) + static_cast<int64_t>(s) * MMA_BK;
            if (k0 >= cols) break;  // block-uniform
            // B: BN tokens x 64 columns of fp16 activations, 8 x 16 bytes per token, loaded before
            // the dequantization so their latency overlaps it.
            constexpr int BV = BN * 8 / MMA_THREADS;
            uint4 xv[BV];
#pragma unroll
            for (int j = 0; j < BV; ++j) {
                const int f = tid + j * MMA_THREADS;
                const int t = t0 + f / 8;
                const int64_t kk = k0 + 8 * (f % 8);
                xv[j] = make_uint4(0u, 0u, 0u, 0u);
                if (t < n_tok && kk < cols) xv[j] = __ldg(reinterpret_cast<const uint4*>(x + static_cast<int64_t>(t) * cols + kk));
            }
            // A: one chunk per thread, dequantized from the stage to fp16.
            {
                const int64_t c = k0 / 32 + ah;
                float v[32];
                if (arow != nullptr && c < n_chunks) {
                    if constexpr (TILED) {
                        tile_chunk<T, true>(smem + st * stage_bytes + (ai / TILE_ROWS) * TileFmt<T>::BYTES,
                                            ai % TILE_ROWS, s * 2 + ah, v);
                    } else {
                        ChunkDequant<T>::run(arow_s, s * 2 + ah, v);
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 32; ++i) v[i] = 0.0f;
                }
                uint4* dst = reinterpret_cast<uint4*>(&As[ai][ah * 32]);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    dst[i] = make_uint4(pack_half2(v[8 * i], v[8 * i + 1]), pack_half2(v[8 * i + 2], v[8 * i + 3]),
                                        pack_half2(v[8 * i + 4], v[8 * i + 5]), pack_half2(v[8 * i + 6], v[8 * i + 7]));
                }
            }
#pragma unroll
            for (int j = 0; j < BV; ++j) {
                const int f = tid + j * MMA_THREADS;
                *reinterpret_cast<uint4*>(&Bs[f / 8][8 * (f % 8)]) = xv[j];
            }
            __syncthreads();
            if (!SMALL || t0 + wn0 + 32 <= n_tok) {
                warp_mma(As, Bs, wm0, wn0, lane, acc, NT);
            } else {
                // Tokens past n_tok are zeros: the n8 tiles wholly past it are skipped (warp-uniform).
                warp_mma(As, Bs, wm0, wn0, lane, acc, (n_tok - t0 - wn0 + 7) / 8);
            }
            __syncthreads();
        }
    }

    // Epilogue: c0, c1 at (row g, tokens 2q, 2q + 1); c2, c3 at row g + 8.
    const int g = lane >> 2, q2 = (lane & 3) * 2;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int m = wm0 + mt * 16 + g;
            store_acc(y, rows, n_tok, ystride, swiglu, partial, out_mode, r0 + (m >> 4) * 8 + (m & 7), r0 + m,
                      t0 + wn0 + nt * 8 + q2, acc[mt][nt]);
        }
    }
}

// y[i] (= or +=) sum over z of work[z][i], z in order; n = n_tok * rows.
__global__ void kernel_splitk_reduce(const float* __restrict__ work, int split, int64_t n, float* __restrict__ y,
                                     int add) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = work[i];
    for (int z = 1; z < split; ++z) s += work[z * n + i];
    y[i] = add ? y[i] + s : s;
}

// SwiGLU: y[t][r] = silu(sum_z gate) * sum_z up, from work[z][t][2 * rows] (gate | up), z in order.
__global__ void kernel_splitk_reduce_swiglu(const float* __restrict__ work, int split, int n_tok, int64_t rows,
                                            float* __restrict__ y) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n_tok * rows) return;
    const int64_t t = i / rows, r = i % rows;
    const int64_t part = static_cast<int64_t>(n_tok) * 2 * rows;
    const float* p = work + t * 2 * rows + r;
    float g = p[0], u = p[rows];
    for (int z = 1; z < split; ++z) {
        g += p[z * part];
        u += p[z * part + rows];
    }
    y[i] = silu_mul_f(g, u);
}

// Enough blocks to give every SM two.
constexpr int GEMM_TARGET_BLOCKS = 264;
// A block's start (its first group staged with nothing to overlap), in column steps.
constexpr int64_t GEMM_BLOCK_START_STEPS = 2;

// The split-K parts for a grid of `blocks` blocks over `steps` steps (column steps of a block), at
// most `fits` (the work buffer's room) and GEMM_MAX_SPLIT: the fewest that minimize waves x (steps
// per block + `start`, a block's start in steps), the waves counted in `wave` blocks.
int gemm_split(int64_t blocks, int64_t steps, int64_t fits, int64_t wave, int64_t start) {
    const int64_t most = std::min<int64_t>({GEMM_MAX_SPLIT, steps, fits});
    int best = 1;
    int64_t best_cost = INT64_MAX;
    for (int64_t z = 1; z <= most; ++z) {
        const int64_t waves = (blocks * z + wave - 1) / wave;
        const int64_t cost = waves * ((steps + z - 1) / z + start);
        if (cost < best_cost) best_cost = cost, best = static_cast<int>(z);
    }
    return best;
}

// Row blocks of a product of `rows` rows (a SwiGLU block holds 64 gate and 64 up rows).
int64_t gemm_row_blocks(int64_t rows, MatOut out) {
    const int64_t per_block = out == MatOut::SwiGLU ? MMA_BM / 2 : MMA_BM;
    return (rows + per_block - 1) / per_block;
}

// Dynamic shared memory of a launch: two weight stages, then the A and B tiles.
size_t gemm_smem(const GemmGeom& geo, int bn) {
    return 2 * static_cast<size_t>(MMA_BM) * geo.slot + (bn == 128 ? gemm_tiles_bytes<128>() : gemm_tiles_bytes<64>());
}

// y (= or += with add) the ordered sum of `split` partial sums of n values from work.
void launch_splitk_reduce(const float* work, int split, int64_t n, float* y, bool add, void* stream) {
    kernel_splitk_reduce<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(work, split, n, y,
                                                                                                add ? 1 : 0);
    JLLM_CUDA_LAUNCH_CHECK("kernel_splitk_reduce");
}

// The plan of a grid of row_blocks row blocks whose split parts take per_split work floats each.
GemmPlan plan_grid(int64_t row_blocks, size_t per_split, int64_t cols, int n_tok, size_t work_floats) {
    GemmPlan plan;
    // 128-token tiles only when they still give every SM two blocks (so that kernel never splits).
    plan.bn = n_tok > 64 && row_blocks * ((n_tok + 127) / 128) >= GEMM_TARGET_BLOCKS ? 128 : 64;
    const int64_t blocks = row_blocks * ((n_tok + plan.bn - 1) / plan.bn);
    // Split the column steps when the grid is small (few rows, few tokens).
    plan.split = blocks < GEMM_TARGET_BLOCKS
                     ? gemm_split(blocks, (cols + MMA_BK - 1) / MMA_BK, static_cast<int64_t>(work_floats / per_split),
                                  GEMM_TARGET_BLOCKS, GEMM_BLOCK_START_STEPS)
                     : 1;
    return plan;
}

// ---------------------------------------------------------------- small batches, tiled weights
// Up to GEMM_SMALL_MAX_TOKENS tokens (a turn's prompt) on tiled Q4_K/Q6_K: each warp decodes its
// weights from the stage straight into mma fragments in registers, so a step needs no A tile, no
// ldmatrix and no barrier; one barrier per block column (256 columns) publishes the next stage.
// A block is 8 warps of one m16 tile each (rows g and g + 8: two tiles of 8 rows; SwiGLU: 8 gate
// rows and the same 8 up rows, so c0/c1 are gate and c2/c3 up sums of one row, as in
// kernel_gemm_mma), each with all NT n8 tiles of tokens. A stage holds one block column: the
// activations of every token (fp16, 256 columns) and the block's 16 weight tiles, copied by
// cp.async while the other stage is computed.
// The k order inside a step is free as long as A and B agree: lane (g, c) takes the 4 weights a
// 32-bit word of its tile row holds (Q4_K: the 32 bytes of sub-blocks 2c and 2c + 1; Q6_K: the ql
// bytes 32c..32c+31), which are 4 consecutive columns, and reads the same 4 columns of token g as
// one 8-byte word; sg_act_offset places those words so the half-warps' loads do not collide.
// Numerics (gemm_small_ref): half2 arithmetic, 4 codes per byte_perm under fp16 1024, minus 1024
// (exact), then q * fp16(d * sc) - fp16(dmin * m) by one __hfma2 (Q6_K: (q - 32) * fp16(d * sc)
// by __hmul2). A warp whose block column holds a weight that could pass 65504 decodes
// ChunkDequant's fp32 values, saturated as pack_half2 does (gemm_f16_ref), in a loop kept compact:
// no quantizer makes such weights from a real model, and unrolled it cost the fast path's
// instruction cache (pp33 6,050 -> 6,740 when it was rolled up).
constexpr int SMALL_TILES = 16;  // weight tiles per block: 128 rows (SwiGLU: 64 gate + 64 up)
constexpr int SMALL_MT = 1;      // m16 tiles per warp
constexpr int SMALL_THREADS = SMALL_TILES / (2 * SMALL_MT) * WARP;
constexpr int SMALL_STAGES = 2;  // block columns in shared memory: one computed, one arriving
constexpr int64_t SMALL_BLOCK_START = 1;  // a block's first stage, copied with nothing to overlap (block columns)
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

template <GgmlType T, int NT>
__host__ __device__ constexpr int small_stage_bytes() {
    return NT * 8 * SMALL_ACT_PITCH + SMALL_TILES * TileFmt<T>::BYTES;
}

// segs: up to GEMM_MAX_SEG matrices of one width (a plain product is one segment); w2: the up
// matrix of a SwiGLU product (one segment). Split-K (grid z > 1): block z takes block columns
// [z * NB / Z, (z + 1) * NB / Z) and stores partial sums as kernel_gemm_mma does.
template <GgmlType T, int NT>
__global__ void __launch_bounds__(SMALL_THREADS)
    kernel_gemm_small(GemmSegs segs, const uint8_t* __restrict__ w2, int64_t cols, const uint16_t* __restrict__ x,
                      int n_tok, int out_mode) {
    using F = TileFmt<T>;
    constexpr int MT = SMALL_MT, Q = 2 * MT;  // tile slots per warp
    constexpr int THREADS = SMALL_THREADS;
    constexpr int ACT_BYTES = NT * 8 * SMALL_ACT_PITCH;
    constexpr int STAGE = small_stage_bytes<T, NT>();
    int64_t bx = blockIdx.x;
    const int seg = bx < segs.block_end[0] ? 0 : (bx < segs.block_end[1] ? 1 : 2);
    bx -= seg == 0 ? 0 : (seg == 1 ? segs.block_end[0] : segs.block_end[1]);
    const uint8_t* w = seg == 0 ? segs.w[0] : (seg == 1 ? segs.w[1] : segs.w[2]);
    float* y = seg == 0 ? segs.y[0] : (seg == 1 ? segs.y[1] : segs.y[2]);
    const int64_t rows = seg == 0 ? segs.rows[0] : (seg == 1 ? segs.rows[1] : segs.rows[2]);

    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int g = lane >> 2, c = lane & 3;
    const bool swiglu = out_mode == static_cast<int>(MatOut::SwiGLU);
    const bool partial = gridDim.z > 1;
    const int64_t ystride = partial && swiglu ? 2 * rows : rows;
    if (partial) y += static_cast<int64_t>(blockIdx.z) * n_tok * ystride;
    const int64_t nb = cols / 256;
    const int64_t kb_first = nb * blockIdx.z / gridDim.z, kb_last = nb * (blockIdx.z + 1) / gridDim.z;
    const int64_t r0 = bx * (swiglu ? MMA_BM / 2 : MMA_BM);

    // Tile slot q (0..Q - 1) of warp v: fragment rows g (q even) or g + 8 (q odd) of m16 tile q / 2.
    auto slot_row = [&](int v, int q) -> int64_t { return swiglu ? r0 + v * 8 * MT + 8 * (q >> 1) : r0 + v * 16 * MT + 8 * q; };

    auto issue = [&](int64_t kb, int st) {
        if (kb < kb_last) {
            uint8_t* sb = smem + st * STAGE;
            const uint16_t* xk = x + kb * 256;
            for (int p = tid; p < n_tok * 64; p += THREADS) {
                const int t = p >> 6, u = p & 63;
                cp_async8(sb + sg_act_offset(t, u >> 3, u & 7), xk + static_cast<int64_t>(t) * cols + 4 * u);
            }
            constexpr int UNITS = F::BYTES / 16;
            uint8_t* sw = sb + ACT_BYTES;
            for (int u = tid; u < SMALL_TILES * UNITS; u += THREADS) {
                const int k = u / UNITS, o = u - k * UNITS;
                const int64_t r = slot_row(k / Q, k % Q);
                if (r < rows) {
                    const uint8_t* m = swiglu && (k & 1) ? w2 : w;
                    cp_async16(sw + k * F::BYTES + 16 * F::staged_unit(o), tile_of<T>(m, nb, r, kb * 8) + 16 * o);
                }
            }
        }
        cp_async_commit();
    };

    bool valid[Q];
#pragma unroll
    for (int q = 0; q < Q; ++q) valid[q] = slot_row(warp, q) < rows;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.0f;

    // One k step: the warp's m16 tiles' fragments from pair(q, p) (slot q's columns 2p, 2p + 1 of the
    // step's 4 as a half2), then the NT token tiles' B words of 32-column group G, unit u.
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
        for (int nt = 0; nt < NT; ++nt) {
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

    static_assert(SMALL_STAGES == 2, "the wait below counts one group in flight");
    const int64_t n_iter = kb_last - kb_first;
    issue(kb_first, 0);
    for (int64_t i = 0; i < n_iter; ++i) {
        cp_async_wait<0>();  // block column i has landed (this thread's copies) ...
        __syncthreads();     // ... for every thread; and every warp is done with column i - 1's stage
        issue(kb_first + i + 1, static_cast<int>((i + 1) % SMALL_STAGES));
        if (valid[0]) compute(smem + (i % SMALL_STAGES) * STAGE);
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int64_t r = swiglu ? r0 + warp * 8 * MT + 8 * mt + g : r0 + warp * 16 * MT + 16 * mt + g;
            store_acc(y, rows, n_tok, ystride, swiglu, partial, out_mode, r, r, nt * 8 + 2 * c, acc[mt][nt]);
        }
    }
}

// The small-batch product of n_seg segments (segs: weights, outputs, rows; block_end unset) or a
// SwiGLU product (one segment, w2 its up matrix): the grid, split parts in work, the reductions.
void launch_gemm_small(GgmlType type, int n_seg, GemmSegs segs, const uint8_t* w2, int64_t cols, const uint16_t* x,
                       int n_tok, MatOut out, void* stream, float* work, size_t work_floats) {
    JLLM_ASSERT(n_tok >= 1 && n_tok <= GEMM_SMALL_MAX_TOKENS && cols % 256 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
    JLLM_ASSERT(out != MatOut::SwiGLU || (n_seg == 1 && w2 != nullptr));
    const int nt = (n_tok + 7) / 8;
    int64_t blocks = 0, all_rows = 0;
    for (int s = 0; s < n_seg; ++s) {
        JLLM_ASSERT(segs.rows[s] >= 1 && tiles_fit(type, segs.rows[s], cols) && reinterpret_cast<uintptr_t>(segs.w[s]) % 16 == 0);
        blocks += gemm_row_blocks(segs.rows[s], out);
        segs.block_end[s] = blocks;
        all_rows += segs.rows[s];
    }
    for (int s = n_seg; s < GEMM_MAX_SEG; ++s) segs.block_end[s] = blocks;
    const size_t per_split = static_cast<size_t>(n_tok) * all_rows * (out == MatOut::SwiGLU ? 2 : 1);
    float* y_final[GEMM_MAX_SEG] = {segs.y[0], segs.y[1], segs.y[2]};
    const bool ok = dispatch_tiled_type(type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        auto run = [&](auto kernel, size_t stage_bytes) {
            const size_t smem = stage_bytes * SMALL_STAGES;
            allow_dynamic_smem(kernel, smem);
            const int64_t n_kb = cols / 256;
            const int64_t resident =
                std::max(1, resident_blocks(reinterpret_cast<const void*>(kernel), SMALL_THREADS, smem));
            const int split =
                work != nullptr ? gemm_split(blocks, n_kb, static_cast<int64_t>(work_floats / per_split), resident, SMALL_BLOCK_START)
                                : 1;
            if (split > 1) {
                int64_t row_off = 0;
                for (int s = 0; s < n_seg; ++s) {
                    segs.y[s] = work + static_cast<int64_t>(split) * n_tok * row_off * (out == MatOut::SwiGLU ? 2 : 1);
                    row_off += segs.rows[s];
                }
            }
            const int mode = split > 1 && out != MatOut::SwiGLU ? static_cast<int>(MatOut::Store) : static_cast<int>(out);
            const dim3 grid(static_cast<unsigned>(blocks), 1, static_cast<unsigned>(split));
            kernel<<<grid, SMALL_THREADS, smem, as_stream(stream)>>>(segs, w2, cols, x, n_tok, mode);
            JLLM_CUDA_LAUNCH_CHECK("kernel_gemm_small");
            if (split == 1) return;
            for (int s = 0; s < n_seg; ++s) {
                const int64_t n = static_cast<int64_t>(n_tok) * segs.rows[s];
                if (out == MatOut::SwiGLU) {
                    kernel_splitk_reduce_swiglu<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(
                        segs.y[s], split, n_tok, segs.rows[s], y_final[s]);
                    JLLM_CUDA_LAUNCH_CHECK("kernel_splitk_reduce_swiglu");
                } else {
                    launch_splitk_reduce(segs.y[s], split, n, y_final[s], out == MatOut::Add, stream);
                }
            }
        };
        switch (nt) {
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
    if (!ok) throw JllmError(std::string("cuda: no small-batch GEMM kernel for weight type ") + type_name(type));
}
}  // namespace

bool gemm_takes_small(WeightFormat fmt, int n_tok) { return fmt.tiled() && n_tok <= GEMM_SMALL_MAX_TOKENS; }

GemmPlan gemm_plan(int64_t rows, int64_t cols, int n_tok, MatOut out, size_t work_floats) {
    return plan_grid(gemm_row_blocks(rows, out), static_cast<size_t>(n_tok) * rows * (out == MatOut::SwiGLU ? 2 : 1),
                     cols, n_tok, work_floats);
}

GemmPlan gemm_plan_multi(int n_seg, const int64_t* rows, int64_t cols, int n_tok, size_t work_floats) {
    int64_t row_blocks = 0, all_rows = 0;
    for (int s = 0; s < n_seg; ++s) {
        row_blocks += gemm_row_blocks(rows[s], MatOut::Store);
        all_rows += rows[s];
    }
    return plan_grid(row_blocks, static_cast<size_t>(n_tok) * all_rows, cols, n_tok, work_floats);
}

size_t gemm_work_floats(int n_tok, int64_t rows) {
    return static_cast<size_t>(GEMM_MAX_SPLIT) * static_cast<size_t>(n_tok) * static_cast<size_t>(rows);
}

size_t gemm_work_floats_for_batch(int n_batch, int64_t rows) {
    return std::max(static_cast<size_t>(GEMM_BATCH_SPLIT) * static_cast<size_t>(std::min(n_batch, 64)) *
                        static_cast<size_t>(rows),
                    static_cast<size_t>(2) * static_cast<size_t>(n_batch) * static_cast<size_t>(rows));
}

namespace {

__global__ void kernel_to_f16(const float4* __restrict__ x, int64_t n4, uint2* __restrict__ y) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 v = x[i];
    y[i] = make_uint2(pack_half2(v.x, v.y), pack_half2(v.z, v.w));
}

}  // namespace

void launch_to_f16(const float* x, int64_t n, uint16_t* xh, void* stream) {
    JLLM_ASSERT(n >= 1 && n % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(xh) % 8 == 0);
    const int64_t n4 = n / 4;
    kernel_to_f16<<<static_cast<unsigned>((n4 + 255) / 256), 256, 0, as_stream(stream)>>>(
        reinterpret_cast<const float4*>(x), n4, reinterpret_cast<uint2*>(xh));
    JLLM_CUDA_LAUNCH_CHECK("kernel_to_f16");
}

void launch_gemm(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const uint16_t* x,
                 int n_tok, float* y, MatOut out, void* stream, float* work, size_t work_floats) {
    JLLM_ASSERT(n_tok >= 1 && cols % 32 == 0 && rows >= 1 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
    JLLM_ASSERT(out != MatOut::SwiGLU || w2 != nullptr);
    const GgmlType type = fmt.type;
    JLLM_ASSERT(!fmt.tiled() || (tiles_fit(type, rows, cols) && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                                 reinterpret_cast<uintptr_t>(w2) % 16 == 0));
    if (gemm_takes_small(fmt, n_tok)) {
        GemmSegs segs{};
        segs.w[0] = static_cast<const uint8_t*>(w);
        segs.y[0] = y;
        segs.rows[0] = rows;
        launch_gemm_small(type, 1, segs, static_cast<const uint8_t*>(w2), cols, x, n_tok, out, stream, work, work_floats);
        return;
    }
    const GemmGeom geo =
        gemm_geom(fmt, cols, reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(w2) % 16 == 0);
    const GemmPlan plan = gemm_plan(rows, cols, n_tok, out, work != nullptr ? work_floats : 0);
    const int split = plan.split;
    const bool wide = plan.bn == 128;
    const dim3 grid(static_cast<unsigned>(gemm_row_blocks(rows, out)), static_cast<unsigned>((n_tok + plan.bn - 1) / plan.bn),
                    static_cast<unsigned>(split));
    float* dst = split > 1 ? work : y;
    // A split SwiGLU product keeps its mode (the kernel writes gate and up partial sums).
    const int mode = split > 1 && out != MatOut::SwiGLU ? static_cast<int>(MatOut::Store) : static_cast<int>(out);
    const size_t smem = gemm_smem(geo, plan.bn);
    auto launch = [&](auto kernel) {
        allow_dynamic_smem(kernel, smem);
        kernel<<<grid, MMA_THREADS, smem, as_stream(stream)>>>(static_cast<const uint8_t*>(w),
                                                               static_cast<const uint8_t*>(w2), rows, cols, geo, x,
                                                               n_tok, dst, mode, GemmSegs{});
    };
    const bool ok = dispatch_format(type, fmt.tiled(), [&](auto tag, auto tiled) {
        constexpr GgmlType T = decltype(tag)::value;
        constexpr bool TILED = decltype(tiled)::value;
        if (wide) launch(kernel_gemm_mma<T, 128, TILED>);
        else launch(kernel_gemm_mma<T, 64, TILED>);
    });
    if (!ok) throw JllmError(std::string("cuda: no GEMM kernel for weight type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemm_mma");
    if (split > 1) {
        const int64_t n = static_cast<int64_t>(n_tok) * rows;
        if (out == MatOut::SwiGLU) {
            kernel_splitk_reduce_swiglu<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(
                work, split, n_tok, rows, y);
            JLLM_CUDA_LAUNCH_CHECK("kernel_splitk_reduce_swiglu");
        } else {
            launch_splitk_reduce(work, split, n, y, out == MatOut::Add, stream);
        }
    }
}

void launch_gemm_multi(WeightFormat fmt, int n_seg, const void* const* w, const int64_t* rows, int64_t cols,
                       const uint16_t* x, int n_tok, float* const* y, void* stream, float* work, size_t work_floats) {
    JLLM_ASSERT(n_seg >= 1 && n_seg <= GEMM_MAX_SEG && n_tok >= 1 && cols % 32 == 0 &&
                reinterpret_cast<uintptr_t>(x) % 16 == 0);
    if (gemm_takes_small(fmt, n_tok)) {
        GemmSegs segs{};
        for (int s = 0; s < n_seg; ++s) {
            segs.w[s] = static_cast<const uint8_t*>(w[s]);
            segs.y[s] = y[s];
            segs.rows[s] = rows[s];
        }
        launch_gemm_small(fmt.type, n_seg, segs, nullptr, cols, x, n_tok, MatOut::Store, stream, work, work_floats);
        return;
    }
    const GemmPlan plan = gemm_plan_multi(n_seg, rows, cols, n_tok, work != nullptr ? work_floats : 0);
    // One grid for the tiled types in 64-token tiles; otherwise a launch per matrix.
    if (n_seg == 1 || !fmt.tiled() || plan.bn != 64) {
        for (int s = 0; s < n_seg; ++s) {
            launch_gemm(fmt, w[s], nullptr, rows[s], cols, x, n_tok, y[s], MatOut::Store, stream, work, work_floats);
        }
        return;
    }
    GemmSegs segs{};
    int64_t blocks = 0, row_off = 0;
    for (int s = 0; s < n_seg; ++s) {
        JLLM_ASSERT(rows[s] >= 1 && tiles_fit(fmt.type, rows[s], cols) && reinterpret_cast<uintptr_t>(w[s]) % 16 == 0);
        blocks += gemm_row_blocks(rows[s], MatOut::Store);
        segs.w[s] = static_cast<const uint8_t*>(w[s]);
        segs.rows[s] = rows[s];
        // Split: segment s's parts in a region of its own, [split][n_tok][rows[s]].
        segs.y[s] = plan.split > 1 ? work + static_cast<int64_t>(plan.split) * n_tok * row_off : y[s];
        segs.block_end[s] = blocks;
        row_off += rows[s];
    }
    for (int s = n_seg; s < GEMM_MAX_SEG; ++s) segs.block_end[s] = blocks;
    const GemmGeom geo = gemm_geom(fmt, cols, true);
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>((n_tok + 63) / 64),
                    static_cast<unsigned>(plan.split));
    const size_t smem = gemm_smem(geo, 64);
    const bool ok = dispatch_tiled_type(fmt.type, [&](auto tag) {
        constexpr GgmlType T = decltype(tag)::value;
        auto kernel = kernel_gemm_mma<T, 64, true, true>;
        allow_dynamic_smem(kernel, smem);
        kernel<<<grid, MMA_THREADS, smem, as_stream(stream)>>>(nullptr, nullptr, 0, cols, geo, x, n_tok, nullptr,
                                                               static_cast<int>(MatOut::Store), segs);
    });
    if (!ok) throw JllmError(std::string("cuda: no tiled GEMM kernel for weight type ") + type_name(fmt.type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemm_mma (segments)");
    if (plan.split > 1) {
        for (int s = 0; s < n_seg; ++s) {
            launch_splitk_reduce(segs.y[s], plan.split, static_cast<int64_t>(n_tok) * rows[s], y[s], false, stream);
        }
    }
}

void launch_matmul(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                   const uint16_t* xh, int n_tok, float* y, MatOut out, void* stream, float* work,
                   size_t work_floats) {
    if (n_tok <= GEMV_MAX_TOKENS) {
        launch_gemv(fmt, w, w2, rows, cols, x, n_tok, y, out, stream);
    } else {
        JLLM_ASSERT(xh != nullptr);
        launch_gemm(fmt, w, w2, rows, cols, xh, n_tok, y, out, stream, work, work_floats);
    }
}

}  // namespace cuda
}  // namespace jllm
