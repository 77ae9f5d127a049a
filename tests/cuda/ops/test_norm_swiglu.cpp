// tests/cuda/ops/test_norm_swiglu.cpp — RMSNorm (with its fp16 copy for the GEMM, and in place)
// against rmsnorm_ref, and the elementwise SwiGLU (and in place) against swiglu_ref. Outputs are
// poisoned before each launch.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace jllm::test {
namespace {

// ---- error bounds (every tolerance of this file's tests)
// RMSNorm: |gpu - ref| <= 1e-5 * |ref| + 1e-6 (fp32 vs fp64 sum of squares); its fp16 copy bit
// for bit as the GEMM's input conversion rounds the fp32 output.
constexpr double RMSNORM_REL = 1e-5;
constexpr double RMSNORM_ABS = 1e-6;
// SwiGLU: 1e-6 relative to 1 + |ref| (expf vs std::exp).
constexpr double SWIGLU_REL = 1e-6;

TEST(CudaOps, RmsNorm) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(7);
    for (int64_t n : {1, 31, 257, 1000, 4096}) {
        for (int rows : {1, 5}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows));
            const auto [x, w, ref] = rmsnorm_case(n, rows, rng);
            DevBuf<float> dx(x), dw(w), dy(x.size());
            DevBuf<uint16_t> dh(x.size());
            dy.poison();
            cuda::launch_rmsnorm(dx.get(), dw.get(), dy.get(), dh.get(), rows, n, 1e-6f, nullptr);
            std::vector<float> got = dy.download();
            for (size_t i = 0; i < ref.size(); ++i) {
                ASSERT_NEAR(got[i], ref[i], RMSNORM_REL * std::fabs(ref[i]) + RMSNORM_ABS) << i;
            }
            // the fp16 copy: each value as the GEMM's input conversion rounds it, bit for bit
            const std::vector<uint16_t> h = dh.download();
            for (size_t i = 0; i < got.size(); ++i) {
                const float want = cuda::round_f16_sat(got[i]), have = fp16_to_f32(h[i]);
                ASSERT_EQ(std::memcmp(&want, &have, sizeof(float)), 0) << i << ": " << have << " vs " << want;
            }
            // in place (y aliases x), no fp16 copy
            cuda::launch_rmsnorm(dx.get(), dw.get(), dx.get(), nullptr, rows, n, 1e-6f, nullptr);
            got = dx.download();
            for (size_t i = 0; i < ref.size(); ++i) {
                ASSERT_NEAR(got[i], ref[i], RMSNORM_REL * std::fabs(ref[i]) + RMSNORM_ABS) << i;
            }
        }
    }
}

TEST(CudaOps, SwiGluElementwise) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(3);
    for (int64_t n : {1, 255, 256, 1000, 70001}) {
        const std::vector<float> g = randn(static_cast<size_t>(n), rng, 4.0f), u = randn(static_cast<size_t>(n), rng);
        std::vector<float> ref(g.size());
        cuda::swiglu_ref(g.data(), u.data(), ref.data(), n);
        DevBuf<float> dg(g), du(u), dy(g.size());
        dy.poison();
        cuda::launch_swiglu(dg.get(), du.get(), dy.get(), n, nullptr);
        std::vector<float> got = dy.download();
        for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_NEAR(got[i], ref[i], SWIGLU_REL * (1.0 + std::fabs(ref[i]))) << i;
        }
        cuda::launch_swiglu(dg.get(), du.get(), dg.get(), n, nullptr);  // in place, as the backend runs it
        got = dg.download();
        for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_NEAR(got[i], ref[i], SWIGLU_REL * (1.0 + std::fabs(ref[i]))) << i;
        }
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
