// tests/cuda/ops/test_gemm_s8.cpp — the int8 prefill GEMM (tiled Q4_K, gemm_takes_s8) and its input:
// the act_q8k quantizer against its twin, the product against gemm_s8_ref (bit for bit without
// split-K) and against the exact product of the dequantized weights (the activations' rounding
// bound), every output mode, token chunks, partial row blocks, Q/K/V segments. Outputs are
// poisoned before each launch.
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
// Without split-K: the twin's order exactly, so bit for bit (Store, Add). With split-K the parts'
// fp32 sums are added in order: within SPLIT_REL of the sum of the 256-column terms' magnitudes
// (abs_sum; a few fp32 roundings of at most that size each).
constexpr double SPLIT_REL = 4e-6;
// SwiGLU: silu(g) * u with the device's expf against the host's: relative, on top of the above
// carried through silu (|silu'| < 1.1).
constexpr double SWIGLU_REL = 2e-6;
// Against the exact product (fp64, the file's dequantized weights, x rounded to fp16): each
// activation moves by at most d / 2 of its 256-value block (round to nearest), so
// |y - exact| <= sum_b d_b / 2 * sum_{k in b} |w_k| (times EXACT_SLACK), plus EXACT_REL of
// sum |w x| for the fp32 steps and the reference's own fp32 dequantization.
constexpr double EXACT_SLACK = 1.001;
constexpr double EXACT_REL = 1e-5;

// The exact product (fp64: the file's dequantized weights, x rounded to fp16) of row r, token t, and
// the activations' rounding bound around it (EXACT_SLACK, EXACT_REL) from xq's block scales.
struct Exact {
    double y, bound;
};
Exact exact_product(const std::vector<uint8_t>& w, const std::vector<float>& x, const std::vector<uint8_t>& xq,
                    int n_tok, int64_t cols, int64_t r, int t) {
    const size_t rb = row_size(GgmlType::Q4_K, cols);
    const std::vector<float> wr = dequantize(GgmlType::Q4_K, w.data() + r * rb, cols);
    const size_t recs = cuda::act_q8k_records_at(n_tok, cols);
    double exact = 0.0, mag = 0.0, bound = 0.0;
    for (int64_t b = 0; b < cols / 256; ++b) {
        float d;
        std::memcpy(&d, xq.data() + recs + (static_cast<size_t>(t) * (cols / 256) + b) * 48 + 32, sizeof d);
        double wabs = 0.0;
        for (int64_t k = 256 * b; k < 256 * b + 256; ++k) {
            const double xv = cuda::round_f16_sat(x[static_cast<size_t>(t * cols + k)]);
            exact += wr[k] * xv;
            mag += std::fabs(wr[k] * xv);
            wabs += std::fabs(wr[k]);
        }
        bound += 0.5 * d * wabs;
    }
    return {exact, EXACT_SLACK * bound + EXACT_REL * mag};
}

// The twin alone (no GPU): quantize_q8k_ref and gemm_s8_ref within the activations' rounding of
// the exact product, so the twin reads Q4_K's layout and act_q8k as they are.
TEST(CudaOps, GemmS8TwinWithinTheActivationRoundingOnHost) {
    std::mt19937 rng(9005);
    const int64_t rows = 24, cols = 768;
    const int n_tok = 6;
    const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, rows, cols, rng);
    const std::vector<float> x = batch_activations(n_tok, cols, rng);
    std::vector<uint8_t> xq(cuda::act_q8k_bytes(n_tok, cols));
    cuda::quantize_q8k_ref(x.data(), n_tok, cols, xq.data());
    std::vector<float> y(static_cast<size_t>(rows) * n_tok);
    cuda::gemm_s8_ref(w.data(), nullptr, rows, cols, xq.data(), n_tok, y.data(), MatOut::Store);
    for (int64_t r = 0; r < rows; ++r) {
        for (int t = 0; t < n_tok; ++t) {
            const Exact e = exact_product(w, x, xq, n_tok, cols, r, t);
            const double got = y[static_cast<size_t>(t) * rows + r];
            ASSERT_LE(std::fabs(got - e.y), e.bound) << "y[" << t << "][" << r << "] = " << got << ", exact " << e.y;
        }
    }
}

// x -> fp16 -> act_q8k on the device.
std::vector<uint8_t> quantize_on_device(const std::vector<float>& x, int n_tok, int64_t cols, DevBuf<uint8_t>& xq) {
    DevBuf<float> dx(x);
    DevBuf<uint16_t> dxh(x.size());
    cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
    xq.poison(0xA5);
    cuda::launch_quantize_q8k(dxh.get(), n_tok, cols, xq.get(), nullptr);
    return xq.download();
}

// Two act_q8k buffers of n_tok x cols: the int8 values and the records byte for byte (the padding
// between them is not written).
void expect_same_q8k(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int n_tok, int64_t cols) {
    ASSERT_EQ(got.size(), want.size());
    const size_t used = cuda::act_q8k_records_at(n_tok, cols);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), static_cast<size_t>(n_tok) * cols), 0) << "q";
    ASSERT_EQ(std::memcmp(got.data() + used, want.data() + used, got.size() - used), 0) << "records";
}

// The quantizer against its twin, byte for byte: normal rows with outliers, an all-zero block,
// values past fp16's range (saturated first), a block of one sign, a block at the clamp.
TEST(CudaOps, QuantizeQ8kAsTheTwin) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9001);
    const int n_tok = 7;
    const int64_t cols = 1024;
    std::vector<float> x = batch_activations(n_tok, cols, rng);
    for (int i = 0; i < 256; ++i) x[static_cast<size_t>(cols + i)] = 0.0f;                    // token 1, block 0
    for (int i = 0; i < 256; ++i) x[static_cast<size_t>(2 * cols + 256 + i)] = 3.0f + 0.01f * i;  // one sign
    x[static_cast<size_t>(3 * cols + 5)] = 1e6f;                                               // saturates at 65504
    x[static_cast<size_t>(3 * cols + 6)] = -70000.0f;
    for (int i = 0; i < 256; ++i) x[static_cast<size_t>(4 * cols + 512 + i)] = (i % 2 ? 1.0f : -1.0f) * 0.5f;
    DevBuf<uint8_t> xq(cuda::act_q8k_bytes(n_tok, cols));
    const std::vector<uint8_t> got = quantize_on_device(x, n_tok, cols, xq);
    std::vector<uint8_t> want(got.size(), 0xA5);
    cuda::quantize_q8k_ref(x.data(), n_tok, cols, want.data());
    ASSERT_NO_FATAL_FAILURE(expect_same_q8k(got, want, n_tok, cols));
    const size_t used = cuda::act_q8k_records_at(n_tok, cols);
    // The records' sums are the quants' (S_j = 64 hi + lo, 0 <= lo < 64) and the zero block has d = 0.
    const int8_t* q = reinterpret_cast<const int8_t*>(got.data());
    for (int64_t b = 0; b < n_tok * (cols / 256); ++b) {
        const uint8_t* r = got.data() + used + b * 48;
        for (int j = 0; j < 8; ++j) {
            int s = 0;
            for (int k = 0; k < 32; ++k) s += q[b * 256 + 32 * j + k];
            const Half* h = reinterpret_cast<const Half*>(r);
            const float hi = to_f32(h[4 * (j / 2) + j % 2]), lo = to_f32(h[4 * (j / 2) + 2 + j % 2]);
            ASSERT_GE(lo, 0.0f);
            ASSERT_LT(lo, 64.0f);
            ASSERT_EQ(64.0f * hi + lo, static_cast<float>(s)) << "block " << b << " sub-block " << j;
        }
    }
    float d_zero;
    std::memcpy(&d_zero, got.data() + used + (cols / 256) * 48 + 32, sizeof d_zero);
    EXPECT_EQ(d_zero, 0.0f);
}

// The kernels that write the int8 GEMM's input beside its fp16 input, byte for byte as the two
// launches they replace: launch_to_f16_q8k as launch_to_f16 then launch_quantize_q8k, and the
// prefill RMSNorm's act_q8k copy as launch_quantize_q8k of its own fp16 output, with the fp32 and
// fp16 outputs unchanged (in place too: y aliasing x, as the engine's norms run).
TEST(CudaOps, Q8kWrittenWithTheF16Input) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9013);
    const int n_tok = 5;
    const int64_t cols = 1536;
    std::vector<float> x = batch_activations(n_tok, cols, rng);
    x[static_cast<size_t>(cols + 9)] = 1e6f;  // saturates at 65504
    for (int i = 0; i < 256; ++i) x[static_cast<size_t>(2 * cols + 512 + i)] = 0.0f;
    const size_t q8_bytes = cuda::act_q8k_bytes(n_tok, cols);
    {
        SCOPED_TRACE("to_f16_q8k");
        DevBuf<uint8_t> xq(q8_bytes);
        const std::vector<uint8_t> want = quantize_on_device(x, n_tok, cols, xq);
        DevBuf<float> dx(x);
        DevBuf<uint16_t> dxh(x.size()), dxh2(x.size());
        cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh2.get(), nullptr);
        xq.poison(0x5A);
        dxh.poison();
        cuda::launch_to_f16_q8k(dx.get(), n_tok, cols, dxh.get(), xq.get(), nullptr);
        ASSERT_EQ(dxh.download(), dxh2.download());
        ASSERT_NO_FATAL_FAILURE(expect_same_q8k(xq.download(), want, n_tok, cols));
    }
    const std::vector<float> w = random_activations(cols, rng);
    for (bool in_place : {false, true}) {
        SCOPED_TRACE(in_place ? "rmsnorm in place" : "rmsnorm");
        DevBuf<float> dx(x), dw(w), dy(x.size()), dx2(x), dy2(x.size());
        DevBuf<uint16_t> dyh(x.size()), dyh2(x.size());
        DevBuf<uint8_t> xq(q8_bytes), xq2(q8_bytes);
        dy.poison();
        dyh.poison();
        xq.poison(0x5A);
        xq2.poison(0x5A);
        float* y = in_place ? dx.get() : dy.get();
        float* y2 = in_place ? dx2.get() : dy2.get();
        cuda::launch_rmsnorm(dx.get(), dw.get(), y, dyh.get(), n_tok, cols, 1e-6f, nullptr, xq.get());
        cuda::launch_rmsnorm(dx2.get(), dw.get(), y2, dyh2.get(), n_tok, cols, 1e-6f, nullptr);
        cuda::launch_quantize_q8k(dyh2.get(), n_tok, cols, xq2.get(), nullptr);
        ASSERT_EQ((in_place ? dx : dy).download(), (in_place ? dx2 : dy2).download());
        ASSERT_EQ(dyh.download(), dyh2.download());
        ASSERT_NO_FATAL_FAILURE(expect_same_q8k(xq.download(), xq2.download(), n_tok, cols));
    }
}

struct S8Case {
    int64_t rows, cols;
    int n_tok;
    MatOut out;
    bool split;
};

// One product on the device: y (poisoned, or holding `init` for Add).
std::vector<float> run_s8(const S8Case& c, const std::vector<uint8_t>& w, const std::vector<uint8_t>& w2,
                          const DevBuf<uint8_t>& xq, const DevBuf<uint16_t>& xh, const std::vector<float>& init) {
    const cuda::WeightFormat fmt(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    DevBuf<uint8_t> dw(device_bytes(GgmlType::Q4_K, fmt.layout, w, c.rows, c.cols));
    std::unique_ptr<DevBuf<uint8_t>> dw2;
    if (c.out == MatOut::SwiGLU) dw2 = std::make_unique<DevBuf<uint8_t>>(device_bytes(GgmlType::Q4_K, fmt.layout, w2, c.rows, c.cols));
    DevBuf<float> dy(static_cast<size_t>(c.rows) * c.n_tok);
    if (c.out == MatOut::Add) dy.upload(init);
    else dy.poison();
    const size_t wf = cuda::gemm_work_floats(c.n_tok, c.rows) * 2;
    DevBuf<float> work(c.split ? wf : 1);
    work.poison();
    cuda::launch_gemm(fmt, dw.get(), dw2 ? dw2->get() : nullptr, c.rows, c.cols, xh.get(), c.n_tok, dy.get(), c.out,
                      nullptr, c.split ? work.get() : nullptr, c.split ? wf : 0, xq.get());
    return dy.download();
}

// The product against its twin: bit for bit without split-K (Store, Add), within SPLIT_REL of the
// terms' magnitudes with it; SwiGLU within SWIGLU_REL. Rows that end in half a warp's tile pair (72,
// 200), one to three token chunks, a chunk of an odd number of n8 tiles.
TEST(CudaOps, GemmS8AsTheTwin) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9002);
    const S8Case cases[] = {
        {72, 512, 5, MatOut::Store, false},   {136, 2048, 33, MatOut::Store, false},
        {200, 768, 64, MatOut::Add, false},   {136, 1024, 65, MatOut::Store, false},
        {72, 512, 130, MatOut::Add, false},   {136, 2048, 33, MatOut::Store, true},
        {200, 2560, 40, MatOut::Add, true},   {72, 1024, 24, MatOut::SwiGLU, false},
        {136, 2048, 70, MatOut::SwiGLU, true}, {256, 256, 9, MatOut::Store, true},
    };
    for (const S8Case& c : cases) {
        const char* mode = c.out == MatOut::Store ? "store" : (c.out == MatOut::Add ? "add" : "swiglu");
        SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " n_tok " + std::to_string(c.n_tok) +
                     " " + mode + (c.split ? " split" : ""));
        const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        const std::vector<uint8_t> w2 = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
        const std::vector<float> x = batch_activations(c.n_tok, c.cols, rng);
        const std::vector<float> init = randn(static_cast<size_t>(c.rows) * c.n_tok, rng);
        DevBuf<float> dx(x);
        DevBuf<uint16_t> dxh(x.size());
        cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
        DevBuf<uint8_t> xq(cuda::act_q8k_bytes(c.n_tok, c.cols));
        cuda::launch_quantize_q8k(dxh.get(), c.n_tok, c.cols, xq.get(), nullptr);
        std::vector<uint8_t> hq(xq.size());
        cuda::quantize_q8k_ref(x.data(), c.n_tok, c.cols, hq.data());
        const std::vector<float> got = run_s8(c, w, w2, xq, dxh, init);

        const size_t n = static_cast<size_t>(c.rows) * c.n_tok;
        std::vector<float> ref = init, mag(n), g(n), u(n), mag_u(n);
        if (c.out == MatOut::SwiGLU) {
            cuda::gemm_s8_ref(w.data(), nullptr, c.rows, c.cols, hq.data(), c.n_tok, g.data(), MatOut::Store, mag.data());
            cuda::gemm_s8_ref(w2.data(), nullptr, c.rows, c.cols, hq.data(), c.n_tok, u.data(), MatOut::Store, mag_u.data());
        }
        cuda::gemm_s8_ref(w.data(), w2.data(), c.rows, c.cols, hq.data(), c.n_tok, ref.data(), c.out,
                          c.out == MatOut::SwiGLU ? nullptr : mag.data());
        int bad = 0;
        for (size_t i = 0; i < n; ++i) {
            bool ok;
            if (c.out == MatOut::SwiGLU) {
                const double sg = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
                const double tol = SWIGLU_REL * std::fabs(ref[i]) +
                                   (c.split ? SPLIT_REL * (1.1 * std::fabs(u[i]) * mag[i] + std::fabs(sg) * mag_u[i]) : 0.0);
                ok = std::fabs(static_cast<double>(got[i]) - ref[i]) <= tol;
            } else if (c.split) {
                ok = std::fabs(static_cast<double>(got[i]) - ref[i]) <= SPLIT_REL * (mag[i] + std::fabs(init[i]));
            } else {
                ok = std::memcmp(&got[i], &ref[i], sizeof(float)) == 0;
            }
            if (!ok && ++bad <= 5) ADD_FAILURE() << "y[" << i / c.rows << "][" << i % c.rows << "] = " << got[i] << ", ref " << ref[i];
        }
        EXPECT_EQ(bad, 0);
    }
}

// Against the exact product: the activations' rounding bound (EXACT_SLACK, EXACT_REL), so the twin
// and the kernel cannot share a wrong reading of the layout unnoticed.
TEST(CudaOps, GemmS8WithinTheActivationRounding) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9003);
    const S8Case c = {136, 2560, 48, MatOut::Store, true};
    const std::vector<uint8_t> w = random_matrix(GgmlType::Q4_K, c.rows, c.cols, rng);
    const std::vector<float> x = batch_activations(c.n_tok, c.cols, rng);
    DevBuf<float> dx(x);
    DevBuf<uint16_t> dxh(x.size());
    cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
    DevBuf<uint8_t> xq(cuda::act_q8k_bytes(c.n_tok, c.cols));
    const std::vector<uint8_t> hq = quantize_on_device(x, c.n_tok, c.cols, xq);
    const std::vector<float> got = run_s8(c, w, {}, xq, dxh, {});
    int bad = 0;
    for (int64_t r = 0; r < c.rows; ++r) {
        for (int t = 0; t < c.n_tok; ++t) {
            const Exact e = exact_product(w, x, hq, c.n_tok, c.cols, r, t);
            const double y = got[static_cast<size_t>(t) * c.rows + r];
            if (std::fabs(y - e.y) > e.bound && ++bad <= 5) {
                ADD_FAILURE() << "y[" << t << "][" << r << "] = " << y << ", exact " << e.y << ", bound " << e.bound;
            }
        }
    }
    EXPECT_EQ(bad, 0);
}

// Q/K/V in one int8 grid (launch_gemm_multi with xq8): each segment as the twin, bit for bit without
// split-K.
TEST(CudaOps, GemmS8MultiSegments) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(9004);
    const int64_t rows[3] = {136, 40, 40}, cols = 2048;
    const int n_tok = 37;
    const std::vector<float> x = batch_activations(n_tok, cols, rng);
    DevBuf<float> dx(x);
    DevBuf<uint16_t> dxh(x.size());
    cuda::launch_to_f16(dx.get(), static_cast<int64_t>(x.size()), dxh.get(), nullptr);
    DevBuf<uint8_t> xq(cuda::act_q8k_bytes(n_tok, cols));
    cuda::launch_quantize_q8k(dxh.get(), n_tok, cols, xq.get(), nullptr);
    std::vector<uint8_t> hq(xq.size());
    cuda::quantize_q8k_ref(x.data(), n_tok, cols, hq.data());
    std::vector<std::vector<uint8_t>> w;
    std::vector<std::unique_ptr<DevBuf<uint8_t>>> dw;
    std::vector<std::unique_ptr<DevBuf<float>>> dy;
    const void* wp[3];
    float* yp[3];
    const cuda::WeightFormat fmt(GgmlType::Q4_K, cuda::WeightLayout::Tiles);
    for (int s = 0; s < 3; ++s) {
        w.push_back(random_matrix(GgmlType::Q4_K, rows[s], cols, rng));
        dw.push_back(std::make_unique<DevBuf<uint8_t>>(device_bytes(GgmlType::Q4_K, fmt.layout, w.back(), rows[s], cols)));
        dy.push_back(std::make_unique<DevBuf<float>>(static_cast<size_t>(rows[s]) * n_tok));
        dy.back()->poison();
        wp[s] = dw.back()->get();
        yp[s] = dy.back()->get();
    }
    cuda::launch_gemm_multi(fmt, 3, wp, rows, cols, dxh.get(), n_tok, yp, nullptr, nullptr, 0, xq.get());
    for (int s = 0; s < 3; ++s) {
        std::vector<float> ref(static_cast<size_t>(rows[s]) * n_tok);
        cuda::gemm_s8_ref(w[static_cast<size_t>(s)].data(), nullptr, rows[s], cols, hq.data(), n_tok, ref.data(), MatOut::Store);
        const std::vector<float> got = dy[static_cast<size_t>(s)]->download();
        ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0) << "segment " << s;
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
