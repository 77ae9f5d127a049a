// backend/backend_registry.h — the one place a backend is chosen and made: CUDA where it is
// asked for or (auto) where a device is present, else the CPU. The engine calls this and then
// sees only the Backend interface.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backend/backend_options.h"

namespace jllm {

struct ModelConfig;

// Whether this build has the CUDA backend and the CUDA runtime finds a device.
bool cuda_backend_available();

// DeviceKind::Cuda without the CUDA backend or a device throws JllmError; Auto falls back to the CPU.
std::unique_ptr<Backend> create_backend(DeviceKind device, const ModelConfig& config, const BackendOptions& options);

}  // namespace jllm
