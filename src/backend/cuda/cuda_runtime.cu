// backend/cuda/cuda_runtime.cu — the host side of the CUDA runtime: the error checks behind
// cuda_check.h's macros, the device queries of cuda_ops.h (device count, SMs, resident blocks;
// cached per device), the per-thread stack limit, and the device-memory helpers.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace jllm {
namespace cuda {

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
    throw JllmError(strfmt("cuda: %s failed at %s:%d: %s (%s)", call, file, line, cudaGetErrorName(e),
                           cudaGetErrorString(e)));
}

void check_launch(const char* what, const char* file, int line) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw_cuda_error(e, what, file, line);
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
        return 0;
    }
    return n;
}

int device_sm_count() {
    int dev = 0;
    JLLM_CUDA_CHECK(cudaGetDevice(&dev));
    static std::mutex mu;
    static std::map<int, int> cache;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(dev); it != cache.end()) return it->second;
    int sms = 0;
    JLLM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return cache[dev] = sms;
}

size_t thread_stack_limit() {
    size_t bytes = 0;
    JLLM_CUDA_CHECK(cudaDeviceGetLimit(&bytes, cudaLimitStackSize));
    return bytes;
}

int64_t device_used_bytes() {
    size_t free_b = 0, total_b = 0;
    JLLM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return static_cast<int64_t>(total_b) - static_cast<int64_t>(free_b);
}

size_t fit_thread_stack() {
    constexpr size_t DRIVER_DEFAULT = 1024;
    if (thread_stack_limit() == DRIVER_DEFAULT) {
        JLLM_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, THREAD_STACK_BYTES));
    }
    return thread_stack_limit();
}

int resident_blocks(const void* kernel, int threads, size_t smem) {
    int dev = 0;
    JLLM_CUDA_CHECK(cudaGetDevice(&dev));
    static std::mutex mu;
    static std::map<std::tuple<const void*, int, size_t, int>, int> cache;
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_tuple(kernel, threads, smem, dev);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    int per_sm = 0;
    JLLM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    return cache[key] = per_sm * device_sm_count();
}

void* dev_alloc(size_t bytes) {
    void* p = nullptr;
    JLLM_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
}
void dev_free(void* p) noexcept {
    // Called from destructors: a failure here is reported by the next checked call.
    if (p) (void)cudaFree(p);
}
void dev_memset(void* p, int byte, size_t bytes) { JLLM_CUDA_CHECK(cudaMemset(p, byte, bytes)); }
void upload(void* dst, const void* src, size_t bytes) {
    JLLM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void download(void* dst, const void* src, size_t bytes) {
    JLLM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void synchronize() { JLLM_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace cuda
}  // namespace jllm
