// core/thread_pool.h — the persistent worker pool every CPU kernel runs on.
// Workers are created once; `parallel_for` hands them a range of task indices without any heap
// allocation (the decode loop calls it hundreds of times per token). Idle workers spin for a
// short while (a decode step issues its next job within microseconds), then block on a
// condition variable so an idle engine costs no CPU. The calling thread takes part as thread 0.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace jllm {

class ThreadPool {
public:
    // fn(ctx, begin, end, thread_id): run tasks [begin, end). Must not throw.
    using TaskFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread_id);

    // n_threads <= 0: one per hardware thread. n_threads == 1 runs everything on the caller.
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int n_threads() const { return n_threads_; }

    // Runs tasks [0, n_tasks) in chunks of `chunk` indices (0: about 4 chunks per thread),
    // claimed dynamically so a preempted thread on a shared machine does not stall the job.
    // Returns when every task has finished. Not reentrant: one job at a time per pool.
    void run(int64_t n_tasks, int64_t chunk, TaskFn fn, void* ctx);

    // f(begin, end, thread_id) for chunks of [0, n_tasks); f lives on the caller's stack.
    template <class F>
    void parallel_for(int64_t n_tasks, F&& f, int64_t chunk = 0) {
        using Fn = typename std::remove_reference<F>::type;
        run(n_tasks, chunk,
            [](void* ctx, int64_t b, int64_t e, int tid) { (*static_cast<Fn*>(ctx))(b, e, tid); },
            const_cast<void*>(static_cast<const void*>(&f)));
    }

private:
    void worker_main(int thread_id);
    void work(uint64_t gen, int thread_id);

    int n_threads_ = 1;
    std::vector<std::thread> workers_;  // [n_threads - 1]
    std::mutex mu_;
    std::condition_variable cv_;

    // The current job. Two slots: job g lives in slot g & 1, so a worker that wakes late can
    // still read job g's fields while the caller sets up job g + 1.
    // Fields are atomics (release stores, acquire loads) because a worker that wakes very late
    // may read a slot while it is being refilled two jobs later; it then fails the claim check
    // and never uses what it read, but the read itself must not be a data race.
    struct Job {
        std::atomic<TaskFn> fn{nullptr};
        std::atomic<void*> ctx{nullptr};
        std::atomic<int64_t> n_tasks{0};
        std::atomic<int64_t> chunk{1};
    };
    Job jobs_[2];

    // Claims: (generation << CLAIM_BITS) | next unclaimed task index, advanced by CAS so a worker
    // that still holds an old generation can never claim a task of a newer job.
    static constexpr int CLAIM_BITS = 40;
    alignas(64) std::atomic<uint64_t> claim_{0};
    alignas(64) std::atomic<uint64_t> generation_{0};  // bumped (seq_cst) to publish a job
    alignas(64) std::atomic<int64_t> done_{0};          // tasks of the current job finished
    alignas(64) std::atomic<int> sleepers_{0};           // workers blocked (or about to) on cv_
    std::atomic<bool> stop_{false};
};

}  // namespace jllm
