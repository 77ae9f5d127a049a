// include/jllm_memory.h — the memory model (DESIGN.md "Memory model"): what the OS really has
// (/proc/meminfo through an injectable root), what this engine will hold (weights, KV pool,
// scratch pool, runtime overhead), the safety margin and the hard cap; the context length that
// fits; the pools allocated once at load; and the OOM guard that watches MemAvailable while
// generating. No CUDA header here: device memory arrives as a plain struct from the backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace jllm {

constexpr int64_t MIB = 1024 * 1024;

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

// The budget as printed at load and served by /health. All sizes in bytes. The rows add up:
// total = os_and_others + runtime + model + kv + scratch + margin + free.
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

    int64_t ours() const { return runtime + model + kv + scratch; }
    std::string table() const;       // the load-time table, one row per line
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
    void set_model(int64_t bytes, bool mapped);

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
    bool model_mapped_ = true;
    int n_ctx_ = 0, n_ctx_limit_ = 0;
    int64_t kv_ = 0, scratch_ = 0, kv_per_pos_ = 0;
};

// Watches MemAvailable during generation. check() is called once per token; it reads the file
// only when `interval_ms` has passed since the last read, so its cost per token is a clock read.
// The interval is derived from the measured cost of one read (calibrate()) so that reading
// stays under ~0.1% of wall time, clamped to [10, 250] ms.
class OomGuard {
public:
    OomGuard() = default;
    // `root`: sysfs/proc root; `threshold`: bytes of MemAvailable below which check() fails.
    void configure(const std::string& root, int64_t threshold);
    // Measures one read (median of a few) and sets the interval. Returns the read cost in µs.
    double calibrate();
    void set_interval_ms(double ms) { interval_ms_ = ms; }
    void reset();                        // start of a generation: the next check() reads
    // False when MemAvailable was read and is below the threshold. Never throws, never allocates.
    bool check();
    bool enabled() const { return threshold_ > 0 && !path_.empty(); }
    int64_t last_available() const { return last_available_; }
    int64_t threshold() const { return threshold_; }
    double interval_ms() const { return interval_ms_; }
    double read_us() const { return read_us_; }
    int64_t reads() const { return reads_; }

private:
    std::string path_;
    int64_t threshold_ = 0;
    double interval_ms_ = 50.0;
    double read_us_ = 0.0;
    double last_ms_ = -1e300;
    int64_t last_available_ = -1;
    int64_t reads_ = 0;
};

// "1234.5 MB"-style helper for tables and messages (MiB, one decimal).
std::string format_mb(int64_t bytes);

}  // namespace jllm
