// backend/cuda/gemm.cu — prefill matrix products on tensor cores:
//   Y[n_tok][rows] = W[rows][cols] X[n_tok][cols]   (store, += residual, or SwiGLU with W2).
// Tiled Q4_K/Q6_K products go to gemm_small.cu's kernel (gemm_takes_small) but for the Q6_K
// SwiGLU product of more than 64 tokens; this file's kernel serves that and every other format.
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

#include "backend/cuda/chunk_dequant.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/weight_tiles.cuh"
#include "core/error.h"

namespace jllm {
namespace cuda {

namespace {

constexpr int MMA_THREADS = 256;
constexpr int MMA_LDS = MMA_BK + 8;  // shared row stride in halves (144 bytes: ldmatrix without conflicts)

// Weight staging: the columns go in groups of GROUP_STEPS steps (256 columns for the quantized
// types, whole blocks of every one; 64 for F32/F16/BF16). While a group's steps run, the raw bytes
// of the next group of the block's 128 rows are copied into the other of two shared stage
// buffers by cp.async (16-byte units from the 16-byte boundary at or below the group's first
// byte, the last unit cut at the group's end, so nothing beyond it is read), and ChunkDequant
// decodes from there: DRAM latency overlaps the previous group's tensor-core work instead of
// stalling every step. A row's slot is `slot` bytes (the group's bytes rounded up to 16, plus 16
// when groups are not 16-byte aligned); the group starts at (address % 16) within it, so the
// decoders see the alignment they would see in global memory. Tiled Q6_K (TILED; tiled Q4_K never
// comes here and is not compiled): a group is one block column, so the block's 128 rows are 16
// whole tiles of contiguous bytes; 16 threads copy each, its 16-byte units permuted as
// TileFmt::staged_unit says (a row's units spread over the banks), and tile_chunk<T, true> decodes
// them (slot = tile bytes / 8).
__host__ __device__ constexpr int group_steps(GgmlType t) {
    return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ? 1 : 4;
}

struct GemmGeom {
    size_t row_bytes;   // bytes of one weight row
    int group_bytes;    // bytes of one full column group of a row
    int slot;           // stage bytes per row
};

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

// One warp's share of a step: its WM rows x 32 tokens (the first `tiles` n8 tiles of them, a
// warp-uniform count) over MMA_BK columns from the shared A and B tiles.
template <int MT, int N_TOK>
__device__ __forceinline__ void warp_mma(const __half (*As)[MMA_LDS], const __half (*Bs)[MMA_LDS], int wm0, int wn0,
                                         int lane, float (&acc)[MT][N_TOK][4], int tiles) {
#pragma unroll
    for (int ks = 0; ks < MMA_BK / 16; ++ks) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            ldmatrix_x4(a[mt], &As[wm0 + mt * 16 + (lane & 15)][ks * 16 + (lane >> 4) * 8]);
        }
#pragma unroll
        for (int np = 0; np < N_TOK / 2; ++np) {
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
// Shared memory (dynamic): stage 0 | stage 1 ([MMA_BM][slot] bytes each) | As | Bs.
template <GgmlType T, int BN, bool TILED>
__global__ void __launch_bounds__(MMA_THREADS, 2)
    kernel_gemm_mma(const uint8_t* __restrict__ w, const uint8_t* __restrict__ w2, int64_t rows, int64_t cols,
                    GemmGeom geo, const uint16_t* __restrict__ x, int n_tok, float* __restrict__ y, int out_mode) {
    constexpr int GS = group_steps(T);
    const int64_t bx = blockIdx.x;  // the row block
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
    constexpr int N_TOK = 4;                 // n8 tiles per warp (32 tokens)

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

    float acc[MT][N_TOK][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < N_TOK; ++j)
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
                warp_mma(As, Bs, wm0, wn0, lane, acc, N_TOK);
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
        for (int nt = 0; nt < N_TOK; ++nt) {
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

// Dynamic shared memory of a launch: two weight stages, then the A and B tiles.
size_t gemm_smem(const GemmGeom& geo, int bn) {
    return 2 * static_cast<size_t>(MMA_BM) * geo.slot + (bn == 128 ? gemm_tiles_bytes<128>() : gemm_tiles_bytes<64>());
}

__global__ void kernel_to_f16(const float4* __restrict__ x, int64_t n4, uint2* __restrict__ y) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 v = x[i];
    y[i] = make_uint2(pack_half2(v.x, v.y), pack_half2(v.z, v.w));
}

}  // namespace

// y (= or += with add) the ordered sum of `split` partial sums of n values from work.
void launch_splitk_reduce(const float* work, int split, int64_t n, float* y, bool add, void* stream) {
    kernel_splitk_reduce<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(work, split, n, y,
                                                                                                add ? 1 : 0);
    JLLM_CUDA_LAUNCH_CHECK("kernel_splitk_reduce");
}

void launch_splitk_reduce_swiglu(const float* work, int split, int n_tok, int64_t rows, float* y, void* stream) {
    const int64_t n = static_cast<int64_t>(n_tok) * rows;
    kernel_splitk_reduce_swiglu<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(stream)>>>(work, split,
                                                                                                       n_tok, rows, y);
    JLLM_CUDA_LAUNCH_CHECK("kernel_splitk_reduce_swiglu");
}

void launch_to_f16(const float* x, int64_t n, uint16_t* xh, void* stream) {
    JLLM_ASSERT(n >= 1 && n % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(xh) % 8 == 0);
    const int64_t n4 = n / 4;
    kernel_to_f16<<<static_cast<unsigned>((n4 + 255) / 256), 256, 0, as_stream(stream)>>>(
        reinterpret_cast<const float4*>(x), n4, reinterpret_cast<uint2*>(xh));
    JLLM_CUDA_LAUNCH_CHECK("kernel_to_f16");
}

void launch_gemm(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const uint16_t* x,
                 int n_tok, float* y, MatOut out, void* stream, float* work, size_t work_floats, const void* xq8) {
    JLLM_ASSERT(n_tok >= 1 && cols % 32 == 0 && rows >= 1 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
    JLLM_ASSERT(out != MatOut::SwiGLU || w2 != nullptr);
    const GgmlType type = fmt.type;
    JLLM_ASSERT(!fmt.tiled() || (tiles_fit(type, rows, cols) && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                                 reinterpret_cast<uintptr_t>(w2) % 16 == 0));
    const bool s8 = xq8 != nullptr && gemm_takes_s8(fmt);
    if (s8 || gemm_takes_small(fmt, n_tok, out)) {
        GemmSegs segs{};
        segs.w[0] = static_cast<const uint8_t*>(w);
        segs.y[0] = y;
        segs.rows[0] = rows;
        const uint8_t* up = static_cast<const uint8_t*>(w2);
        if (s8) launch_gemm_s8(1, segs, up, cols, xq8, n_tok, out, stream, work, work_floats);
        else launch_gemm_small(type, 1, segs, up, cols, x, n_tok, out, stream, work, work_floats);
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
                                                               n_tok, dst, mode);
    };
    const bool ok = dispatch_format(type, fmt.tiled(), [&](auto tag, auto tiled) {
        constexpr GgmlType T = decltype(tag)::value;
        constexpr bool TILED = decltype(tiled)::value;
        if constexpr (TILED && T != GgmlType::Q6_K) {
            // Tiled Q4_K takes kernel_gemm_small at every batch (gemm_takes_small): not compiled here.
            JLLM_ASSERT_MSG(false, "cuda: tiled Q4_K reached the dequantizing GEMM");
        } else {
            if (wide) launch(kernel_gemm_mma<T, 128, TILED>);
            else launch(kernel_gemm_mma<T, 64, TILED>);
        }
    });
    if (!ok) throw JllmError(std::string("cuda: no GEMM kernel for weight type ") + type_name(type));
    JLLM_CUDA_LAUNCH_CHECK("kernel_gemm_mma");
    if (split > 1) {
        const int64_t n = static_cast<int64_t>(n_tok) * rows;
        if (out == MatOut::SwiGLU) {
            launch_splitk_reduce_swiglu(work, split, n_tok, rows, y, stream);
        } else {
            launch_splitk_reduce(work, split, n, y, out == MatOut::Add, stream);
        }
    }
}

void launch_gemm_multi(WeightFormat fmt, int n_seg, const void* const* w, const int64_t* rows, int64_t cols,
                       const uint16_t* x, int n_tok, float* const* y, void* stream, float* work, size_t work_floats,
                       const void* xq8) {
    JLLM_ASSERT(n_seg >= 1 && n_seg <= GEMM_MAX_SEG && n_tok >= 1 && cols % 32 == 0 &&
                reinterpret_cast<uintptr_t>(x) % 16 == 0);
    const bool s8 = xq8 != nullptr && gemm_takes_s8(fmt);
    if (s8 || gemm_takes_small(fmt, n_tok, MatOut::Store)) {
        GemmSegs segs{};
        for (int s = 0; s < n_seg; ++s) {
            segs.w[s] = static_cast<const uint8_t*>(w[s]);
            segs.y[s] = y[s];
            segs.rows[s] = rows[s];
        }
        if (s8) launch_gemm_s8(n_seg, segs, nullptr, cols, xq8, n_tok, MatOut::Store, stream, work, work_floats);
        else launch_gemm_small(fmt.type, n_seg, segs, nullptr, cols, x, n_tok, MatOut::Store, stream, work, work_floats);
        return;
    }
    // Untiled formats: a launch per matrix (tiled ones take kernel_gemm_small's one grid above).
    for (int s = 0; s < n_seg; ++s) {
        launch_gemm(fmt, w[s], nullptr, rows[s], cols, x, n_tok, y[s], MatOut::Store, stream, work, work_floats);
    }
}

void launch_matmul(WeightFormat fmt, const void* w, const void* w2, int64_t rows, int64_t cols, const float* x,
                   const uint16_t* xh, int n_tok, float* y, MatOut out, void* stream, float* work,
                   size_t work_floats, const void* xq8) {
    if (n_tok <= GEMV_MAX_TOKENS) {
        launch_gemv(fmt, w, w2, rows, cols, x, n_tok, y, out, stream);
    } else {
        JLLM_ASSERT(xh != nullptr);
        launch_gemm(fmt, w, w2, rows, cols, xh, n_tok, y, out, stream, work, work_floats, xq8);
    }
}

}  // namespace cuda
}  // namespace jllm
