// backend/cuda/cuda_check.h — CUDA error checking (STYLE.md error tier 3): every runtime call
// goes through JLLM_CUDA_CHECK (failing call, file, line, error name and text, thrown as
// JllmError); every launch is followed by JLLM_CUDA_LAUNCH_CHECK (its launch errors). An
// asynchronous fault surfaces at the next synchronization; the backend's CudaOptions::sync_check
// synchronizes after every step of the forward pass to report it at the step that caused it.
// Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

namespace jllm {
namespace cuda {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line);
void check_launch(const char* what, const char* file, int line);

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
    if (e != cudaSuccess) throw_cuda_error(e, call, file, line);
}

}  // namespace cuda
}  // namespace jllm

#define JLLM_CUDA_CHECK(call) ::jllm::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define JLLM_CUDA_LAUNCH_CHECK(what) ::jllm::cuda::check_launch((what), __FILE__, __LINE__)
