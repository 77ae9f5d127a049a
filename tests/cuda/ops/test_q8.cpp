// tests/cuda/ops/test_q8.cpp — the 8-bit activation path: the int8 chunk decoders and the tiled
// GEMV's lanes on the host, activation quantization and RMSNorm + quantization bit for bit
// against the twin's quantization of the same fp32 values, and the dp4a GEMV (file rows and tiles,
// Q/K/V segments of mixed types, its 8-bit output, a product launched in two parts) against
// gemv_q8_ref. Outputs are poisoned before each launch.
#include <gtest/gtest.h>

#if JLLM_CUDA

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "op_test_util.h"

namespace jllm::test {
namespace {

using cuda::MatOut;

// ---- error bounds (every tolerance of this file's tests)
// The dp4a GEMV (on the GPU and its lanes on the host; op_test_util.h's ProductBound): as the fp32
// GEMV, 1e-4 * sum_i |w_i x_i| + 1e-6 against fp64 sums of the dequantized weights times the
// dequantized activations; the SwiGLU epilogue with silu's slope, at most 1.1.
constexpr ProductBound PRODUCT = {1e-4, 1e-6, 1.1};
// The int8 chunk decoders (host): a * q + b equals the dequantized weight w to fp32 rounding, 2e-6
// relative to |w| + |b| (b may cancel most of a * q), and 1e-30 for a zero.
constexpr float CHUNK_Q8_REL = 2e-6f;
constexpr float CHUNK_Q8_ABS = 1e-30f;
// RMSNorm + quantize, its fp32 output: |gpu - ref| <= 1e-5 * |ref| + 1e-6 (fp32 vs fp64 sum of
// squares).
constexpr double RMSNORM_REL = 1e-5;
constexpr double RMSNORM_ABS = 1e-6;
// 8-bit activations (quantize, RMSNorm + quantize, the GEMV's 8-bit y): bit-exact against the
// twin's quantization of the same fp32 values; a product in two launches: the bits of one.

const GgmlType kQ8Types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                             GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// The int8 chunk decoders (host build of the kernels' code): a * q + b reproduces quant_ref's
// dequantized value to fp32 rounding. Needs no GPU.
TEST(CudaOps, ChunkQ8DecodersMatchDequantizationOnHost) {
    std::mt19937 rng(4242);
    for (GgmlType t : kQ8Types) {
        SCOPED_TRACE(type_name(t));
        ASSERT_TRUE(cuda::gemv_q8_type_supported(t));
        const int64_t n = 768;
        for (int rep = 0; rep < 10; ++rep) {
            const std::vector<uint8_t> row = random_weight_row(t, n, rng);
            std::vector<uint64_t> aligned((row.size() + 7) / 8 + 2);
            uint8_t* r = reinterpret_cast<uint8_t*>(aligned.data());
            if (reinterpret_cast<uintptr_t>(r) % 16 != 0) r += 8;
            std::memcpy(r, row.data(), row.size());
            const std::vector<float> ref = dequantize(t, r, n);
            for (int64_t c = 0; c < n / 32; ++c) {
                int8_t q[32];
                float a[2], b[2];
                cuda::chunk_q8_host(t, r, c, q, a, b);
                for (int i = 0; i < 32; ++i) {
                    const float v = a[i / 16] * static_cast<float>(q[i]) + b[i / 16];
                    const float e = ref[c * 32 + i];
                    ASSERT_NEAR(v, e, CHUNK_Q8_REL * (std::fabs(e) + std::fabs(b[i / 16])) + CHUNK_Q8_ABS)
                        << "chunk " << c << " element " << i;
                }
            }
        }
    }
    EXPECT_FALSE(cuda::gemv_q8_type_supported(GgmlType::F16));
}

// The tiled GEMV's per-lane arithmetic (each lane's loads, columns, scales and offsets), run on
// the host over every lane, against its twin gemv_q8_ref on the file's layout, within the GPU
// tests' bound (PRODUCT). Needs no GPU.
TEST(CudaOps, GemvQ8TilesLanesOnHost) {
    std::mt19937 rng(717);
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const auto& [rows, cols, n_tok] : {std::tuple<int64_t, int64_t, int>{24, 768, 1}, {16, 2560, 3},
                                                 {8, 256, 4}, {40, 1280, 2}}) {
            SCOPED_TRACE(std::string(type_name(type)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                         " n_tok=" + std::to_string(n_tok));
            const std::vector<uint8_t> w = random_matrix(type, rows, cols, rng);
            std::vector<float> x;
            for (int t = 0; t < n_tok; ++t) {
                const std::vector<float> xt = random_activations(cols, rng);
                x.insert(x.end(), xt.begin(), xt.end());
            }
            std::vector<uint8_t> xq(cuda::act_q8_bytes(n_tok, cols));  // operator new: 16-byte aligned
            cuda::quantize_act_ref(x.data(), n_tok, cols, xq.data());
            const size_t ny = static_cast<size_t>(rows) * n_tok;
            std::vector<float> ref(ny), got(ny, NAN);
            cuda::gemv_q8_ref(type, w.data(), nullptr, rows, cols, xq.data(), n_tok, ref.data(), MatOut::Store);
            const std::vector<uint8_t> tiles = device_bytes(type, cuda::WeightLayout::Tiles, w, rows, cols);
            cuda::gemv_q8_tiled_host(type, tiles.data(), rows, cols, xq.data(), n_tok, got.data());
            const size_t rb = row_size(type, cols);
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float> wr = dequantize(type, w.data() + r * rb, cols);
                for (int t = 0; t < n_tok; ++t) {
                    double mag = 0.0;
                    for (int64_t i = 0; i < cols; ++i) mag += std::fabs(static_cast<double>(wr[i]) * x[t * cols + i]);
                    const size_t k = static_cast<size_t>(t * rows + r);
                    ASSERT_LE(std::fabs(static_cast<double>(got[k]) - ref[k]), PRODUCT.rel * mag + PRODUCT.abs)
                        << "row " << r << " token " << t;
                }
            }
        }
    }
}

TEST(CudaOps, QuantizeActivationsBitExact) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2718);
    for (auto [n_tok, cols] : {std::pair<int, int64_t>{1, 32}, {3, 2560}, {4, 9728}, {2, 96}}) {
        SCOPED_TRACE("n_tok=" + std::to_string(n_tok) + " cols=" + std::to_string(cols));
        std::vector<float> x = randn(static_cast<size_t>(n_tok) * cols, rng, 2.0f);
        if (x.size() >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
        std::vector<uint8_t> ref(cuda::act_q8_bytes(n_tok, cols), 0);
        cuda::quantize_act_ref(x.data(), n_tok, cols, ref.data());
        DevBuf<float> dx(x);
        DevBuf<uint8_t> dq(ref.size());
        dq.poison(0);
        cuda::launch_quantize_act(dx.get(), n_tok, cols, dq.get(), nullptr);
        const std::vector<uint8_t> got = dq.download();
        ASSERT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size()));
    }
}

TEST(CudaOps, RmsNormQuantized) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(8);
    for (int64_t n : {32, 2560, 4096}) {
        for (int rows : {1, 4}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " rows=" + std::to_string(rows));
            const auto [x, w, ref] = rmsnorm_case(n, rows, rng);
            DevBuf<float> dx(x), dw(w), dy(x.size());
            DevBuf<uint8_t> dq(cuda::act_q8_bytes(rows, n));
            dy.poison();
            dq.poison();
            cuda::launch_rmsnorm_q8(dx.get(), dw.get(), dy.get(), dq.get(), rows, n, 1e-6f, nullptr);
            const std::vector<float> y = dy.download();
            for (size_t i = 0; i < ref.size(); ++i) {
                ASSERT_NEAR(y[i], ref[i], RMSNORM_REL * std::fabs(ref[i]) + RMSNORM_ABS) << i;
            }
            // The 8-bit copy is exactly the quantization of the fp32 output the kernel wrote.
            std::vector<uint8_t> qref(dq.size());
            cuda::quantize_act_ref(y.data(), rows, n, qref.data());
            const std::vector<uint8_t> q = dq.download();
            ASSERT_EQ(0, std::memcmp(q.data(), qref.data(), q.size()));
            // Without the fp32 output.
            dq.poison();
            cuda::launch_rmsnorm_q8(dx.get(), dw.get(), nullptr, dq.get(), rows, n, 1e-6f, nullptr);
            ASSERT_EQ(0, std::memcmp(dq.download().data(), qref.data(), q.size()));
            if (n % 256 != 0) continue;
            // The act_q8k copy (the int8 GEMV's input), with the act_q8 one and alone: exactly
            // launch_to_f16 + launch_quantize_q8k of the fp32 output, the act_q8 bytes unchanged.
            std::vector<uint8_t> kref(cuda::act_q8k_bytes(rows, n), 0);
            cuda::quantize_q8k_ref(y.data(), rows, n, kref.data());
            DevBuf<uint8_t> dk(kref.size());
            for (bool with_q8 : {true, false}) {
                SCOPED_TRACE(with_q8 ? "act_q8k and act_q8" : "act_q8k alone");
                dk.poison();  // every byte written, the records' zero padding too
                dq.poison();
                cuda::launch_rmsnorm_q8(dx.get(), dw.get(), nullptr, with_q8 ? dq.get() : nullptr, rows, n, 1e-6f,
                                        nullptr, dk.get());
                const std::vector<uint8_t> k = dk.download();
                ASSERT_EQ(0, std::memcmp(k.data(), kref.data(), k.size()));
                if (with_q8) {
                    ASSERT_EQ(0, std::memcmp(dq.download().data(), qref.data(), q.size()));
                }
            }
        }
    }
}

// GEMV on 8-bit activations vs its twin (quant_ref weights x dequantized activations, fp64):
// within PRODUCT.rel * sum_i |w_i x_i| + PRODUCT.abs as the fp32 GEMV. quantize_out (one matrix):
// y's 8-bit copy too, which must be launch_quantize_act's of the y written, bit for bit.
// last_type: the last segment's type where it differs (one launch of mixed types). halves: the
// activations quantized by halves (each 16 values on a scale of their own; the tiled GEMV's
// input from the SwiGLU product), and y's 8-bit copy allowed to be (yq_halves).
void run_gemv_q8_case(GgmlType type, int n_seg, const int64_t* seg_rows, int64_t cols, int n_tok, MatOut out,
                      std::mt19937& rng, cuda::WeightLayout layout = cuda::WeightLayout::Rows,
                      bool quantize_out = false, std::optional<GgmlType> last_type = std::nullopt,
                      bool halves = false) {
    SCOPED_TRACE(std::string(type_name(type)) + (last_type ? std::string("+") + type_name(*last_type) : "") +
                 " cols=" + std::to_string(cols) + " n_tok=" + std::to_string(n_tok) +
                 " segs=" + std::to_string(n_seg) + " out=" + std::to_string(static_cast<int>(out)) +
                 (layout == cuda::WeightLayout::Tiles ? " tiles" : "") + (quantize_out ? " 8-bit out" : "") +
                 (halves ? " halves" : ""));
    auto seg_type = [&](int sgi) { return last_type && sgi == n_seg - 1 ? *last_type : type; };
    std::vector<float> x;
    for (int t = 0; t < n_tok; ++t) {
        const std::vector<float> xt = random_activations(cols, rng);
        x.insert(x.end(), xt.begin(), xt.end());
    }
    std::vector<uint8_t> xq(cuda::act_q8_bytes(n_tok, cols));
    cuda::quantize_act_ref(x.data(), n_tok, cols, xq.data(), halves);
    std::vector<float> xd(x.size());  // what the kernel multiplies by: each half's d times q
    {
        const int8_t* q = reinterpret_cast<const int8_t*>(xq.data());
        const float* sc = reinterpret_cast<const float*>(xq.data() + cuda::act_q8_scale_offset(n_tok, cols));
        for (size_t i = 0; i < xd.size(); ++i) xd[i] = sc[4 * (i / 32) + (i % 32 < 16 ? 0 : 2)] * static_cast<float>(q[i]);
    }
    DevBuf<uint8_t> dxq(xq);
    const size_t rb = row_size(type, cols);
    std::vector<std::vector<uint8_t>> ws, w2s;
    std::vector<std::unique_ptr<DevBuf<uint8_t>>> dws;
    std::vector<std::unique_ptr<DevBuf<float>>> dys;
    std::vector<std::vector<float>> refs, mags;
    const void* wp[3];
    float* yp[3];
    std::unique_ptr<DevBuf<uint8_t>> dw2;
    std::vector<uint8_t> w2;
    if (out == MatOut::SwiGLU) {
        w2 = random_matrix(type, seg_rows[0], cols, rng);
        dw2 = std::make_unique<DevBuf<uint8_t>>(device_bytes(type, layout, w2, seg_rows[0], cols));
    }
    for (int sgi = 0; sgi < n_seg; ++sgi) {
        const int64_t rows = seg_rows[sgi];
        const GgmlType st = seg_type(sgi);
        const size_t srb = row_size(st, cols);
        ws.push_back(random_matrix(st, rows, cols, rng));
        const size_t ny = static_cast<size_t>(rows) * n_tok;
        std::vector<float> y0 = out == MatOut::Add ? randn(ny, rng) : std::vector<float>(ny, 0.0f);
        std::vector<float> ref = y0, mag(ny);
        cuda::gemv_q8_ref(st, ws.back().data(), w2.empty() ? nullptr : w2.data(), rows, cols, xq.data(), n_tok,
                          ref.data(), out);
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> wr = dequantize(st, ws.back().data() + r * srb, cols);
            std::vector<float> wr2;
            if (out == MatOut::SwiGLU) wr2 = dequantize(type, w2.data() + r * rb, cols);
            for (int t = 0; t < n_tok; ++t) {
                double a = 0.0, a2 = 0.0, g = 0.0;
                for (int64_t i = 0; i < cols; ++i) {
                    a += std::fabs(static_cast<double>(wr[i]) * xd[t * cols + i]);
                    g += static_cast<double>(wr[i]) * xd[t * cols + i];
                    if (!wr2.empty()) a2 += std::fabs(static_cast<double>(wr2[i]) * xd[t * cols + i]);
                }
                double m = PRODUCT.rel * a + PRODUCT.abs;
                if (out == MatOut::SwiGLU) {  // silu(g) * u: both factors carry the bound
                    double u = 0.0;
                    for (int64_t i = 0; i < cols; ++i) u += static_cast<double>(wr2[i]) * xd[t * cols + i];
                    const double sg = g / (1.0 + std::exp(-g));
                    m = PRODUCT.swiglu_slope * m * (std::fabs(u) + PRODUCT.rel * a2) +
                        std::fabs(sg) * (PRODUCT.rel * a2 + PRODUCT.abs) + PRODUCT.abs;
                }
                mag[t * rows + r] = static_cast<float>(m);
            }
        }
        dws.push_back(std::make_unique<DevBuf<uint8_t>>(device_bytes(st, layout, ws.back(), rows, cols)));
        dys.push_back(std::make_unique<DevBuf<float>>(ny));
        if (out == MatOut::Add) dys.back()->upload(y0);
        else dys.back()->poison();
        refs.push_back(ref);
        mags.push_back(mag);
        wp[sgi] = dws.back()->get();
        yp[sgi] = dys.back()->get();
    }
    const cuda::WeightFormat fmt(type, layout);
    DevBuf<uint8_t> dyq(quantize_out ? cuda::act_q8_bytes(n_tok, seg_rows[0]) : 1);
    dyq.poison();
    if (n_seg == 1) {
        cuda::launch_gemv_q8(fmt, wp[0], dw2 ? dw2->get() : nullptr, seg_rows[0], cols, dxq.get(), n_tok, yp[0], out,
                             nullptr, quantize_out ? dyq.get() : nullptr, halves);
    } else {
        ASSERT_FALSE(quantize_out);
        const cuda::WeightFormat fmts[3] = {{seg_type(0), layout}, {seg_type(1), layout}, {seg_type(2), layout}};
        ASSERT_TRUE(cuda::gemv_q8_multi_takes(fmts, n_seg));
        cuda::launch_gemv_q8_multi(fmts, n_seg, wp, seg_rows, yp, cols, dxq.get(), n_tok, nullptr);
    }
    for (int sgi = 0; sgi < n_seg; ++sgi) {
        const std::vector<float> got = dys[static_cast<size_t>(sgi)]->download();
        int bad = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            if (!(std::fabs(static_cast<double>(got[i]) - refs[sgi][i]) <= mags[sgi][i])) {
                if (++bad <= 5) ADD_FAILURE() << "seg " << sgi << " y[" << i << "] = " << got[i] << ", ref " << refs[sgi][i];
            }
        }
        EXPECT_EQ(bad, 0);
        if (quantize_out) {
            std::vector<uint8_t> want(cuda::act_q8_bytes(n_tok, seg_rows[0]));
            const bool by_halves = halves && out == MatOut::SwiGLU && cuda::gemv_q8_yq_by_halves(fmt, seg_rows[0], cols);
            cuda::quantize_act_ref(got.data(), n_tok, seg_rows[0], want.data(), by_halves);
            const std::vector<uint8_t> yq = dyq.download();
            EXPECT_TRUE(yq.size() == want.size() && std::memcmp(yq.data(), want.data(), want.size()) == 0)
                << "8-bit copy of y";
        }
    }
}

TEST(CudaOps, GemvQ8EveryTypeAndEpilogue) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(4321);
    for (GgmlType t : kQ8Types) {
        for (int v = 0; v < 2; ++v) {
            const int64_t cols = cols_for(t, v);
            const int64_t r67[1] = {67}, r5[1] = {5}, r130[1] = {130};
            run_gemv_q8_case(t, 1, r67, cols, 1, MatOut::Store, rng);
            run_gemv_q8_case(t, 1, r5, cols, 3, MatOut::Add, rng);
            run_gemv_q8_case(t, 1, r130, cols, cuda::GEMV_MAX_TOKENS, MatOut::SwiGLU, rng);
            run_gemv_q8_case(t, 1, r67, cols, 2, MatOut::SwiGLU, rng);
        }
        const int64_t qkv[3] = {64, 17, 17}, two[2] = {9, 40};
        run_gemv_q8_case(t, 3, qkv, cols_for(t, 1), 1, MatOut::Store, rng);
        run_gemv_q8_case(t, 2, two, cols_for(t, 0), 4, MatOut::Store, rng);
    }
    // Many rows (several warps per SM), layer-like Q/K/V segments, and wide rows (several
    // batches per lane, 4 warps per row).
    const int64_t r5000[1] = {5000}, r37[1] = {37}, qkv_big[3] = {2048, 512, 512};
    run_gemv_q8_case(GgmlType::Q4_K, 1, r5000, 256, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r5000, 256, 1, MatOut::SwiGLU, rng);
    run_gemv_q8_case(GgmlType::Q6_K, 3, qkv_big, 512, 2, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q8_0, 1, r37, 8192, 1, MatOut::Add, rng);
    run_gemv_q8_case(GgmlType::Q8_0, 1, r37, 16384, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q4_0, 1, r37, 16384 + 32, 3, MatOut::SwiGLU, rng);
    // Short rows, several rows per warp: 16 lanes per row (Q4_K, 2,560 columns: 40 units of 64
    // weights), 8 lanes per row (Q6_K and Q8_0, 1,024 columns: 32 chunks), across segment ends.
    const int64_t r130[1] = {130}, qkv_small[3] = {45, 11, 11};
    run_gemv_q8_case(GgmlType::Q4_K, 3, qkv_big, 2560, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r130, 2560, 1, MatOut::SwiGLU, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r37, 2560, 4, MatOut::Add, rng);
    run_gemv_q8_case(GgmlType::Q6_K, 3, qkv_small, 1024, 1, MatOut::Store, rng);
    run_gemv_q8_case(GgmlType::Q8_0, 1, r130, 1024, 2, MatOut::SwiGLU, rng);
    // SwiGLU (gate and up rows in one batch) at layer-like widths: Q6_K 2,560 columns (a warp
    // per row), Q4_K 9,728 columns (several batches per lane, several warps per row).
    run_gemv_q8_case(GgmlType::Q6_K, 1, r130, 2560, 1, MatOut::SwiGLU, rng);
    run_gemv_q8_case(GgmlType::Q4_K, 1, r37, 9728, 1, MatOut::SwiGLU, rng);
}

// The tiled GEMV (Q4_K, Q6_K) against its twin (gemv_q8_ref on the file layout): one, two and
// four warps per 8-row group, a block-column walk that ends mid-batch, Store, Add and SwiGLU,
// 1..4 tokens, and Q/K/V segments in one launch. One token takes the prefetching loop: a warp
// walking ten block columns alone, and long rows (17 block columns) that get two warps per group
// although the groups alone would not ask for them.
TEST(CudaOps, GemvQ8Tiles) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(515);
    const auto T = cuda::WeightLayout::Tiles;
    struct Case {
        int n_seg;
        int64_t rows[3];
        int64_t cols;
        int n_tok;
        MatOut out;
    };
    const Case cases[] = {
        {1, {64}, 2560, 1, MatOut::Store},
        {1, {16}, 768, 2, MatOut::Add},
        {1, {16992}, 512, 1, MatOut::Store},
        {1, {1024}, 2560, 4, MatOut::Add},
        {1, {40}, 9728, 3, MatOut::Store},
        {1, {64}, 2560, 1, MatOut::SwiGLU},
        {1, {1024}, 768, 4, MatOut::SwiGLU},
        {1, {40}, 9728, 2, MatOut::SwiGLU},
        {3, {2048, 512, 512}, 2560, 1, MatOut::Store},  // Q/K/V in one launch
        {3, {64, 16, 8}, 1280, 3, MatOut::Store},
        {2, {8, 40}, 512, 4, MatOut::Store},
        {1, {16992}, 2560, 1, MatOut::Store},  // one token: a warp walks ten block columns alone
        {1, {16384}, 4352, 1, MatOut::Add},    // long rows: two warps per group from the walk rule
        {1, {256}, 4096, 1, MatOut::Add},      // one token, few groups: eight warps per group
        {1, {40}, 9728, 1, MatOut::Store},     // the same with a last pass that not every warp takes
        {1, {40}, 9728, 1, MatOut::SwiGLU},    // SwiGLU keeps four warps per group
    };
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const Case& c : cases) run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T);
    }
    // Q4_K segments then a Q6_K one in one launch (Q4_K_M's Q/K/V where V has more bits), 1..4
    // tokens; the other orders and the file's rows are not taken.
    const Case mixed[] = {
        {3, {4096, 1024, 1024}, 2560, 1, MatOut::Store},  // qwen3-4b
        {3, {64, 16, 8}, 1280, 3, MatOut::Store},
        {2, {8, 40}, 512, 4, MatOut::Store},
        {2, {16, 24}, 9728, 2, MatOut::Store},
    };
    for (const Case& c : mixed) {
        run_gemv_q8_case(GgmlType::Q4_K, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, false, GgmlType::Q6_K);
    }
    const cuda::WeightFormat q4{GgmlType::Q4_K, T}, q6{GgmlType::Q6_K, T};
    const cuda::WeightFormat ok[3] = {q4, q4, q6}, back[3] = {q6, q6, q4}, between[3] = {q4, q6, q4},
                             rows[3] = {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K};
    EXPECT_TRUE(cuda::gemv_q8_multi_takes(ok, 3));
    EXPECT_FALSE(cuda::gemv_q8_multi_takes(back, 3));
    EXPECT_FALSE(cuda::gemv_q8_multi_takes(between, 3));
    EXPECT_FALSE(cuda::gemv_q8_multi_takes(rows, 3));
    // The 8-bit copy of y: by the SwiGLU product itself for one token where its grid is one wave
    // (four groups per block; on the H200: 256 columns x 128 rows at one warp per group, 512 x 256
    // at two, 1,024 x 3,072 as qwen3-0.6b and 9,728 x 64 at four), else by the quantization kernel
    // after it (2,560 x 9,728 as qwen3-4b: more blocks than one wave; two tokens; Add; the file's
    // rows). Either way the bits of launch_quantize_act.
    const Case quantized[] = {
        {1, {128}, 256, 1, MatOut::SwiGLU},   {1, {256}, 512, 1, MatOut::SwiGLU},
        {1, {3072}, 1024, 1, MatOut::SwiGLU}, {1, {64}, 9728, 1, MatOut::SwiGLU},
        {1, {9728}, 2560, 1, MatOut::SwiGLU}, {1, {96}, 2560, 2, MatOut::SwiGLU},
        {1, {256}, 4096, 1, MatOut::Add},
    };
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const Case& c : quantized) run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, true);
        const int64_t r96[1] = {96};
        run_gemv_q8_case(q, 1, r96, 2560, 1, MatOut::SwiGLU, rng, cuda::WeightLayout::Rows, true);
    }
    // Quantized by halves where the reader takes them (tiles) and the blocks of four groups would
    // not fit one wave (qwen3-4b's 9,728 x 2,560 on the H200; the others as before), and inputs
    // quantized by halves read by every tiled kernel shape (Store, Add, SwiGLU, Q/K/V, 1-4 tokens).
    const cuda::WeightFormat q4t(GgmlType::Q4_K, T);
    EXPECT_FALSE(cuda::gemv_q8_yq_by_halves(q4t, 128, 256));  // one wave of blocks of four groups
    EXPECT_TRUE(cuda::gemv_q8_yq_by_halves(q4t, 9728, 2560));  // more than one wave (1,216 groups)
    EXPECT_FALSE(cuda::gemv_q8_yq_by_halves(cuda::WeightFormat(GgmlType::Q4_K), 9728, 2560));
    for (GgmlType q : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        for (const Case& c : quantized) {
            run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, true, std::nullopt, true);
        }
        for (const Case& c : cases) run_gemv_q8_case(q, c.n_seg, c.rows, c.cols, c.n_tok, c.out, rng, T, false, std::nullopt, true);
    }
}

// A 2-4-token product on tiles gives each token's row of y, and of its 8-bit copy, the bits of a
// one-token launch on that token (a verification's rows are then one-token steps' bits): the
// warps per group (attn_output and ffn_down widen to 8 for one token) and the copy's mode (by
// halves for qwen3-4b's SwiGLU) are the one-token launch's at every token count. qwen3-4b's and
// qwen3-0.6b's layer shapes, a Q/K/V launch of mixed types and an output-layer slice.
TEST(CudaOps, GemvQ8TiledTokensAreOneTokenLaunches) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(2027);
    struct Shape {
        GgmlType type;
        int n_seg;
        int64_t rows[3];
        int64_t cols;
        MatOut out;
        bool yq, halves;
    };
    const Shape shapes[] = {
        {GgmlType::Q4_K, 1, {9728}, 2560, MatOut::SwiGLU, true, true},    // gate/up, copy by halves
        {GgmlType::Q4_K, 1, {9728}, 2560, MatOut::SwiGLU, true, false},   // gate/up, copy after it
        {GgmlType::Q4_K, 1, {3072}, 1024, MatOut::SwiGLU, true, true},    // 0.6b gate/up: blocks of four groups
        {GgmlType::Q4_K, 1, {2560}, 9728, MatOut::Add, false, false},     // ffn_down: one token widens
        {GgmlType::Q6_K, 1, {2560}, 9728, MatOut::Add, false, false},
        {GgmlType::Q4_K, 1, {2560}, 4096, MatOut::Add, false, false},     // attn_output
        {GgmlType::Q4_K, 3, {4096, 1024, 1024}, 2560, MatOut::Store, false, false},  // Q/K/V (V Q6_K)
        {GgmlType::Q6_K, 1, {16384}, 2560, MatOut::Store, false, false},  // a slice of the output layer
    };
    const cuda::WeightLayout T = cuda::WeightLayout::Tiles;
    for (const Shape& sh : shapes) {
        SCOPED_TRACE(std::string(type_name(sh.type)) + " rows=" + std::to_string(sh.rows[0]) + " cols=" +
                     std::to_string(sh.cols) + " segs=" + std::to_string(sh.n_seg) + " out=" +
                     std::to_string(static_cast<int>(sh.out)) + (sh.yq ? " 8-bit copy" : "") +
                     (sh.halves ? " halves" : ""));
        auto seg_type = [&](int i) { return sh.n_seg == 3 && i == 2 ? GgmlType::Q6_K : sh.type; };
        std::vector<std::unique_ptr<DevBuf<uint8_t>>> dws;
        const void* wp[3] = {};
        cuda::WeightFormat fmts[3] = {sh.type, sh.type, sh.type};
        for (int i = 0; i < sh.n_seg; ++i) {
            const std::vector<uint8_t> w = random_matrix(seg_type(i), sh.rows[i], sh.cols, rng);
            dws.push_back(std::make_unique<DevBuf<uint8_t>>(device_bytes(seg_type(i), T, w, sh.rows[i], sh.cols)));
            wp[i] = dws.back()->get();
            fmts[i] = cuda::WeightFormat(seg_type(i), T);
        }
        std::unique_ptr<DevBuf<uint8_t>> dw2;
        if (sh.out == MatOut::SwiGLU) {
            const std::vector<uint8_t> w2 = random_matrix(sh.type, sh.rows[0], sh.cols, rng);
            dw2 = std::make_unique<DevBuf<uint8_t>>(device_bytes(sh.type, T, w2, sh.rows[0], sh.cols));
        }
        constexpr int N = cuda::GEMV_MAX_TOKENS;
        std::vector<std::vector<float>> xs, y0s(static_cast<size_t>(sh.n_seg));
        for (int t = 0; t < N; ++t) xs.push_back(random_activations(sh.cols, rng));
        for (int i = 0; i < sh.n_seg; ++i) y0s[static_cast<size_t>(i)] = randn(static_cast<size_t>(sh.rows[i]) * N, rng);
        // Launches `n` tokens from token t0; returns each segment's y and the copy.
        auto run = [&](int t0, int n, std::vector<std::vector<float>>* ys, std::vector<uint8_t>* yq) {
            std::vector<float> x;
            for (int t = t0; t < t0 + n; ++t) x.insert(x.end(), xs[static_cast<size_t>(t)].begin(), xs[static_cast<size_t>(t)].end());
            std::vector<uint8_t> xq(cuda::act_q8_bytes(n, sh.cols));
            cuda::quantize_act_ref(x.data(), n, sh.cols, xq.data());
            DevBuf<uint8_t> dxq(xq);
            std::vector<std::unique_ptr<DevBuf<float>>> dys;
            float* yp[3] = {};
            for (int i = 0; i < sh.n_seg; ++i) {
                const int64_t r = sh.rows[i];
                const std::vector<float>& y0 = y0s[static_cast<size_t>(i)];
                dys.push_back(std::make_unique<DevBuf<float>>(static_cast<size_t>(r) * n));
                if (sh.out == MatOut::Add) {
                    dys.back()->upload(std::vector<float>(y0.begin() + t0 * r, y0.begin() + (t0 + n) * r));
                } else {
                    dys.back()->poison();
                }
                yp[i] = dys.back()->get();
            }
            DevBuf<uint8_t> dyq(sh.yq ? cuda::act_q8_bytes(n, sh.rows[0]) : 1);
            dyq.poison();
            if (sh.n_seg == 1) {
                cuda::launch_gemv_q8(fmts[0], wp[0], dw2 ? dw2->get() : nullptr, sh.rows[0], sh.cols, dxq.get(), n, yp[0],
                                     sh.out, nullptr, sh.yq ? dyq.get() : nullptr, sh.halves);
            } else {
                cuda::launch_gemv_q8_multi(fmts, sh.n_seg, wp, sh.rows, yp, sh.cols, dxq.get(), n, nullptr);
            }
            ys->clear();
            for (auto& d : dys) ys->push_back(d->download());
            if (sh.yq) *yq = dyq.download();
        };
        std::vector<std::vector<std::vector<float>>> one(N);
        std::vector<std::vector<uint8_t>> one_q(N);
        for (int t = 0; t < N; ++t) run(t, 1, &one[static_cast<size_t>(t)], &one_q[static_cast<size_t>(t)]);
        for (int n = 2; n <= N; ++n) {
            std::vector<std::vector<float>> ys;
            std::vector<uint8_t> yq;
            run(0, n, &ys, &yq);
            for (int t = 0; t < n; ++t) {
                for (int i = 0; i < sh.n_seg; ++i) {
                    const size_t r = static_cast<size_t>(sh.rows[i]);
                    EXPECT_EQ(std::memcmp(ys[static_cast<size_t>(i)].data() + t * r,
                                          one[static_cast<size_t>(t)][static_cast<size_t>(i)].data(), r * sizeof(float)),
                              0)
                        << n << " tokens: token " << t << ", segment " << i << " differs from its one-token launch";
                }
                if (sh.yq) {
                    const size_t r = static_cast<size_t>(sh.rows[0]);
                    const uint8_t* q = yq.data() + t * r;
                    const uint8_t* s = yq.data() + cuda::act_q8_scale_offset(n, sh.rows[0]) + t * (r / 32) * 16;
                    const std::vector<uint8_t>& o = one_q[static_cast<size_t>(t)];
                    EXPECT_EQ(std::memcmp(q, o.data(), r), 0) << n << " tokens: token " << t << "'s 8-bit codes";
                    EXPECT_EQ(std::memcmp(s, o.data() + cuda::act_q8_scale_offset(1, sh.rows[0]), (r / 32) * 16), 0)
                        << n << " tokens: token " << t << "'s scales";
                }
            }
        }
    }
}

// gemv_q8_split_rows: the rows of a tiled product launched in two parts give the bits of one
// launch where the split is offered, and no split is offered where the parts' kernels differ.
TEST(CudaOps, GemvQ8SplitRows) {
    JLLM_REQUIRE_CUDA_DEVICE();
    std::mt19937 rng(77);
    for (GgmlType type : {GgmlType::Q6_K, GgmlType::Q4_K}) {
        const cuda::WeightFormat fmt(type, cuda::WeightLayout::Tiles);
        const int64_t rows = 65536, cols = 512;
        const int64_t head = cuda::gemv_q8_split_rows(fmt, rows, cols, rows * 3 / 4);
        ASSERT_EQ(head, 49152);
        EXPECT_EQ(cuda::gemv_q8_split_rows(fmt, 20480, 2560, 15360), 0);  // the parts take other warps per group
        EXPECT_EQ(cuda::gemv_q8_split_rows(cuda::WeightFormat(type), rows, cols, head), 0);  // the file's rows
        const std::vector<uint8_t> w = random_matrix(type, rows, cols, rng);
        DevBuf<uint8_t> dw(device_bytes(type, fmt.layout, w, rows, cols));
        const std::vector<float> x = random_activations(cols, rng);
        std::vector<uint8_t> xq(cuda::act_q8_bytes(1, cols));
        cuda::quantize_act_ref(x.data(), 1, cols, xq.data());
        DevBuf<uint8_t> dxq(xq);
        DevBuf<float> y1(static_cast<size_t>(rows)), y2(static_cast<size_t>(rows));
        y1.poison();
        y2.poison();
        cuda::launch_gemv_q8(fmt, dw.get(), nullptr, rows, cols, dxq.get(), 1, y1.get(), MatOut::Store, nullptr);
        const size_t head_bytes = static_cast<size_t>(head) * row_size(type, cols);
        cuda::launch_gemv_q8(fmt, dw.get(), nullptr, head, cols, dxq.get(), 1, y2.get(), MatOut::Store, nullptr);
        cuda::launch_gemv_q8(fmt, dw.get() + head_bytes, nullptr, rows - head, cols, dxq.get(), 1, y2.get() + head,
                             MatOut::Store, nullptr);
        const std::vector<float> a = y1.download(), b = y2.download();
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << type_name(type);
    }
}

}  // namespace
}  // namespace jllm::test

#endif  // JLLM_CUDA
