// backend/cpu/cpu_backend.h — the CPU backend: the reference forward pass every CUDA kernel is
// checked against, and the path CI exercises. Weights are read in place from the mapped GGUF;
// activations are quantized to 8-bit blocks for the quantized dot products (backend/cpu/matmul.h).
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backend/backend_options.h"

namespace jllm {

struct ModelConfig;

std::unique_ptr<Backend> create_cpu_backend(const ModelConfig& config, const CpuOptions& options);

}  // namespace jllm
