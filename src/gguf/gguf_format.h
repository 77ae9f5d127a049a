// gguf/gguf_format.h — what the GGUF reader and writer share about the file format (internal
// to gguf/).
//
// File layout (little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// kv_count x (string key, u32 type, value), tensor_count x (string name, u32 n_dims,
// n_dims x u64 ne, u32 type, u64 offset), padding to `general.alignment` (default 32), data.
// A string is u64 length + bytes (no terminator); an array is u32 element type, u64 count, items.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"

namespace jllm {

constexpr uint32_t GGUF_MAGIC = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t GGUF_DEFAULT_ALIGNMENT = 32;

// Bytes of one scalar of type t; 0 for STRING and ARRAY.
inline size_t gguf_scalar_size(GgufType t) {
    switch (t) {
        case GgufType::UINT8:
        case GgufType::INT8:
        case GgufType::BOOL: return 1;
        case GgufType::UINT16:
        case GgufType::INT16: return 2;
        case GgufType::UINT32:
        case GgufType::INT32:
        case GgufType::FLOAT32: return 4;
        case GgufType::UINT64:
        case GgufType::INT64:
        case GgufType::FLOAT64: return 8;
        default: return 0;
    }
}

}  // namespace jllm
