// backend/cuda/cuda_options.h — the CUDA backend's run-time options (backend/backend_options.h
// reads them from the environment), in plain C++ so the engine and the tests can fill them.
#pragma once

#include "backend/cuda/cuda_ops.h"

namespace jllm {

struct CudaOptions {
    int device = 0;
    bool graphs = true;       // CUDA graphs for every forward (off: each kernel on the stream)
    // An event after every step of the forward pass, the GPU time between them summed per step
    // and printed when the backend is destroyed (graphs off; a few microseconds per step).
    bool profile = false;
    // Synchronize the stream after every step and check for errors, naming the step (graphs off).
    bool sync_check = false;
    bool warm_up = true;      // Backend::warm_up runs the first request's one-time work at load
    cuda::AttnChoice attention;  // attention kernels (measurement knobs; the defaults are the engine's)
    int attn_max_split = cuda::ATTN_MAX_SPLIT;  // cap on decode-attention splits (longer splits)
    // Prefill products of tiled Q4_K in batches of gemm_int8_min_tokens or more on int8 tensor cores
    // (activations quantized by 256, as the CPU's Q4_K products take them); off: the fp16
    // register-decoding GEMM.
    bool gemm_int8 = true;
    // The smallest batch whose products take the int8 GEMM (more than GEMV_MAX_TOKENS).
    int gemm_int8_min_tokens = cuda::GEMM_S8_MIN_TOKENS;
    // Decode batches (up to GEMV_MAX_TOKENS tokens: a step, a verification) take a layer's gate / up
    // product on int8 tensor cores (launch_gemv_s8 on the norm's act_q8k, writing W_down's 8-bit
    // input itself) where gate and up are tiled Q4_K and W_down is tiled; off: the dp4a GEMV. The
    // choice is per layer and the same at every batch size, so a verification's rows stay steps'.
    bool gemv_int8 = false;
    // Copied Q4_K/Q6_K matrices in the tiled layout (tiles_fit); off: the file's rows, as mapped
    // weights are read (for comparisons: the register GEMMs and the tiled GEMV need the tiles).
    bool tiled_weights = true;
};

}  // namespace jllm
