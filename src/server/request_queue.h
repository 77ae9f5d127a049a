// server/request_queue.h — the bounded FIFO in front of the one Engine: at most one ticket holds
// the engine, at most `max_waiting` tickets wait behind it in arrival order; a full queue refuses
// at once (the handler answers 503 + Retry-After). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace jllm::server {

class RequestQueue {
public:
    explicit RequestQueue(int max_waiting) : max_waiting_(max_waiting < 0 ? 0 : max_waiting) {}

    // A ticket (> 0) that holds the engine or waits for it; 0 when the queue is full.
    uint64_t enter();
    // Waits up to `slice` for the ticket's turn; true once it holds the engine. Callers loop,
    // checking their own deadline, the client connection and shutdown between slices.
    bool wait_turn(uint64_t ticket, std::chrono::milliseconds slice);
    // Leaves the queue or releases the engine. Idempotent.
    void leave(uint64_t ticket);
    // Wakes every waiter (shutdown).
    void wake_all();

    int waiting() const;
    bool busy() const;
    int capacity() const { return max_waiting_; }

private:
    bool promote_locked(uint64_t ticket);

    const int max_waiting_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<uint64_t> waiting_;
    uint64_t running_ = 0;
    uint64_t next_ = 1;
};

}  // namespace jllm::server
