// include/jllm_jetson.h — the Jetson HAL (DESIGN.md "Jetson HAL"): what the board is and how it
// is running, read from plain files only (no process spawned, no CUDA header): L4T release,
// module model, power mode, GPU/EMC/CPU clocks, thermal zones with trip points, INA3221 power
// rails. Every path is relative to an injectable root (JLLM_SYSFS_ROOT, default "/"; it covers
// /proc too), so tests run on fixture trees. Off-Jetson every field is "unknown" (strings) or
// -1 (numbers); nothing here throws. Also the thermal policy the generate loop applies.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace jllm {

// What the CUDA side knows (filled by the CUDA backend through a provider; -1 / "" = unknown).
struct GpuProperties {
    int sm_count = -1;
    int cc_major = -1, cc_minor = -1;
    std::string cuda_version;   // runtime/driver version, e.g. "12.6"
};
using GpuPropertiesProvider = std::function<GpuProperties()>;

struct JetsonInfo {
    bool is_jetson = false;            // /etc/nv_tegra_release or a tegra device tree was found
    std::string l4t = "unknown";       // "R36.4.3"
    std::string l4t_raw;               // first line of /etc/nv_tegra_release
    std::string model = "unknown";     // device-tree model string
    std::string cuda_version = "unknown";
    int sm_count = -1;
    std::string compute_capability = "unknown";  // "8.7"
};

struct PowerState {
    int mode_id = -1;                  // nvpmodel mode id
    std::string mode_name = "unknown"; // e.g. "MAXN_SUPER", "15W"
    int64_t gpu_cur_mhz = -1, gpu_max_mhz = -1;
    int gpu_load_pct = -1;             // 0..100
    int64_t emc_cur_mhz = -1, emc_max_mhz = -1;
    int64_t cpu_cur_mhz = -1, cpu_max_mhz = -1;  // highest current clock over online CPUs; cpu0's max
    int cpus_online = -1;
    std::string cpus_online_list = "unknown";    // "0-5"
};

struct TripPoint {
    float temp_c = 0.0f;
    std::string type;                  // passive, active, hot, critical
};

struct ThermalZone {
    std::string type;                  // cpu-thermal, gpu-thermal, soc0-thermal, tj-thermal, ...
    int index = -1;                    // thermal_zoneN
    float temp_c = -1000.0f;           // < -273: unreadable (some zones are disabled and read empty)
    std::vector<TripPoint> trips;
    bool valid() const { return temp_c > -273.0f; }
    float critical_c() const;          // the zone's critical trip, or -1
};

struct ThermalState {
    std::vector<ThermalZone> zones;
    float max_c() const;               // hottest readable zone, or -1000 when none
    float critical_c() const;          // lowest critical trip over zones, or -1
    const ThermalZone* find(const std::string& type) const;
};

// One INA3221 channel (hwmon: inN_label, inN_input mV, currN_input mA).
struct PowerRail {
    std::string name;                  // VDD_IN, VDD_CPU_GPU_CV, VDD_SOC
    int64_t mv = -1, ma = -1, mw = -1;
};

struct LiveStats {
    PowerState power;
    ThermalState thermal;
    std::vector<PowerRail> rails;
    int64_t board_mw = -1;             // VDD_IN, the module's input power
    int64_t mem_available = -1;        // bytes, /proc/meminfo MemAvailable
    int64_t rss = -1, rss_peak = -1;   // this process, bytes
};

class JetsonHal {
public:
    explicit JetsonHal(std::string root = "/", GpuPropertiesProvider gpu = {});
    // JLLM_SYSFS_ROOT if set, else "/".
    static std::string default_root();
    const std::string& root() const { return root_; }

    JetsonInfo info() const;
    PowerState power() const;
    ThermalState thermal() const;
    std::vector<PowerRail> rails() const;
    LiveStats live() const;

    // Every file the HAL would read on this root (absolute system paths, existing ones only).
    std::vector<std::string> files() const;
    // Copies every such file to dir/<same path> (a fixture tree). Returns the count copied.
    // Throws JllmError if the directory cannot be written.
    int dump(const std::string& dir) const;

    // Multi-line human summary: device, L4T, power mode, clocks, temperatures, rails.
    std::string summary() const;

private:
    std::string root_;
    GpuPropertiesProvider gpu_;
};

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
