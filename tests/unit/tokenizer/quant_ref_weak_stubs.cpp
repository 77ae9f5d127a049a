// tests/unit/tokenizer/quant_ref_weak_stubs.cpp — TEMPORARY: weak stand-ins for the quant
// reference functions that gguf.cpp's type table links against, until src/quant lands on main.
// The tokenizer tests never call them; a real definition, once it exists, is used instead.
#include "quant/quant_ref.h"

#include <cstdlib>

namespace jllm {

__attribute__((weak)) void dequantize_row_f16(const Half*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_bf16(const BFloat16*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q4_0(const BlockQ4_0*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q4_1(const BlockQ4_1*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q5_0(const BlockQ5_0*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q5_1(const BlockQ5_1*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q8_0(const BlockQ8_0*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q8_1(const BlockQ8_1*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q2_k(const BlockQ2_K*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q3_k(const BlockQ3_K*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q4_k(const BlockQ4_K*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q5_k(const BlockQ5_K*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q6_k(const BlockQ6_K*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void dequantize_row_q8_k(const BlockQ8_K*, float*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_f16_ref(const float*, Half*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_bf16_ref(const float*, BFloat16*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q4_0_ref(const float*, BlockQ4_0*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q4_1_ref(const float*, BlockQ4_1*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q5_0_ref(const float*, BlockQ5_0*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q5_1_ref(const float*, BlockQ5_1*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q8_0_ref(const float*, BlockQ8_0*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q8_1_ref(const float*, BlockQ8_1*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q2_k_ref(const float*, BlockQ2_K*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q3_k_ref(const float*, BlockQ3_K*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q4_k_ref(const float*, BlockQ4_K*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q5_k_ref(const float*, BlockQ5_K*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q6_k_ref(const float*, BlockQ6_K*, int64_t) { std::abort(); }
__attribute__((weak)) void quantize_row_q8_k_ref(const float*, BlockQ8_K*, int64_t) { std::abort(); }

}  // namespace jllm
