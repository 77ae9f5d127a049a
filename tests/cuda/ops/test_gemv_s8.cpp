// tests/cuda/ops/test_gemv_s8.cpp — the decode GEMV on int8 tensor cores (tiled Q4_K on act_q8k,
// launch_gemv_s8): against its twin gemv_s8_ref bit for bit (Store, Add; SwiGLU up to the device's
// exponential) for every token count 1..8 and several column splits, rows that end in half a
// warp's tile pair, Q/K/V segments in one grid; every row of an n-token product equal to the
// one-token product of its token; the SwiGLU product's 8-bit copy by halves; the twin itself, on the
// host, against gemm_s8_ref and the unsplit sums; the kernel's lane pieces on the host around an
// emulated mma against the twin.
// Outputs are poisoned before each launch.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace jllm::test {
namespace {

using cuda::MatOut;

// ---- error bounds (every tolerance of this file's tests)
// Store and Add: the twin's order exactly, so bit for bit. SwiGLU: silu(g) * u with the device's
// expf against the host's, g and u bit for bit: relative (|silu'| < 1.1 carries an ulp or two).
constexpr double SWIGLU_REL = 2e-6;
// The twin split over k parts against the twin unsplit: the parts' fp32 sums added in another
// order, within SPLIT_REL of the sum of the 256-column terms' magnitudes.
constexpr double SPLIT_REL = 4e-6;

const char* mode_name(MatOut m) { return m == MatOut::Store ? "store" : (m == MatOut::Add ? "add" : "swiglu"); }

// The twin with k_split 1 is gemm_s8_ref, bit for bit; split into parts it stays within SPLIT_REL
// of the terms' magnitudes (no GPU needed).
TEST(CudaOps, GemvS8TwinSplitsOnHost) {
    std::mt19937 rng(9101);
    const int64_t rows = 40, cols = 2560;
    const int n_tok = 3;
    const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, rows, cols, rng);
    const std::vector<float> x = batch_activations(n_tok, cols, rng);
    std::vector<uint8_t> xq(cuda::act_q8k_bytes(n_tok, cols));
    cuda::quantize_q8k_ref(x.data(), n_tok, cols, xq.data());
    const size_t n = static_cast<size_t>(rows) * n_tok;
    std::vector<float> want(n), mag(n), got(n);
    cuda::gemm_s8_ref(w.data(), nullptr, rows, cols, xq.data(), n_tok, want.data(), MatOut::Store, mag.data());
    cuda::gemv_s8_ref(w.data(), nullptr, rows, cols, xq.data(), n_tok, 1, got.data(), MatOut::Store);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0);
    bool differs = false;
    for (int k_split : {2, 3, 10}) {
        cuda::gemv_s8_ref(w.data(), nullptr, rows, cols, xq.data(), n_tok, k_split, got.data(), MatOut::Store);
        for (size_t i = 0; i < n; ++i) {
            ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), SPLIT_REL * mag[i])
                << "k_split " << k_split << " y " << i;
            differs = differs || got[i] != want[i];
        }
    }
    EXPECT_TRUE(differs) << "a split that never changes a rounding does not test the order";
}

// The kernel's lanes run on the host (gemv_s8_lanes_host: its own pieces around an emulated mma)
// against the twin, bit for bit: the fragment layout, the order of k, the high nibbles at 16 times
// the code, the scales and the split as the kernel takes them (no GPU needed).
TEST(CudaOps, GemvS8LanesOnHost) {
    std::mt19937 rng(9105);
    const cuda::WeightFormat fmt(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    const int64_t rows = 40, cols = 768;  // two 16-row groups and a half one
    const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, rows, cols, rng);
    const std::vector<uint8_t> tiles = device_bytes(GgmlType::Q4_K, fmt.layout, w, rows, cols);
    for (int n_tok : {1, 3, 8}) {
        for (int k_split : {1, 2}) {
            const std::vector<float> x = batch_activations(n_tok, cols, rng);
            std::vector<uint8_t> xq(cuda::act_q8k_bytes(n_tok, cols));
            cuda::quantize_q8k_ref(x.data(), n_tok, cols, xq.data());
            std::vector<float> want(static_cast<size_t>(rows) * n_tok), got(want.size(), NAN);
            cuda::gemv_s8_ref(w.data(), nullptr, rows, cols, xq.data(), n_tok, k_split, want.data(), MatOut::Store);
            cuda::gemv_s8_lanes_host(tiles.data(), rows, cols, xq.data(), n_tok, k_split, got.data());
            ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
                << "n_tok " << n_tok << " k_split " << k_split;
        }
    }
}

struct Case {
    int64_t rows, cols;
    MatOut out;
    int k_split;  // 0: gemv_s8_split's
};

// One product on the device from the act_q8k buffer xq: y poisoned, or holding init for Add.
std::vector<float> run_gemv(const Case& c, int k_split, int n_tok, const DevBuf<uint8_t>& dw,
                            const DevBuf<uint8_t>* dw2, const DevBuf<uint8_t>& xq, const std::vector<float>& init) {
    DevBuf<float> dy(static_cast<size_t>(c.rows) * n_tok);
    if (c.out == MatOut::Add) dy.upload(init);
    else dy.poison();
    cuda::launch_gemv_s8(dw.get(), dw2 != nullptr ? dw2->get() : nullptr, c.rows, c.cols, xq.get(), n_tok, k_split,
                         dy.get(), c.out, nullptr);
    return dy.download();
}

// x -> act_q8k on the device.
std::unique_ptr<DevBuf<uint8_t>> quantized(const std::vector<float>& x, int n_tok, int64_t cols) {
    DevBuf<float> dx(x);
    DevBuf<uint16_t> dxh(x.size());
    auto xq = std::make_unique<DevBuf<uint8_t>>(cuda::act_q8k_bytes(n_tok, cols));
    xq->poison(0xA5);
    cuda::launch_to_f16_q8k(dx.get(), n_tok, cols, dxh.get(), xq->get(), nullptr);
    return xq;
}

// Every token count against the twin: Store and Add bit for bit, SwiGLU within SWIGLU_REL.
TEST(CudaOps, GemvS8AsTheTwin) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9102);
    const cuda::WeightFormat fmt(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    const Case cases[] = {
        {24, 256, MatOut::Store, 1},    {200, 768, MatOut::Add, 0},     {64, 2560, MatOut::Store, 0},
        {136, 2560, MatOut::Store, 3},  {72, 4096, MatOut::Add, 16},    {40, 1024, MatOut::SwiGLU, 0},
        {136, 2560, MatOut::SwiGLU, 7},
    };
    for (const Case& c : cases) {
        const int k_split = c.k_split > 0 ? c.k_split : cuda::gemv_s8_split(c.cols);
        const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        const std::vector<uint8_t> w2 = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        DevBuf<uint8_t> dw(device_bytes(GgmlType::Q4_K, fmt.layout, w, c.rows, c.cols));
        DevBuf<uint8_t> dw2(device_bytes(GgmlType::Q4_K, fmt.layout, w2, c.rows, c.cols));
        for (int n_tok = 1; n_tok <= cuda::GEMV_S8_MAX_TOKENS; ++n_tok) {
            SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + mode_name(c.out) + " k_split " +
                         std::to_string(k_split) + " n_tok " + std::to_string(n_tok));
            const std::vector<float> x = batch_activations(n_tok, c.cols, rng);
            const std::vector<float> init = randn(static_cast<size_t>(c.rows) * n_tok, rng);
            const auto xq = quantized(x, n_tok, c.cols);
            const std::vector<float> got = run_gemv(c, k_split, n_tok, dw, &dw2, *xq, init);
            std::vector<uint8_t> hq(xq->size());
            cuda::quantize_q8k_ref(x.data(), n_tok, c.cols, hq.data());
            std::vector<float> ref = init;
            cuda::gemv_s8_ref(w.data(), w2.data(), c.rows, c.cols, hq.data(), n_tok, k_split, ref.data(), c.out);
            int bad = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                const bool ok = c.out == MatOut::SwiGLU
                                    ? std::fabs(static_cast<double>(got[i]) - ref[i]) <= SWIGLU_REL * std::fabs(ref[i])
                                    : std::memcmp(&got[i], &ref[i], sizeof(float)) == 0;
                if (!ok && ++bad <= 5) {
                    ADD_FAILURE() << "y[" << i / c.rows << "][" << i % c.rows << "] = " << got[i] << ", ref " << ref[i];
                }
            }
            ASSERT_EQ(bad, 0);
        }
    }
}

// Row t of an n-token product is the one-token product of token t, bit for bit (SwiGLU included):
// what lets a verification of up to 8 drafted tokens reproduce the plain decode's steps.
TEST(CudaOps, GemvS8RowsAreOneTokenProducts) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9103);
    const cuda::WeightFormat fmt(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    for (MatOut out : {MatOut::Store, MatOut::SwiGLU}) {
        const Case c = {144, 2560, out, 0};
        const int k_split = cuda::gemv_s8_split(c.cols);
        SCOPED_TRACE(mode_name(out));
        const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        const std::vector<uint8_t> w2 = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        DevBuf<uint8_t> dw(device_bytes(GgmlType::Q4_K, fmt.layout, w, c.rows, c.cols));
        DevBuf<uint8_t> dw2(device_bytes(GgmlType::Q4_K, fmt.layout, w2, c.rows, c.cols));
        const int n_max = cuda::GEMV_S8_MAX_TOKENS;
        const std::vector<float> x = batch_activations(n_max, c.cols, rng);
        std::vector<std::vector<float>> one(n_max);
        for (int t = 0; t < n_max; ++t) {
            const std::vector<float> xt(x.begin() + t * c.cols, x.begin() + (t + 1) * c.cols);
            one[static_cast<size_t>(t)] = run_gemv(c, k_split, 1, dw, &dw2, *quantized(xt, 1, c.cols), {});
        }
        for (int n_tok = 2; n_tok <= n_max; ++n_tok) {
            const std::vector<float> xn(x.begin(), x.begin() + n_tok * c.cols);
            const std::vector<float> got = run_gemv(c, k_split, n_tok, dw, &dw2, *quantized(xn, n_tok, c.cols), {});
            for (int t = 0; t < n_tok; ++t) {
                const float* want = one[static_cast<size_t>(t)].data();
                ASSERT_EQ(std::memcmp(got.data() + t * c.rows, want, c.rows * sizeof(float)), 0)
                    << "n_tok " << n_tok << " token " << t;
            }
        }
    }
}

// The SwiGLU product's 8-bit copy by halves (W_down's dp4a input): for every token count, y the
// same bits as without the copy, and the copy exactly quantize_act_ref(y, .., halves) of that y.
TEST(CudaOps, GemvS8SwiGLUWritesEightBitHalves) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9106);
    const cuda::WeightFormat fmt(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    for (const Case& c : {Case{96, 2560, MatOut::SwiGLU, 0}, Case{512, 256, MatOut::SwiGLU, 0}}) {
        const int k_split = cuda::gemv_s8_split(c.cols);
        const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        const std::vector<uint8_t> w2 = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        DevBuf<uint8_t> dw(device_bytes(GgmlType::Q4_K, fmt.layout, w, c.rows, c.cols));
        DevBuf<uint8_t> dw2(device_bytes(GgmlType::Q4_K, fmt.layout, w2, c.rows, c.cols));
        for (int n_tok = 1; n_tok <= cuda::GEMV_S8_MAX_TOKENS; ++n_tok) {
            SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n_tok " + std::to_string(n_tok));
            const auto xq = quantized(batch_activations(n_tok, c.cols, rng), n_tok, c.cols);
            const std::vector<float> plain = run_gemv(c, k_split, n_tok, dw, &dw2, *xq, {});
            DevBuf<float> dy(plain.size());
            DevBuf<uint8_t> dq(cuda::act_q8_bytes(n_tok, c.rows));
            dy.poison();
            dq.poison();
            cuda::launch_gemv_s8(dw.get(), dw2.get(), c.rows, c.cols, xq->get(), n_tok, k_split, dy.get(), c.out,
                                 nullptr, dq.get());
            const std::vector<float> y = dy.download();
            ASSERT_EQ(std::memcmp(y.data(), plain.data(), y.size() * sizeof(float)), 0);
            std::vector<uint8_t> want(dq.size(), 0);
            cuda::quantize_act_ref(y.data(), n_tok, c.rows, want.data(), true);
            const std::vector<uint8_t> got = dq.download();
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
        }
    }
}

// Q/K/V in one grid (launch_gemv_s8_multi): each segment as the twin, bit for bit, for 1 and 8
// tokens; segments whose rows end in half a tile pair.
TEST(CudaOps, GemvS8MultiSegments) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9104);
    const int64_t rows[3] = {136, 40, 24}, cols = 2048;
    const cuda::WeightFormat fmt(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    const int k_split = cuda::gemv_s8_split(cols);
    std::vector<std::vector<uint8_t>> w;
    std::vector<std::unique_ptr<DevBuf<uint8_t>>> dw;
    const void* wp[3];
    for (int s = 0; s < 3; ++s) {
        w.push_back(random_matrix(GgmlType::Q4_K, rows[s], cols, rng));
        dw.push_back(
            std::make_unique<DevBuf<uint8_t>>(device_bytes(GgmlType::Q4_K, fmt.layout, w.back(), rows[s], cols)));
        wp[s] = dw.back()->get();
    }
    for (int n_tok : {1, 8}) {
        const std::vector<float> x = batch_activations(n_tok, cols, rng);
        const auto xq = quantized(x, n_tok, cols);
        std::vector<uint8_t> hq(xq->size());
        cuda::quantize_q8k_ref(x.data(), n_tok, cols, hq.data());
        std::vector<std::unique_ptr<DevBuf<float>>> dy;
        float* yp[3];
        for (int s = 0; s < 3; ++s) {
            dy.push_back(std::make_unique<DevBuf<float>>(static_cast<size_t>(rows[s]) * n_tok));
            dy.back()->poison();
            yp[s] = dy.back()->get();
        }
        cuda::launch_gemv_s8_multi(3, wp, nullptr, rows, cols, xq->get(), n_tok, k_split, yp, MatOut::Store, nullptr);
        for (int s = 0; s < 3; ++s) {
            std::vector<float> ref(static_cast<size_t>(rows[s]) * n_tok);
            cuda::gemv_s8_ref(w[static_cast<size_t>(s)].data(), nullptr, rows[s], cols, hq.data(), n_tok, k_split,
                              ref.data(), MatOut::Store);
            const std::vector<float> got = dy[static_cast<size_t>(s)]->download();
            ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0)
                << "n_tok " << n_tok << " segment " << s;
        }
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
