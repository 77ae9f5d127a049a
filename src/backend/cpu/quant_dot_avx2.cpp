// backend/cpu/quant_dot_avx2.cpp — AVX2 + FMA + F16C activation quantizers and dot products.
// Everything here is compiled for that target by the pragma below (no global -march) and
// reached only through the dispatch table after run-time detection.
//
// The kernels themselves live in quant_dot_x86_kernels.inc (shared with the AVX-512 level).
#include <cstring>

#include "backend/cpu/quant_dot_internal.h"
#include "quant/quant_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>

// Every function below carries target("avx2,fma,f16c"): GCC through its target pragma, clang
// through an attribute push (clang ignores the GCC pragma).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace jllm::cpu_detail {

namespace {

#define JLLM_X86_VNNI 0
#include "backend/cpu/quant_dot_x86_kernels.inc"
#undef JLLM_X86_VNNI

}  // namespace

}  // namespace jllm::cpu_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace jllm::cpu_detail {

VecDotFn vec_dot_avx2(GgmlType w_type) {
    switch (w_type) {
        case GgmlType::Q4_0: return &by_n_act<KQ4_0>;
        case GgmlType::Q4_1: return &by_n_act<KQ4_1>;
        case GgmlType::Q5_0: return &by_n_act<KQ5_0>;
        case GgmlType::Q5_1: return &by_n_act<KQ5_1>;
        case GgmlType::Q8_0: return &by_n_act<KQ8_0>;
        case GgmlType::Q2_K: return &by_n_act<KQ2_K>;
        case GgmlType::Q3_K: return &by_n_act<KQ3_K>;
        case GgmlType::Q4_K: return &by_n_act<KQ4_K>;
        case GgmlType::Q5_K: return &by_n_act<KQ5_K>;
        case GgmlType::Q6_K: return &by_n_act<KQ6_K>;
        case GgmlType::F32: return &by_n_act<KF32>;
        case GgmlType::F16: return &by_n_act<KF16>;
        case GgmlType::BF16: return &by_n_act<KBF16>;
        default: return nullptr;
    }
}

QuantizeActFn quantize_act_avx2(GgmlType act_type) {
    switch (act_type) {
        case GgmlType::Q8_0: return &quantize_q8_0;
        case GgmlType::Q8_1: return &quantize_q8_1;
        case GgmlType::Q8_K: return &quantize_q8_k;
        default: return nullptr;
    }
}

}  // namespace jllm::cpu_detail

#else  // !__x86_64__

namespace jllm::cpu_detail {
VecDotFn vec_dot_avx2(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_avx2(GgmlType) { return nullptr; }
}  // namespace jllm::cpu_detail

#endif  // __x86_64__
