// tests/unit/cpu_kernels/test_thread_pool.cpp — the worker pool: every task runs exactly once,
// thread ids are in range, jobs back to back and after the workers fell asleep.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace jllm {
namespace {

void check_once(ThreadPool& pool, int64_t n, int64_t chunk) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    for (auto& h : hits) h.store(0);
    std::atomic<int> bad_tid{0};
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e, int tid) {
            if (tid < 0 || tid >= pool.n_threads()) bad_tid++;
            for (int64_t i = b; i < e; i++) hits[static_cast<size_t>(i)]++;
        },
        chunk);
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
    EXPECT_EQ(bad_tid.load(), 0);
}

TEST(ThreadPool, EveryTaskOnce) {
    for (int threads : {1, 2, 3, 4}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.n_threads(), threads);
        for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 4097})
            for (int64_t chunk : {0, 1, 5, 64}) check_once(pool, n, chunk);
    }
}

TEST(ThreadPool, ManyJobsBackToBack) {
    ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    for (int it = 0; it < 20000; it++) {
        pool.parallel_for(17, [&](int64_t b, int64_t e, int) { total += e - b; }, 1);
    }
    EXPECT_EQ(total.load(), 20000 * 17);
}

TEST(ThreadPool, WakesSleepingWorkers) {
    ThreadPool pool(3);
    for (int it = 0; it < 5; it++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // workers block on the cv
        check_once(pool, 301, 1);
    }
}

TEST(ThreadPool, DefaultUsesHardwareThreads) {
    ThreadPool pool;
    EXPECT_GE(pool.n_threads(), 1);
    check_once(pool, 100, 0);
}

TEST(ThreadPool, AllThreadsTakePart) {
    ThreadPool pool(2);
    std::atomic<int> seen[2] = {{0}, {0}};
    // Tasks that take a while so the worker surely claims some.
    pool.parallel_for(
        64,
        [&](int64_t, int64_t, int tid) {
            seen[tid]++;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        },
        1);
    EXPECT_GT(seen[0].load(), 0);
    EXPECT_GT(seen[1].load(), 0);
}

}  // namespace
}  // namespace jllm
