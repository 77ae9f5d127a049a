// quant/quant_types.h — tensor element types (GGUF type ids) and the traits table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jllm {

// Values are the GGUF on-disk type ids.
enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    BF16 = 30,
};

// Converts `n` elements (a whole number of blocks) starting at `src` to float.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
// Quantizes `n` floats (a whole number of blocks) into blocks at `dst`.
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeTraits {
    GgmlType type;
    const char* name;      // as GGUF tools print it: "Q4_K", "F16", ...
    int64_t block_size;    // elements per block
    size_t type_size;      // bytes per block
    bool is_quantized;
    ToFloatFn to_float;      // nullptr for integer types
    FromFloatFn from_float;  // nullptr where no reference quantizer exists
};

// Traits of a known type id, or nullptr if the id is unknown to this build.
const TypeTraits* type_traits(uint32_t type_id);
const TypeTraits& type_traits(GgmlType type);
const char* type_name(GgmlType type);

// Bytes of a row of `n` elements; throws JllmError if n is not a multiple of the block size.
size_t row_size(GgmlType type, int64_t n);

}  // namespace jllm
