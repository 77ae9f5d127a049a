// server/metrics.h — the counters and gauges behind GET /metrics, rendered as Prometheus text
// (exposition format 0.0.4). Updated from handler threads; all methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "jllm_engine.h"

namespace jllm::server {

struct GaugeSnapshot {
    int queue_waiting = 0;
    int queue_capacity = 0;
    bool generating = false;
    bool ready = false;
    int64_t n_ctx = 0;
    int64_t kv_used_tokens = 0;
    uint64_t weight_bytes = 0;
    uint64_t kv_bytes = 0;
    int64_t rss_bytes = 0;
    SessionCacheStats sessions;
};

class Metrics {
public:
    void count_request(const std::string& endpoint, int status);
    void count_generation(const GenerateStats& st, const char* finish);
    void count_disconnect() { disconnects_.fetch_add(1); }
    void count_timeout() { timeouts_.fetch_add(1); }

    std::string render(const GaugeSnapshot& g) const;

private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, uint64_t> finishes_;
    uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0, reasoning_tokens_ = 0;
    uint64_t prefilled_tokens_ = 0, decoded_tokens_ = 0;
    uint64_t ngram_drafted_ = 0, ngram_accepted_ = 0, model_drafted_ = 0, model_accepted_ = 0, decode_forwards_ = 0;
    double prefill_s_ = 0, decode_s_ = 0, ttft_s_ = 0;
    uint64_t ttft_count_ = 0;
    double last_prefill_tps_ = 0, last_decode_tps_ = 0;
    std::atomic<uint64_t> disconnects_{0};
    std::atomic<uint64_t> timeouts_{0};
};

// Resident set size of this process (/proc/self/statm); 0 when unknown.
int64_t process_rss_bytes();

}  // namespace jllm::server
