// backend/cuda/gemm.cuh — what the prefill GEMM (gemm.cu) and the register-decoding GEMM on tiles
// (gemm_small.cu) share: the row block and column step, the segments of a multi-matrix grid, the
// epilogue that stores one mma accumulator, the split-K plan (gemm_plan.cu) and the ordered
// reduction of the split parts (gemm.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

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

// The register-decoding product of n_seg segments (segs: weights, outputs, rows; block_end unset) or a
// SwiGLU product (one segment, w2 its up matrix): the grid, split parts in work, the reductions.
void launch_gemm_small(GgmlType type, int n_seg, GemmSegs segs, const uint8_t* w2, int64_t cols, const uint16_t* x,
                       int n_tok, MatOut out, void* stream, float* work, size_t work_floats);

}  // namespace cuda
}  // namespace jllm
