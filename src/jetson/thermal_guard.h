// jetson/thermal_guard.h — the thermal policy the generate loop applies (DESIGN.md "Jetson HAL").
#pragma once

#include <string>
#include <vector>

namespace jllm {

// Thermal policy for the decode loop: above `pace_c` each token is followed by a pause growing
// with the temperature (up to max_sleep_ms); at or above the stop temperature (configured, else
// the lowest critical trip, else 95 C) generation ends cleanly. Zones are read every
// `interval_ms`, so the per-token cost is one clock read.
struct ThermalConfig {
    float pace_c = 85.0f;
    float stop_c = 0.0f;               // 0: the critical trip (or 95 C when no zone has one)
    double interval_ms = 500.0;
    double max_sleep_ms = 100.0;
};

enum class ThermalAction { None, Pace, Stop };

class ThermalGuard {
public:
    void configure(const std::string& root, const ThermalConfig& cfg);
    void reset();                      // start of a generation (peak cleared, next step reads)
    // Once per token. Pace: the caller sleeps pause_ms(). Stop: end the generation.
    ThermalAction step();
    double pause_ms() const { return pause_ms_; }
    float peak_c() const { return peak_c_; }
    float last_c() const { return last_c_; }
    float stop_c() const { return stop_c_; }
    bool enabled() const { return enabled_; }

private:
    std::vector<std::string> temp_paths_;  // every readable zone's temp file, resolved at configure()
    ThermalConfig cfg_;
    bool enabled_ = false;
    float stop_c_ = 95.0f;
    float last_c_ = -1000.0f, peak_c_ = -1000.0f;
    double last_ms_ = -1e300;
    double pause_ms_ = 0.0;
};

}  // namespace jllm
