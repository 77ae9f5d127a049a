// backend/cpu/quant_dot_internal.h — what each SIMD-level implementation file of the quantized
// dot products exports to the dispatcher (quant_dot.cpp). A getter returns nullptr for a type
// that level does not accelerate; the dispatcher then falls back to the level below.
#pragma once

#include "backend/cpu/quant_dot.h"

namespace jllm::cpu_detail {

VecDotFn vec_dot_scalar(GgmlType w_type);
QuantizeActFn quantize_act_scalar(GgmlType act_type);

VecDotFn vec_dot_avx2(GgmlType w_type);  // nullptr when not built for x86
QuantizeActFn quantize_act_avx2(GgmlType act_type);

VecDotFn vec_dot_avx512(GgmlType w_type);
const QuantGemm* gemm_avx512(GgmlType w_type);  // nullptr for types without a many-token path
const QuantDotPacked* packed_avx512(GgmlType w_type);  // nullptr for types without packed activations
QuantizeActFn quantize_act_avx512(GgmlType act_type);

VecDotFn vec_dot_neon(GgmlType w_type);  // nullptr when not built for aarch64
// The NEON kernels with (`sdot`: Armv8.2-A vdotq_s32) or without the dot-product instructions;
// vec_dot_neon picks by neon_has_sdot() (the CPU's HWCAP_ASIMDDP). For the tests.
VecDotFn vec_dot_neon_variant(GgmlType w_type, bool sdot);
bool neon_has_sdot();
QuantizeActFn quantize_act_neon(GgmlType act_type);

// Unpacks the 12-byte Q4_K / Q5_K scale field into 8 scales (bytes 0..7) and 8 mins
// (bytes 8..15), all 6-bit; same result as get_scale_min_k4 for j = 0..7.
inline void unpack_scales_mins_k4(const uint8_t* packed, uint8_t* out16) {
    uint32_t u[4];
    __builtin_memcpy(u, packed, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);  // mins 4..7
    const uint32_t mins_lo = u[1] & m6;                      // mins 0..3
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);         // scales 4..7
    u[2] = mins_lo;
    u[0] &= m6;                                              // scales 0..3
    __builtin_memcpy(out16, u, 16);
}

// Unpacks the 12-byte Q3_K scale field into 16 signed scales (already minus 32).
inline void unpack_scales_q3_k(const uint8_t* packed, int8_t* out16) {
    uint32_t u[4];
    __builtin_memcpy(u, packed, 12);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t t = u[2];
    u[2] = ((u[0] >> 4) & m4) | (((t >> 4) & m2) << 4);
    u[3] = ((u[1] >> 4) & m4) | (((t >> 6) & m2) << 4);
    u[0] = (u[0] & m4) | (((t >> 0) & m2) << 4);
    u[1] = (u[1] & m4) | (((t >> 2) & m2) << 4);
    uint8_t b[16];
    __builtin_memcpy(b, u, 16);
    for (int i = 0; i < 16; i++) out16[i] = static_cast<int8_t>(b[i] - 32);
}

}  // namespace jllm::cpu_detail
