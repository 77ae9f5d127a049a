// jetson/jetson_hal.h — the Jetson HAL's reader (DESIGN.md "Jetson HAL"): the values of
// include/jllm_jetson.h read from plain files under an injectable root (no process spawned, no
// CUDA header). Paths: jetson/hal_paths.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jllm_jetson.h"

namespace jllm {

// What the CUDA side knows (filled by the CUDA backend through a provider; -1 / "" = unknown).
struct GpuProperties {
    int sm_count = -1;
    int cc_major = -1, cc_minor = -1;
    std::string cuda_version;   // runtime/driver version, e.g. "12.6"
};
using GpuPropertiesProvider = std::function<GpuProperties()>;

class JetsonHal {
public:
    explicit JetsonHal(std::string root = "/", GpuPropertiesProvider gpu = {});
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

}  // namespace jllm
