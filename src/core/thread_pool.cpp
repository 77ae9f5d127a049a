// core/thread_pool.cpp — spin-then-block worker pool (see thread_pool.h).
//
// Completion is counted in tasks, not in workers: the caller returns as soon as every task is
// done, without waiting for workers that were asleep or preempted to check in. That matters on
// the shared 2-core machines, where a worker may not get a core for milliseconds.
#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define JLLM_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define JLLM_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define JLLM_CPU_RELAX() ((void)0)
#endif

namespace jllm {

namespace {
// A few tens of microseconds of spinning (a pause is ~10-60 ns): long enough to bridge the
// gap between two kernels of one decode step, short enough not to steal a shared core.
constexpr int SPIN_ITERS = 2000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
    n_threads_ = std::max(1, n_threads);
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    for (int i = 1; i < n_threads_; i++) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
}

// Claims and runs chunks of job `gen` until none is left or a newer job replaced it.
void ThreadPool::work(uint64_t gen, int thread_id) {
    const Job& job = jobs_[gen & 1];
    const TaskFn fn = job.fn.load(std::memory_order_acquire);
    void* const ctx = job.ctx.load(std::memory_order_acquire);
    const int64_t n = job.n_tasks.load(std::memory_order_acquire);
    const int64_t chunk = job.chunk.load(std::memory_order_acquire);
    const uint64_t mask = (uint64_t{1} << CLAIM_BITS) - 1;
    uint64_t c = claim_.load();
    for (;;) {
        if ((c >> CLAIM_BITS) != (gen & ((uint64_t{1} << (64 - CLAIM_BITS)) - 1))) return;
        const int64_t b = static_cast<int64_t>(c & mask);
        if (b >= n) return;
        const int64_t e = std::min(n, b + chunk);
        if (!claim_.compare_exchange_weak(c, c + static_cast<uint64_t>(e - b))) continue;
        fn(ctx, b, e, thread_id);
        done_.fetch_add(e - b, std::memory_order_release);
        c = claim_.load();
    }
}

void ThreadPool::worker_main(int thread_id) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = generation_.load(std::memory_order_acquire);
        for (int i = 0; g == seen && i < SPIN_ITERS; i++) {
            JLLM_CPU_RELAX();
            g = generation_.load(std::memory_order_acquire);
        }
        if (g == seen) {
            std::unique_lock<std::mutex> lk(mu_);
            sleepers_.fetch_add(1);  // seq_cst: pairs with run()'s bump-then-check
            cv_.wait(lk, [&] { return (g = generation_.load()) != seen; });
            sleepers_.fetch_sub(1);
        }
        seen = g;
        if (stop_.load()) return;
        work(g, thread_id);
    }
}

void ThreadPool::run(int64_t n_tasks, int64_t chunk, TaskFn fn, void* ctx) {
    if (n_tasks <= 0) return;
    if (chunk <= 0) chunk = std::max<int64_t>(1, n_tasks / (4 * n_threads_));
    if (n_threads_ == 1 || n_tasks <= chunk) {
        fn(ctx, 0, n_tasks, 0);
        return;
    }
    const uint64_t gen = generation_.load() + 1;
    Job& job = jobs_[gen & 1];
    job.fn.store(fn, std::memory_order_release);
    job.ctx.store(ctx, std::memory_order_release);
    job.n_tasks.store(n_tasks, std::memory_order_release);
    job.chunk.store(chunk, std::memory_order_release);
    done_.store(0);
    claim_.store((gen & ((uint64_t{1} << (64 - CLAIM_BITS)) - 1)) << CLAIM_BITS);
    generation_.store(gen);  // seq_cst: publishes the job
    if (sleepers_.load() > 0) {
        // Taking the lock orders this wake-up after any sleeper's predicate check.
        { std::lock_guard<std::mutex> lk(mu_); }
        cv_.notify_all();
    }
    work(gen, 0);
    int spins = 0;
    while (done_.load(std::memory_order_acquire) != n_tasks) {
        if (++spins < SPIN_ITERS) {
            JLLM_CPU_RELAX();
        } else {
            std::this_thread::yield();  // a worker holding a chunk was preempted
        }
    }
}

}  // namespace jllm
