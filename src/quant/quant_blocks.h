// quant/quant_blocks.h — every quantized block layout, defined ONCE for host and device.
// Byte layouts are those of the GGUF format (ggml block types); sizes are checked by
// static_assert. Element order inside each block is documented next to the dequantizer
// (quant/quant_ref.cpp), which is the scalar oracle every kernel is tested against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/fp16.h"

namespace jllm {

constexpr int QK4_0 = 32;
constexpr int QK4_1 = 32;
constexpr int QK5_0 = 32;
constexpr int QK5_1 = 32;
constexpr int QK8_0 = 32;
constexpr int QK8_1 = 32;
constexpr int QK_K = 256;        // super-block size of the k-quants
constexpr int K_SCALE_SIZE = 12;  // packed 6-bit scales/mins of Q4_K and Q5_K

// x = d * (q - 8), q in [0, 15]; low nibbles hold elements 0..15, high nibbles 16..31.
struct BlockQ4_0 {
    Half d;
    uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "BlockQ4_0 size");

// x = d * q + m, q in [0, 15]; nibble order as Q4_0.
struct BlockQ4_1 {
    Half d;
    Half m;
    uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "BlockQ4_1 size");

// x = d * (q - 16), q 5-bit: low 4 bits in qs (nibbles as Q4_0), bit 4 of element j in qh bit j.
struct BlockQ5_0 {
    Half d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "BlockQ5_0 size");

// x = d * q + m, q 5-bit as Q5_0.
struct BlockQ5_1 {
    Half d;
    Half m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "BlockQ5_1 size");

// x = d * q, q int8.
struct BlockQ8_0 {
    Half d;
    int8_t qs[QK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "BlockQ8_0 size");

// Activation block: x = d * q, with s = d * sum(q) precomputed (for formats with a min).
struct BlockQ8_1 {
    Half d;
    Half s;
    int8_t qs[QK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36, "BlockQ8_1 size");

// 2-bit k-quant: 16 sub-blocks of 16; scales[i] low nibble = scale, high nibble = min.
struct BlockQ2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    Half d;
    Half dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "BlockQ2_K size");

// 3-bit k-quant: low 2 bits in qs, high bit in hmask, 16 6-bit scales packed in 12 bytes.
struct BlockQ3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    Half d;
};
static_assert(sizeof(BlockQ3_K) == 110, "BlockQ3_K size");

// 4-bit k-quant: 8 sub-blocks of 32, 6-bit scale and min each, packed in `scales`.
struct BlockQ4_K {
    Half d;
    Half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "BlockQ4_K size");

// 5-bit k-quant: as Q4_K plus one high bit per element in qh.
struct BlockQ5_K {
    Half d;
    Half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "BlockQ5_K size");

// 6-bit k-quant: 16 sub-blocks of 16 with int8 scales; low 4 bits in ql, high 2 in qh.
struct BlockQ6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    Half d;
};
static_assert(sizeof(BlockQ6_K) == 210, "BlockQ6_K size");

// 8-bit k-quant (activations for k-quant dot products): float scale and per-16 sums.
struct BlockQ8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "BlockQ8_K size");

}  // namespace jllm
