// backend/backend_options.h — how each backend runs beyond the model and the engine's config:
// the CPU's threads and SIMD level, the CUDA backend's device and its measurement and debug
// knobs. The engine makes them (engine/env_options.h: the environment and its EngineConfig) and
// passes them down: no backend reads the environment itself and none sets a process-wide global.
#pragma once

#include "backend/cpu/cpu_features.h"
#include "backend/cuda/cuda_options.h"

namespace jllm {

struct CpuOptions {
    int n_threads = 1;
    // Kernels of this level (JLLM_CPU_SIMD caps it; the best this CPU runs by default).
    SimdLevel simd = simd_level_best();
};

struct BackendOptions {
    CpuOptions cpu;
    CudaOptions cuda;
};

}  // namespace jllm
