// backend/backend_registry.cpp — see backend_registry.h. The only translation unit outside
// src/backend/cuda/ that knows whether the CUDA backend is built (DESIGN.md "Layers").
#include "backend/backend_registry.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#if JLLM_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace jllm {

bool cuda_backend_available() {
#if JLLM_CUDA
    return cuda_device_available();
#else
    return false;
#endif
}

std::unique_ptr<Backend> create_backend(DeviceKind device, const ModelConfig& config, const BackendOptions& options) {
#if JLLM_CUDA
    if (device == DeviceKind::Cuda || (device == DeviceKind::Auto && cuda_device_available())) {
        return create_cuda_backend(config, options.cuda);
    }
#else
    if (device == DeviceKind::Cuda) throw JllmError("device 'cuda' requested but this build has no CUDA backend");
#endif
    return create_cpu_backend(config, options.cpu);
}

}  // namespace jllm
