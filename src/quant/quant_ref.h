// quant/quant_ref.h — scalar reference dequantizers and quantizers (the oracle for every SIMD
// and CUDA kernel). `k` is the number of elements and must be a multiple of the block size.
#pragma once

#include <cstdint>

#include "quant/quant_blocks.h"

namespace jllm {

void dequantize_row_f16(const Half* x, float* y, int64_t k);
void dequantize_row_bf16(const BFloat16* x, float* y, int64_t k);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t k);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t k);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t k);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k);
void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t k);
void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t k);
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t k);
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t k);
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t k);
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t k);
void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t k);

void quantize_row_f16_ref(const float* x, Half* y, int64_t k);
void quantize_row_bf16_ref(const float* x, BFloat16* y, int64_t k);
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t k);
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t k);
void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t k);
void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t k);
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k);
void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t k);
void quantize_row_q2_k_ref(const float* x, BlockQ2_K* y, int64_t k);
void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t k);
void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t k);
void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t k);
void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t k);
void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t k);

// Unpacks scale j (0..7) and min j of a Q4_K / Q5_K block's 12-byte packed scales.
JLLM_HD void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

}  // namespace jllm
