// tests/unit/quant/test_quant_types.cpp — the traits table and row_size arithmetic against the
// GGUF format's block sizes (hand-written here from the format, not from the table under test).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "quant/quant_types.h"

namespace jllm {
namespace {

struct Expect {
    GgmlType type;
    uint32_t id;
    const char* name;
    int64_t block_size;
    size_t type_size;
    bool quantized;
    bool has_to_float;
    bool has_from_float;
};

// Bytes per block: fp16 fields 2 bytes; Q4: 32 nibbles = 16 bytes; Q5: + 4 bytes of high bits;
// k-quants per 256 elements: Q2_K 16 scale bytes + 64 + 2*2, Q3_K 32 + 64 + 12 + 2,
// Q4_K 2*2 + 12 + 128, Q5_K 2*2 + 12 + 32 + 128, Q6_K 128 + 64 + 16 + 2, Q8_K 4 + 256 + 16*2.
const Expect kExpect[] = {
    {GgmlType::F32, 0, "F32", 1, 4, false, true, true},
    {GgmlType::F16, 1, "F16", 1, 2, false, true, true},
    {GgmlType::Q4_0, 2, "Q4_0", 32, 2 + 16, true, true, true},
    {GgmlType::Q4_1, 3, "Q4_1", 32, 2 + 2 + 16, true, true, true},
    {GgmlType::Q5_0, 6, "Q5_0", 32, 2 + 4 + 16, true, true, true},
    {GgmlType::Q5_1, 7, "Q5_1", 32, 2 + 2 + 4 + 16, true, true, true},
    {GgmlType::Q8_0, 8, "Q8_0", 32, 2 + 32, true, true, true},
    {GgmlType::Q8_1, 9, "Q8_1", 32, 2 + 2 + 32, true, true, true},
    {GgmlType::Q2_K, 10, "Q2_K", 256, 16 + 64 + 4, true, true, true},
    {GgmlType::Q3_K, 11, "Q3_K", 256, 32 + 64 + 12 + 2, true, true, true},
    {GgmlType::Q4_K, 12, "Q4_K", 256, 4 + 12 + 128, true, true, true},
    {GgmlType::Q5_K, 13, "Q5_K", 256, 4 + 12 + 32 + 128, true, true, true},
    {GgmlType::Q6_K, 14, "Q6_K", 256, 128 + 64 + 16 + 2, true, true, true},
    {GgmlType::Q8_K, 15, "Q8_K", 256, 4 + 256 + 32, true, true, true},
    {GgmlType::I8, 24, "I8", 1, 1, false, false, false},
    {GgmlType::I16, 25, "I16", 1, 2, false, false, false},
    {GgmlType::I32, 26, "I32", 1, 4, false, false, false},
    {GgmlType::I64, 27, "I64", 1, 8, false, false, false},
    {GgmlType::F64, 28, "F64", 1, 8, false, false, false},
    {GgmlType::BF16, 30, "BF16", 1, 2, false, true, true},
};

TEST(QuantTypes, TraitsTableMatchesFormat) {
    for (const Expect& e : kExpect) {
        SCOPED_TRACE(e.name);
        EXPECT_EQ(static_cast<uint32_t>(e.type), e.id);
        const TypeTraits* t = type_traits(e.id);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t, &type_traits(e.type));
        EXPECT_EQ(t->type, e.type);
        EXPECT_EQ(std::string(t->name), e.name);
        EXPECT_EQ(std::string(type_name(e.type)), e.name);
        EXPECT_EQ(t->block_size, e.block_size);
        EXPECT_EQ(t->type_size, e.type_size);
        EXPECT_EQ(t->is_quantized, e.quantized);
        EXPECT_EQ(t->to_float != nullptr, e.has_to_float);
        EXPECT_EQ(t->from_float != nullptr, e.has_from_float);
    }
}

TEST(QuantTypes, UnknownIdsHaveNoTraits) {
    for (uint32_t id : {4u, 5u, 16u, 23u, 29u, 31u, 39u, 1000u, 0xFFFFFFFFu}) {
        EXPECT_EQ(type_traits(id), nullptr) << id;
    }
    EXPECT_STREQ(type_name(static_cast<GgmlType>(4)), "unknown");
}

TEST(QuantTypes, RowSizeWholeBlocks) {
    for (const Expect& e : kExpect) {
        SCOPED_TRACE(e.name);
        EXPECT_EQ(row_size(e.type, 0), 0u);
        EXPECT_EQ(row_size(e.type, e.block_size), e.type_size);
        EXPECT_EQ(row_size(e.type, 7 * e.block_size), 7 * e.type_size);
        // Real shapes: n_embd 2560 (Qwen3-4B), n_ff 9728, n_vocab 151936 (odd number of blocks
        // of 32), and a row past 2^32 bytes to catch 32-bit overflow.
        for (int64_t n : {int64_t(2560), int64_t(9728), int64_t(151936)}) {
            if (n % e.block_size != 0) continue;
            EXPECT_EQ(row_size(e.type, n), size_t(n / e.block_size) * e.type_size) << n;
        }
        const int64_t big = (int64_t(1) << 34) / e.block_size * e.block_size;
        EXPECT_EQ(row_size(e.type, big), size_t(big / e.block_size) * e.type_size);
    }
    EXPECT_EQ(row_size(GgmlType::Q4_K, 2560), 10u * 144u);
    EXPECT_EQ(row_size(GgmlType::Q6_K, 9728), 38u * 210u);
    EXPECT_EQ(row_size(GgmlType::Q8_0, 151936), 4748u * 34u);
    EXPECT_EQ(row_size(GgmlType::BF16, 3), 6u);
    EXPECT_EQ(row_size(GgmlType::F32, 5), 20u);
}

TEST(QuantTypes, RowSizeOddShapesThrow) {
    for (const Expect& e : kExpect) {
        SCOPED_TRACE(e.name);
        EXPECT_THROW(row_size(e.type, -1), JllmError);
        if (e.block_size == 1) continue;
        for (int64_t n : {int64_t(1), e.block_size - 1, e.block_size + 1, 3 * e.block_size / 2,
                          int64_t(2560 + 16), int64_t(151935)}) {
            if (n % e.block_size == 0) continue;
            EXPECT_THROW(row_size(e.type, n), JllmError) << n;
        }
    }
    try {
        row_size(GgmlType::Q4_K, 100);
        FAIL() << "no exception";
    } catch (const JllmError& err) {
        // The message names the actual size, the type and the expected block size.
        const std::string msg = err.what();
        EXPECT_NE(msg.find("100"), std::string::npos) << msg;
        EXPECT_NE(msg.find("Q4_K"), std::string::npos) << msg;
        EXPECT_NE(msg.find("256"), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace jllm
