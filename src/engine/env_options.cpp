// engine/env_options.cpp — see env_options.h.
#include "engine/env_options.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace jllm {

namespace {

// The value of `name`, or nullptr when it is unset or empty; a value outside `allowed` throws.
const char* knob(const char* name, std::initializer_list<const char*> allowed) {
    const char* v = std::getenv(name);
    if (v == nullptr || v[0] == '\0') return nullptr;
    std::string list;
    for (const char* a : allowed) {
        if (std::strcmp(v, a) == 0) return v;
        list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw JllmError(strfmt("%s: '%s' is not one of %s", name, v, list.c_str()));
}

// A 0|1 switch: `fallback` when unset.
bool switch_knob(const char* name, bool fallback) {
    const char* v = knob(name, {"0", "1"});
    return v == nullptr ? fallback : v[0] == '1';
}

// A whole number in [lo, hi]: `fallback` when unset.
int int_knob(const char* name, int lo, int hi, int fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || v[0] == '\0') return fallback;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < lo || n > hi) {
        throw JllmError(strfmt("%s: '%s' is not a whole number in %d..%d", name, v, lo, hi));
    }
    return static_cast<int>(n);
}

}  // namespace

BackendOptions backend_options_from_env() {
    BackendOptions o;
    o.cpu.simd = simd_level_from_env(std::getenv("JLLM_CPU_SIMD"));
    CudaOptions& c = o.cuda;
    c.graphs = switch_knob("JLLM_CUDA_GRAPH", c.graphs);
    c.profile = switch_knob("JLLM_CUDA_PROFILE", c.profile);
    c.sync_check = switch_knob("JLLM_CUDA_SYNC_CHECK", c.sync_check);
    c.warm_up = switch_knob("JLLM_CUDA_WARMUP", c.warm_up);
    c.tiled_weights = switch_knob("JLLM_CUDA_TILES", c.tiled_weights);
    if (const char* v = knob("JLLM_CUDA_ATTN_KERNEL", {"auto", "simt"})) {
        c.attention.kernel = std::strcmp(v, "simt") == 0 ? cuda::AttnKernel::Simt : cuda::AttnKernel::Auto;
    }
    if (const char* v = knob("JLLM_CUDA_GEMM", {"int8", "fp16"})) c.gemm_int8 = std::strcmp(v, "int8") == 0;
    if (const char* v = knob("JLLM_CUDA_GEMV", {"int8", "dp4a"})) c.gemv_int8 = std::strcmp(v, "int8") == 0;
    if (const char* v = knob("JLLM_CUDA_ATTN_WARPS", {"1", "2", "4"})) c.attention.decode_warps = std::atoi(v);
    c.attn_max_split = int_knob("JLLM_CUDA_ATTN_SPLITS", 1, cuda::ATTN_MAX_SPLIT, c.attn_max_split);
    c.gemm_int8_min_tokens =
        int_knob("JLLM_CUDA_GEMM_S8_MIN", cuda::GEMV_MAX_TOKENS + 1, 1 << 20, c.gemm_int8_min_tokens);
    return o;
}

std::string sysfs_root_from_env() {
    const char* v = std::getenv("JLLM_SYSFS_ROOT");
    return v != nullptr && v[0] != '\0' ? std::string(v) : std::string("/");
}

std::string default_sysfs_root() { return sysfs_root_from_env(); }

}  // namespace jllm
