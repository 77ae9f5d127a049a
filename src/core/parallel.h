// core/parallel.h — fn(i) for i in [0, n) over a few short-lived threads, for the bulk copies and
// checksums of session snapshots (100+ MB, where one core's memory bandwidth is the limit). The
// forward pass has its own pool (core/thread_pool.h); this is for work outside it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

namespace jllm {

// Up to `threads` threads (the caller is one) claim indices in turn.
template <typename F>
void parallel_for(size_t n, int threads, F&& fn) {
    const size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
    if (t <= 1) {
        for (size_t i = 0; i < n; ++i) fn(i);
        return;
    }
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
    };
    std::vector<std::thread> pool;
    pool.reserve(t - 1);
    for (size_t k = 1; k < t; ++k) pool.emplace_back(work);
    work();
    for (std::thread& th : pool) th.join();
}

// Threads for bulk copies: half the cores, at most 8 (the Orin's 6 cores: 3; a 16-core host: 8),
// enough to approach the memory bandwidth while a forward pass may still run.
inline int bulk_copy_threads() {
    return static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency() / 2)));
}

// memcpy in slices of at least 1 MB over bulk_copy_threads().
inline void parallel_memcpy(void* dst, const void* src, size_t n) {
    constexpr size_t SLICE = 1u << 20;
    const size_t slices = (n + SLICE - 1) / SLICE;
    const int threads = n >= 4 * SLICE ? bulk_copy_threads() : 1;
    parallel_for(slices, threads, [&](size_t i) {
        const size_t at = i * SLICE;
        std::memcpy(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at, std::min(SLICE, n - at));
    });
}

}  // namespace jllm
