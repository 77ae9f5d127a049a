// backend/cuda/gemm.cuh — what the prefill GEMM (gemm.cu) and the register-decoding GEMM on tiles
// (gemm_small.cu) share: the row block and column step, the segments of a multi-matrix grid, the
// epilogue that stores one mma accumulator, the split-K plan (gemm_plan.cu) and the ordered
// reduction of the split parts (gemm.cu).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/weight_tiles.cuh"

namespace jllm {
namespace cuda {

constexpr int MMA_BM = 128;     // A rows per block
constexpr int MMA_BK = 64;      // columns per step (two chunks)

// silu(g) * u: the SwiGLU epilogue of both GEMMs and of the split SwiGLU's reduction.
__device__ __forceinline__ float silu_mul_f(float g, float u) { return g / (1.0f + expf(-g)) * u; }

struct GemmSegs {
    const uint8_t* w[GEMM_MAX_SEG];
    float* y[GEMM_MAX_SEG];
    int64_t rows[GEMM_MAX_SEG];
    int64_t block_end[GEMM_MAX_SEG];  // row blocks of segments 0..s together
};
static_assert(GEMM_MAX_SEG == 3, "kernel_gemm_small selects among three segments");

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

// The split-K parts for a grid of `blocks` blocks over `steps` steps (column steps of a block), at
// most `fits` (the work buffer's room) and GEMM_MAX_SPLIT: the fewest that minimize waves x (steps
// per block + `start`, a block's start in steps), the waves counted in `wave` blocks.
int gemm_split(int64_t blocks, int64_t steps, int64_t fits, int64_t wave, int64_t start);

// Row blocks of a product of `rows` rows (a SwiGLU block holds 64 gate and 64 up rows).
int64_t gemm_row_blocks(int64_t rows, MatOut out);

// y (= or += with add) the ordered sum of `split` partial sums of n values from work.
void launch_splitk_reduce(const float* work, int split, int64_t n, float* y, bool add, void* stream);
// y[n_tok][rows] = silu(sum of the gate parts) * (sum of the up parts), from `split` partial sums
// [split][n_tok][2 * rows] (gate | up) in work, added in order.
void launch_splitk_reduce_swiglu(const float* work, int split, int n_tok, int64_t rows, float* y, void* stream);

// ---- what the two register-decoding GEMMs share (gemm_small.cu: fp16 activations; gemm_s8.cu:
// act_q8k on int8 tensor cores): a block of REG_TILES weight tiles (128 rows; SwiGLU 64 gate + 64
// up), one m16 tile per warp, a batch in token chunks (grid y), split-K over block columns (grid z).
constexpr int REG_TILES = 16;                          // weight tiles per block
constexpr int REG_THREADS = REG_TILES / 2 * WARP;      // a warp per two tiles (one m16 tile)
constexpr int64_t REG_BLOCK_START = 1;  // a block's first stage, copied with nothing to overlap (block columns)

// Row of tile slot q (0: fragment rows g, 1: rows g + 8) of warp v in the block starting at row r0
// (SwiGLU: the gate row and the up row r0 + 8v + g).
__host__ __device__ __forceinline__ int64_t reg_slot_row(bool swiglu, int64_t r0, int v, int q) {
    return swiglu ? r0 + 8 * v : r0 + 16 * v + 8 * q;
}

#ifdef __CUDACC__
// A register-decoding block's share of the grid: its segment's weights, output (advanced to its
// split part and token chunk) and rows, the SwiGLU and split-K modes, its token chunk of up to
// `chunk` tokens (grid y), its block columns of 256 (grid z's part) and its first row.
struct RegBlock {
    const uint8_t* w;
    float* y;
    int64_t rows, ystride, nb, kb_first, kb_last, r0;
    int tok0, n_loc;
    bool swiglu, partial;
    __device__ RegBlock(const GemmSegs& segs, int64_t cols, int n_tok, int out_mode, int chunk) {
        int64_t bx = blockIdx.x;
        const int seg = bx < segs.block_end[0] ? 0 : (bx < segs.block_end[1] ? 1 : 2);
        bx -= seg == 0 ? 0 : (seg == 1 ? segs.block_end[0] : segs.block_end[1]);
        w = seg == 0 ? segs.w[0] : (seg == 1 ? segs.w[1] : segs.w[2]);
        y = seg == 0 ? segs.y[0] : (seg == 1 ? segs.y[1] : segs.y[2]);
        rows = seg == 0 ? segs.rows[0] : (seg == 1 ? segs.rows[1] : segs.rows[2]);
        swiglu = out_mode == static_cast<int>(MatOut::SwiGLU);
        partial = gridDim.z > 1;
        ystride = partial && swiglu ? 2 * rows : rows;
        if (partial) y += static_cast<int64_t>(blockIdx.z) * n_tok * ystride;
        tok0 = static_cast<int>(blockIdx.y) * chunk;
        n_loc = min(chunk, n_tok - tok0);
        y += static_cast<int64_t>(tok0) * ystride;
        nb = cols / 256;
        kb_first = nb * blockIdx.z / gridDim.z;
        kb_last = nb * (blockIdx.z + 1) / gridDim.z;
        r0 = bx * (swiglu ? MMA_BM / 2 : MMA_BM);
    }
};

// The block's walk over its block columns through two shared-memory stages of stage_bytes:
// issue(kb, stage) copies block column kb into a stage (nothing from kb_last on) and commits the
// group; compute(stage) runs on each landed column where `run` (the warp holds rows). One
// barrier per column, after which the stage computed last is free for the next copy.
template <typename Issue, typename Compute>
__device__ __forceinline__ void reg_gemm_walk(const RegBlock& blk, uint8_t* smem, int stage_bytes, bool run,
                                              Issue&& issue, Compute&& compute) {
    const int64_t n_iter = blk.kb_last - blk.kb_first;
    issue(blk.kb_first, 0);
    for (int64_t i = 0; i < n_iter; ++i) {
        cp_async_wait<0>();  // block column i has landed (this thread's copies) ...
        __syncthreads();     // ... for every thread; and every warp is done with column i - 1's stage
        issue(blk.kb_first + i + 1, static_cast<int>((i + 1) % 2));
        if (run) compute(smem + (i % 2) * stage_bytes);
    }
}

// The cp.async copies of a block's REG_TILES weight tiles into a stage, one block column at a time:
// thread tid copies tile k = tid / 16 (slot k % 2 of warp k / 2; SwiGLU: odd slots from w2), its
// units by tile_copy_unit(tid % 16, m), so its tile's address is set up once per block and the
// units' addresses differ by constants. Tiles past the last row are not copied.
template <GgmlType T>
struct RegTileCopy {
    using F = TileFmt<T>;
    static_assert(REG_THREADS == 16 * REG_TILES, "16 threads per tile");
    const uint8_t* src;  // the thread's tile in block column 0
    uint32_t dst;        // byte offset of the tile in a stage
    int l;
    bool run;
    __device__ RegTileCopy(int tid, const uint8_t* w, const uint8_t* w2, bool swiglu, int64_t r0, int64_t rows, int64_t nb) {
        const int k = tid >> 4;
        l = tid & 15;
        const int64_t r = reg_slot_row(swiglu, r0, k >> 1, k & 1);
        run = r < rows;
        src = tile_of<T>(swiglu && (k & 1) ? w2 : w, nb, run ? r : 0, 0);
        dst = static_cast<uint32_t>(k * F::BYTES);
    }
    // Block column kb into the stage's tiles at shared-window address sw.
    __device__ __forceinline__ void issue(uint32_t sw, int64_t kb) const {
        if (!run) return;
        const uint8_t* s = src + kb * F::BYTES;
#pragma unroll
        for (int m = 0; m < tile_copies_per_thread<T>(); ++m) {
            int su, du;
            if (tile_copy_unit<T>(l, m, su, du)) cp_async16_at(sw + dst + 16 * du, s + 16 * su);
        }
    }
};
#endif

// Token chunks of a register-decoding product: up to GEMM_SMALL_CHUNK tokens each, as even as
// whole n8 tiles allow (65 tokens: two chunks of 40 and 25); n8: n8 tiles per chunk.
struct RegChunks {
    int chunks = 1;
    int n8 = 1;
};
inline RegChunks reg_chunks(int n_tok) {
    RegChunks c;
    c.chunks = (n_tok + GEMM_SMALL_CHUNK - 1) / GEMM_SMALL_CHUNK;
    c.n8 = ((n_tok + c.chunks - 1) / c.chunks + 7) / 8;
    return c;
}

// The grid of a register-decoding product of n_seg segments (segs: weights, outputs, rows) in
// `chunks` token chunks: every segment's row blocks side by side (block_end set here), split-K
// parts where the work buffer holds them (the outputs then point into work), launch(grid, segs,
// mode) for the product, then the ordered reductions into the outputs.
template <typename Launch>
void launch_reg_gemm(const void* kernel, size_t smem, int n_seg, GemmSegs segs, int64_t cols, int n_tok, int chunks,
                     MatOut out, void* stream, float* work, size_t work_floats, Launch&& launch) {
    int64_t blocks = 0, all_rows = 0;
    for (int s = 0; s < n_seg; ++s) {
        blocks += gemm_row_blocks(segs.rows[s], out);
        segs.block_end[s] = blocks;
        all_rows += segs.rows[s];
    }
    for (int s = n_seg; s < GEMM_MAX_SEG; ++s) segs.block_end[s] = blocks;
    const size_t per_split = static_cast<size_t>(n_tok) * all_rows * (out == MatOut::SwiGLU ? 2 : 1);
    float* y_final[GEMM_MAX_SEG] = {segs.y[0], segs.y[1], segs.y[2]};
    const int64_t n_kb = cols / 256;
    const int64_t resident = std::max(1, resident_blocks(kernel, REG_THREADS, smem));
    const int split = work != nullptr ? gemm_split(blocks * chunks, n_kb, static_cast<int64_t>(work_floats / per_split),
                                                   resident, REG_BLOCK_START)
                                      : 1;
    if (split > 1) {
        int64_t row_off = 0;
        for (int s = 0; s < n_seg; ++s) {
            segs.y[s] = work + static_cast<int64_t>(split) * n_tok * row_off * (out == MatOut::SwiGLU ? 2 : 1);
            row_off += segs.rows[s];
        }
    }
    const int mode = split > 1 && out != MatOut::SwiGLU ? static_cast<int>(MatOut::Store) : static_cast<int>(out);
    launch(dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks), static_cast<unsigned>(split)), segs, mode);
    if (split == 1) return;
    for (int s = 0; s < n_seg; ++s) {
        const int64_t n = static_cast<int64_t>(n_tok) * segs.rows[s];
        if (out == MatOut::SwiGLU) {
            launch_splitk_reduce_swiglu(segs.y[s], split, n_tok, segs.rows[s], y_final[s], stream);
        } else {
            launch_splitk_reduce(segs.y[s], split, n, y_final[s], out == MatOut::Add, stream);
        }
    }
}

// The register-decoding product of n_seg segments (segs: weights, outputs, rows; block_end unset) or a
// SwiGLU product (one segment, w2 its up matrix): the grid, split parts in work, the reductions.
void launch_gemm_small(GgmlType type, int n_seg, GemmSegs segs, const uint8_t* w2, int64_t cols, const uint16_t* x,
                       int n_tok, MatOut out, void* stream, float* work, size_t work_floats);
// The same on int8 tensor cores (tiled Q4_K; gemm_takes_s8) from xq in the act_q8k layout.
void launch_gemm_s8(int n_seg, GemmSegs segs, const uint8_t* w2, int64_t cols, const void* xq, int n_tok, MatOut out,
                    void* stream, float* work, size_t work_floats);

}  // namespace cuda
}  // namespace jllm
