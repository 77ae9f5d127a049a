// tests/unit/quant/test_fp16.cpp — core/fp16.h conversions: f16 -> f32 exhaustively against an
// independent ldexp decoding, f32 -> f16 / bf16 against numpy goldens (tests/data/quant/
// round_f32.bin, written by scripts/golden/gen_quant_goldens.py), plus round-trip identities.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "test_paths.h"

namespace jllm {
namespace {

// IEEE binary16 decoded from its definition: (-1)^s * 2^(e-15) * (1 + m/1024) for normal
// numbers, (-1)^s * 2^-14 * (m/1024) for subnormals.
double half_value(uint16_t h, bool* is_nan) {
    const int s = h >> 15;
    const int e = (h >> 10) & 0x1F;
    const int m = h & 0x3FF;
    *is_nan = (e == 31 && m != 0);
    double v;
    if (e == 31) {
        v = INFINITY;
    } else if (e == 0) {
        v = std::ldexp(static_cast<double>(m), -24);
    } else {
        v = std::ldexp(1024.0 + m, e - 25);
    }
    return s ? -v : v;
}

TEST(Fp16, ToF32ExhaustiveVsLdexp) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        bool is_nan = false;
        const double want = half_value(static_cast<uint16_t>(h), &is_nan);
        const float got = fp16_to_f32(static_cast<uint16_t>(h));
        bool ok;
        if (is_nan) {
            // NaN stays NaN with its sign and its 10 payload bits in the top of the f32 mantissa.
            ok = std::isnan(got) && (std::signbit(got) == ((h & 0x8000u) != 0)) &&
                 ((f32_bits(got) >> 13 & 0x3FFu) == (h & 0x3FFu));
        } else {
            ok = (static_cast<double>(got) == want) && (std::signbit(got) == std::signbit(want));
        }
        if (!ok && ++bad <= 8) {
            ADD_FAILURE() << "fp16_to_f32(0x" << std::hex << h << ") = " << got << ", expected "
                          << want << std::dec;
        }
    }
    EXPECT_EQ(bad, 0);
}

TEST(Fp16, RoundTripHalfToFloatToHalfIsIdentity) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t back = f32_to_fp16(fp16_to_f32(static_cast<uint16_t>(h)));
        if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0) {
            // NaN: stays a NaN of the same sign (the payload may be quieted).
            EXPECT_EQ(back & 0x7C00u, 0x7C00u);
            EXPECT_NE(back & 0x3FFu, 0u);
            EXPECT_EQ(back & 0x8000u, h & 0x8000u);
        } else {
            ASSERT_EQ(back, h) << "half 0x" << std::hex << h;
        }
    }
}

TEST(Fp16, Bf16ToF32IsUpperHalf) {
    for (uint32_t b = 0; b < 65536; ++b) {
        ASSERT_EQ(f32_bits(bf16_to_f32(static_cast<uint16_t>(b))), b << 16);
        if ((b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0) continue;  // NaN: covered by goldens
        ASSERT_EQ(f32_to_bf16(bf16_to_f32(static_cast<uint16_t>(b))), b);
    }
}

struct RoundGolden {
    std::vector<uint32_t> input;
    std::vector<uint16_t> f16;
    std::vector<uint16_t> bf16;
};

RoundGolden load_round_golden() {
    RoundGolden g;
    const std::string bytes = test::read_file(test::data_dir() + "/quant/round_f32.bin");
    if (bytes.size() < 8 || bytes.compare(0, 4, "JQR1") != 0) return g;
    uint32_t n;
    std::memcpy(&n, bytes.data() + 4, 4);
    if (bytes.size() != 8 + size_t(n) * 8) return g;
    g.input.resize(n);
    g.f16.resize(n);
    g.bf16.resize(n);
    std::memcpy(g.input.data(), bytes.data() + 8, 4 * size_t(n));
    std::memcpy(g.f16.data(), bytes.data() + 8 + 4 * size_t(n), 2 * size_t(n));
    std::memcpy(g.bf16.data(), bytes.data() + 8 + 6 * size_t(n), 2 * size_t(n));
    return g;
}

bool is_f32_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

TEST(Fp16, F32ToF16VsNumpy) {
    const RoundGolden g = load_round_golden();
    ASSERT_GT(g.input.size(), 1000u) << "missing tests/data/quant/round_f32.bin";
    int bad = 0;
    for (size_t i = 0; i < g.input.size(); ++i) {
        const uint32_t in = g.input[i];
        const uint16_t got = f32_to_fp16(bits_f32(in));
        bool ok;
        if (is_f32_nan(in)) {
            // numpy keeps NaN payload bits (0x7f800001 -> 0x7c01); we return a quiet NaN, as
            // the F16C / CUDA conversions do. Only NaN-ness and sign are specified.
            ok = (got & 0x7C00u) == 0x7C00u && (got & 0x3FFu) != 0 &&
                 (got & 0x8000u) == ((in >> 16) & 0x8000u);
        } else {
            ok = got == g.f16[i];
        }
        if (!ok && ++bad <= 8) {
            ADD_FAILURE() << "f32_to_fp16(0x" << std::hex << in << ") = 0x" << got
                          << ", numpy 0x" << g.f16[i] << std::dec;
        }
    }
    EXPECT_EQ(bad, 0);
}

TEST(Fp16, F32ToBf16VsGolden) {
    const RoundGolden g = load_round_golden();
    ASSERT_GT(g.input.size(), 1000u) << "missing tests/data/quant/round_f32.bin";
    int bad = 0;
    for (size_t i = 0; i < g.input.size(); ++i) {
        const uint16_t got = f32_to_bf16(bits_f32(g.input[i]));
        if (got != g.bf16[i] && ++bad <= 8) {
            ADD_FAILURE() << "f32_to_bf16(0x" << std::hex << g.input[i] << ") = 0x" << got
                          << ", expected 0x" << g.bf16[i] << std::dec;
        }
    }
    EXPECT_EQ(bad, 0);
}

// Hand-worked edge cases, readable without the goldens.
TEST(Fp16, HandWorkedRounding) {
    EXPECT_EQ(f32_to_fp16(1.0f), 0x3C00);
    EXPECT_EQ(f32_to_fp16(65504.0f), 0x7BFF);
    EXPECT_EQ(f32_to_fp16(65519.996f), 0x7BFF);  // below the tie
    EXPECT_EQ(f32_to_fp16(65520.0f), 0x7C00);    // tie with odd 65504 rounds up to inf
    EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
    EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);         // tie to even (0)
    EXPECT_EQ(f32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);         // tie 1.5 ulp -> 2
    EXPECT_EQ(f32_to_fp16(-std::ldexp(1.0f, -26)), 0x8000);        // signed zero
    EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie, even stays
    EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie, odd rounds up
    EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);   // tie, even stays
    EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);   // tie, odd rounds up
    EXPECT_EQ(f32_to_bf16(bits_f32(0x7F7FFFFFu)), 0x7F80);         // max float -> inf
}

}  // namespace
}  // namespace jllm
