// backend/cpu/quant_dot_neon.cpp — aarch64 Advanced SIMD dot products (the Jetson's
// Cortex-A78AE). Compiled only on aarch64; elsewhere the getters return nullptr.
//
// Deliberately plain, since no aarch64 machine runs the tests here (qemu-user does in CI): every
// kernel unpacks a block into int8 values exactly as the scalar reference reads them, takes
// 16-lane int8 dot products, and then applies the same per-block float math as
// quant_dot_scalar.cpp. The kernels are built twice (quant_dot_neon_kernels.inc): with the
// Armv8.2-A dot product (vdotq_s32; the Orin's Cortex-A78AE has it) and without (vmull_s8 +
// pairwise adds), chosen at run time from the CPU's HWCAP_ASIMDDP, so a default build (plain
// Armv8-A) still uses sdot on the board. Activation quantization uses the scalar reference.
#include "backend/cpu/quant_dot_internal.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <cstring>

#include "quant/quant_blocks.h"

namespace jllm::cpu_detail {

#define JLLM_NEON_NS base
#define JLLM_NEON_SDOT 0
#include "backend/cpu/quant_dot_neon_kernels.inc"
#undef JLLM_NEON_NS
#undef JLLM_NEON_SDOT

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#define JLLM_NEON_NS sdot
#define JLLM_NEON_SDOT 1
#include "backend/cpu/quant_dot_neon_kernels.inc"
#undef JLLM_NEON_NS
#undef JLLM_NEON_SDOT
#pragma GCC pop_options

bool neon_has_sdot() {
    static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    return has;
}

VecDotFn vec_dot_neon_variant(GgmlType w_type, bool sdot) { return sdot ? sdot::table(w_type) : base::table(w_type); }

VecDotFn vec_dot_neon(GgmlType w_type) { return vec_dot_neon_variant(w_type, neon_has_sdot()); }

QuantizeActFn quantize_act_neon(GgmlType) { return nullptr; }

}  // namespace jllm::cpu_detail

#else  // !__aarch64__

namespace jllm::cpu_detail {
bool neon_has_sdot() { return false; }
VecDotFn vec_dot_neon_variant(GgmlType, bool) { return nullptr; }
VecDotFn vec_dot_neon(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_neon(GgmlType) { return nullptr; }
}  // namespace jllm::cpu_detail

#endif  // __aarch64__
