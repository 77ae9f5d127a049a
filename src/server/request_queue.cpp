// server/request_queue.cpp — ticket admission, FIFO hand-over of the engine.
#include "server/request_queue.h"

#include <algorithm>

namespace jllm::server {

uint64_t RequestQueue::enter() {
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t t = next_++;
    if (running_ == 0 && waiting_.empty()) {
        running_ = t;
        return t;
    }
    if (static_cast<int>(waiting_.size()) >= max_waiting_) return 0;
    waiting_.push_back(t);
    return t;
}

bool RequestQueue::promote_locked(uint64_t ticket) {
    if (running_ == ticket) return true;
    if (running_ == 0 && !waiting_.empty() && waiting_.front() == ticket) {
        waiting_.pop_front();
        running_ = ticket;
        return true;
    }
    return false;
}

bool RequestQueue::wait_turn(uint64_t ticket, std::chrono::milliseconds slice) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, slice, [&] { return promote_locked(ticket); });
    return running_ == ticket;
}

void RequestQueue::leave(uint64_t ticket) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (running_ == ticket) {
            running_ = 0;
        } else {
            waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), ticket), waiting_.end());
        }
    }
    cv_.notify_all();
}

void RequestQueue::wake_all() { cv_.notify_all(); }

int RequestQueue::waiting() const {
    std::lock_guard<std::mutex> lk(mu_);
    return static_cast<int>(waiting_.size());
}

bool RequestQueue::busy() const {
    std::lock_guard<std::mutex> lk(mu_);
    return running_ != 0;
}

}  // namespace jllm::server
