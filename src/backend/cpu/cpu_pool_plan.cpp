// backend/cpu/cpu_pool_plan.cpp — see cpu_pool_plan.h.
#include "backend/cpu/cpu_pool_plan.h"

#include <algorithm>

#include "backend/cpu/matmul.h"
#include "core/memory_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace jllm {

namespace {
int64_t al(int64_t bytes) { return static_cast<int64_t>(MemoryPool::aligned(static_cast<size_t>(bytes))); }
}  // namespace

int64_t cpu_kv_pool_bytes(const ModelConfig& c, int n_ctx, KvType kv_type) {
    const int64_t elt = kv_type == KvType::Int8 ? 1 : 2;
    const int64_t kv = al(static_cast<int64_t>(n_ctx) * c.kv_dim() * elt);
    const int64_t sc = kv_type == KvType::Int8 ? al(static_cast<int64_t>(n_ctx) * c.n_head_kv * 2) : 0;
    return c.n_layer * 2 * (kv + sc);
}

int64_t cpu_matmul_scratch_bytes(const ModelWeights& w, int n_batch) {
    size_t mm = 0;
    auto need = [&](const WeightTensor& t) { mm = std::max(mm, matmul_scratch_size(t.type, t.cols, n_batch)); };
    for (const LayerWeights& L : w.layers) {
        for (const WeightTensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) need(*t);
    }
    need(w.output);
    return static_cast<int64_t>(mm);
}

int64_t cpu_scratch_pool_bytes(const ModelConfig& c, int n_ctx, int n_batch, int n_threads, int64_t matmul_scratch) {
    const int64_t B = std::max(1, n_batch), F = sizeof(float);
    return 2 * al(B * c.n_embd * F) + 2 * al(B * c.q_dim() * F) + 2 * al(B * c.kv_dim() * F) +
           2 * al(B * c.n_ff * F) + al(matmul_scratch + 64) + al(c.n_vocab * F) + al(B * c.n_rot * F) +
           // attention tiles: scores [n_threads][ATTN_TILE * group][n_ctx], queries
           // [n_threads][ATTN_TILE * group][head_dim + 2] (+ row max and sum), converted K/V rows
           // [n_threads][ATTN_KCHUNK][head_dim]
           al(static_cast<int64_t>(n_threads) * attn_tile_queries(c) * n_ctx * F) +
           al(static_cast<int64_t>(n_threads) * attn_tile_queries(c) * (c.head_dim + 2) * F) +
           al(static_cast<int64_t>(n_threads) * ATTN_KCHUNK * c.head_dim * F);
}

}  // namespace jllm

namespace jllm {
int64_t attn_tile_queries(const ModelConfig& c) { return ATTN_TILE * (c.n_head / c.n_head_kv); }
}  // namespace jllm
