// tests/unit/cpu_attn/test_kv_rotation.cpp — the INT8 cache's key rotation (backend/kv_quant.h):
// the butterfly against the Hadamard matrix itself, its scale, its inverse, the dot products it
// keeps, which heads it applies to, and what it is for: a key with a few large channels (Qwen2's
// K bias) quantized per head loses far less of q . k once rotated.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/kv_quant.h"

using namespace jllm;

namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

// Dequantized INT8 copy of x (kv_quant.h's quantizer).
std::vector<float> int8_roundtrip(const std::vector<float>& x) {
    std::vector<int8_t> q(x.size());
    Half d;
    quantize_kv_int8(x.data(), static_cast<int64_t>(x.size()), q.data(), &d);
    std::vector<float> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = to_f32(d) * static_cast<float>(q[i]);
    return y;
}

}  // namespace

TEST(KvRotation, ButterflyIsTheNormalizedHadamardMatrix) {
    std::mt19937 rng(11);
    for (int n = 2; n <= 256; n *= 2) {
        const std::vector<float> x = randn(static_cast<size_t>(n), rng, 3.0f);
        std::vector<float> y = x;
        hadamard_rotate(y.data(), n);
        double amax = 0.0;
        for (float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
        for (int i = 0; i < n; ++i) {
            double want = 0.0;
            for (int j = 0; j < n; ++j) want += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[static_cast<size_t>(j)];
            want /= std::sqrt(static_cast<double>(n));
            // log2(n) float stages of sums of magnitude up to sqrt(n) amax after scaling
            EXPECT_NEAR(y[static_cast<size_t>(i)], want, 1e-6 * amax * std::sqrt(static_cast<double>(n)) * std::log2(2.0 * n))
                << "n=" << n << " i=" << i;
        }
    }
}

TEST(KvRotation, ScaleIsOneOverSqrtNFromConstants) {
    for (int m = 1; m <= 8; ++m) {
        const int64_t n = int64_t{1} << m;
        const float s = kv_rotation_scale(n);
        EXPECT_EQ(s, static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)))) << "n=" << n;
        if (m % 2 == 0) {
            EXPECT_EQ(s, std::ldexp(1.0f, -m / 2)) << "even powers are exact";
        }
    }
}

TEST(KvRotation, AppliedTwiceReturnsTheVectorAndKeepsDotProducts) {
    std::mt19937 rng(12);
    for (int n : {32, 64, 128, 256}) {
        const std::vector<float> q = randn(static_cast<size_t>(n), rng), k = randn(static_cast<size_t>(n), rng, 5.0f);
        std::vector<float> hq = q, hk = k;
        hadamard_rotate(hq.data(), n);
        hadamard_rotate(hk.data(), n);
        EXPECT_NEAR(dot(hq, hk), dot(q, k), 1e-5 * std::sqrt(dot(q, q) * dot(k, k))) << "n=" << n;
        EXPECT_NEAR(dot(hk, hk), dot(k, k), 1e-5 * dot(k, k)) << "norm kept, n=" << n;
        hadamard_rotate(hk.data(), n);
        for (int i = 0; i < n; ++i) EXPECT_NEAR(hk[static_cast<size_t>(i)], k[static_cast<size_t>(i)], 1e-5f) << "n=" << n;
    }
}

TEST(KvRotation, AppliesToInt8CachesOfPowerOfTwoHeadsOnly) {
    for (int64_t hd : {2, 32, 64, 128, 256}) {
        EXPECT_TRUE(kv_k_rotated(KvType::Int8, hd)) << hd;
        EXPECT_FALSE(kv_k_rotated(KvType::Fp16, hd)) << hd;
    }
    for (int64_t hd : {0, 1, 48, 80, 96, 160, 512}) EXPECT_FALSE(kv_k_rotated(KvType::Int8, hd)) << hd;
}

// Keys with a few channels ~10x the rest (the shape of Qwen2's K bias): per-head INT8 of the raw
// key spends its 127 steps on the outliers; rotated, the outliers' energy is spread evenly and the
// error of q . k falls (measured at head_dim 64, three channels at +12: relative RMS 0.99% raw,
// 0.53% rotated; bound: rotated below 0.63x raw).
TEST(KvRotation, OutlierKeysLoseLessOfTheScoreOnceRotated) {
    std::mt19937 rng(13);
    const int n = 64;
    double err_raw = 0.0, err_rot = 0.0, ref = 0.0;
    for (int trial = 0; trial < 400; ++trial) {
        const std::vector<float> q = randn(n, rng);
        std::vector<float> k = randn(n, rng);
        for (int c : {3, 17, 40}) k[static_cast<size_t>(c)] += 12.0f;
        const double want = dot(q, k);
        err_raw += std::pow(dot(q, int8_roundtrip(k)) - want, 2);
        std::vector<float> hq = q, hk = k;
        hadamard_rotate(hq.data(), n);
        hadamard_rotate(hk.data(), n);
        err_rot += std::pow(dot(hq, int8_roundtrip(hk)) - want, 2);
        ref += want * want;
    }
    EXPECT_LT(err_rot, 0.4 * err_raw) << "raw rel RMS " << std::sqrt(err_raw / ref) << ", rotated "
                                      << std::sqrt(err_rot / ref);
}
