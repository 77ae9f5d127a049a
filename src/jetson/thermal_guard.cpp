// jetson/thermal_guard.cpp — ThermalGuard: the decode loop's thermal policy. Zones are resolved
// once at configure(); step() reads their temp files (open/read into a stack buffer, no
// allocation) only every interval_ms, so between reads a token costs one clock read.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "jetson/thermal_guard.h"

#include "core/error.h"
#include "core/sysfs_root.h"
#include "core/timer.h"
#include "jetson/hal_paths.h"
#include "jetson/jetson_hal.h"

namespace jllm {

namespace {

// Millidegrees from a thermal zone's temp file; false when unreadable or empty.
bool read_millideg(const char* path, long long* out) {
    char buf[64];
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    char* end = nullptr;
    const long long v = std::strtoll(buf, &end, 10);
    if (end == buf) return false;
    *out = v;
    return true;
}

}  // namespace

void ThermalGuard::configure(const std::string& root, const ThermalConfig& cfg) {
    cfg_ = cfg;
    temp_paths_.clear();
    const ThermalState ts = JetsonHal(root).thermal();
    for (const ThermalZone& z : ts.zones) {
        if (!z.valid()) continue;  // disabled zones read empty; they never count
        temp_paths_.push_back(rooted_path(root, strfmt("%s/thermal_zone%d/temp", hal_paths::THERMAL_DIR, z.index)));
    }
    const float crit = ts.critical_c();
    stop_c_ = cfg.stop_c > 0.0f ? cfg.stop_c : (crit > 0.0f ? crit : 95.0f);
    enabled_ = !temp_paths_.empty();
    reset();
}

void ThermalGuard::reset() {
    last_ms_ = -1e300;
    last_c_ = -1000.0f;
    peak_c_ = -1000.0f;
    pause_ms_ = 0.0;
}

ThermalAction ThermalGuard::step() {
    if (!enabled_) return ThermalAction::None;
    const double t = now_ms();
    if (t - last_ms_ >= cfg_.interval_ms) {
        last_ms_ = t;
        float hottest = -1000.0f;
        for (const std::string& p : temp_paths_) {
            long long v = 0;
            if (read_millideg(p.c_str(), &v)) hottest = std::max(hottest, static_cast<float>(v) / 1000.0f);
        }
        last_c_ = hottest;
        peak_c_ = std::max(peak_c_, hottest);
    }
    if (last_c_ < -273.0f) return ThermalAction::None;
    if (last_c_ >= stop_c_) return ThermalAction::Stop;
    if (last_c_ >= cfg_.pace_c) {
        // The pause grows linearly from 10% of max_sleep_ms at pace_c to max_sleep_ms at stop_c.
        const float span = std::max(1.0f, stop_c_ - cfg_.pace_c);
        const double f = std::clamp(static_cast<double>(last_c_ - cfg_.pace_c) / span, 0.0, 1.0);
        pause_ms_ = cfg_.max_sleep_ms * (0.1 + 0.9 * f);
        return ThermalAction::Pace;
    }
    return ThermalAction::None;
}

}  // namespace jllm
