// backend/cpu/select.h — the k largest of a row of logits on the host: the CPU backend's
// Backend::forward_select, the oracle of the CUDA top-k kernel (cuda::topk_ref), and a draft
// model's selection where its backend returned the whole row (engine/speculative.cpp).
#pragma once

#include <cstdint>

namespace jllm {

// The k largest of x[n] into ids[0..k) and vals[0..k), best first, ties to the lower index; NaN
// counts as -inf, and so does every token `allowed` (a bitmask, bit t % 32 of word t / 32; null:
// all allowed) leaves out. Fewer than k finite values: the rest are -inf entries, lowest ids first.
// 1 <= k <= n. Allocates nothing.
void select_top_k(const float* x, int64_t n, int k, const uint32_t* allowed, int32_t* ids, float* vals);

}  // namespace jllm
