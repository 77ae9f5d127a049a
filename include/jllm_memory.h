// include/jllm_memory.h — the memory plan as Engine::memory_report() gives it (DESIGN.md "Memory
// model"): what the OS has, what this engine holds (weights, KV pool, scratch pool, runtime
// overhead), the safety margin, the hard cap, the chosen context and the OOM guard's settings.
// The budget that computes it is the engine's (src/memory/memory_budget.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jllm {

constexpr int64_t MIB = 1024 * 1024;

// The budget as printed at load and served by /health. All sizes in bytes. The rows add up:
// total = os_and_others + runtime + model + kv + scratch + sessions + margin + free.
struct MemoryReport {
    bool known = false;          // /proc/meminfo was readable; otherwise only our own rows are real
    bool unified = true;
    int64_t total = 0;           // MemTotal
    int64_t os_and_others = 0;   // MemTotal - MemAvailable at load, less what this process already held
    int64_t cma_total = -1;      // informational: part of `total`
    int64_t cma_free = -1;
    int64_t runtime = 0;         // process overhead: resident heap at load + logits + backend context
    int64_t model = 0;           // weight bytes (mapped in place or copied)
    bool model_mapped = true;
    int64_t kv = 0;              // KV cache pool
    int64_t scratch = 0;         // activation / scratch pool
    int64_t sessions = 0;        // session snapshots in host RAM, at most (--cache-ram)
    int64_t draft = 0;           // the draft model (--draft): its weights, KV and scratch
    int64_t margin = 0;          // --mem-margin
    int64_t free = 0;            // what is left (may be negative only if the report is of a refusal)
    int64_t cap = 0;             // --max-memory, 0 = none
    int64_t available_at_load = -1;
    int64_t device_total = -1, device_free = -1;
    int64_t device_used = -1;    // live: device bytes the backend holds beyond its context (-1 unknown)
    int n_ctx = 0;               // chosen context
    int n_ctx_limit = 0;         // min(model context, 4096)
    int64_t kv_bytes_per_pos = 0;
    // Live values (refreshed by Engine::memory_report()).
    int64_t available_now = -1;
    int64_t rss_now = -1, rss_peak = -1;
    // OOM guard.
    int64_t oom_threshold = 0;       // generation stops when MemAvailable drops below this
    double oom_check_interval_ms = 0;
    double oom_read_us = 0;          // measured cost of one MemAvailable read

    int64_t ours() const { return runtime + model + kv + scratch + sessions + draft; }
    std::string table() const;       // the load-time table, one row per line
};

// "1234.5 MB"-style helper for tables and messages (MiB, one decimal).
std::string format_mb(int64_t bytes);

}  // namespace jllm
