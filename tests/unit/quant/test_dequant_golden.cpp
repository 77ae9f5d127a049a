// tests/unit/quant/test_dequant_golden.cpp — every reference dequantizer against the goldens of
// scripts/golden/gen_quant_goldens.py (random blocks dequantized by the `gguf` Python package /
// numpy). Bit-exact, no ulp tolerance: every product in these formats is exact in float32 (see
// quant_ref.cpp), so the only rounding is the final add of a min, the same in numpy and here.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "quant/quant_ref.h"
#include "quant/quant_types.h"
#include "test_paths.h"

namespace jllm {
namespace {

struct DequantGolden {
    uint32_t type_id = 0;
    uint32_t n_blocks = 0;
    uint32_t block_size = 0;
    uint32_t type_size = 0;
    std::vector<uint8_t> blocks;  // [n_blocks * type_size]
    std::vector<float> expected;  // [n_blocks * block_size]
};

// Reads tests/data/quant/dequant_<name>.bin (format documented in the generator script).
bool load_golden(const std::string& name, DequantGolden* g, std::string* why) {
    const std::string path = test::data_dir() + "/quant/dequant_" + name + ".bin";
    const std::string bytes = test::read_file(path);
    if (bytes.size() < 20 || bytes.compare(0, 4, "JQD1") != 0) {
        *why = "missing or bad golden file " + path;
        return false;
    }
    uint32_t hdr[4];
    std::memcpy(hdr, bytes.data() + 4, sizeof(hdr));
    g->type_id = hdr[0];
    g->n_blocks = hdr[1];
    g->block_size = hdr[2];
    g->type_size = hdr[3];
    const size_t n_bytes = size_t(g->n_blocks) * g->type_size;
    const size_t n_vals = size_t(g->n_blocks) * g->block_size;
    if (bytes.size() != 20 + n_bytes + 4 * n_vals) {
        *why = "golden file " + path + " has the wrong size";
        return false;
    }
    g->blocks.assign(bytes.begin() + 20, bytes.begin() + 20 + static_cast<std::ptrdiff_t>(n_bytes));
    g->expected.resize(n_vals);
    std::memcpy(g->expected.data(), bytes.data() + 20 + n_bytes, 4 * n_vals);
    return true;
}

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

class DequantGoldenTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(DequantGoldenTest, BitExactVsGguf) {
    const TypeTraits& tt = type_traits(GetParam());
    DequantGolden g;
    std::string why;
    ASSERT_TRUE(load_golden(tt.name, &g, &why)) << why;
    ASSERT_EQ(g.type_id, static_cast<uint32_t>(tt.type));
    ASSERT_EQ(g.block_size, static_cast<uint32_t>(tt.block_size)) << tt.name;
    ASSERT_EQ(g.type_size, tt.type_size) << tt.name;
    ASSERT_NE(tt.to_float, nullptr);

    const int64_t n = int64_t(g.n_blocks) * g.block_size;
    std::vector<float> got(static_cast<size_t>(n), -12345.0f);
    tt.to_float(g.blocks.data(), got.data(), n);

    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float want = g.expected[static_cast<size_t>(i)];
        const float have = got[static_cast<size_t>(i)];
        if (bits_of(want) != bits_of(have)) {
            if (++mismatches <= 8) {
                ADD_FAILURE() << tt.name << " block " << i / g.block_size << " element "
                              << i % g.block_size << ": expected " << want << " (0x" << std::hex
                              << bits_of(want) << "), got " << have << " (0x" << bits_of(have)
                              << ")" << std::dec;
            }
        }
    }
    EXPECT_EQ(mismatches, 0) << tt.name << ": " << mismatches << " of " << n << " values differ";
}

// Dequantizing a row block by block gives the same values as the whole row (no state carried
// between blocks, correct pointer stepping).
TEST_P(DequantGoldenTest, BlockByBlockEqualsRow) {
    const TypeTraits& tt = type_traits(GetParam());
    DequantGolden g;
    std::string why;
    ASSERT_TRUE(load_golden(tt.name, &g, &why)) << why;
    const int64_t n = int64_t(g.n_blocks) * g.block_size;
    std::vector<float> row(static_cast<size_t>(n)), one(static_cast<size_t>(n));
    tt.to_float(g.blocks.data(), row.data(), n);
    for (uint32_t b = 0; b < g.n_blocks; ++b) {
        tt.to_float(g.blocks.data() + size_t(b) * g.type_size, one.data() + size_t(b) * g.block_size,
                    g.block_size);
    }
    EXPECT_EQ(0, std::memcmp(row.data(), one.data(), row.size() * sizeof(float))) << tt.name;
}

const GgmlType kGoldenTypes[] = {GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                                 GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1,
                                 GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                 GgmlType::Q6_K, GgmlType::Q8_K};

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantGoldenTest, ::testing::ValuesIn(kGoldenTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& p) {
                             return std::string(type_name(p.param));
                         });

// A hand-worked Q4_K block, readable without the goldens: sub-block 1 (elements 32..63) uses
// the high nibbles of qs[0..31]; scale/min 5 and 6 come from the packed 12-byte layout.
TEST(DequantHandWorked, Q4KElementOrderAndScales) {
    BlockQ4_K blk{};
    blk.d = to_half(0.5f);
    blk.dmin = to_half(0.25f);
    // scale j=1: 3, min j=1: 2 (j < 4: low 6 bits of bytes 1 and 5).
    blk.scales[1] = 3;
    blk.scales[5] = 2;
    // scale j=5: 0x25 = 37 -> low 4 bits 5 in byte 9, high 2 bits (2) in bits 6-7 of byte 1.
    // min j=5: 0x16 = 22 -> low 4 bits 6 in byte 9 high nibble, high 2 bits (1) in byte 5.
    blk.scales[1] |= static_cast<uint8_t>(2 << 6);
    blk.scales[5] |= static_cast<uint8_t>(1 << 6);
    blk.scales[9] = static_cast<uint8_t>(5 | (6 << 4));
    blk.qs[7] = 0xA0;         // element 39 (sub-block 1, high nibble) = 10, element 7 = 0
    blk.qs[32 * 2 + 7] = 0x0C;  // element 128 + 7 = 135 (chunk 2 low nibble: sub-block 4) = 12
    blk.qs[32 * 2 + 8] = 0x90;  // element 128 + 32 + 8 = 168 (chunk 2 high: sub-block 5) = 9
    float y[QK_K];
    dequantize_row_q4_k(&blk, y, QK_K);
    EXPECT_EQ(y[39], 0.5f * 3 * 10 - 0.25f * 2);   // 14.5
    EXPECT_EQ(y[7], 0.0f);                          // sub-block 0: scale 0, min 0
    EXPECT_EQ(y[33], -0.25f * 2);                   // q = 0 in sub-block 1
    EXPECT_EQ(y[168], 0.5f * 37 * 9 - 0.25f * 22);  // 161
    EXPECT_EQ(y[135], 0.0f);                        // sub-block 4: scale 0 and min 0
}

}  // namespace
}  // namespace jllm
