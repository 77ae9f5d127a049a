// include/jllm_jetson.h — the Jetson HAL (DESIGN.md "Jetson HAL"): what the board is and how it
// is running, read from plain files only (no process spawned, no CUDA header): L4T release,
// module model, power mode, GPU/EMC/CPU clocks, thermal zones with trip points, INA3221 power
// rails. Every path is relative to an injectable root (JLLM_SYSFS_ROOT, default "/"; it covers
// /proc too), so tests run on fixture trees. Off-Jetson every field is "unknown" (strings) or
// -1 (numbers). These are the values Engine::live_stats() returns; the reader itself
// (src/jetson/jetson_hal.h) and the thermal policy (src/jetson/thermal_guard.h) are the engine's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jllm {

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

// A multi-line summary of the board under `sysfs_root` ("/" on a real system): device, L4T,
// power mode, clocks, temperatures, rails; "unknown" fields off-Jetson.
std::string board_summary(const std::string& sysfs_root);
// Copies every file the HAL reads under `sysfs_root` into dir/<same path> (a fixture tree for
// tests). Returns the count copied; throws std::runtime_error if `dir` cannot be written.
int dump_board_files(const std::string& sysfs_root, const std::string& dir);
// JLLM_SYSFS_ROOT when set, else "/": the root the tools pass as EngineConfig::sysfs_root.
std::string default_sysfs_root();

}  // namespace jllm
