// backend/cpu/cpu_backend.h — the CPU backend: the reference forward pass every CUDA kernel is
// checked against, and the path CI exercises. Weights are read in place from the mapped GGUF;
// activations are quantized to 8-bit blocks for the quantized dot products (backend/cpu/matmul.h).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace jllm {

struct ModelConfig;

// Debug hook: when set, the forward pass reports named per-layer activations
// ("l3.attn_out", [n_tokens, width]) so CPU/GPU divergence can be pinned to one layer.
using ActivationTap = void (*)(void* ctx, const char* name, const float* data, int64_t n_tokens, int64_t width);

std::unique_ptr<Backend> create_cpu_backend(const ModelConfig& config, int n_threads);
void cpu_backend_set_tap(Backend& backend, ActivationTap tap, void* ctx);

}  // namespace jllm
