// jetson/sysfs_paths.h — every file the Jetson HAL reads, with the source that justifies it.
// All are absolute system paths, joined to the injectable root (memory/sysfs_path.h).
//
// Sources:
//  [L4T]   NVIDIA Jetson Linux Developer Guide, "Jetson Orin Nano Series, Jetson Orin NX Series
//          and Jetson AGX Orin Series" (Platform Power and Performance), r35.6.0 and r36.4:
//          nvpmodel, /etc/nvpmodel.conf power models, clocks, thermal zones, power monitors.
//  [KDOC]  Linux kernel documentation: filesystems/proc.rst (meminfo, status),
//          ABI/testing/sysfs-class-devfreq (cur_freq, max_freq in Hz),
//          ABI/testing/sysfs-devices-system-cpu (online), cpu-freq/cpufreq (kHz),
//          driver-api/thermal/sysfs-api.rst (type, temp and trip_point_N_* in millidegrees C),
//          hwmon/ina3221.rst (inN_label, inN_input mV, currN_input mA).
//  [BOARD] Listings from real boards published in public repositories (JetPack 6 / L4T R36.4 on
//          Orin Nano devkits, and L4T R35 on Orin): "# R36 (release), REVISION: 4.3, GCID: ...,
//          BOARD: generic, EABI: aarch64, DATE: ..." in /etc/nv_tegra_release; device-tree model
//          "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super"; "pmode:0002" in
//          /var/lib/nvpmodel/status; "< POWER_MODEL ID=2 NAME=MAXN_SUPER >" in /etc/nvpmodel.conf
//          (Orin Nano Super ids 15W=0, 25W=1, MAXN_SUPER=2, 7W=3); GPU devfreq at
//          platform/bus@0/17000000.gpu (R36) and gpu.0/devfreq/17000000.ga10b (R35); EMC at
//          /sys/class/devfreq/bwmgr (R36) and the BPMP debugfs clock (R35, root only, as
//          jetson_clocks reads it); INA3221 at i2c bus 1 address 0x40 with in1..3 labelled
//          VDD_IN, VDD_CPU_GPU_CV, VDD_SOC (also in the Orin Nano device tree's power-sensor@40
//          node); an Orin Nano (p3767) whose tj-thermal zone reads empty.
#pragma once

namespace jllm::hal_paths {

// L4T release, first line "# R36 (release), REVISION: 4.3, ..." [L4T][BOARD]
constexpr const char* NV_TEGRA_RELEASE = "/etc/nv_tegra_release";
// Device tree: NUL-terminated model string; compatible list holds "nvidia,tegra234" [KDOC][BOARD].
// /proc/device-tree is a link to /sys/firmware/devicetree/base; both are tried.
constexpr const char* DT_MODEL = "/proc/device-tree/model";
constexpr const char* DT_MODEL_ALT = "/sys/firmware/devicetree/base/model";
constexpr const char* DT_COMPATIBLE = "/proc/device-tree/compatible";
// CUDA toolkit version manifest ({"cuda": {"version": "12.6.68"}}) installed by JetPack 6.
constexpr const char* CUDA_VERSION_JSON = "/usr/local/cuda/version.json";
// nvpmodel: the active mode as "pmode:NNNN" and the catalogue of modes [L4T][BOARD]
constexpr const char* NVPMODEL_STATUS = "/var/lib/nvpmodel/status";
constexpr const char* NVPMODEL_CONF = "/etc/nvpmodel.conf";
// GPU devfreq (Hz) and load (0..1000): L4T R36 first, then R35 [L4T][BOARD][KDOC]
constexpr const char* GPU_DEVFREQ_R36 = "/sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu";
constexpr const char* GPU_LOAD_R36 = "/sys/devices/platform/bus@0/17000000.gpu/load";
constexpr const char* GPU_DEVFREQ_R35 = "/sys/devices/gpu.0/devfreq/17000000.ga10b";
constexpr const char* GPU_LOAD_R35 = "/sys/devices/gpu.0/load";
// EMC (memory clock): devfreq "bwmgr" on R36 (Hz); BPMP debugfs on R35 (Hz, root only) [BOARD]
constexpr const char* EMC_DEVFREQ_R36 = "/sys/class/devfreq/bwmgr";
constexpr const char* EMC_RATE_R35 = "/sys/kernel/debug/bpmp/debug/clk/emc/rate";
constexpr const char* EMC_MAX_R35 = "/sys/kernel/debug/bpmp/debug/clk/emc/max_rate";
// CPUs: online list ("0-5") and per-CPU cpufreq in kHz [KDOC]
constexpr const char* CPU_ONLINE = "/sys/devices/system/cpu/online";
constexpr const char* CPU_DIR = "/sys/devices/system/cpu";
// Thermal zones: thermal_zoneN/{type,temp,trip_point_M_temp,trip_point_M_type} [KDOC][L4T]
constexpr const char* THERMAL_DIR = "/sys/class/thermal";
// INA3221 power monitor: <dev>/hwmon/hwmonN/{inK_label,inK_input,currK_input} [KDOC][L4T][BOARD]
constexpr const char* INA3221_DRIVER_DIR = "/sys/bus/i2c/drivers/ina3221";
// Memory, for LiveStats [KDOC]
constexpr const char* PROC_MEMINFO = "/proc/meminfo";
constexpr const char* PROC_SELF_STATUS = "/proc/self/status";

}  // namespace jllm::hal_paths
