// tests/unit/cpu_attn/test_rope.cpp — RoPE with angles computed once per position
// (rope_angles + rope_apply_cs, what the CPU forward pass uses) against the one-call
// rotation rope_apply_ref, bit for bit, both pair styles.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/rope.h"

using namespace jllm;

TEST(Rope, SharedAnglesGiveTheReferenceRotationBitForBit) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (int64_t n_rot : {2, 64, 128}) {
        std::vector<float> inv(static_cast<size_t>(n_rot / 2));
        for (int64_t i = 0; i < n_rot / 2; ++i) inv[static_cast<size_t>(i)] = std::pow(1e6f, -2.0f * i / n_rot);
        for (RopeStyle style : {RopeStyle::Normal, RopeStyle::NeoX}) {
            for (int64_t pos : {0, 1, 17, 4095, 40000}) {
                std::vector<float> cs(static_cast<size_t>(n_rot));
                rope_angles(n_rot, inv.data(), pos, cs.data());
                std::vector<float> a(static_cast<size_t>(n_rot + 3)), b;
                for (float& v : a) v = nd(rng);
                b = a;
                rope_apply_ref(a.data(), n_rot, style, inv.data(), pos);
                rope_apply_cs(b.data(), n_rot, style, cs.data());
                EXPECT_EQ(a, b) << "n_rot=" << n_rot << " pos=" << pos;
            }
        }
    }
}
