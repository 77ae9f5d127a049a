// backend/cpu/rope.h — rotary position embedding: the frequency table (with linear or Llama-3
// scaling, or per-frequency divisors from rope_freqs.weight) and the rotation of one head,
// shared by the CPU backend and the CUDA backend's CPU twin.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace jllm {

// inv_freq[i] for i in [0, n_rot/2): the angle of pair i at position p is p * inv_freq[i].
// `freq_divisors` (rope_freqs.weight, [n_rot/2]) may be null.
std::vector<float> rope_inv_freq(const ModelConfig& c, const float* freq_divisors);

// Rotates the first n_rot elements of one head vector x [head_dim] at position `pos`.
// Normal: pairs (2i, 2i+1); NeoX: pairs (i, i + n_rot/2).
void rope_apply_ref(float* x, int64_t n_rot, RopeStyle style, const float* inv_freq, int64_t pos);

// The same rotation split in two, so one position's angles serve every head of every layer:
// cs [n_rot] = cos of pair i's angle at i, sin at n_rot/2 + i (the values rope_apply_ref uses);
// rope_apply_cs then gives rope_apply_ref's result bit for bit.
void rope_angles(int64_t n_rot, const float* inv_freq, int64_t pos, float* cs);
void rope_apply_cs(float* x, int64_t n_rot, RopeStyle style, const float* cs);

}  // namespace jllm
