// quant/quant_types.cpp — the traits table: one row per tensor type this build knows.
#include "quant/quant_types.h"

#include <cstring>

#include "core/error.h"
#include "quant/quant_ref.h"

namespace jllm {

namespace {

void f32_to_float(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void f32_from_float(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

template <typename Block, void (*Fn)(const Block*, float*, int64_t)>
void to_float_wrap(const void* src, float* dst, int64_t n) {
    Fn(static_cast<const Block*>(src), dst, n);
}
template <typename Block, void (*Fn)(const float*, Block*, int64_t)>
void from_float_wrap(const float* src, void* dst, int64_t n) {
    Fn(src, static_cast<Block*>(dst), n);
}

#define JLLM_TRAITS_Q(T, NAME, BS, BLOCK, DQ, Q)                                           \
    TypeTraits {                                                                           \
        GgmlType::T, NAME, BS, sizeof(BLOCK), true, &to_float_wrap<BLOCK, DQ>,             \
            &from_float_wrap<BLOCK, Q>                                                     \
    }

const TypeTraits kTraits[] = {
    {GgmlType::F32, "F32", 1, 4, false, &f32_to_float, &f32_from_float},
    {GgmlType::F16, "F16", 1, 2, false, &to_float_wrap<Half, dequantize_row_f16>,
     &from_float_wrap<Half, quantize_row_f16_ref>},
    {GgmlType::BF16, "BF16", 1, 2, false, &to_float_wrap<BFloat16, dequantize_row_bf16>,
     &from_float_wrap<BFloat16, quantize_row_bf16_ref>},
    JLLM_TRAITS_Q(Q4_0, "Q4_0", QK4_0, BlockQ4_0, dequantize_row_q4_0, quantize_row_q4_0_ref),
    JLLM_TRAITS_Q(Q4_1, "Q4_1", QK4_1, BlockQ4_1, dequantize_row_q4_1, quantize_row_q4_1_ref),
    JLLM_TRAITS_Q(Q5_0, "Q5_0", QK5_0, BlockQ5_0, dequantize_row_q5_0, quantize_row_q5_0_ref),
    JLLM_TRAITS_Q(Q5_1, "Q5_1", QK5_1, BlockQ5_1, dequantize_row_q5_1, quantize_row_q5_1_ref),
    JLLM_TRAITS_Q(Q8_0, "Q8_0", QK8_0, BlockQ8_0, dequantize_row_q8_0, quantize_row_q8_0_ref),
    JLLM_TRAITS_Q(Q8_1, "Q8_1", QK8_1, BlockQ8_1, dequantize_row_q8_1, quantize_row_q8_1_ref),
    JLLM_TRAITS_Q(Q2_K, "Q2_K", QK_K, BlockQ2_K, dequantize_row_q2_k, quantize_row_q2_k_ref),
    JLLM_TRAITS_Q(Q3_K, "Q3_K", QK_K, BlockQ3_K, dequantize_row_q3_k, quantize_row_q3_k_ref),
    JLLM_TRAITS_Q(Q4_K, "Q4_K", QK_K, BlockQ4_K, dequantize_row_q4_k, quantize_row_q4_k_ref),
    JLLM_TRAITS_Q(Q5_K, "Q5_K", QK_K, BlockQ5_K, dequantize_row_q5_k, quantize_row_q5_k_ref),
    JLLM_TRAITS_Q(Q6_K, "Q6_K", QK_K, BlockQ6_K, dequantize_row_q6_k, quantize_row_q6_k_ref),
    JLLM_TRAITS_Q(Q8_K, "Q8_K", QK_K, BlockQ8_K, dequantize_row_q8_k, quantize_row_q8_k_ref),
    {GgmlType::I8, "I8", 1, 1, false, nullptr, nullptr},
    {GgmlType::I16, "I16", 1, 2, false, nullptr, nullptr},
    {GgmlType::I32, "I32", 1, 4, false, nullptr, nullptr},
    {GgmlType::I64, "I64", 1, 8, false, nullptr, nullptr},
    {GgmlType::F64, "F64", 1, 8, false, nullptr, nullptr},
};
#undef JLLM_TRAITS_Q

}  // namespace

const TypeTraits* type_traits(uint32_t type_id) {
    for (const TypeTraits& t : kTraits) {
        if (static_cast<uint32_t>(t.type) == type_id) return &t;
    }
    return nullptr;
}

const TypeTraits& type_traits(GgmlType type) {
    const TypeTraits* t = type_traits(static_cast<uint32_t>(type));
    JLLM_ASSERT_MSG(t != nullptr, "type without traits");
    return *t;
}

const char* type_name(GgmlType type) {
    const TypeTraits* t = type_traits(static_cast<uint32_t>(type));
    return t ? t->name : "unknown";
}

size_t row_size(GgmlType type, int64_t n) {
    const TypeTraits& t = type_traits(type);
    if (n < 0 || n % t.block_size != 0) {
        throw JllmError(strfmt("row of %lld elements is not a multiple of the %s block size %lld",
                               static_cast<long long>(n), t.name,
                               static_cast<long long>(t.block_size)));
    }
    return static_cast<size_t>(n / t.block_size) * t.type_size;
}

}  // namespace jllm
