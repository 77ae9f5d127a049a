// backend/cpu/quant_dot_neon.cpp — aarch64 NEON dot products (Jetson's Cortex-A78AE).
// Compiled only on aarch64; elsewhere the getters return nullptr.
#include "backend/cpu/quant_dot_internal.h"

#if !defined(__aarch64__)
namespace jllm::cpu_detail {
VecDotFn vec_dot_neon(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_neon(GgmlType) { return nullptr; }
}  // namespace jllm::cpu_detail
#endif
