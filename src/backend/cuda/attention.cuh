// backend/cuda/attention.cuh — what attention.cu (launch_attention, the generic kernel, the
// combine) and attention_decode.cu (the group-shared decode kernel) share: the decode split
// plan, which the host and every kernel compute alike, and the decode kernel's entry points.
#pragma once

#include "backend/cuda/cuda_ops.h"

namespace jllm {
namespace cuda {

constexpr int KT = 32;                  // keys per tile

// Keys per split for a KV length of n_kv over at most max_split splits of at least min_keys keys
// (a multiple of 32), and the splits used.
__host__ __device__ __forceinline__ void split_plan(int n_kv, int max_split, int min_keys, int* per_split,
                                                   int* n_used) {
    int per = (n_kv + max_split - 1) / max_split;
    per = (per + KT - 1) / KT * KT;
    if (max_split > 1 && per < min_keys) per = min_keys;
    *per_split = per;
    *n_used = (n_kv + per - 1) / per;
}

// Whether launch_attention takes the group-shared decode kernel: one token over the INT8 cache (or
// the FP16 cache at head_dim 128 and 256), AttnKernel::Auto, and heads it serves.
bool use_grouped_decode(int n_tok, KvType kv, int group, int head_dim, const AttnChoice& choice);

// The group-shared decode kernel over n_split splits of at least min_keys keys (its chunk: 32 x
// its warps), post: the Q/K/V post folded in (null: done before); hb: query heads per block
// (attention_decode_heads).
void launch_attention_decode_grouped(const AttentionParams& p, int n_split, int min_keys, const QkvPostParams* post,
                                int hb, void* stream);

}  // namespace cuda
}  // namespace jllm
