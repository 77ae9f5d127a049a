// memory/memory_budget.h — the memory model (DESIGN.md "Memory model"): what the OS really has
// (/proc/meminfo through an injectable root), what this engine will hold (weights, KV pool,
// scratch pool, runtime overhead), the safety margin and the hard cap; the context length that
// fits. No CUDA header here: device memory arrives as a plain struct from the backend.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include "jllm_memory.h"

namespace jllm {

// /proc/meminfo values in bytes; -1 where the key is absent (CmaTotal only exists with CMA).
struct MemInfo {
    int64_t total = -1;      // MemTotal
    int64_t free = -1;       // MemFree
    int64_t available = -1;  // MemAvailable (the kernel's estimate of what can be had without swapping)
    int64_t cma_total = -1;  // CmaTotal (Jetson: carve-out the GPU driver may use; part of MemTotal)
    int64_t cma_free = -1;   // CmaFree
    bool valid() const { return total > 0 && available >= 0; }
};

// Parses the text of /proc/meminfo ("Key:   1234 kB" lines); unknown keys are ignored.
MemInfo parse_meminfo(const std::string& text);
// Reads <root>/proc/meminfo; an unreadable file gives all -1 (never throws).
MemInfo read_meminfo(const std::string& root);
// MemAvailable only, for the OOM guard: one open/read/close into a stack buffer, no allocation.
// `path` is the full meminfo path. -1 on failure.
int64_t read_mem_available(const char* path);

// This process, from <root>/proc/self/status; -1 when unknown.
struct ProcessMemory {
    int64_t rss = -1;       // VmRSS
    int64_t rss_peak = -1;  // VmHWM: resident high-water mark
    int64_t rss_anon = -1;  // RssAnon: private memory already resident (heap, stacks)
};
ProcessMemory read_process_memory(const std::string& root);

// Device memory as the backend reports it (the engine copies it from Backend::memory()).
struct DeviceMemoryInfo {
    bool unified = true;    // the device draws from host DRAM (CPU backend, Jetson iGPU)
    int64_t total = -1;     // bytes, -1 unknown
    int64_t free = -1;
};

struct BudgetConfig {
    int64_t margin = 256 * MIB;   // kept free for the OS and the other services
    int64_t cap = 0;              // hard cap on what this engine holds; 0 = none
    std::string root = "/";       // where proc/meminfo and proc/self/status are read
};

// Accounts every byte before the first allocation and picks the context that fits.
class MemoryBudget {
public:
    explicit MemoryBudget(BudgetConfig cfg);

    // Reads /proc/meminfo and this process's resident memory now.
    void sample_system();
    // Injects a snapshot (tests; or a caller that already read it).
    void set_system(const MemInfo& mi, int64_t process_resident);
    void set_device(const DeviceMemoryInfo& d);
    // Runtime overhead still to be allocated (logits, backend context), on top of what is resident.
    void set_runtime_pending(int64_t bytes) { runtime_pending_ = bytes; }
    // The model's weights: mapped (read in place; their pages count against MemAvailable) or
    // copied, which the budget takes as already allocated when the system was sampled (out of
    // MemAvailable on a unified board, out of the device's free memory on a discrete one).
    void set_model(int64_t bytes, bool mapped);
    // Host RAM reserved for session snapshots (--cache-ram), counted before the pools.
    void set_sessions(int64_t bytes) { sessions_ = std::max<int64_t>(bytes, 0); }
    // A draft model (speculative decoding): its weights (placed as the model's) and its pools for
    // n positions, counted with the model's when the context is chosen.
    void set_draft(int64_t weights, std::function<int64_t(int)> pools) {
        draft_weights_ = weights;
        draft_pools_fn_ = std::move(pools);
    }
    // The draft's pools as allocated (after its allocate()).
    void set_draft_pools(int64_t bytes) { draft_pools_ = bytes; }
    int64_t planned_draft_pools() const { return draft_pools_; }
    // Bytes the pools and the session cache may still take after the recorded pools.
    int64_t headroom_after_pools() const { return pool_headroom() - kv_ - scratch_ - draft_pools_; }

    // Picks n_ctx: `requested` 0 means the largest that fits in [8, limit] (multiples of 256
    // where possible); an explicit value that does not fit throws JllmError with needed vs
    // available MB and a hint. kv_bytes(n) and scratch_bytes(n) give the pools for n positions.
    int choose_context(int requested, int limit, const std::function<int64_t(int)>& kv_bytes,
                       const std::function<int64_t(int)>& scratch_bytes);

    // Records the pools actually allocated (after the backend's allocate()).
    void set_pools(int n_ctx, int64_t kv, int64_t scratch);
    // Throws JllmError if what is recorded exceeds the cap or what the system had.
    void check_fits() const;

    MemoryReport report() const;
    const BudgetConfig& config() const { return cfg_; }

private:
    int64_t runtime() const { return process_resident_ + runtime_pending_; }
    // Bytes the pools may take; the smaller of the system's and the cap's headroom.
    int64_t pool_headroom() const;
    bool fits(int64_t pools) const { return pools <= pool_headroom(); }

    BudgetConfig cfg_;
    MemInfo mi_;
    int64_t process_resident_ = 0;
    int64_t runtime_pending_ = 0;
    DeviceMemoryInfo dev_;
    int64_t model_ = 0;
    int64_t sessions_ = 0;
    int64_t draft_weights_ = 0, draft_pools_ = 0;
    std::function<int64_t(int)> draft_pools_fn_;
    int64_t weights() const { return model_ + draft_weights_; }
    int64_t draft_pools(int n) const { return draft_pools_fn_ ? draft_pools_fn_(n) : 0; }
    bool model_mapped_ = true;
    int n_ctx_ = 0, n_ctx_limit_ = 0;
    int64_t kv_ = 0, scratch_ = 0, kv_per_pos_ = 0;
};

}  // namespace jllm
