// memory/oom_guard.cpp — OomGuard: ends a generation cleanly when MemAvailable falls below a
// threshold, before the kernel's OOM killer picks a victim (on an 8 GB board shared with speech
// and Home Assistant, that victim could be anyone). The per-token cost is one steady_clock read;
// the file is read at an interval chosen from the measured cost of reading it.
#include <algorithm>
#include <vector>

#include "memory/oom_guard.h"

#include "core/sysfs_root.h"
#include "core/timer.h"
#include "memory/memory_budget.h"

namespace jllm {

void OomGuard::configure(const std::string& root, int64_t threshold) {
    path_ = rooted_path(root, "/proc/meminfo");
    threshold_ = threshold;
    reset();
}

double OomGuard::calibrate() {
    if (path_.empty()) return 0.0;
    std::vector<double> t;
    for (int i = 0; i < 9; ++i) {
        const double t0 = now_ms();
        read_mem_available(path_.c_str());
        t.push_back((now_ms() - t0) * 1000.0);
    }
    std::sort(t.begin(), t.end());
    read_us_ = t[t.size() / 2];
    // Keep reads under ~0.1% of wall time: interval = 1000 x read cost. A cost of c µs gives
    // 1000c µs = c ms; clamped to [10, 250] ms so a slow read cannot blind the guard for long.
    interval_ms_ = std::clamp(read_us_, 10.0, 250.0);
    return read_us_;
}

void OomGuard::reset() { last_ms_ = -1e300; }

bool OomGuard::check() {
    if (!enabled()) return true;
    const double t = now_ms();
    if (t - last_ms_ < interval_ms_) return true;
    last_ms_ = t;
    ++reads_;
    const int64_t avail = read_mem_available(path_.c_str());
    if (avail < 0) return true;  // unreadable: unknown, never a reason to stop
    last_available_ = avail;
    return avail >= threshold_;
}

}  // namespace jllm
