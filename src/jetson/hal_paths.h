// jetson/hal_paths.h — every file the Jetson HAL reads, with the source that justifies it.
// All are absolute system paths, joined to the injectable root (core/sysfs_root.h).
//
// Sources (facts only; cited where each path is used below):
//  [L4T]   NVIDIA Jetson Linux Developer Guide, "Jetson Orin Nano Series, Jetson Orin NX Series
//          and Jetson AGX Orin Series" (Platform Power and Performance), r35.6.0 and r36.4.3:
//          https://docs.nvidia.com/jetson/archives/r36.4.3/DeveloperGuide/SD/PlatformPowerAndPerformance/JetsonOrinNanoSeriesJetsonOrinNxSeriesAndJetsonAgxOrinSeries.html
//          (nvpmodel and /etc/nvpmodel.conf power models, supported modes, clocks, thermal
//          zones, the INA3221 power monitor).
//  [KDOC]  Linux kernel documentation: filesystems/proc.rst (meminfo, status);
//          ABI/testing/sysfs-class-devfreq (cur_freq, max_freq in Hz);
//          ABI/testing/sysfs-devices-system-cpu (online) and cpu-freq docs (kHz);
//          driver-api/thermal/sysfs-api.rst (type, temp, trip_point_N_{temp,type}, m°C);
//          https://kernel.org/doc/Documentation/hwmon/ina3221.rst (inN_label, inN_input mV,
//          currN_input mA).
//  [BOARD] Listings from real boards in public repositories:
//          - /etc/nv_tegra_release on JetPack 6: "# R36 (release), REVISION: 4.3, GCID: 38968081,
//            BOARD: generic, EABI: aarch64, DATE: ..." and an Orin Nano Super whose device-tree
//            model reads "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super";
//          - /var/lib/nvpmodel/status holding "pmode:0002" on an Orin Nano Super in MAXN_SUPER,
//            /etc/nvpmodel.conf lines "< POWER_MODEL ID=2 NAME=MAXN_SUPER >" and
//            "< PM_CONFIG DEFAULT=2 >" (ids 15W=0, 25W=1, MAXN_SUPER=2, 7W=3); the MAXN SUPER
//            id 2 also in analogdevicesinc/ADCAM sdcard-images-utils/.../jetson-perf.sh;
//          - GPU devfreq at /sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu and
//            EMC at /sys/devices/platform/bwmgr/devfreq/bwmgr (= /sys/class/devfreq/bwmgr) on
//            R36; /sys/devices/gpu.0/devfreq/17000000.ga10b in an R35 Orin /etc/nvpmodel.conf
//            (GPU MAX_FREQ); the BPMP debugfs EMC clock read by jetson_clocks and
//            analogdevicesinc/ADCAM's Orin Nano script;
//          - GPU load (per mille) at /sys/devices/platform/bus@0/17000000.gpu/load on R36 and
//            /sys/devices/gpu.0/load on R35 (monitoring scripts reading both);
//          - INA3221 root /sys/bus/i2c/drivers/ina3221 with hwmon children on L4T 32..36
//            (alumet-dev/alumet plugins/nvidia-jetson/README.md); on Orin Nano at 1-0040 with
//            in1..3 = VDD_IN, VDD_CPU_GPU_CV, VDD_SOC (also the Orin Nano device tree's
//            power-sensor@40 node);
//          - thermal zones read on an Orin Nano: cpu-thermal, gpu-thermal, soc0-thermal,
//            soc1-thermal, soc2-thermal, tj-thermal (cv0..2-thermal on larger Orin modules), and
//            a p3767 (Orin Nano/NX) module whose tj-thermal reads empty.
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
