// engine/env_options.h — the one place the library reads the environment: every JLLM_* variable
// it honours, read once into the options that are then passed down (backend/backend_options.h,
// the sysfs root of EngineConfig). docs/engine.md lists them too.
#pragma once

#include <string>

#include "backend/backend_options.h"

namespace jllm {

// The backends' options the environment asks for; defaults where a variable is unset or empty:
//   JLLM_CPU_SIMD          scalar|avx2|avx512|neon   CPU kernel level (one the CPU lacks falls
//                                                    back below it, with a warning)
//   JLLM_CUDA_GRAPH        0|1     0: no CUDA graphs, every kernel launched on the stream
//   JLLM_CUDA_PROFILE      0|1     1: per-step GPU times, printed when the backend goes (graphs off)
//   JLLM_CUDA_SYNC_CHECK   0|1     1: synchronize and check after every step (graphs off)
//   JLLM_CUDA_WARMUP       0|1     0: no warm-up at load (what a first request pays without it)
//   JLLM_CUDA_ATTN_KERNEL  auto|simt   simt: the fp32 SIMT attention kernels only
//   JLLM_CUDA_GEMM         int8|fp16   prefill products of tiled Q4_K on int8 (default) or fp16 tensor cores
//   JLLM_CUDA_GEMM_S8_MIN  5..2^20 the smallest batch the int8 GEMM takes (default GEMM_S8_MIN_TOKENS)
//   JLLM_CUDA_GEMV         int8|dp4a decode gate / up products on int8 tensor cores or dp4a (CudaOptions::gemv_int8)
//   JLLM_CUDA_ATTN_WARPS   1|2|4   warps per block of the group-shared decode-attention kernel
//   JLLM_CUDA_ATTN_SPLITS  1..256  at most this many attention splits of the KV range (decode, short prefills)
// A value outside the allowed ones throws JllmError naming the variable.
BackendOptions backend_options_from_env();

// JLLM_SYSFS_ROOT when set (a fixture tree every /proc and /sys read comes from), else "/".
std::string sysfs_root_from_env();

}  // namespace jllm
