// memory/oom_guard.h — the runtime OOM guard (DESIGN.md "Memory model"): watches MemAvailable
// while generating and ends a generation cleanly before the kernel's OOM killer would.
#pragma once

#include <cstdint>
#include <string>

namespace jllm {

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

}  // namespace jllm
