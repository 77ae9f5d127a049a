// backend/cuda/cuda_backend.h — the CUDA backend's public face, free of CUDA types so the
// engine (under #if JLLM_CUDA) and the tests can include it from plain C++.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"  // ActivationTap

namespace jllm {

struct ModelConfig;

// True when the CUDA runtime finds at least one device (false without a driver or GPU).
bool cuda_device_available();

// A backend on CUDA device `device`. Weight placement (bind_weights): Copy copies every tensor to
// device memory; Mapped registers the mapped GGUF in place (cudaHostRegister) and reads it
// zero-copy; Auto maps on integrated GPUs (Jetson: one DRAM) and copies on discrete ones.
std::unique_ptr<Backend> create_cuda_backend(const ModelConfig& config, int device = 0);

// Debug hook: the same named per-layer activations as cpu_backend_set_tap (synchronizes and
// copies each to the host, so it is slow; null turns it off).
void cuda_backend_set_tap(Backend& backend, ActivationTap tap, void* ctx);

// Greedy decode fast path: runs `token` at `pos` and returns the argmax of its logits, computed
// on the GPU (4 bytes cross to the host instead of n_vocab floats).
int32_t cuda_backend_forward_argmax(Backend& backend, int32_t token, int pos);

// Top-k decode path: runs `token` at `pos` and returns the k (<= 128) largest logits, best
// first (ties to the lower id), computed on the GPU: 8 k bytes cross to the host instead of
// n_vocab floats. Sampling among them is exact for greedy and top-k sampling (engine/sampler.h).
constexpr int CUDA_TOPK_MAX = 128;
void cuda_backend_forward_topk(Backend& backend, int32_t token, int pos, int k, int32_t* ids, float* vals);

// The CUDA graphs the backend holds now (decode steps and other forwards; 0 with graphs off):
// lets tests check that a path ran as graphs.
int cuda_backend_graph_count(const Backend& backend);
// Rows of a decode step's logits copied to the host while the GPU computes the rest (0: one copy
// after the whole product): lets tests check that the two-copy path ran.
int64_t cuda_backend_logits_head(const Backend& backend);

}  // namespace jllm
