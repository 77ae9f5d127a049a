// tests/cuda/ops/cuda_test_util.h — device buffers for the op tests: RAII allocation, upload,
// download and poisoning (outputs are filled with NaN / out-of-range bytes before each launch so
// an element the kernel fails to write is caught).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_ops.h"

namespace jllm::test {

inline bool have_cuda_device() {
    static const bool have = cuda::device_count() > 0;
    return have;
}

#define JLLM_REQUIRE_CUDA_DEVICE()                                                   \
    do {                                                                             \
        if (!::jllm::test::have_cuda_device()) GTEST_SKIP() << "no CUDA device";     \
    } while (0)

// Registered by each CUDA test program: lowers the per-thread stack limit as the backend does
// (cuda::fit_thread_stack) before the first test, and fails the program if any kernel the tests ran
// made the driver raise it (a kernel whose stack outgrew cuda::THREAD_STACK_BYTES: the engine would
// still run, with a bigger context than docs/performance.md reports).
class ThreadStackEnv : public ::testing::Environment {
public:
    void SetUp() override {
        if (have_cuda_device()) cuda::fit_thread_stack();
    }
    void TearDown() override {
        if (have_cuda_device()) {
            EXPECT_EQ(cuda::thread_stack_limit(), cuda::THREAD_STACK_BYTES)
                << "a kernel needed more per-thread stack than cuda::THREAD_STACK_BYTES";
        }
    }
};

template <typename T>
class DevBuf {
public:
    DevBuf() = default;
    explicit DevBuf(size_t n) : n_(n), p_(static_cast<T*>(cuda::dev_alloc(n * sizeof(T)))) {}
    explicit DevBuf(const std::vector<T>& h) : DevBuf(h.size()) { upload(h); }
    ~DevBuf() { cuda::dev_free(p_); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;

    T* get() const { return p_; }
    size_t size() const { return n_; }
    void upload(const std::vector<T>& h) { cuda::upload(p_, h.data(), h.size() * sizeof(T)); }
    std::vector<T> download() const {
        std::vector<T> h(n_);
        cuda::synchronize();
        cuda::download(h.data(), p_, n_ * sizeof(T));
        return h;
    }
    void poison(int byte = 0xFF) { cuda::dev_memset(p_, byte, n_ * sizeof(T)); }  // 0xFF: float NaN

private:
    size_t n_ = 0;
    T* p_ = nullptr;
};

}  // namespace jllm::test
