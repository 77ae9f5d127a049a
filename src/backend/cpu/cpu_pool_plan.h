// backend/cpu/cpu_pool_plan.h — the sizes of the CPU backend's two pools, computed before anything
// is allocated so MemoryBudget can choose the context; the CPU backend carves its buffers from
// pools of exactly these sizes (one place defines the layout's footprint).
//
// KV pool, per layer: k, v [n_ctx][n_head_kv][head_dim] int8|fp16, and for INT8
// k_scale, v_scale [n_ctx][n_head_kv] fp16 — each slice 64-byte aligned.
// Scratch pool: x, h [n_batch][n_embd]; q, att [n_batch][n_head*head_dim]; k, v
// [n_batch][n_head_kv*head_dim]; g, u [n_batch][n_ff] f32; the logits of forward_select [n_vocab];
// the RoPE angles [n_batch][n_rot]; the attention tiles (cpu_scratch_pool_bytes); the matmul
// activation-quantization buffer (largest over every weight) + 64.
#pragma once

#include <cstdint>

#include "jllm_types.h"

namespace jllm {

struct ModelConfig;
struct ModelWeights;

// Attention works on tiles of ATTN_TILE query tokens x all query heads of one KV head.
constexpr int64_t ATTN_TILE = 8;
// V rows are converted to f32 ATTN_KCHUNK at a time (8 KB at head_dim 128: stays in L1), and
// each query's output row is accumulated over the chunk in registers.
constexpr int64_t ATTN_KCHUNK = 16;
int64_t attn_tile_queries(const ModelConfig& c);

int64_t cpu_kv_pool_bytes(const ModelConfig& c, int n_ctx, KvType kv_type);
int64_t cpu_matmul_scratch_bytes(const ModelWeights& w, int n_batch);
int64_t cpu_scratch_pool_bytes(const ModelConfig& c, int n_ctx, int n_batch, int n_threads, int64_t matmul_scratch);

}  // namespace jllm
