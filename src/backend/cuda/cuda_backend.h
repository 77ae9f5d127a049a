// backend/cuda/cuda_backend.h — the CUDA backend's public face, free of CUDA types so the
// backend registry and the tests can include it from plain C++.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_options.h"

namespace jllm {

struct ModelConfig;

// True when the CUDA runtime finds at least one device (false without a driver or GPU).
bool cuda_device_available();

// A backend on CUDA device options.device. Weight placement (bind_weights): Copy copies every
// tensor to device memory (Q4_K/Q6_K tiled; a mapped file's pages dropped behind the copy); Mapped
// registers the mapped GGUF in place (cudaHostRegister) and reads it zero-copy; Auto copies, on
// integrated GPUs (Jetson: one DRAM) too, where pinned memory is not cached by the GPU. Its
// forward_select runs the decode step as a CUDA graph ending in the on-GPU argmax (k = 1) or
// top-k (k <= cuda::TOPK_MAX), so only the candidates cross to the host; a grammar's token mask
// rides in the same graph (copied in by its node, applied to the logits before the selection).
std::unique_ptr<Backend> create_cuda_backend(const ModelConfig& config, const CudaOptions& options = {});

}  // namespace jllm
