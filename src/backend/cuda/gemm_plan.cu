// backend/cuda/gemm_plan.cu — how a GEMM is cut: the token tile and split-K parts of a product
// (gemm_plan; gemm_split for both GEMMs' grids) and the work buffer the parts
// need. The parts are added back in a fixed order by gemm.cu's reduction kernels.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.cuh"

namespace jllm {
namespace cuda {

namespace {

// Enough blocks to give every SM two.
constexpr int GEMM_TARGET_BLOCKS = 264;
// A block's start (its first group staged with nothing to overlap), in column steps.
constexpr int64_t GEMM_BLOCK_START_STEPS = 2;

}  // namespace

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

GemmPlan gemm_plan(int64_t rows, int64_t cols, int n_tok, MatOut out, size_t work_floats) {
    const int64_t row_blocks = gemm_row_blocks(rows, out);
    const size_t per_split = static_cast<size_t>(n_tok) * rows * (out == MatOut::SwiGLU ? 2 : 1);
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

size_t gemm_work_floats(int n_tok, int64_t rows) {
    return static_cast<size_t>(GEMM_MAX_SPLIT) * static_cast<size_t>(n_tok) * static_cast<size_t>(rows);
}

size_t gemm_work_floats_for_batch(int n_batch, int64_t rows) {
    return std::max(static_cast<size_t>(GEMM_BATCH_SPLIT) * static_cast<size_t>(std::min(n_batch, 64)) *
                        static_cast<size_t>(rows),
                    static_cast<size_t>(2) * static_cast<size_t>(n_batch) * static_cast<size_t>(rows));
}

}  // namespace cuda
}  // namespace jllm
